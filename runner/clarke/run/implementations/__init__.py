"""One campaign on several link and server implementations, and their table."""

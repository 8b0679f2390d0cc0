"""A session on a testbed: one verified page load through the roles' agents."""

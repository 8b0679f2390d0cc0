"""Campaign files: the typed model, semantic checks, and expansion into a plan of runs."""

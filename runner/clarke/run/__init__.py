"""Running campaigns: the loop, a session, link checks, benchmarks, comparisons."""

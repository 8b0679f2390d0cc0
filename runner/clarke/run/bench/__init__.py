"""Benchmarks that print figures: the harness per load, the link, the nightly's power."""

"""Comparing two campaigns cell by cell: median ratios, intervals, verdicts."""

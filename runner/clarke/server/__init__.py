"""Implementations of the testbed's server role besides the built-in origin."""

"""The campaign loop: a campaign on one testbed, its schedule of loads and link checks."""

"""Running campaigns: the campaign loop, one run, and the summary of a campaign."""

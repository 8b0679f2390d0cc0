"""One campaign on several netns testbeds at once, and whether they agree."""

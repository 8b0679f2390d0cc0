"""Link checks: the link measured against its profile, and a schedule followed."""

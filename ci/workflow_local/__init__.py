"""ci/run-workflow-locally: a GitHub Actions workflow's jobs, run in Debian 12 containers
where GitHub Actions is not available (docs/ci.md)."""

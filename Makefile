# The two commands README names: the main job and the test command.
.PHONY: pages test setup

PAGES_DIR ?= build/pages

## pages: install what is missing, then build the GEO study's 12 test pages
pages: setup
	uv run clarke pages build --out $(PAGES_DIR)

## test: install what is missing, lint, build the Rust parts and run every test (as root)
test:
	ci/test.sh

setup:
	ci/setup.sh

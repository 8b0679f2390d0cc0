# The two commands README names: the main job (the demo) and the test command.
.PHONY: demo test pages setup

PAGES_DIR ?= build/pages

## demo: install what is missing, then run the demo campaign over an emulated GEO link (root)
demo:
	ci/demo.sh

## test: install what is missing, lint, build the Rust parts and run every test (as root)
test:
	ci/test.sh

## pages: build the GEO study's 12 test pages into $(PAGES_DIR)
pages: setup
	uv run clarke pages build --out $(PAGES_DIR)

setup:
	ci/setup.sh

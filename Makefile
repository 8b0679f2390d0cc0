# The commands README names: the main job (the demo), the test command and its fast lane.
.PHONY: demo test check pages corpus setup

PAGES_DIR ?= build/pages
CORPUS_DIR ?= build/corpus

## demo: install what is missing, then run the demo campaign over an emulated GEO link (root)
demo:
	ci/demo.sh

## test: install what is missing, lint, check types, build the Rust parts and run every test (as root)
test:
	ci/test.sh

## check: the fast lane: lint, the layer contract, types, unit tests (under 2 minutes, no root)
check:
	ci/check.sh

## pages: build the GEO study's 12 test pages into $(PAGES_DIR)
pages: setup
	uv run clarke pages build --out $(PAGES_DIR)

## corpus: record the offline corpus (docs/sites.md) into $(CORPUS_DIR), anew (root)
corpus: setup
	ci/corpus.sh $(CORPUS_DIR)

setup:
	ci/setup.sh

#!/usr/bin/env bash
# Sourced by ci/test.sh, ci/check.sh and ci/demo.sh. Python keeps the bytecode of what it
# imports (runner/clarke's modules and the virtual environment's, which uv installs
# without it) in __pycache__ beside them. An environment that forbids that
# (PYTHONDONTWRITEBYTECODE set) makes every process compile its imports from source
# again: each role agent, clarke command and pytest worker of the suite, hundreds in a
# run of `make test`.
unset PYTHONDONTWRITEBYTECODE

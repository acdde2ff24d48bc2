#!/usr/bin/env bash
# Set up (first time only), lint, check the formatting, and run the test suite. Options go to pytest
# (e.g. -m "not slow").
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh --test
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest "$@"

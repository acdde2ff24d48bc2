#!/usr/bin/env bash
# Set up (first time only) and run the test suite. Options go to pytest (e.g. -m "not slow").
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh --test
exec .venv/bin/python -m pytest "$@"

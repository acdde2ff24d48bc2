#!/usr/bin/env bash
# Set up (first time only) and launch the web app on http://127.0.0.1:7860. Options go to app.py.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
exec .venv/bin/python app.py "$@"

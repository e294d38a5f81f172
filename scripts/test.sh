#!/usr/bin/env bash
# The README's test command: installs the app and test requirements, then runs every test.
# Browser tests skip with a reason when Chromium is missing (outside CI); in CI they must run.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -r requirements-dev.txt
export KINETO_LOG_LEVEL=6
exec python3 -m pytest "$@"

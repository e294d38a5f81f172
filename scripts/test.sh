#!/usr/bin/env bash
# The README's test command: installs the app and test requirements, then runs every test.
# Browser tests skip with a reason when Chromium is missing (outside CI); in CI they must run.
#
# Order: shuffled by pytest-randomly with a fixed seed, so a run is repeatable (CI runs the
# order the last local run did) and still not the file order: a test that needs another's
# leftovers fails here. The seed is printed in the header ("Using --randomly-seed=N").
#   TEST_SEED=7 bash scripts/test.sh        another order
#   TEST_SEED=random bash scripts/test.sh   a new order each run
#   TEST_SEED=none bash scripts/test.sh     file order
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -r requirements-dev.txt
export KINETO_LOG_LEVEL=6
seed="${TEST_SEED:-12}"
case "$seed" in
  none) order=(-p no:randomly) ;;
  random) order=() ;;
  *) order=(-p randomly "--randomly-seed=$seed") ;;
esac
status=0
python3 -m pytest "${order[@]}" "$@" || status=$?
if [ "$status" -eq 5 ]; then
  # pytest's "no tests collected": a wrong path or marker must not pass as green.
  echo "scripts/test.sh: pytest collected no tests (exit 5); that is a failure" >&2
fi
exit "$status"

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
#
# Tiers: with no tier every test runs (CI, .ci/run). `fast` runs the pure, corpus and claim tests
# and leaves out the groups marked in pyproject.toml's `markers` (FAST below): pools of processes,
# AppTest pages, browsers, fuzzing, the install, bench runs, PostgreSQL, Ray, fresh interpreters.
#   bash scripts/test.sh fast                  the fast tier, one worker per core (README: its wall time here)
#   bash scripts/test.sh fast tests/test_trace.py -x    a tier takes pytest's arguments after it
set -euo pipefail
cd "$(dirname "$0")/.."
FAST="not (gpu or browser or slow or pool or apptest or fuzz or install or bench or rooms or ray or subprocess)"
tier=()
if [ "${1:-}" = "fast" ]; then
  shift
  # One pytest worker per core (pytest-xdist; TEST_WORKERS=0 runs it in one process). The full
  # run (CI) stays one process: its pools, pages and servers start processes of their own.
  tier=(-m "$FAST" -n "${TEST_WORKERS:-auto}")
fi
# pip's resolver takes ~6 s even when nothing is missing: it runs only when a pinned requirement is
# not installed at its version (scripts/requirements_met.py says which).
python3 scripts/requirements_met.py requirements-dev.txt 2>/dev/null || python3 -m pip install -q -r requirements-dev.txt
export KINETO_LOG_LEVEL=6
# Bytecode caches on (they sit in git-ignored __pycache__ folders): with PYTHONDONTWRITEBYTECODE set,
# as some hosts' environments have it, every pytest worker re-rewrote the asserts of each test
# module (13-15 s of a worker's collection on a 2-core box) and every fresh interpreter a test
# starts recompiled the lab.
unset PYTHONDONTWRITEBYTECODE
seed="${TEST_SEED:-12}"
case "$seed" in
  none) order=(-p no:randomly) ;;
  random) order=() ;;
  *) order=(-p randomly "--randomly-seed=$seed") ;;
esac
status=0
python3 -m pytest "${order[@]}" "${tier[@]}" "$@" || status=$?
if [ "$status" -eq 5 ]; then
  # pytest's "no tests collected": a wrong path or marker must not pass as green.
  echo "scripts/test.sh: pytest collected no tests (exit 5); that is a failure" >&2
fi
exit "$status"

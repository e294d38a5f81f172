#!/usr/bin/env bash
# Click → result on the page (AppTest after the worker is warm) on a GPU host, the first click
# of each dtype included: bench/bench_page_clicks.py, in one call.
#
#     OUT=/some/folder bash scripts/gpu_page_clicks.sh
#
# Streamlit is not installed on the lent H200: put its wheels (and altair, blinker, cachetools,
# tenacity, toml, tornado, jsonschema, jsonschema-specifications, referencing, rpds-py,
# sqlalchemy, greenlet, msgspec, isal; cp312 manylinux) in .whl/ here, e.g. with
# `pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64`.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"
export KINETO_LOG_LEVEL=6 PYTHONUNBUFFERED=1
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
{
    nvidia-smi -L
    timeout 300 python3 bench/bench_page_clicks.py --device cuda --out "$OUT/clicks.json"
} 2>&1 | tee "$OUT/log.txt"

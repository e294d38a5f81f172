#!/usr/bin/env bash
# The trace-derived table, GEMM figures and diagnoses checked on a GPU host, in one call:
#
#     OUT=/some/folder bash scripts/gpu_fidelity_check.sh
#
# 1. record a fresh ground-truth corpus (scripts/record_groundtruth.py: real programs, each
#    trace beside torch's own key_averages) and compare the lab's table with torch's on every
#    trace of it (scripts/check_groundtruth.py, with the text tables and by input shape);
# 2. run the engine's tests that read the committed corpus and record CPU programs in-test
#    (under this host's torch), and the GPU tests (tests/test_gpu.py).
# Installs .whl/*.whl first when that folder exists (streamlit and friends for the AppTests).
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
    nvidia-smi -L; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
    timeout 240 python3 scripts/record_groundtruth.py --device cuda --out /tmp/gt --budget 200
    for flags in "--tables" "--by-shape"; do
        timeout 60 python3 scripts/check_groundtruth.py $flags /tmp/gt
    done
    python3 -m lab table /tmp/gt/seed_flops.json.gz --row-limit 8
    timeout 240 python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts= -rs \
        tests/test_key_averages.py tests/test_verdict_real.py tests/test_diagnoses_real.py \
        tests/test_samples.py tests/test_gpu.py
} 2>&1 | tee "$OUT/log.txt"
tar -czf "$OUT/gt_fresh.tar.gz" -C /tmp gt 2>/dev/null || true

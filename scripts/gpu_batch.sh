#!/usr/bin/env bash
# Everything the lab needs from a GPU host, in one call:
#
#     OUT=/some/folder bash scripts/gpu_batch.sh
#
# Steps, most valuable first, each bounded by `timeout` and independent (a failure is
# recorded and the next step runs):
#   info      nvidia-smi -L, torch / CUDA versions
#   cli       python3 -m lab profile … 4096³ bf16 → $OUT/cli/{trace.json.gz,key_averages.csv,summary.json}
#   samples   scripts/record_samples.py → $OUT/samples.tar.gz (traces + manifest.json, flat)
#   fidelity  scripts/fidelity.py → $OUT/fidelity.json + $OUT/fidelity.md
#   transformer  scripts/make_transformer_trace.py → $OUT/transformer_trace.json.gz
#   capacity  bench/bench_capacity.py → $OUT/capacity.md (all GPUs at once, OOM then next run)
#   tests     pytest tests/test_gpu.py -m gpu (installs .whl/*.whl first when that folder exists)
# The whole output is also in $OUT/log.txt. At most 8 files come back from the GPU box: the
# list above is exactly 8 (cli/ is packed into one tar if anything else appears).
#
# GPU_BATCH_DEVICE=cpu rehearses every step on a CPU host with tiny sizes (the tests skip).
# GPU_BATCH_DEADLINE_S (default 530) bounds the whole batch.

set -u -o pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"
export KINETO_LOG_LEVEL=6 PYTHONUNBUFFERED=1
DEVICE="${GPU_BATCH_DEVICE:-cuda}"
DEADLINE_S="${GPU_BATCH_DEADLINE_S:-560}"
WORK="$(mktemp -d /tmp/gpu_batch.XXXXXX)"
if [ "$DEVICE" = "cpu" ]; then
    QUICK="--quick"; CLI_SIZE=256
else
    QUICK=""; CLI_SIZE=4096
fi

STEP_NAMES=()
STEP_RCS=()
STEP_SECS=()

# step NAME PLANNED_SECONDS COMMAND…: run COMMAND under timeout min(PLANNED, time left).
step() {
    local name="$1" planned="$2"
    shift 2
    local left=$(( DEADLINE_S - SECONDS - 5 ))
    local limit=$(( planned < left ? planned : left ))
    if (( limit < 10 )); then
        echo "=== $name: skipped, ${left}s left of the ${DEADLINE_S}s budget"
        STEP_NAMES+=("$name"); STEP_RCS+=("skipped"); STEP_SECS+=(0)
        return
    fi
    echo
    echo "=== $name (limit ${limit}s, t=${SECONDS}s) $(date -u +%H:%M:%S)"
    local t0=$SECONDS
    timeout -k 5 "$limit" "$@"
    local rc=$?
    (( rc == 124 || rc == 137 )) && echo "=== $name: TIMED OUT after ${limit}s"
    echo "=== $name: exit $rc in $(( SECONDS - t0 ))s"
    STEP_NAMES+=("$name"); STEP_RCS+=("$rc"); STEP_SECS+=($(( SECONDS - t0 )))
}

info() {
    nvidia-smi -L 2>&1 || echo "(nvidia-smi not available)"
    python3 - <<'EOF'
import platform, torch
print(f"python {platform.python_version()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"cuda available {torch.cuda.is_available()}, GPUs {torch.cuda.device_count()}")
for i in range(torch.cuda.device_count()):
    free, total = torch.cuda.mem_get_info(i)
    print(f"  cuda:{i} {torch.cuda.get_device_name(i)}: {free / 2**30:.1f} of {total / 2**30:.1f} GiB free")
for name in ("streamlit", "msgspec", "pandas", "numpy", "pytest"):
    try:
        module = __import__(name)
        print(f"  {name} {getattr(module, '__version__', '?')}")
    except ImportError:
        print(f"  {name}: not installed")
EOF
}

cli_profile() {
    python3 -m lab profile --device "$DEVICE" --m "$CLI_SIZE" --k "$CLI_SIZE" --n "$CLI_SIZE" \
        --dtype bfloat16 --label matmul_add --out "$OUT/cli" || return $?
    # Per-iteration time with and without the profiler, TFLOP/s and % of peak, from summary.json.
    python3 - "$OUT/cli/summary.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
c, t, d = s["config"], s["timing"], s["device"]
flops = 2 * c["m"] * c["k"] * c["n"]
plain, prof = t["unprofiled_median_us"], t["profiled_median_us"]
peak = ((d.get("peak") or {}).get("tflops") or {}).get(c["dtype"])
print(f"device: {d['name']} ({d['kind']}), torch {d['torch_version']}, CUDA {d['cuda_version']}")
print(f"per iteration: {plain:.1f} µs without the profiler, {prof:.1f} µs with it "
      f"({t['overhead_pct']:+.1f} %, {t['method']})")
for what, us in (("without profiler", plain), ("with profiler", prof)):
    tflops = flops / us / 1e6
    pct = f", {100 * tflops / peak:.0f} % of {peak:g} TFLOP/s peak" if peak else ""
    print(f"step throughput {what}: {tflops:.1f} TFLOP/s{pct}")
print("stages (s):", {k: round(v, 3) for k, v in s["stage_s"].items()})
EOF
}

samples() {  # $1: seconds after which no new run starts
    python3 scripts/record_samples.py --device "$DEVICE" $QUICK --out "$WORK/samples" \
        --budget-s "$1" --tar "$OUT/samples.tar.gz"
}

pack_samples_if_cut_short() {
    # record_samples writes its manifest after every run; if it was killed before --tar, pack here.
    if [ ! -f "$OUT/samples.tar.gz" ] && [ -f "$WORK/samples/manifest.json" ]; then
        tar -czf "$OUT/samples.tar.gz" -C "$WORK/samples" --exclude='*.tmp' . && echo "packed $OUT/samples.tar.gz after the fact"
    fi
}

gpu_tests() {
    if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    fi
    # pyproject's addopts pass --timeout, which needs pytest-timeout; drop them if it is missing.
    local opts=()
    python3 -c "import pytest_timeout" 2>/dev/null || opts=(-o "addopts=")
    python3 -m pytest tests/test_gpu.py -q -m gpu -rs -p no:cacheprovider "${opts[@]}"
}

export OUT DEVICE QUICK CLI_SIZE WORK
export -f info cli_profile samples gpu_tests

main() {
    echo "gpu_batch: device=$DEVICE out=$OUT deadline=${DEADLINE_S}s work=$WORK $(date -u +%FT%TZ)"
    step info 60 bash -c info
    step cli 60 bash -c cli_profile
    # record_samples starts no run after 160 s, so it ends (tar written) within its limit.
    step samples 170 bash -c "samples 145"
    pack_samples_if_cut_short
    step fidelity 90 python3 scripts/fidelity.py --device "$DEVICE" $QUICK \
        --json "$OUT/fidelity.json" --out "$OUT/fidelity.md"
    # Workshop capacity on every visible GPU at once, then an OOM-sized run and the next run.
    step capacity 70 python3 bench/bench_capacity.py --runs 30 --oom --out "$OUT/capacity.md"
    step transformer 70 python3 scripts/make_transformer_trace.py --device "$DEVICE" $QUICK \
        --out "$OUT/transformer_trace.json.gz"
    step tests 110 bash -c gpu_tests

    # The GPU box returns at most 8 files: fold cli/ into one tar if more are there.
    local count
    count=$(find "$OUT" -type f ! -name log.txt | wc -l)
    if (( count + 1 > 8 )) && [ -d "$OUT/cli" ]; then
        tar -czf "$OUT/cli.tar.gz" -C "$OUT" cli && rm -rf "$OUT/cli" && echo "packed cli/ into cli.tar.gz (file limit)"
    fi

    echo
    echo "=== summary (${SECONDS}s in all)"
    printf '%-12s %8s %6s\n' step exit secs
    local i failed=0
    for i in "${!STEP_NAMES[@]}"; do
        printf '%-12s %8s %6s\n' "${STEP_NAMES[$i]}" "${STEP_RCS[$i]}" "${STEP_SECS[$i]}"
        [ "${STEP_RCS[$i]}" = "0" ] || failed=$(( failed + 1 ))
    done
    echo "files in $OUT:"
    (cd "$OUT" && find . -type f ! -name log.txt -printf '  %p  %s bytes\n' | sort)
    rm -rf "$WORK"
    echo "$failed step(s) did not succeed"
    return $(( failed > 0 ))
}

main 2>&1 | tee "$OUT/log.txt"
exit "${PIPESTATUS[0]}"

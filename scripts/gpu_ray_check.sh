#!/usr/bin/env bash
# Issue 16 on the H200 (the device tool; CI cannot run it): a one-node Ray cluster holding the
# GPU serves the lab. Ray and the page's packages travel in .carry-ray (see below), which this
# script installs first:
#   .carry-ray/ray.tar.xz   ray 2.60.0 cp312 unpacked, its Java jars and the libraries the lab
#                           never imports (rllib, data, tune, train, serve) left out, xz'd (25 MB;
#                           the wheel is 79 MB, over the device tool's 64 MiB carry)
#   .carry-ray/whl/*.whl    streamlit, altair, msgspec, sqlalchemy, … for Python 3.12 (no deps)
# Then: 1. one 4096³ bf16 run through ProfileService on the Ray backend (its node and device);
# 2. the page's AppTest run (tests/test_app.py's run test) with PROFILER_LAB_BACKEND=ray;
# 3. bench/bench_capacity.py --quick on Ray and on the local backend, one after the other.
set -u
export KINETO_LOG_LEVEL=6 RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
mkdir -p /tmp/raypkg && tar xJf .carry-ray/ray.tar.xz -C /tmp/raypkg
python3 -m pip install -q --no-index --no-deps .carry-ray/whl/*.whl 2>&1 | grep -v WARNING
export PYTHONPATH="/tmp/raypkg:$PWD"
python3 -c "import ray, streamlit, torch; print('ray', ray.__version__, 'streamlit', streamlit.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"
python3 -m ray.scripts.scripts start --head --num-gpus=1 --num-cpus=8 --include-dashboard=false \
  --disable-usage-stats --node-ip-address=127.0.0.1 >"$OUT/ray_start.log" 2>&1 || { cat "$OUT/ray_start.log"; exit 1; }
echo "== 1. one run on the Ray backend"
PROFILER_LAB_BACKEND=ray PROFILER_LAB_RAY_ADDRESS=auto python3 - <<'PY'
import time
from lab.run import HostSettings, ProfileService, RunConfig
settings = HostSettings.from_env()
t0 = time.perf_counter()
with ProfileService(settings=settings) as service:
    service.start()
    result = service.submit(RunConfig(m=4096, k=4096, n=4096, dtype="bfloat16", device="cuda")).result(timeout=600)
    print(f"first result after {time.perf_counter() - t0:.1f} s (actor start + warm-up + run)")
    print("device:", result.device, "| per iteration:", getattr(result, "timing", None))
    health = service.health()
    print("backend:", getattr(health, "backend", "?"), "| workers:", [(w.device, getattr(w, "node", None)) for w in health.workers])
    t1 = time.perf_counter()
    again = service.submit(RunConfig(m=4096, k=4096, n=4096, dtype="bfloat16", device="cuda", step_label="second")).result(timeout=600)
    print(f"warm run submit -> result {time.perf_counter() - t1:.2f} s on {again.device}")
PY
echo "== 2. the page's AppTest run on Ray"
PROFILER_LAB_BACKEND=ray PROFILER_LAB_RAY_ADDRESS=auto timeout 240 python3 -m pytest -q -x -p no:cacheprovider \
  tests/test_app.py -k "run_profile_shows_the_label" 2>&1 | tail -5
echo "== 3. capacity, Ray then local"
PROFILER_LAB_BACKEND=ray PROFILER_LAB_RAY_ADDRESS=auto timeout 200 python3 bench/bench_capacity.py --quick 2>&1 | tail -12
python3 -m ray.scripts.scripts stop --force >/dev/null 2>&1
timeout 150 python3 bench/bench_capacity.py --quick 2>&1 | tail -12

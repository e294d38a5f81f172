"""Workshop capacity: how many runs a minute the service serves, on every worker at once.

    python bench/bench_capacity.py                 # one worker per visible GPU (or one CPU worker)
    python bench/bench_capacity.py --quick         # fewer, smaller runs (CI)
    python bench/bench_capacity.py --oom           # also: an out-of-memory run, then a normal one

A room of attendees submits a mix of the configs people actually try (the seed at several
sizes and dtypes, each with its own label) all at once; the bench waits for every result and
reports runs per minute per worker, p50/p95 of the wait (submit → result), which device
each run used, and whether each result holds only its own label. Prints a markdown section.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

from lab.core import HostSettings, RunConfig  # noqa: E402
from lab.run import ProfileService, RunFailed  # noqa: E402


def room_configs(n: int, *, gpu: bool, quick: bool) -> list[RunConfig]:
    """``n`` configs as a room would submit them: a rotating mix of sizes and dtypes."""
    if gpu:
        mix = [(1024, "float32"), (4096, "bfloat16"), (2048, "tf32"), (64, "bfloat16"), (4096, "float16")]
    else:
        mix = [(128, "float32"), (256, "float32"), (512, "bfloat16")] if quick else \
              [(256, "float32"), (512, "float32"), (1024, "float32"), (512, "bfloat16")]
    configs = []
    for i in range(n):
        size, dtype = mix[i % len(mix)]
        configs.append(RunConfig(m=size, k=size, n=size, dtype=dtype, step_label=f"attendee_{i:02d}",
                                 device="cuda" if gpu else "cpu"))
    return configs


def labels_in(trace_gz: bytes) -> set[str]:
    events = json.loads(gzip.decompress(trace_gz))["traceEvents"]
    return {e["name"] for e in events
            if e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#")}


def percentile(values: list[float], pct: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(pct / 100 * (len(s) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help="submissions (default 40, quick 6)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--oom", action="store_true", help="also submit an out-of-memory run (GPU)")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown section here")
    args = parser.parse_args()

    settings = HostSettings.from_env().replace(queue_max=200, max_dim=200_000)
    service = ProfileService(settings=settings)
    t0 = time.perf_counter()
    service.start(wait=True)
    ready_s = time.perf_counter() - t0
    health = service.health()
    devices = [w.device for w in health.workers]
    gpu = any(d.startswith("cuda") for d in devices)
    n = args.runs or (6 if args.quick else 40)
    configs = room_configs(n, gpu=gpu, quick=args.quick)

    waits, used, mixed, failures = [], {}, [], []
    lock = threading.Lock()

    def attendee(config: RunConfig) -> None:
        start = time.perf_counter()
        try:
            result = service.submit(config).result(timeout=settings.run_timeout_s * n)
        except RunFailed as exc:
            with lock:
                failures.append(f"{config.step_label}: {exc}")
            return
        wait = time.perf_counter() - start
        found = labels_in(result.trace_gz)
        with lock:
            waits.append(wait)
            key = f"{result.device.name} #{result.device.index}" if result.device.kind == "cuda" else result.device.name
            used[key] = used.get(key, 0) + 1
            if found != {config.step_label}:
                mixed.append(f"{config.step_label}: trace holds {sorted(found)}")

    threads = [threading.Thread(target=attendee, args=(c,)) for c in configs]
    t1 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t1

    oom_lines = []
    if args.oom and gpu:
        # Passes the size estimate check only if free memory is misread; either way the user
        # must get one clear message and the next run must work.
        big = RunConfig(m=150_000, k=150_000, n=150_000, dtype="float32", device="cuda", step_label="oom")
        try:
            service.submit(big).result(timeout=600)
            oom_lines.append("- OOM-sized run: unexpectedly succeeded")
        except RunFailed as exc:
            oom_lines.append(f"- OOM-sized run (150000³ float32): refused — “{exc}” (kind {exc.kind})")
        after_oom = RunConfig(m=1024, k=1024, n=1024, device="cuda", step_label="after_oom")
        after = service.submit(after_oom).result(timeout=120)
        oom_lines.append(f"- next run: ok on {after.device.label}, labels {sorted(labels_in(after.trace_gz))}")
    service.shutdown()

    done = len(waits)
    workers = len(devices)
    per_min = done / wall * 60 if wall else float("nan")
    lines = [
        "## Workshop capacity",
        "",
        f"Command: `python bench/bench_capacity.py{' --quick' if args.quick else ''}{' --oom' if args.oom else ''}` — "
        f"{dt.date.today()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"workers: {', '.join(devices)} (ready after {ready_s:.1f} s, warm-up included).",
        "",
        f"{n} attendees submit at once (threads, one config each: a rotating mix of sizes and dtypes, "
        "each with its own step label); each waits for its own result.",
        "",
        "| runs done | failed | wall | runs/min (all workers) | runs/min per worker | wait p50 | wait p95 |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {done}/{n} | {len(failures)} | {wall:.1f} s | {per_min:.0f} | {per_min / workers:.0f} | "
        f"{statistics.median(waits) if waits else float('nan'):.2f} s | "
        f"{percentile(waits, 95) if waits else float('nan'):.2f} s |",
        "",
        "Runs per device: " + ", ".join(f"{k}: {v}" for k, v in sorted(used.items())),
        "",
        f"Each result holds only its own label: {'yes' if not mixed else 'NO — ' + '; '.join(mixed[:3])}",
    ]
    if failures:
        lines += ["", "Failures: " + "; ".join(failures[:5])]
    lines += oom_lines and ["", *oom_lines]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0 if done == n and not mixed else 1


if __name__ == "__main__":
    raise SystemExit(main())

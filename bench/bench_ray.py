"""The Ray backend's cost: per-run overhead against the local backend, and runs/min under a burst.

    python bench/bench_ray.py                  # writes BENCHMARKS.md's "Ray backend" section
    python bench/bench_ray.py --runs 20 --burst 30 --no-write

Same machine, same config, side by side in one run: a local service (one CPU worker process)
and a Ray service (one CPU actor on a one-node Ray cluster that this bench starts with
``ray start`` and stops after: ``bench/ray_cluster.py``). Both warm first.

1. Per-run overhead: the same tiny run (16×17×18 float32, one profiled step) submitted alone,
   alternating local, Ray, local, Ray … ``--runs`` times each; submit → result wall time, median
   of each and their difference (the runner's own stage time is printed too: it is the same work).
2. Burst: ``--burst`` submissions at once (64³, each its own session and label) on each backend;
   runs/min = runs ÷ (first submit → last result), and whether each result holds only its own label.
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
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

from benchmarks_md import write_section  # noqa: E402
from ray_cluster import local_cluster  # noqa: E402

from lab.core import HostSettings, RunConfig  # noqa: E402
from lab.run import ProfileService  # noqa: E402

# Seconds any one result may take, burst included (30 runs on one worker of a busy 2-core box).
RESULT_WAIT_S = 600


def tiny(label: str, size: int = 16) -> RunConfig:
    return RunConfig(m=size, k=size + 1, n=size + 2, device="cpu", step_label=label, wait=0, warmup=1, active=1,
                     warmup_iters=0)


def labels_in(trace_gz: bytes) -> set[str]:
    events = json.loads(gzip.decompress(trace_gz))["traceEvents"]
    return {e["name"] for e in events if e.get("cat") == "user_annotation"
            and not e["name"].startswith("ProfilerStep")}


def one_run(service: ProfileService, label: str) -> tuple[float, float]:
    """(submit → result seconds, the runner's own stage seconds) of one tiny run."""
    start = time.perf_counter()
    result = service.submit(tiny(label)).result(timeout=RESULT_WAIT_S)
    return time.perf_counter() - start, sum(result.stage_s.values())


def burst(service: ProfileService, n: int, tag: str) -> dict:
    """``n`` submissions at once from ``n`` sessions; runs/min and isolation."""
    configs = [tiny(f"{tag}_{i:02d}", size=64) for i in range(n)]
    results: dict = {}
    errors: list[str] = []
    barrier = threading.Barrier(n + 1)

    def attendee(i: int) -> None:
        barrier.wait()
        try:
            results[i] = service.submit(configs[i], session=f"{tag}-{i}").result(timeout=RESULT_WAIT_S)
        except Exception as error:  # noqa: BLE001 - counted below
            errors.append(f"{type(error).__name__}: {error}")

    threads = [threading.Thread(target=attendee, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join(RESULT_WAIT_S)
    wall_s = time.perf_counter() - start
    isolated = sum(labels_in(result.trace_gz) == {configs[i].step_label} for i, result in results.items())
    return {"done": len(results), "errors": errors, "wall_s": wall_s, "per_min": 60 * len(results) / wall_s,
            "isolated": isolated}


def measure(runs: int, burst_n: int) -> dict:
    # standby=0: a Ray actor has no warm spare, so the local worker runs without one too (same config).
    limits = dict(queue_max=200, max_run_estimate_s=0.0, run_timeout_s=RESULT_WAIT_S, standby=0)
    with local_cluster(nodes=1, cpus_per_node=1) as address:
        services = {"local": ProfileService(settings=HostSettings(**limits), devices=["cpu"]),
                    "ray": ProfileService(settings=HostSettings(backend="ray", ray_address=address, **limits),
                                          devices=["cpu"])}
        ready_s = {}
        try:
            for name, service in services.items():
                start = time.perf_counter()
                service.start(wait=True)
                ready_s[name] = time.perf_counter() - start
            one_run(services["local"], "warm"), one_run(services["ray"], "warm")
            walls: dict[str, list[float]] = {"local": [], "ray": []}
            stages: dict[str, list[float]] = {"local": [], "ray": []}
            for i in range(runs):
                for name, service in services.items():  # alternating: the box's load hits both alike
                    wall, stage = one_run(service, f"{name}_{i}")
                    walls[name].append(wall)
                    stages[name].append(stage)
            bursts = {name: burst(service, burst_n, name) for name, service in services.items()}
            nodes = {w.node for w in services["ray"].health().workers}
        finally:
            for service in services.values():
                service.shutdown()
    return {"walls": walls, "stages": stages, "bursts": bursts, "ready_s": ready_s, "nodes": nodes}


def section(m: dict, runs: int, burst_n: int) -> str:
    med = {k: statistics.median(v) * 1000 for k, v in m["walls"].items()}
    stage = {k: statistics.median(v) * 1000 for k, v in m["stages"].items()}
    b = m["bursts"]
    lines = [
        "## Ray backend: per-run overhead and a burst",
        "",
        f"`python bench/bench_ray.py` ({dt.date.today()}, {platform.node()}, {os.cpu_count()} cores shared with "
        f"other jobs, Python {platform.python_version()}, ray {__import__('ray').__version__}). One CPU worker "
        "each, no warm spare: a local worker process, and one CPU actor on a one-node Ray cluster the bench starts "
        "(`ray start --head --num-cpus=1 --object-store-memory=200000000 --include-dashboard=false`); "
        "same config, measured side by side, alternating.",
        "",
        "| | local | Ray | Ray − local |",
        "| --- | --- | --- | --- |",
        f"| submit → result, tiny run (median of {runs}) | {med['local']:.0f} ms | {med['ray']:.0f} ms | "
        f"{med['ray'] - med['local']:+.0f} ms ({med['ray'] / med['local']:.2f}×) |",
        f"| of which the runner's own stages (median) | {stage['local']:.0f} ms | {stage['ray']:.0f} ms | "
        f"{stage['ray'] - stage['local']:+.0f} ms |",
        f"| {burst_n} submissions at once (64³, own sessions): all results in | {b['local']['wall_s']:.1f} s | "
        f"{b['ray']['wall_s']:.1f} s | |",
        f"| runs/min in that burst | {b['local']['per_min']:.0f} | {b['ray']['per_min']:.0f} | "
        f"{b['ray']['per_min'] / b['local']['per_min']:.2f}× |",
        f"| completed / own label only | {b['local']['done']}/{b['local']['isolated']} | "
        f"{b['ray']['done']}/{b['ray']['isolated']} | |",
        f"| start + warm-up of the worker | {m['ready_s']['local']:.1f} s | {m['ready_s']['ray']:.1f} s | |",
        "",
        "Ray's extra per run is the actor call, the stage polls (one small call per 0.25 s tick) and the "
        "result's trip through Ray's object store; the runner's own stages are the same work on both (their "
        "difference is this shared box's noise and the actor's thread). "
        f"Errors: local {b['local']['errors'][:2] or 'none'}, Ray {b['ray']['errors'][:2] or 'none'}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="tiny runs per backend (default 21)")
    parser.add_argument("--burst", type=int, default=30, help="simultaneous submissions (default 30)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = parser.parse_args()
    text = section(measure(args.runs, args.burst), args.runs, args.burst)
    print(text)
    if not args.no_write:
        write_section(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

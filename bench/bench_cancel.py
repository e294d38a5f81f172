"""Cancel → the next run running, with and without the warm spare (lab/pool/standby.py).

    python bench/bench_cancel.py            # 3 cancels each way, interleaved
    python bench/bench_cancel.py --repeats 1

Two one-worker CPU services side by side (``standby=1`` and ``standby=0``), used in turn: each
time, a 4096³ run is started, cancelled once it profiles, and a tiny run submitted at once; the
figure is the time from ``cancel()`` to that run leaving the queue (what the page shows as
running). Also the resident memory of the idle warm worker and of its spare. Results go to the
"Cancel and the warm spare" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

from lab.core import HostSettings, RunConfig  # noqa: E402
from lab.run import ProfileService  # noqa: E402

SECTION = "## Cancel and the warm spare"
BIG = RunConfig(m=4096, k=4096, n=4096, device="cpu", step_label="big", wait=0, warmup=1, active=40, warmup_iters=0)
TINY = RunConfig(m=16, k=17, n=18, device="cpu", step_label="next", wait=0, warmup=1, active=1, warmup_iters=0)
WAIT_S = 180.0


def _until(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} after {WAIT_S:g} s")
        time.sleep(0.01)


def _ready(svc: ProfileService) -> None:
    """The worker idle and, with a spare, the spare warm."""
    def ok() -> bool:
        w = svc.health().workers[0]
        return w.alive and w.state == "idle" and w.standby in ("ready", "off")
    _until(ok, "the worker (and its spare) not ready")


def cancel_once(svc: ProfileService) -> float:
    _ready(svc)
    ticket = svc.submit(BIG, session="a")
    _until(lambda: ticket.poll().stage == "profiling", "the big run never profiled")
    cancelled = time.monotonic()
    ticket.cancel()
    following = svc.submit(TINY, session="b")
    _until(lambda: following.poll().state != "queued", "the next run never started")
    took_s = time.monotonic() - cancelled
    following.result(timeout=WAIT_S)
    return took_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    settings = HostSettings(max_run_estimate_s=0.0, run_timeout_s=WAIT_S)
    services = {"warm spare": ProfileService(settings=settings.replace(standby=1), devices=["cpu"]),
                "no spare": ProfileService(settings=settings.replace(standby=0), devices=["cpu"])}
    times: dict[str, list[float]] = {name: [] for name in services}
    try:
        for svc in services.values():
            svc.start(wait=True)
        _ready(services["warm spare"])
        idle = services["warm spare"].health().workers[0]
        for _ in range(args.repeats):
            for name, svc in services.items():  # interleaved: a busy box slows both alike
                times[name].append(cancel_once(svc))
                print(f"{name}: cancel → next run running {times[name][-1]:.2f} s", flush=True)
    finally:
        for svc in services.values():
            svc.shutdown()
    spare, fresh = statistics.median(times["warm spare"]), statistics.median(times["no spare"])
    mib = 2**20
    text = "\n".join([
        SECTION, "",
        f"`python bench/bench_cancel.py --repeats {args.repeats}` on {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores (shared): two one-worker CPU services side by side, cancels interleaved. A 4096³ "
        "run is cancelled while it profiles and a tiny run submitted at once; the time is `cancel()` → that run "
        "running.", "",
        "| | median | runs |", "| --- | ---: | --- |",
        f"| warm spare (`standby=1`, the default) | {spare:.2f} s | "
        f"{', '.join(f'{t:.2f}' for t in times['warm spare'])} |",
        f"| no spare (`standby=0`: a fresh worker warms up) | {fresh:.2f} s | "
        f"{', '.join(f'{t:.2f}' for t in times['no spare'])} |", "",
        f"The spare makes it {fresh / spare:.0f}× sooner. Its cost: one more idle process; here the warm worker "
        f"held {idle.rss_bytes / mib:.0f} MB resident and its spare {idle.standby_rss_bytes / mib:.0f} MB.", ""])
    print(text)
    from bench.benchmarks_md import write_section

    write_section(text)


if __name__ == "__main__":
    main()

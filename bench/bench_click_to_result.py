"""Click to result: from "Run" to a result the page can show, through a warm ProfileService.

    python bench/bench_click_to_result.py                  # 10 runs, CPU worker
    python bench/bench_click_to_result.py --quick          # 3 runs
    python bench/bench_click_to_result.py --device cuda    # one GPU worker (default config on cuda)

One iteration is what the page does after a click: ``service.submit(config)`` →
``ticket.result()`` (queue, worker process, run_profile, pickled RunResult back) →
``load_trace(result.trace_gz)`` → ``analyze(trace)`` → ``judge_trace(trace, analysis)``.
Each part is timed with ``time.perf_counter``; the table gives the median over N runs.
The service part is split into the worker's own stages (``RunResult.stage_s``) and what is
left (dispatch, pipe, pickling): the service's overhead. Side by side, in the same loop,
``run_profile`` is called directly in this process, as a reference for that overhead.
Rendering (table, timeline) is not included: other benches cover it.
Results go to the "Click to result" section of BENCHMARKS.md, one subsection per device.
"""

from __future__ import annotations

import argparse
import datetime as dt
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

SECTION = "## Click to result"
HEADER = "# Benchmarks\n\nMeasured figures, one section per bench, with command and method.\n"
# The brief's target for the default CPU config on this 2-core box.
TARGET_S = 1.5


def pipeline_steps():
    """The post-run steps that exist in this checkout, as (name, function of (result, state))."""
    steps, missing = [], []
    try:
        from lab.trace.load import load_trace

        steps.append(("load_trace", lambda result, state: state.__setitem__("trace", load_trace(result.trace_gz))))
    except ImportError:
        missing.append("lab.trace.load_trace")
    try:
        from lab.analysis import analyze

        steps.append(("analyze", lambda result, state: state.__setitem__(
            "analysis", analyze(state["trace"], config=result.config))))
    except ImportError:
        missing.append("lab.analysis.analyze")
    try:
        from lab.judge import judge_trace

        steps.append(("judge_trace", lambda result, state: state.__setitem__(
            "insights", judge_trace(state["trace"], state["analysis"]).findings)))
    except ImportError:
        missing.append("lab.judge.judge_trace")
    return steps, missing


def one_click(service: ProfileService, config: RunConfig, steps) -> dict[str, float]:
    row = {}
    t0 = time.perf_counter()
    result = service.submit(config, force_fresh=True).result(timeout=600)
    row["service"] = time.perf_counter() - t0
    row["worker stages"] = sum(result.stage_s.values())
    row["service overhead"] = row["service"] - row["worker stages"]
    state: dict = {}
    for name, step in steps:
        t = time.perf_counter()
        step(result, state)
        row[name] = time.perf_counter() - t
    row["total"] = time.perf_counter() - t0
    row["_stage_s"] = dict(result.stage_s)
    row["_device"] = result.device
    row["_insights"] = len(state.get("insights", ()))
    row["_events"] = len(state["trace"].events) if "trace" in state else None
    return row


def direct_run(config: RunConfig) -> float:
    from lab.run.runner import run_profile

    t0 = time.perf_counter()
    run_profile(config, settings=HostSettings())
    return time.perf_counter() - t0


def write_section(text: str, path: Path = ROOT / "BENCHMARKS.md") -> None:
    """Put ``text`` (a "### ..." subsection) into this bench's section of BENCHMARKS.md,
    replacing the subsection of the same title; other sections and subsections stay."""
    old = path.read_text() if path.exists() else HEADER
    lines = old.split("\n")
    body = text.rstrip("\n").split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip() == SECTION), None)
    if start is None:
        lines = lines + ["", SECTION, ""] + body + [""]
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        sub = next((i for i in range(start + 1, end) if lines[i].strip() == body[0].strip()), None)
        if sub is None:
            lines = lines[:end] + body + [""] + lines[end:]
        else:
            sub_end = next((i for i in range(sub + 1, end) if lines[i].startswith("### ")), end)
            lines = lines[:sub] + body + [""] + lines[sub_end:]
    new = "\n".join(lines)
    while "\n\n\n" in new:
        new = new.replace("\n\n\n", "\n\n")
    path.write_text(new.strip("\n") + "\n")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f} ms"


def report(args, config, start_s, first_s, rows, direct_s, missing) -> str:
    import torch

    med = {key: statistics.median(r[key] for r in rows) for key in rows[0] if not key.startswith("_")}
    stage_keys = list(rows[0]["_stage_s"])
    stage_med = {k: statistics.median(r["_stage_s"].get(k, 0.0) for r in rows) for k in stage_keys}
    direct_med = statistics.median(direct_s)
    cpu = platform.processor() or platform.machine()
    verdict = "meets" if med["total"] <= TARGET_S else "misses"
    device = rows[0]["_device"]
    title = (f"### CPU worker ({device.name}, {device.cpu_count} cores)" if device.kind == "cpu"
             else f"### GPU worker ({device.name})")
    flags = ((" --quick" if args.quick else "") + (f" --runs {args.runs}" if args.runs else "")
             + (" --device cuda" if args.device == "cuda" else ""))
    lines = [
        title,
        "",
        f"Command: `python bench/bench_click_to_result.py{flags}` — "
        f"{dt.date.today().isoformat()}, {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, "
        f"torch {torch.__version__}. Machine shared with other jobs: load average at start {args.load_avg:.1f}.",
        "",
        f"Device: {device.label}. Config: the default `RunConfig(device=\"{config.device}\")` = "
        f"{config.workload} {config.shape_text} {config.dtype}, "
        f"schedule wait {config.wait} / warmup {config.warmup} / active {config.active}, "
        f"{config.warmup_iters} warm-up iterations. One warm worker; each click submits with "
        f"`force_fresh=True` (no reuse). Median of {len(rows)} clicks; in the same loop, after each click, "
        f"`run_profile` is called directly in the bench process as a reference (no worker, no pipe).",
        "",
        "| part | median | share |",
        "|---|---:|---:|",
    ]
    for key in ("service", "worker stages", "service overhead", "load_trace", "analyze", "judge_trace", "total"):
        if key in med:
            share = f"{100 * med[key] / med['total']:.0f} %" if key != "total" else ""
            bold = "**" if key == "total" else ""
            lines.append(f"| {bold}{key}{bold} | {bold}{_ms(med[key])}{bold} | {share} |")
    lines += [
        "",
        f"Total click to result: **{_ms(med['total'])}** median (min {_ms(min(r['total'] for r in rows))}, "
        f"max {_ms(max(r['total'] for r in rows))}) — {verdict} the {TARGET_S:g} s target. "
        f"The service adds {_ms(med['service overhead'])} to the worker's own stages (dispatch, pipe, "
        f"unpickling the result). Reference, same loop: `run_profile` called in the bench process took "
        f"{_ms(direct_med)} median; through the service {_ms(med['service'])} "
        f"({med['service'] / direct_med:.2f}×).",
        "",
        "Worker stages (median): " + ", ".join(f"{k} {_ms(v)}" for k, v in stage_med.items()) + ".",
        "",
        "Cold start, for contrast: `ProfileService.start(wait=True)` (new interpreters, torch import, "
        f"warm-up profile) "
        f"took {start_s:.1f} s; the first click after it {_ms(first_s)} (not in the medians). "
        f"Trace: {rows[0]['_events']} events; insights found: {rows[0]['_insights']}.",
        "",
    ]
    if missing:
        lines += [f"Not timed (not in this checkout yet): {', '.join(missing)}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 clicks instead of 10")
    parser.add_argument("--runs", type=int, default=None, help="clicks to time (default 10, quick 3)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu: a CPU worker; cuda: one worker on the first visible GPU")
    parser.add_argument("--no-write", action="store_true", help="print, do not update BENCHMARKS.md")
    parser.add_argument("--benchmarks", type=Path, default=ROOT / "BENCHMARKS.md", help="file to update")
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 10)
    args.load_avg = os.getloadavg()[0]
    config = RunConfig(device=args.device)
    steps, missing = pipeline_steps()

    service = ProfileService(settings=HostSettings(), devices=["cpu" if args.device == "cpu" else "cuda:0"])
    try:
        t0 = time.perf_counter()
        service.start(wait=True)
        start_s = time.perf_counter() - t0
        print(f"service ready in {start_s:.1f} s: {service.device_info().label}", flush=True)
        first_s = one_click(service, config, steps)["total"]
        direct_run(config)  # the bench process's own first profile pays the warm-up; discard it
        rows, direct_s = [], []
        for i in range(runs):
            rows.append(one_click(service, config, steps))
            direct_s.append(direct_run(config))
            print(f"click {i + 1}/{runs}: total {_ms(rows[-1]['total'])}, service {_ms(rows[-1]['service'])}, "
                  f"direct run_profile {_ms(direct_s[-1])}", flush=True)
    finally:
        service.shutdown()
    text = report(args, config, start_s, first_s, rows, direct_s, missing)
    print("\n" + text)
    if not args.no_write:
        write_section(text, args.benchmarks)
        print("BENCHMARKS.md updated (section 'Click to result')")


if __name__ == "__main__":
    main()

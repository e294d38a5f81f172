"""Analyze: every analysis + the findings on a large real trace, and how the cost scales.

    python bench/bench_analysis.py              # real 71k-event H200 transformer step + 1k…1M scaling
    python bench/bench_analysis.py --quick      # small inputs, no write (CI)

Analyze = ``lab.analysis.analyze`` (operator and kernel summaries, GPU busy/idle, launch
delays, steps, GEMM efficiency, verdict) + ``lab.judge.judge_trace``; the trace is loaded
once beforehand (ingest has its own bench). Large traces for the scaling rows repeat a real
H200 trace's steps (``bench/make_large_trace.py``: times shifted, ids renumbered). Each figure
is the median of N calls after one warm-up, wall clock and process CPU time. Target (issue
"Benchmarks"): analyze + judge ≤ 0.5 s on the large trace on this 2-core box.

Beside it, same run: the TensorBoard plugin's views, which are not part of ``analyze`` (computed
when the tab is opened): each of ``step_time``, ``kernel_view``, ``module_view`` in this process,
and the tab's job as the page runs it — ``JobKind.TENSORBOARD`` on a ``ReaderPool`` (one reader)
that has read the trace: the trace and analysis sent, the views computed there and sent back.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from benchmarks_md import write_section  # noqa: E402
from make_large_trace import repeated_events  # noqa: E402

from lab.analysis import analyze, kernel_view, module_view, step_time  # noqa: E402
from lab.core.settings import HostSettings  # noqa: E402
from lab.judge import judge_trace  # noqa: E402
from lab.read import Job, JobInput, JobKind, ReaderPool  # noqa: E402
from lab.trace.load import load_trace  # noqa: E402

REAL_TRACE = ROOT / "bench" / "data" / "transformer_step_h200.json.gz"
SCALING_SOURCE = ROOT / "tests" / "data" / "matmul_add_4096_bf16.json.gz"
# The target: analyze (now with torch's key_averages rebuilt and the diagnoses) stays ≤ 150 ms on the
# real 52k-event transformer trace (it was 114 ms before either existed).
TARGET_S = 0.15
# What the figure was before (this section's earlier runs on this box), kept beside the new one.
HISTORY = ("108 ms on 2026-12-01 (load 3.1), before the TensorBoard plugin's views were added to every analyze(); "
           "~0.5 s with them (kernel_view 156–204 ms, module_view 140–180 ms on the loaded box); 114 ms before the "
           "trace-derived key_averages and the diagnoses were added, which took it to 303 ms until the diagnoses ran "
           "once per analysis and the by-shape tables became on demand")


def timed(fn, repeats: int) -> tuple[object, float, float]:
    """(result, median wall s, median CPU s) over ``repeats`` calls after one warm-up."""
    result = fn()
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return result, statistics.median(walls), statistics.median(cpus)


def analyze_and_judge(trace):
    analysis = analyze(trace)
    return analysis, judge_trace(trace, analysis).findings


def tab_job(repeats: int) -> float:
    """Median wall s of the TensorBoard tab's reader job on the real trace, as ``ui.cache.job_result`` sends it."""
    with ReaderPool(settings=HostSettings(reader_count=1)).start(wait=True) as pool:
        parsed = pool.read(REAL_TRACE.read_bytes(), label=REAL_TRACE.name)
        given = JobInput(traces=(parsed.trace,), analyses=(parsed.analysis,), findings=(parsed.findings,))
        return timed(lambda: pool.run_job(Job(kind=JobKind.TENSORBOARD), given), repeats)[1]


def repeated_trace(n_events: int):
    doc = json.loads(gzip.decompress(SCALING_SOURCE.read_bytes()))
    complete_share = sum(e.get("ph") == "X" for e in doc["traceEvents"]) / len(doc["traceEvents"])
    doc["traceEvents"] = repeated_events(doc, round(n_events / complete_share))
    return load_trace(json.dumps(doc).encode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, 3 repeats, no BENCHMARKS.md write")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    load_avg = os.getloadavg()[0]

    rows = []
    real = load_trace(REAL_TRACE)
    (analysis, findings), wall, cpu = timed(lambda: analyze_and_judge(real), repeats)
    named = judge_trace(real, analysis).named
    verdict = named.rule if named is not None else "none"  # the rule of the finding the verdict names
    rows.append(("real: H200 transformer training step", len(real.events), len(real.flows), wall, cpu,
                 len(findings), verdict))
    # The TensorBoard tab's views, on demand: each in this process, then the tab's job in a reader.
    views = [(name, *timed(lambda fn=fn: fn(real), repeats)[1:])
             for name, fn in (("step_time", step_time), ("kernel_view", kernel_view), ("module_view", module_view))]
    # What every analyze() did before they left it, measured in the same run: the ratio to the row above.
    _, wall, cpu = timed(lambda: (analyze_and_judge(real), step_time(real), kernel_view(real), module_view(real)),
                         repeats)
    rows.append(("same trace, with the TensorBoard views inside (what analyze() did before they left it)",
                 len(real.events), len(real.flows), wall, cpu, len(findings), verdict))
    job = tab_job(repeats) if not args.quick else None

    scaling = []
    for n in ((1_000, 10_000) if args.quick else (1_000, 10_000, 100_000, 1_000_000)):
        trace = repeated_trace(n)
        _, wall, cpu = timed(lambda trace=trace: analyze_and_judge(trace), 3 if n >= 1_000_000 else repeats)
        scaling.append((len(trace.events), wall, cpu))
        del trace

    lines = [
        "## Analyze",
        "",
        f"Command: `python bench/bench_analysis.py{' --quick' if args.quick else ''}` — {dt.date.today()}, "
        f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), Python {platform.python_version()}; "
        f"load average at start {load_avg:.1f}. Method: `analyze(trace)` + `judge_trace(trace, analysis)` on a "
        f"trace loaded beforehand; median of {repeats} calls after one warm-up; wall clock and process CPU time.",
        "",
        "| trace | events | flows | analyze + judge wall ms | CPU ms | findings | verdict |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for i, (name, events, flows, wall, cpu, n_findings, verdict) in enumerate(rows):
        what = f"{name} (`{REAL_TRACE.name}`, with_stack + profile_memory + record_shapes)" if i == 0 else name
        lines.append(f"| {what} | {events:,} | {flows:,} | {wall * 1000:,.0f} | {cpu * 1000:,.0f} | {n_findings} | "
                     f"{verdict} |")
    lines += [
        "",
        f"Reading: target ≤ {TARGET_S * 1000:.0f} ms — "
        + ("met" if rows[0][3] <= TARGET_S else "missed") + f" ({rows[0][3] * 1000:,.0f} ms wall, "
        f"{rows[1][3] / rows[0][3]:.2f}× faster and {rows[1][4] / rows[0][4]:.2f}× less CPU than with the "
        f"TensorBoard views inside, same run; was {HISTORY}).",
        "",
        "Not in analyze: the TensorBoard tab's views, computed when the tab is opened (same trace, run and method) — "
        + ", ".join(f"`{name}` {w * 1000:,.1f} ms wall ({c * 1000:,.1f} ms CPU)" for name, w, c in views) + "."
        + (f" The tab's job as the page runs it (`JobKind.TENSORBOARD` on a one-reader `ReaderPool` holding the "
           f"read trace; trace + analysis sent, the views sent back; median of {repeats} after one warm-up): "
           f"{job * 1000:,.0f} ms wall, once per trace (kept like the by-shape tables)." if job is not None else ""),
        "",
        "## Scaling (analyze)",
        "",
        f"Same run and method; analyze + judge on `{SCALING_SOURCE.name}` repeated to N events "
        "(`bench/make_large_trace.py`; 3 calls at 1M).",
        "",
        "| events | wall ms | CPU ms | CPU µs / event |",
        "|---:|---:|---:|---:|",
    ]
    for events, wall, cpu in scaling:
        lines.append(f"| {events:,} | {wall * 1000:,.1f} | {cpu * 1000:,.1f} | {cpu * 1e6 / events:.2f} |")
    per_event = [cpu * 1e6 / events for events, _, cpu in scaling if events >= 10_000]
    if len(per_event) >= 2:
        lines += ["", f"Reading: from 10k events up the CPU cost per event stays within "
                      f"{min(per_event):.2f}–{max(per_event):.2f} µs: linear growth."]
    text = "\n".join(lines)
    print(text)
    if not (args.quick or args.no_write):
        write_section(text.split("\n## Scaling (analyze)")[0])
        write_section("## Scaling (analyze)" + text.split("\n## Scaling (analyze)")[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Explain: the time attribution, op roofs and findings beside analyze, on the 114 MB trace.

    python bench/bench_explain.py             # ~114 MB of JSON: the H200 transformer step repeated
    python bench/bench_explain.py --mb 20      # a smaller one

Side by side in one run, each the median of N calls after one warm-up, wall and process CPU:
``analyze`` (what the reader ran before), ``explain`` + ``judge`` alone, and the two together
(what the reader runs now). The trace is built by ``make_large_trace`` (times shifted, ids
renumbered) and loaded once. Target (explain issue): analyze plus attribution no longer than
analyze alone took before it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from make_large_trace import events_for_megabytes, load_source, write_trace  # noqa: E402

from lab.analysis import analyze  # noqa: E402
from lab.explain import explain  # noqa: E402
from lab.judge import judge_trace  # noqa: E402
from lab.trace import load_trace  # noqa: E402


def _timed(fn, n: int) -> tuple[float, float]:
    fn()
    wall, cpu = [], []
    for _ in range(n):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=114.0)
    ap.add_argument("--n", type=int, default=5)
    args = ap.parse_args(argv)
    doc = load_source(ROOT / "bench" / "data" / "transformer_step_h200.json.gz")
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(doc, events_for_megabytes(doc, args.mb), Path(tmp))
        size = path.stat().st_size
        trace = load_trace(path.read_bytes())
    analysis = analyze(trace)

    def explained():
        ex = explain(trace, links=analysis.links, spans=analysis.findings.steps, peak=analysis.peak)
        judge_trace(trace, analysis, ex)

    def both():
        a = analyze(trace)
        judge_trace(trace, a)

    rows = [("analyze", _timed(lambda: analyze(trace), args.n)), ("explain + judge", _timed(explained, args.n)),
            ("analyze + explain + judge", _timed(both, args.n))]
    print(f"{len(trace.events):,} events, {size / 1e6:.1f} MB JSON, median of {args.n}")
    print("| step | wall (ms) | CPU (ms) |\n| --- | --- | --- |")
    for name, (wall, cpu) in rows:
        print(f"| {name} | {wall * 1e3:,.0f} | {cpu * 1e3:,.0f} |")
    print(f"ratio (analyze + explain + judge) / analyze: {rows[2][1][0] / rows[0][1][0]:.2f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

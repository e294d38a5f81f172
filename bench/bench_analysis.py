"""Speed of lab.analysis + lab.insights (+ the report) on large traces.

    python bench/bench_analysis.py             # ~10k and ~100k events, 7 repeats
    python bench/bench_analysis.py --quick     # ~100k events only, 3 repeats

The large traces repeat a real H200 trace's events (tests/data) back to back in the JSON,
shifting times and offsetting correlation / External ids and flow ids, so lanes, nesting,
flows and GEMM shapes are real; then load_trace reads them like any upload. Each stage is
timed on its own (wall clock and process CPU time); medians over the repeats. The target in
the analysis issue: analyses + insights ≤ 0.5 s on a 100k-event trace on the 2-core box.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.analysis import analyze  # noqa: E402
from lab.insights import find_insights  # noqa: E402
from lab.report import build_report  # noqa: E402
from lab.trace import load_trace  # noqa: E402

SOURCES = ("matmul_add_1024_fp32", "matmul_add_4096_bf16")
ID_STRIDE = 1_000_000  # larger than any id in the source traces


def repeated_trace_json(name: str, target_events: int) -> bytes:
    """The source trace repeated until it holds ~target_events complete events, as JSON bytes.

    Uses bench/make_large_trace.py (the shared generator) when present, else the same
    construction inline.
    """
    path = ROOT / "tests" / "data" / f"{name}.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))
    try:
        sys.path.insert(0, str(ROOT / "bench"))
        from make_large_trace import repeated_events
    except ImportError:
        repeated_events = None
    if repeated_events is not None:
        body = [e for e in raw["traceEvents"] if e.get("ph") != "M"]
        complete_share = sum(1 for e in body if e.get("ph") == "X") / len(body)
        raw["traceEvents"] = repeated_events(raw, round(target_events / complete_share))
        return json.dumps(raw).encode()
    events = raw["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"]
    # The profiler's own span/overhead events happen once per trace, not once per repeat.
    body = [e for e in events if e.get("ph") in ("X", "s", "f") and e.get("cat") not in ("Trace", "overhead")]
    once = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("Trace", "overhead")]
    start = min(e["ts"] for e in body)
    period = max(e["ts"] + e.get("dur", 0) for e in body) - start + 10.0
    per_copy = sum(1 for e in body if e["ph"] == "X")
    out = list(meta) + once
    for r in range(max(1, round(target_events / per_copy))):
        for e in body:
            copy = dict(e, ts=e["ts"] + r * period)
            if "id" in copy:
                copy["id"] = e["id"] + r * ID_STRIDE
            if "args" in e:
                args = dict(e["args"])
                for key in ("correlation", "External id"):
                    if key in args:
                        args[key] += r * ID_STRIDE
                copy["args"] = args
            out.append(copy)
    raw["traceEvents"] = out
    return json.dumps(raw).encode()


def timed(fn, repeats: int):
    """(result, median wall s, median CPU s) of fn() over ``repeats`` runs after one warm-up."""
    result = fn()
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return result, statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = (100_000,) if args.quick else (10_000, 100_000)
    repeats = 3 if args.quick else 7
    print(f"repeats={repeats}; medians; wall / CPU seconds\n")
    print("| source | events | flows | analyze | insights | analyze+insights | report (reusing both) |")
    print("|---|---|---|---|---|---|---|")
    for name in SOURCES:
        for size in sizes:
            trace = load_trace(repeated_trace_json(name, size))
            analysis, a_wall, a_cpu = timed(lambda: analyze(trace), repeats)
            insights, i_wall, i_cpu = timed(lambda: find_insights(trace, analysis), repeats)
            _, r_wall, r_cpu = timed(lambda: build_report(trace, analysis=analysis, insights=insights), repeats)
            print(f"| {name} | {len(trace.events):,} | {len(trace.flows):,} | {a_wall:.3f} / {a_cpu:.3f} | "
                  f"{i_wall:.3f} / {i_cpu:.3f} | {a_wall + i_wall:.3f} / {a_cpu + i_cpu:.3f} | "
                  f"{r_wall:.3f} / {r_cpu:.3f} |")


if __name__ == "__main__":
    main()

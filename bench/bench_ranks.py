"""2-rank read: two ranks of the large real transformer trace, read as the page reads an upload of
several files, and what the Ranks view costs and sends.

    python bench/bench_ranks.py            # writes the "2-rank read" section of BENCHMARKS.md
    python bench/bench_ranks.py --quick    # fewer rounds, no write

The ranks: ``bench/data/transformer_step_h200.json.gz`` (a real H200 training step, 51,787
complete events, one GPU) written twice with a ``distributedInfo`` of a 2-rank NCCL job, rank 1
with every ``ts`` shifted by ``RANK1_SHIFT_US`` (it starts later on the job's clock). It was
recorded on one GPU, so it holds no collective: the straggler is "none", and what is measured
is the cost of reading and analysing two ranks and the stacked timeline's budget.

Method: the page's ``ReaderPool`` with the host's plan (readers from the core count). Rounds
interleave one rank read alone (``read``) and the two ranks submitted at once and awaited
(what ``ui.upload.accept_group`` does); medians of wall seconds, side by side. Then, in this
process on the two ``Parsed``: ``analyze_ranks`` (what the server computes once a group is
read), ``build_ranks_timeline`` + ``timeline_chart(...).to_dict()`` for the whole job and a
10 % window, with the marks sent, beside ``build_timeline`` of one rank alone.
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

from lab.analysis import analyze_ranks  # noqa: E402
from lab.core import HostSettings  # noqa: E402
from lab.judge import judge_ranks  # noqa: E402
from lab.read import ReaderPool  # noqa: E402
from lab.views import build_ranks_timeline, build_timeline, timeline_chart  # noqa: E402

REAL_TRACE = ROOT / "bench" / "data" / "transformer_step_h200.json.gz"
RANK1_SHIFT_US = 1_500.0  # rank 1 starts 1.5 ms after rank 0, as ranks launched one after another do


def rank_files() -> list[bytes]:
    doc = json.loads(gzip.decompress(REAL_TRACE.read_bytes()))
    out = []
    for rank in (0, 1):
        d = dict(doc)
        d["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
        if rank:
            d["traceEvents"] = [{**e, "ts": e["ts"] + RANK1_SHIFT_US} if "ts" in e else e for e in doc["traceEvents"]]
        out.append(gzip.compress(json.dumps(d).encode(), compresslevel=6))
    return out


def timed_ms(fn, repeats: int):
    result = fn()
    walls = []
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - t)
    return result, 1e3 * statistics.median(walls)


def read_rounds(pool: ReaderPool, files: list[bytes], rounds: int) -> tuple[float, float, list]:
    one, two, parsed = [], [], []
    for _ in range(rounds):
        t = time.perf_counter()
        pool.read(files[0], label="rank0")
        one.append(time.perf_counter() - t)
        t = time.perf_counter()
        tickets = [pool.submit(f, label=f"rank{i}") for i, f in enumerate(files)]
        parsed = [ticket.result() for ticket in tickets]
        two.append(time.perf_counter() - t)
    return statistics.median(one), statistics.median(two), parsed


def view_rows(parsed, ranks, repeats: int) -> list[tuple[str, int, int, float, float]]:
    traces = [p.trace for p in parsed]
    span = max(off + t.meta.span_us for t, off in zip(traces, ranks.offsets_us, strict=True))
    rows = []
    for label, window in (("whole job", (0.0, span)), ("10 % window", (0.45 * span, 0.55 * span))):
        data, build_ms = timed_ms(lambda w=window: build_ranks_timeline(traces, ranks, start_us=w[0], end_us=w[1]),
                                  repeats)
        _, chart_ms = timed_ms(lambda d=data: timeline_chart(d).to_dict(), repeats)
        rows.append((f"2 ranks, {label}", data.total_events, data.mark_count, build_ms, chart_ms))
    single, build_ms = timed_ms(lambda: build_timeline(traces[0]), repeats)
    _, chart_ms = timed_ms(lambda: timeline_chart(single).to_dict(), repeats)
    rows.append(("rank 0 alone (the Timeline view), whole trace", single.total_events, single.mark_count, build_ms,
                 chart_ms))
    return rows


def section(args, plan, one_s, two_s, analyze_ms, ranks, findings, rows, events) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "## 2-rank read", "",
        f"Command: `python bench/bench_ranks.py{' --quick' if args.quick else ''}` — {dt.date.today()}, "
        f"{os.cpu_count()} CPUs ({platform.machine()}), Python {platform.python_version()}; load average at start "
        f"{load:.1f}. Ranks: `transformer_step_h200.json.gz` (the large real trace: {events:,} complete events, "
        f"22.7 MB JSON, 1.4 MB gzipped) written twice with a 2-rank NCCL `distributedInfo`, rank 1 shifted by "
        f"{RANK1_SHIFT_US / 1000:.1f} ms; a one-GPU recording, so no collectives (straggler: none). "
        f"ReaderPool with the host's plan: {plan.count} readers.", "",
        f"| read (median of {args.rounds} interleaved rounds) | wall s |", "|---|---:|",
        f"| one rank (`ReaderPool.read`) | {one_s:.2f} |",
        f"| two ranks submitted at once, both awaited (the page's multi-file upload) | {two_s:.2f} |",
        f"| ratio two / one | {two_s / one_s:.2f}× |",
        f"| `analyze_ranks` on the two parsed ranks (in the server, once per group) | {analyze_ms / 1000:.3f} |", "",
        f"| Ranks view (median of {args.repeats}) | events in window | marks sent | build ms | chart.to_dict ms |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [f"| {label} | {n:,} | {marks:,} | {b:.0f} | {c:.0f} |" for label, n, marks, b, c in rows]
    lines += ["", f"Reading: two ranks take {two_s / one_s:.2f}× one rank's read on {plan.count} readers "
                  f"({os.cpu_count()} cores shared with other work, load average {load:.1f}: the two reads, each "
                  "niced, get no core of their own, so they take about as long as one after the other); "
                  "`analyze_ranks` adds milliseconds (this trace has no collectives to match); the stacked "
                  f"timeline sends {rows[0][2]:,} marks for "
                  f"{rows[0][1]:,} events, within the single timeline's 5,000 (rank 0 alone: {rows[2][2]:,}). "
                  f"Findings that fired: {', '.join(f.title for f in findings) or 'none'}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds; do not write BENCHMARKS.md")
    args = parser.parse_args()
    args.rounds, args.repeats = (2, 2) if args.quick else (5, 5)
    files = rank_files()
    settings = HostSettings()
    with ReaderPool(settings=settings).start(wait=True) as pool:
        one_s, two_s, parsed = read_rounds(pool, files, args.rounds)
        plan = pool.plan
    names = [f"transformer_rank{r}.json.gz" for r in (0, 1)]
    ranks, analyze_ms = timed_ms(lambda: analyze_ranks([p.trace for p in parsed], names,
                                                       analyses=[p.analysis for p in parsed]), args.repeats)
    findings = judge_ranks(ranks)
    rows = view_rows(parsed, ranks, args.repeats)
    text = section(args, plan, one_s, two_s, analyze_ms, ranks, findings, rows, len(parsed[0].trace.events))
    print(text)
    if not args.quick:
        write_section(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

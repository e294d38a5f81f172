"""The Ranks view's data: the ranks' timelines stacked on one clock, the per-rank table, the CLI's text
and JSON (as data: ``lab/cli.py`` prints them).

``build_ranks_timeline`` lays every rank's lanes one under the other ("rank 1 · GPU 0 stream 7")
on the job's clock — µs since the earliest rank's first event, each rank shifted by its offset
from ``baseTimeNanoseconds`` (``RanksAnalysis.offsets_us``) — with the single timeline's level
of detail (``build_timeline``, ``lab/views/timeline_lod.py``) and its budget in total: the
ranks share ``max_marks``, the rank with fewest events in the window first, each taking an
even share of what is left, so what one rank does not use the next may.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from lab.analysis.ranks.analyze import RanksAnalysis
from lab.judge.finding import Finding
from lab.trace import Trace, TraceFacts
from lab.units import fmt_us
from lab.views.ranks_tables import job_summary
from lab.views.timeline import DEFAULT_MAX_MARKS, DEFAULT_WIDTH_PX, TimelineData, build_timeline
from lab.views.timeline_lod import empty_marks

__all__ = [
    "LANE_ORDER_STRIDE", "TEXT_SORTS", "build_ranks_timeline", "rank_lane",
    "ranks_dict", "ranks_span_us", "ranks_text", "stacked_timeline",
]  # fmt: skip

# lane_order of rank r's lanes = r × this + the lane's own order: rank 0's lanes first, and no
# trace has a million lanes.
LANE_ORDER_STRIDE = 1_000_000


def rank_lane(rank: int, lane: str) -> str:
    return f"rank {rank} · {lane}"


def ranks_span_us(traces: Sequence[Trace | TraceFacts], ranks: RanksAnalysis) -> float:
    """The job's span on its clock: the last rank's last event end."""
    return max(off + t.meta.span_us for t, off in zip(traces, ranks.offsets_us, strict=True))


def _shifted(data: TimelineData, rank: int, offset: float,
             first_row: int) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, ...]]:
    """One rank's marks and links on the job's clock, its rows below the ranks above it."""
    marks = data.marks.copy()
    for c in ("start_us", "end_us", "draw_end_us"):
        marks[c] = marks[c].to_numpy(dtype=np.float64) + offset
    marks["row"] = marks["row"].to_numpy(dtype=np.int64) + first_row
    marks["lane"] = [rank_lane(rank, str(x)) for x in marks["lane"]]
    marks["lane_order"] = marks["lane_order"].to_numpy(dtype=np.int64) + rank * LANE_ORDER_STRIDE
    links = data.links.copy()
    for c in ("launch_x_us", "gpu_x_us"):
        links[c] = links[c].to_numpy(dtype=np.float64) + offset
    for c in ("launch_y", "gpu_y"):
        links[c] = links[c].to_numpy(dtype=np.float64) + first_row
    for c in ("launch_lane", "gpu_lane"):
        links[c] = [rank_lane(rank, str(x)) for x in links[c]]
    return marks, links, tuple(rank_lane(rank, lane) for lane in data.lanes)


def build_ranks_timeline(traces: Sequence[Trace], ranks: RanksAnalysis, *, start_us: float | None = None,
                         end_us: float | None = None, max_marks: int = DEFAULT_MAX_MARKS,
                         width_px: int = DEFAULT_WIDTH_PX) -> TimelineData:
    """Every rank's timeline in the job-clock window ``start_us``..``end_us``, ≤ ``max_marks`` marks in all.

    ``traces`` are in ``ranks.ranks``' order (by rank).
    """
    return stacked_timeline(traces, tuple(r.rank for r in ranks.ranks), ranks.offsets_us, start_us=start_us,
                            end_us=end_us, max_marks=max_marks, width_px=width_px)


def stacked_timeline(traces: Sequence[Trace], rank_ids: Sequence[int], offsets_us: Sequence[float], *,
                     start_us: float | None = None, end_us: float | None = None, max_marks: int = DEFAULT_MAX_MARKS,
                     width_px: int = DEFAULT_WIDTH_PX) -> TimelineData:
    """``build_ranks_timeline`` of the ranks ``rank_ids`` (one per trace) at their job-clock offsets."""
    n = len(traces)
    if n != len(rank_ids) or n != len(offsets_us):
        raise ValueError(f"{n} traces for {len(rank_ids)} ranks")
    if max_marks < 2 * n:
        raise ValueError(f"max_marks={max_marks}: use at least 2 per rank ({2 * n})")
    w0 = 0.0 if start_us is None else float(start_us)
    offsets = tuple(offsets_us)
    w1 = max(off + t.meta.span_us for t, off in zip(traces, offsets, strict=True)) if end_us is None else float(end_us)
    if not w1 > w0:
        raise ValueError(f"end_us={w1} must be greater than start_us={w0}; widen the window")
    in_window = [int(((t.events["ts_us"] + off <= w1) & (t.events["ts_us"] + t.events["dur_us"] + off >= w0)).sum())
                 for t, off in zip(traces, offsets, strict=True)]
    left, parts = max_marks, {}
    for k, i in enumerate(sorted(range(n), key=in_window.__getitem__)):
        share = max(2, left // (n - k))
        data = build_timeline(traces[i], start_us=w0 - offsets[i], end_us=w1 - offsets[i], max_marks=share,
                              width_px=width_px)
        left -= data.mark_count
        parts[i] = data
    first_rows = np.cumsum([0] + [sum(r for _, _, r in parts[i].lane_rows) for i in range(n)])
    shifted = [_shifted(parts[i], rank_ids[i], offsets[i], int(first_rows[i])) for i in range(n)]
    marks = [m for m, _, _ in shifted if len(m)]
    links = [x for _, x, _ in shifted if len(x)]
    datas = [parts[i] for i in range(n)]
    notes = [f"rank {rank_ids[i]}: {d.note}" for i, d in enumerate(datas) if d.note]
    base = datas[0]
    return replace(
        base,
        marks=pd.concat(marks, ignore_index=True) if marks else empty_marks(),
        links=pd.concat(links, ignore_index=True) if links else base.links.iloc[0:0],
        lanes=tuple(lane for _, _, lanes in shifted for lane in lanes), window=(w0, w1),
        total_events=sum(d.total_events for d in datas), shown_events=sum(d.shown_events for d in datas),
        merged_events=sum(d.merged_events for d in datas), note="; ".join(notes),
        hidden_events=sum(d.hidden_events for d in datas), hidden_links=sum(d.hidden_links for d in datas),
        bin_us=max(d.bin_us for d in datas), depth_cap=None, trace_events=sum(d.trace_events for d in datas),
        lane_rows=tuple((rank_lane(rank_ids[i], lane), first + int(first_rows[i]), rows)
                        for i in range(n) for lane, first, rows in parts[i].lane_rows),
        folded_python=sum(d.folded_python for d in datas),
        profiler_lanes=tuple(rank_lane(rank_ids[i], lane)
                             for i in range(n) for lane in parts[i].profiler_lanes),
        hidden_profiler_events=sum(d.hidden_profiler_events for d in datas),
    )


def _plain(value):
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def ranks_dict(ranks: RanksAnalysis, findings: Sequence[Finding]) -> dict:
    """``python -m lab ranks --json``: the job, a row per rank (µs), the straggler, the findings
    (``lab.judge.judge_ranks``)."""
    s = ranks.straggler
    return {
        "world_size": ranks.world_size, "backend": ranks.backend,
        "ranks": [{k: _plain(v) for k, v in vars(r).items()} | {"offset_us": ranks.offsets_us[i],
                                                                 "rank_source": ranks.infos[i].source}
                  for i, r in enumerate(ranks.ranks)],
        "straggler": None if s is None else {
            "rank": s.rank, "late_median_us": s.late_median_us, "matched_calls": s.matched_calls,
            "call_name": s.call_name, "per_step_deltas_us": dict(s.deltas_us), "op_deltas_us": dict(s.op_deltas_us),
            "cause": None if s.cause is None else {k: _plain(v) for k, v in vars(s.cause).items()},
            "wait_per_step_us": _plain(s.wait_us), "others_wait_per_step_us": _plain(s.others_wait_us)},
        "same_work": ranks.same_work, "work_note": ranks.work_note,
        "collectives": [] if ranks.collectives is None else [
            {k: _plain(v) for k, v in row.items()} for row in ranks.collectives.to_dict("records")],
        "findings": [f.as_dict() for f in findings],
        "warnings": list(ranks.warnings),
    }


# ``python -m lab ranks --sort``: the text table's order (largest first but for rank).
TEXT_SORTS = {"rank": "rank", "step": "step_us", "compute": "compute_us", "comm": "comm_us", "idle": "idle_us",
              "overlap": "overlap_us", "calls": "collective_calls"}


def _text_rows(ranks: RanksAnalysis, sort: str, top: int | None) -> list:
    field = TEXT_SORTS[sort]
    rows = sorted(ranks.ranks, key=lambda r: r.rank) if sort == "rank" else sorted(
        ranks.ranks, key=lambda r: -v if math.isfinite(v := float(getattr(r, field))) else math.inf)
    return rows[:top] if top else rows


def _each(r, value: float, per_step: bool) -> str:
    """A rank's figure as the text table shows it: per step when every rank has steps."""
    if not math.isfinite(value):
        return "—"
    return fmt_us(value / r.steps if per_step and r.steps else value)


def ranks_text(ranks: RanksAnalysis, findings: Sequence[Finding], *, sort: str = "rank", top: int | None = None
               ) -> str:
    """``python -m lab ranks``: the table (by ``sort``, a ``TEXT_SORTS`` key; the first ``top``
    rows), the straggler (marked ``*``) and the findings as text."""
    backend = f", {ranks.backend}" if ranks.backend else ""
    lines = [f"{len(ranks.ranks)} ranks of a world of {ranks.world_size}{backend}"]
    lines += [f"warning: {w}" for w in ranks.warnings]
    rows = _text_rows(ranks, sort, top)
    if len(rows) < len(ranks.ranks) or sort != "rank":
        lines.append(f"{len(rows)} of {len(ranks.ranks)} ranks, by {sort}" + (" (largest first)" if sort != "rank"
                                                                              else ""))
    per_step = all(r.steps > 0 for r in ranks.ranks)
    lines.append(f"{'rank':>5}  {'step':>10}  {'GPU busy':>10}  {'compute':>10}  {'comm':>10}  {'wait':>10}  "
                 f"{'overlap':>8}  {'idle':>10}  {'launch':>9}  calls  file")
    late = ranks.straggler.rank if ranks.straggler is not None else None
    for r in rows:
        overlap = "—" if r.overlap_pct is None else f"{r.overlap_pct:.0f} %"
        launch = "—" if not math.isfinite(r.launch_delay_us) else fmt_us(r.launch_delay_us)
        mark = "*" if r.rank == late else " "
        lines.append(f"{r.rank:>4}{mark}  {fmt_us(r.step_us) if math.isfinite(r.step_us) else '—':>10}  "
                     f"{_each(r, r.gpu_busy_us, per_step):>10}  {_each(r, r.compute_us, per_step):>10}  "
                     f"{_each(r, r.comm_us, per_step):>10}  {_each(r, r.comm_wait_us, per_step):>10}  "
                     f"{overlap:>8}  {_each(r, r.idle_us, per_step):>10}  {launch:>9}  {r.collective_calls:>5}  "
                     f"{r.name}")
    each = "per step (each rank's total over its steps ÷ its steps)" if per_step else "over the whole trace"
    lines.append(f"communication: {ranks.ranks[0].comm_source}; GPU busy, compute, comm, wait and idle {each} "
                 "(compute and comm: the work each rank's steps launched, wherever it ran; wait: at the matched "
                 "collectives, until the last rank arrives; overlap and idle: inside the steps' window; unions of "
                 "intervals)")
    s = ranks.straggler
    lines.append("straggler: none (no collective calls to match)" if s is None else
                 f"straggler: rank {s.rank} (marked *), late by {fmt_us(s.late_median_us)} (median of "
                 f"{s.matched_calls} matched {s.call_name})")
    job = job_summary(ranks, findings)
    if s is not None:
        lines.append(f"why: {job.straggler.removeprefix('Straggler: ')}")
    if job.collectives:
        lines.append(job.collectives)
    for f in findings:
        when = "per step" if f.scope == "per step" else "once"
        lines += [f"[{f.severity}] {f.title}: saves {fmt_us(f.saving_us)} {when} ({f.saving_pct:.0f} %)",
                  f"  premise: {f.premise}", f"  {f.evidence}", f"  try: {f.suggestion}"]
        lines += [f"  caveat: {f.caveat}"] if f.caveat else []
    return "\n".join(lines) + "\n"

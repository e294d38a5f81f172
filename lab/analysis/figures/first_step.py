"""The first recorded step against the later ones: how much longer, and where the extra time went
(its first call of an op, the profiler's own work, the gap before its first op)."""

from __future__ import annotations

import numpy as np

from lab.analysis.bundle import Run
from lab.analysis.figures.steps import event_rows, in_steps
from lab.analysis.steps import first_and_later_step_us, profiler_overlap_us
from lab.trace.load import Trace

__all__ = [
    "first_step_excess_in_us", "first_step_ratio", "first_step_share_pct", "first_step_us", "label_first_gaps_us",
    "label_gap_share_pct", "later_step_median_us", "profiler_overhead_in_first_step_us",
]  # fmt: skip


def first_step_ratio(run: Run) -> float:
    """The first step's CPU time over the median of the later steps' (``first_and_later_step_us``)."""
    first, rest = first_and_later_step_us(run.analysis.steps)
    return first / rest if rest > 0 else float("nan")


def first_step_us(run: Run) -> float:
    """The first recorded step's CPU time, in µs."""
    return first_and_later_step_us(run.analysis.steps)[0]


def later_step_median_us(run: Run) -> float:
    """The median CPU time of the steps after the first, in µs."""
    return first_and_later_step_us(run.analysis.steps)[1]


def _first_step(run: Run) -> tuple[float, float, float]:
    """(start, end, excess over the median later step) of the first step, in µs."""
    steps = run.analysis.steps
    excess = first_step_us(run) - later_step_median_us(run)
    return float(steps["start_us"].iloc[0]), float(steps["end_us"].iloc[0]), excess


def first_step_excess_in_us(run: Run, name: str) -> float:
    """µs of the first step spent inside its first call of the CPU operator ``name``, beyond
    that op's median duration in the later steps: where the cold step's extra time went."""
    ev = run.trace.events
    rows = event_rows(run, ("cpu_op",), (name,), lane_kind="cpu")
    rows = rows[in_steps(run, ev["ts_us"].to_numpy(dtype=float)[rows])]
    if not len(rows) or len(run.analysis.steps) < 2:
        return float("nan")
    start, end, _ = _first_step(run)
    ts = ev["ts_us"].to_numpy(dtype=float)[rows]
    dur = ev["dur_us"].to_numpy(dtype=float)[rows]
    first = (ts >= start) & (ts <= end)
    if not first.any() or first.all():
        return float("nan")
    return float(dur[first][0] - np.median(dur[~first]))


def profiler_overhead_in_first_step_us(run: Run) -> float:
    """µs of the profiler's own events (cat "overhead": Activity Buffer Request, Lazy Function
    Loading) that overlap the first step's CPU window."""
    if not len(run.analysis.steps):
        return float("nan")
    start, end, _ = _first_step(run)
    return profiler_overlap_us(run.trace, start, end)


def first_step_share_pct(run: Run, what: str) -> float:
    """The share (%) of the first step's excess time (over the median later step) that is
    ``what``: "profiler" (its own overhead events) or a CPU operator's name."""
    if len(run.analysis.steps) < 2:
        return float("nan")
    _, _, excess = _first_step(run)
    part = profiler_overhead_in_first_step_us(run) if what == "profiler" else first_step_excess_in_us(run, what)
    return 100.0 * part / excess if excess > 0 else float("nan")


def label_first_gaps_us(trace: Trace, label: str | None = None) -> list[float]:
    """For each instance of the step label (or the outermost repeated annotation): first child's
    start − the label's start, in order. The cold-start gap lives here in the first step."""
    ev = trace.events
    ann = ev[(ev["cat"] == "user_annotation") & (ev["lane_kind"] == "cpu")]
    if label is None:
        counts = ann["name"].astype(str).value_counts()
        repeated = counts[counts >= 2]
        if repeated.empty:
            return []
        top = ann[ann["name"].astype(str).isin(repeated.index)]
        label = str(top.sort_values(["depth", "ts_us"])["name"].iloc[0])
    rows = ann[ann["name"].astype(str) == label]
    gaps = []
    for lane, depth, start, end in zip(rows["lane"], rows["depth"], rows["ts_us"], rows["ts_us"] + rows["dur_us"]):
        inner = ev[(ev["lane"] == lane) & (ev["depth"] == depth + 1) & (ev["ts_us"] >= start) & (ev["ts_us"] <= end)]
        if len(inner):
            gaps.append(float(inner["ts_us"].min() - start))
    return gaps


def label_gap_share_pct(run: Run) -> float:
    """How much the first step's label → first-op gap exceeds the later steps' median gap, as a
    share (%) of the first step's excess time: what the old cold-vs-warm lesson pointed at."""
    gaps = label_first_gaps_us(run.trace)
    if len(gaps) < 2 or len(run.analysis.steps) < 2:
        return float("nan")
    _, _, excess = _first_step(run)
    return 100.0 * (gaps[0] - float(np.median(gaps[1:]))) / excess if excess > 0 else float("nan")

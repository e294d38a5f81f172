"""Which events are the program's steps (iterations): ``step_spans``.

``ProfilerStep#N`` (torch.profiler's schedule writes one per ``prof.step()``) first. Without
them, a user annotation (``record_function``) is the step only when it marks whole
iterations:

- it repeats (≥ 2 instances on one CPU thread);
- its instances nest in no other repeated annotation (it is outermost);
- no other outermost repeated annotation runs between two of its instances — otherwise an
  iteration is a sequence of labelled phases (``h2d`` then ``compute``) and no one label holds
  it; this is what made "3 × 'd2h'" the step before;
- together they cover most of the thread's operator time (``STEP_MIN_COVER_PCT``).

When nothing qualifies there are no steps, and the per-step diagnoses read the whole trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.analysis.diag_common import mask_in, mask_where, merge_intervals, texts
from lab.trace import Trace
from lab.vocab import OPERATOR_CATS, PROFILER_STEP_NAME, PROFILER_STEP_PREFIX

__all__ = ["STEP_MIN_COVER_PCT", "StepSpans", "step_spans"]

# "Cover most of the trace" (issue 11): the union of a step annotation's instances must cover at
# least half of the span of operator events on its thread. The seed's 'matmul_add' label covers
# 88 % of its thread (tests/data/matmul_add_4096_bf16.json.gz: 6.2 of 7.1 ms; the rest is the
# final cudaDeviceSynchronize).
STEP_MIN_COVER_PCT = 50.0


@dataclass(frozen=True)
class StepSpans:
    """The steps of a trace, in start order (empty arrays and source "" when it has none).

    ``period_end_us`` is where each step's iteration ends: the next step's start, and the last
    step's own end — host work between two step labels belongs to the step before it.
    """

    rows: np.ndarray  # positions in Trace.events
    source: str  # "ProfilerStep" | "annotation" | ""
    name: str  # PROFILER_STEP_NAME, the annotation's name, or ""
    lane_order: int  # the steps' CPU thread (lane_order), -1 when none
    start_us: np.ndarray
    end_us: np.ndarray
    cover_pct: float  # union of the steps / span of operator events on their thread

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def period_end_us(self) -> np.ndarray:
        if not len(self.rows):
            return self.end_us
        return np.append(self.start_us[1:], self.end_us[-1])

    @property
    def total_us(self) -> float:
        """From the first step's start to the last step's end."""
        return float(self.end_us[-1] - self.start_us[0]) if len(self.rows) else 0.0


_NO_STEPS = StepSpans(np.array([], dtype=np.int64), "", "", -1, np.array([]), np.array([]), 0.0)


def _spans(trace: Trace, rows: np.ndarray, source: str, name: str) -> StepSpans:
    ev = trace.events
    start = ev["ts_us"].to_numpy()[rows]
    order = np.argsort(start, kind="stable")
    rows, start = rows[order], start[order]
    end = start + ev["dur_us"].to_numpy()[rows]
    lane = int(ev["lane_order"].to_numpy()[rows[0]])
    return StepSpans(rows, source, name, lane, start, end, _cover_pct(trace, lane, start, end))


def _cover_pct(trace: Trace, lane: int, start: np.ndarray, end: np.ndarray) -> float:
    ev = trace.events
    on_lane = (ev["lane_order"].to_numpy() == lane) & mask_in(ev["cat"], OPERATOR_CATS)
    ts = ev["ts_us"].to_numpy()[on_lane]
    if not len(ts):
        return 0.0
    span = float((ts + ev["dur_us"].to_numpy()[on_lane]).max() - ts.min())
    ms, me = merge_intervals(start, end)
    return 100.0 * float((me - ms).sum()) / span if span > 0 else 0.0


def step_spans(trace: Trace) -> StepSpans:
    """The trace's steps: ``ProfilerStep#N`` first, else the annotation that marks iterations."""
    ev = trace.events
    on_cpu = mask_in(ev["lane_kind"], ("cpu",))
    marked = (on_cpu & mask_in(ev["cat"], ("cpu_op", "user_annotation"))
              & mask_where(ev["name"], lambda name: name.startswith(PROFILER_STEP_PREFIX)))
    if marked.any():
        return _spans(trace, np.flatnonzero(marked), "ProfilerStep", PROFILER_STEP_NAME)
    rows = np.flatnonzero(on_cpu & mask_in(ev["cat"], ("user_annotation",)))
    if not len(rows):
        return _NO_STEPS
    best = _step_annotation(trace, rows)
    if best is None:
        return _NO_STEPS
    return _spans(trace, best, "annotation", str(texts(ev["name"], best[:1])[0]))


def _step_annotation(trace: Trace, rows: np.ndarray) -> np.ndarray | None:
    """Rows of the annotation group (one name on one thread) that marks iterations, or None."""
    ev = trace.events
    names = ev["name"].array.codes[rows].astype(np.int64)
    lanes = ev["lane_order"].to_numpy()[rows].astype(np.int64)
    group_key = lanes * (int(names.max()) + 1) + names
    keys, group, count = np.unique(group_key, return_inverse=True, return_counts=True)
    group = group.reshape(-1)
    repeated = count[group] >= 2
    rows, group, lanes = rows[repeated], group[repeated], lanes[repeated]
    if not len(rows):
        return None
    start = ev["ts_us"].to_numpy()[rows]
    end = start + ev["dur_us"].to_numpy()[rows]
    # Rows are in (lane, start, −duration) order: a row is nested when an earlier row of its
    # lane (among repeated annotations) ends at or after its own end.
    prev_end = np.full(len(rows), -np.inf)
    for lane in np.unique(lanes):
        sel = np.flatnonzero(lanes == lane)
        running = np.maximum.accumulate(end[sel])
        prev_end[sel[1:]] = running[:-1]
    nested = prev_end >= end
    bad = np.zeros(len(keys), dtype=bool)
    np.logical_or.at(bad, group, nested)
    top = ~bad[group]  # rows of groups whose every instance is outermost
    candidates = []
    for g in np.unique(group[top]):
        mine = np.flatnonzero(group == g)
        lane = lanes[mine[0]]
        others = top & (group != g) & (lanes == lane)
        first, last = start[mine].min(), end[mine].max()
        if (others & (start >= first) & (end <= last)).any():
            continue  # another outermost label runs between its instances: a phase, not a step
        cover = _cover_pct(trace, int(lane), start[mine], end[mine])
        if cover >= STEP_MIN_COVER_PCT:
            candidates.append((cover, len(mine), rows[mine]))
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c[0], c[1]))[2]

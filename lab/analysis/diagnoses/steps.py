"""Which events are the program's steps (iterations): ``step_spans``.

``ProfilerStep#N`` (torch.profiler's schedule writes one per ``prof.step()``) first. Without
them, a user annotation (``record_function``) is the step only when it marks whole
iterations:

- it repeats (≥ 2 instances on one CPU thread);
- its instances nest in no other repeated annotation (it is outermost);
- no other outermost repeated annotation runs between two of its instances — otherwise an
  iteration is a sequence of labelled phases (``h2d`` then ``compute``) and no one label holds
  it; this is what made "3 × 'd2h'" the step before;
- most of the thread's operator events start inside them (``STEP_MIN_COVER_PCT``).

When nothing qualifies there are no steps, and the per-step diagnoses read the whole trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.analysis.diagnoses.common import mask_in, mask_where, merge_intervals, texts
from lab.trace import Trace
from lab.vocab import OPERATOR_CATS, PROFILER_STEP_NAME, PROFILER_STEP_PREFIX

__all__ = ["STEP_MIN_COVER_PCT", "StepSpans", "step_spans"]

# "Cover most of the trace": at least half of the operator events on the thread must
# start inside a step annotation's instances. Real step labels hold 92–100 % (the seed's
# 'matmul_add' 96–98 %, gemm_fp32 97 %, the .item() loop's 'forward' 92 %: tests/data and the
# H200 corpus); a label around one phase holds a small share or meets the phase rule above.
STEP_MIN_COVER_PCT = 50.0


@dataclass(frozen=True)
class StepSpans:
    """The steps of a trace, in start order (empty arrays and source "" when it has none).

    ``period_end_us`` is where each step's iteration ends: the next step's start — host work
    between two step labels belongs to the step before it — and the last step's own end. (Not
    later: what follows the last label is as often the loop's epilogue — a final
    torch.cuda.synchronize(), the profiler's own exit sync — as the last iteration's tail.)
    """

    rows: np.ndarray  # positions in Trace.events
    source: str  # "ProfilerStep" | "annotation" | ""
    name: str  # PROFILER_STEP_NAME, the annotation's name, or ""
    lane_order: int  # the steps' CPU thread (lane_order), -1 when none
    start_us: np.ndarray
    end_us: np.ndarray
    cover_pct: float  # share of the thread's operator events that start inside a step

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def period_end_us(self) -> np.ndarray:
        if not len(self.rows):
            return self.end_us
        return np.append(self.start_us[1:], self.end_us[-1])

    @property
    def total_us(self) -> float:
        """From the first step's start to the last step's period end."""
        return float(self.period_end_us[-1] - self.start_us[0]) if len(self.rows) else 0.0


_NO_STEPS = StepSpans(np.array([], dtype=np.int64), "", "", -1, np.array([]), np.array([]), 0.0)


def _spans(trace: Trace, rows: np.ndarray, source: str, name: str) -> StepSpans:
    ev = trace.events
    start = ev["ts_us"].to_numpy()[rows]
    order = np.argsort(start, kind="stable")
    rows, start = rows[order], start[order]
    end = start + ev["dur_us"].to_numpy()[rows]
    lane = int(ev["lane_order"].to_numpy()[rows[0]])
    return StepSpans(rows, source, name, lane, start, end, _cover_pct(trace, rows))


def _cover_pct(trace: Trace, rows: np.ndarray) -> float:
    """Share of the thread's operator events (ops, launches, other annotations) that start inside
    a step. Counted in events, not time: on a GPU a step's host part is short and the profiler's
    exit cudaDeviceSynchronize can outlast all of them (gemm_fp32: 3 steps of 3 launches each,
    then one sync waiting ~25 ms for the kernels)."""
    ev = trace.events
    depth = ev["depth"].to_numpy()
    start = ev["ts_us"].to_numpy()[rows]
    end = start + ev["dur_us"].to_numpy()[rows]
    on_lane = (ev["lane_order"].to_numpy() == ev["lane_order"].to_numpy()[rows[0]]) & mask_in(ev["cat"], OPERATOR_CATS)
    on_lane &= depth >= depth[rows].min()  # not what encloses the steps …
    on_lane[rows] = False  # … nor the steps themselves
    ts = ev["ts_us"].to_numpy()[on_lane]
    if not len(ts):
        return 0.0
    ms, me = merge_intervals(start, end)
    k = np.searchsorted(ms, ts, side="right") - 1
    inside = (k >= 0) & (ts < me[np.maximum(k, 0)])
    return 100.0 * float(inside.sum()) / len(ts)


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
        cover = _cover_pct(trace, rows[mine])
        if cover >= STEP_MIN_COVER_PCT:
            candidates.append((cover, len(mine), rows[mine]))
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c[0], c[1]))[2]

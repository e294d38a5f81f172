"""Small helpers the diagnoses (``lab/analysis/diag_*.py``) share.

Deliberately local: the diagnoses import only ``lab.trace``, ``lab.vocab``, ``lab.units``,
numpy and pandas while ``lab/analysis/core.py`` is being split in other branches. Several of
these re-implement a helper of ``core`` with the same contract — ``mask_in``, ``texts``,
``merge_intervals``, ``covered_us`` — and are meant to be de-duplicated at merge (keep one,
import it from both). Everything works on row positions of ``Trace.events``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from lab.trace import Trace
from lab.vocab import GPU_ACTIVITY_CATS

__all__ = [
    "GpuBusy", "covered_us", "ancestor_in", "gpu_busy", "idle_after_us", "intersect_us",
    "mask_in", "mask_where", "merge_intervals", "parents", "pct", "rows_in", "texts",
]  # fmt: skip


def _codes(column: pd.Series) -> np.ndarray:
    # The Categorical's own code array: ``column.cat.codes`` builds a new Series each call
    # (a third of diagnose()'s time on the 52k-event transformer trace).
    return column.array.codes


def mask_in(column: pd.Series, values) -> np.ndarray:
    """Boolean mask: the categorical column's value is one of ``values`` (core.mask_in)."""
    cats = np.asarray(column.cat.categories, dtype=object)
    hit = np.isin(cats, list(values))
    return np.append(hit, False)[_codes(column)]  # code -1 (missing) indexes the appended False


def mask_where(column: pd.Series, predicate: Callable[[str], object]) -> np.ndarray:
    """Boolean mask from a predicate evaluated once per distinct value (core.mask_where)."""
    cats = column.cat.categories
    hit = np.array([bool(predicate(str(c))) for c in cats] + [False], dtype=bool)
    return hit[_codes(column)]


def rows_in(trace: Trace, column: str, values) -> np.ndarray:
    return np.flatnonzero(mask_in(trace.events[column], values))


def texts(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """The text values of a categorical column at ``rows`` (core.texts)."""
    cats = np.asarray(column.cat.categories, dtype=object)
    codes = _codes(column)[rows]
    return np.where(codes >= 0, cats[np.maximum(codes, 0)], "")


def pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


# --- intervals -------------------------------------------------------------------------------


def merge_intervals(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Union of [start, end) intervals as sorted, disjoint (starts, ends) (core.merge_intervals)."""
    starts = np.asarray(starts, dtype=float)
    ends = np.asarray(ends, dtype=float)
    if len(starts) == 0:
        return np.array([], dtype=float), np.array([], dtype=float)
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    run_end = np.maximum.accumulate(ends[order])
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], run_end[last]


def covered_us(starts: np.ndarray, ends: np.ndarray, win_start, win_end) -> np.ndarray:
    """Time covered by merged intervals inside each window [win_start, win_end] (core.covered_us)."""
    win_start = np.atleast_1d(np.asarray(win_start, dtype=float))
    win_end = np.atleast_1d(np.asarray(win_end, dtype=float))
    if len(starts) == 0:
        return np.zeros(len(win_start))
    cum = np.concatenate(([0.0], np.cumsum(ends - starts)))

    def upto(t):  # covered time in (-inf, t]
        k = np.searchsorted(starts, t, side="right")
        last_end = ends[np.maximum(k - 1, 0)]
        return cum[k] - np.where(k > 0, np.clip(last_end - t, 0.0, None), 0.0)

    return np.maximum(upto(win_end) - upto(win_start), 0.0)


def intersect_us(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray],
                 win_start, win_end) -> np.ndarray:
    """|A ∩ B| inside each window, for two merged interval sets: |A| + |B| − |A ∪ B|."""
    union = merge_intervals(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    return np.maximum(covered_us(*a, win_start, win_end) + covered_us(*b, win_start, win_end)
                      - covered_us(*union, win_start, win_end), 0.0)


def idle_after_us(busy: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
    """Per instant ``t``: how long the GPU stays idle from ``t`` until its next activity starts.

    0 when ``t`` falls inside busy time; NaN when no activity starts after ``t`` (nothing
    followed, so no idle time can be charged to whatever ended at ``t``).
    """
    starts, ends = busy
    t = np.asarray(t, dtype=float)
    if len(starts) == 0:
        return np.full(len(t), np.nan)
    k = np.searchsorted(starts, t, side="right")  # first interval starting after t
    inside = (k > 0) & (ends[np.maximum(k - 1, 0)] > t)
    nxt = np.where(k < len(starts), starts[np.minimum(k, len(starts) - 1)] - t, np.nan)
    return np.where(inside, 0.0, nxt)


# --- GPU busy time ---------------------------------------------------------------------------


class GpuBusy:
    """Union of GPU activity (kernels, memcpys, memsets) over all devices, as merged intervals."""

    __slots__ = ("rows", "starts", "ends", "busy_us")

    def __init__(self, rows: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        self.rows = rows
        self.starts, self.ends = starts, ends
        self.busy_us = float((ends - starts).sum())

    @property
    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        return self.starts, self.ends


def gpu_busy(trace: Trace, rows: np.ndarray | None = None) -> GpuBusy:
    """GPU busy intervals of ``rows`` (default: all GPU activity) — core.gpu_utilization's union."""
    ev = trace.events
    if rows is None:
        rows = rows_in(trace, "cat", GPU_ACTIVITY_CATS)
    s = ev["ts_us"].to_numpy()[rows]
    e = s + ev["dur_us"].to_numpy()[rows]
    ms, me = merge_intervals(s, e)
    return GpuBusy(rows, ms, me)


# --- nesting ---------------------------------------------------------------------------------


def parents(trace: Trace) -> np.ndarray:
    """Row of each event's direct parent on its lane (-1 for outermost events).

    Rows are sorted by (lane, start, −duration) and ``depth`` counts enclosing events, so the
    parent of a row at depth d is the last earlier row of the same lane at depth d − 1: one
    binary search per depth level (core._parents computes the same).
    """
    ev = trace.events
    depth = ev["depth"].to_numpy().astype(np.int64)
    lane = ev["lane_order"].to_numpy()
    parent = np.full(len(depth), -1, dtype=np.int64)
    if not len(depth):
        return parent
    for d in range(1, int(depth.max()) + 1):
        kids = np.flatnonzero(depth == d)
        above = np.flatnonzero(depth == d - 1)
        if not len(kids) or not len(above):
            continue
        k = np.searchsorted(above, kids, side="left") - 1
        ok = k >= 0
        cand = above[np.maximum(k, 0)]
        ok &= lane[cand] == lane[kids]
        parent[kids[ok]] = cand[ok]
    return parent


def ancestor_in(parent: np.ndarray, wanted: np.ndarray, rows: np.ndarray, *, self_too: bool = False) -> np.ndarray:
    """For each of ``rows``: the nearest ancestor whose ``wanted`` flag is set, else -1."""
    found = np.full(len(rows), -1, dtype=np.int64)
    cur = rows.copy() if self_too else parent[rows]
    live = cur >= 0
    while live.any():
        idx = np.flatnonzero(live)
        hit = wanted[cur[idx]]
        found[idx[hit]] = cur[idx[hit]]
        live[idx[hit]] = False
        idx = idx[~hit]
        cur[idx] = parent[cur[idx]]
        live[idx] = cur[idx] >= 0
    return found

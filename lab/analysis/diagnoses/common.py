"""Small helpers the diagnoses (``lab/analysis/diagnoses/``) share.

The column and interval helpers are the analyses' own (``lab/analysis/columns.py``,
``lab/analysis/intervals.py``), re-exported here for the diagnoses. Everything works on row
positions of ``Trace.events``.
"""

from __future__ import annotations

import numpy as np

from lab.analysis.columns import gpu_activity_rows, mask_in, mask_where, parent_rows, texts
from lab.analysis.intervals import covered_us, merge_intervals
from lab.trace import Trace

__all__ = [
    "GpuBusy", "covered_us", "ancestor_in", "gpu_busy", "intersect_us",
    "mask_in", "mask_where", "merge_intervals", "parents", "pct", "rows_in", "texts",
]  # fmt: skip


def rows_in(trace: Trace, column: str, values) -> np.ndarray:
    return np.flatnonzero(mask_in(trace.events[column], values))


def pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


# --- intervals -------------------------------------------------------------------------------


def intersect_us(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray],
                 win_start, win_end) -> np.ndarray:
    """|A ∩ B| inside each window, for two merged interval sets: |A| + |B| − |A ∪ B|."""
    union = merge_intervals(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    return np.maximum(covered_us(*a, win_start, win_end) + covered_us(*b, win_start, win_end)
                      - covered_us(*union, win_start, win_end), 0.0)


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
    """GPU busy intervals of ``rows`` (default: all GPU activity, ``lab.analysis.gpu.gpu_activity_rows``)
    — ``gpu_utilization``'s union (``merge_intervals``)."""
    ev = trace.events
    if rows is None:
        rows = gpu_activity_rows(trace)
    s = ev["ts_us"].to_numpy()[rows]
    e = s + ev["dur_us"].to_numpy()[rows]
    ms, me = merge_intervals(s, e)
    return GpuBusy(rows, ms, me)


# --- nesting ---------------------------------------------------------------------------------


def ancestor_in(parent: np.ndarray, wanted: np.ndarray, rows: np.ndarray, *, self_too: bool = False) -> np.ndarray:
    """For each of ``rows``: the nearest ancestor whose ``wanted`` flag is set, else -1."""
    found = np.full(len(rows), -1, dtype=np.int64)
    cur = np.asarray(rows if self_too else parent[rows], dtype=np.int64)
    idx = np.flatnonzero(cur >= 0)  # the rows still walking, and where each one is: shrinking arrays
    cur = cur[idx]
    while len(idx):
        hit = wanted[cur]
        found[idx[hit]] = cur[hit]
        idx, cur = idx[~hit], parent[cur[~hit]]
        idx, cur = idx[cur >= 0], cur[cur >= 0]
    return found


def parents(trace: Trace) -> np.ndarray:
    """Row of each event's direct parent on its lane (-1 for outermost events)."""
    ev = trace.events
    return parent_rows(ev["depth"].to_numpy(), ev["lane_order"].to_numpy())

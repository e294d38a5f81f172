"""The elementary segments of one attribution: the window cut at every start and end of the
events that matter (``Segments``), which segments a set of events covers, and the innermost op
over a segment (``innermost``). ``lab.explain.attribution`` labels the segments.
"""

from __future__ import annotations

import numpy as np

from lab.analysis.diagnoses.common import ancestor_in
from lab.analysis.intervals import merge_intervals

__all__ = ["Segments", "innermost"]

# Up to this many rows, a label's segments are set run by run (a loop over their merged runs);
# above it, by one cumulative count over every segment (114 MB trace: 572k segments, ~3 ms a pass,
# while most host labels — syncs, the profiler's events, the optimizer — cover a few runs).
_FEW_ROWS = 512


class Segments:
    """The segment boundaries of one attribution, and where each event row starts and ends among
    them: every start and end is one of the bounds (or outside them), so an event covers a run of
    whole segments. Each row is searched for once, however many labels read it."""

    def __init__(self, bounds: np.ndarray, ts: np.ndarray, end: np.ndarray):
        self.bounds, self._ts, self._end = bounds, ts, end
        self.lo = np.full(len(ts), -1, dtype=np.int64)
        self.hi = np.full(len(ts), -1, dtype=np.int64)

    @classmethod
    def of(cls, ts: np.ndarray, end: np.ndarray, rows: np.ndarray, extra: np.ndarray, *, lo: float,
           hi: float) -> Segments:
        """The bounds: every start and end of ``rows`` and the ``extra`` instants inside [lo, hi]
        (just lo and hi when fewer than two), with the rows already placed among them. One stable
        argsort does both: one lane's rows come sorted by start, runs its merge sort takes whole
        (a quarter of np.unique's time on the 114 MB trace), and the sorted order gives each
        row's start and end their bound without a search."""
        values = np.concatenate([ts[rows], end[rows], extra])
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        new = np.ones(len(ordered), dtype=bool)
        new[1:] = ordered[1:] != ordered[:-1]
        distinct = ordered[new]
        first, stop = np.searchsorted(distinct, lo, side="left"), np.searchsorted(distinct, hi, side="right")
        if stop - first < 2:
            return cls(np.array([lo, hi]), ts, end)
        out = cls(distinct[first:stop], ts, end)
        rank = np.cumsum(new)  # each sorted value's bound, + 1 + first; shifted and clipped in place
        rank -= 1 + first
        np.clip(rank, 0, stop - first, out=rank)  # outside [lo, hi]: before the first bound or past the last
        at = np.empty(len(values), dtype=np.int64)
        at[order] = rank
        out.lo[rows], out.hi[rows] = at[:len(rows)], at[len(rows):2 * len(rows)]
        return out

    def positions(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first segment, one past the last) of each row: the bounds its start and end fall on."""
        missing = rows[self.lo[rows] < 0]
        if len(missing):
            self.lo[missing] = np.searchsorted(self.bounds, self._ts[missing], side="left")
            self.hi[missing] = np.searchsorted(self.bounds, self._end[missing], side="left")
        return self.lo[rows], self.hi[rows]

    def covered(self, rows: np.ndarray) -> np.ndarray:
        """Which segments lie inside the union of the rows' [start, end)."""
        n = len(self.bounds)
        if not len(rows):
            return np.zeros(n - 1, dtype=bool)
        lo, hi = self.positions(rows)
        if len(rows) <= _FEW_ROWS:  # a few intervals: set their runs, no pass over every segment
            out = np.zeros(n - 1, dtype=bool)
            for a, b in zip(*merge_intervals(lo, hi)):
                out[int(a):int(b)] = True
            return out
        depth = np.bincount(lo, minlength=n + 1)  # +1 where a row starts, -1 where one ends, summed in place:
        depth -= np.bincount(hi, minlength=n + 1)  # one array of the segments' length, not three
        np.cumsum(depth, out=depth)
        return depth[:n - 1] > 0


def innermost(seg: np.ndarray, rows: np.ndarray, bnd: Segments, parent: np.ndarray) -> np.ndarray:
    """For each segment index in ``seg``, the innermost of ``rows`` (properly nested events of one
    lane) around it, -1 if none: the last of them to start at or before the segment, else its
    nearest ancestor among ``rows`` that still covers the segment (one search, then a walk up)."""
    out = np.full(len(seg), -1, dtype=np.int64)
    if not len(rows) or not len(seg):
        return out
    lo, _ = bnd.positions(rows)
    order = np.argsort(lo, kind="stable")  # by start, ties in row order
    # The last to start at or before each segment: how many start there or before, less one (a
    # count over the segments, not a search per segment).
    k = np.cumsum(np.bincount(lo, minlength=len(bnd.bounds)))[seg] - 1
    cand = np.where(k >= 0, rows[order][np.maximum(k, 0)], -1)
    mine = np.zeros(len(parent), dtype=bool)
    mine[rows] = True
    # Each row's nearest enclosing row, walked up once per row: a candidate that ended steps to it
    # (the walk through the frames between two ops is paid per op, not per segment).
    up = np.full(len(parent), -1, dtype=np.int64)
    up[rows] = ancestor_in(parent, mine, rows)
    live = np.flatnonzero(cand >= 0)
    while len(live):
        c = cand[live]
        ok = bnd.hi[c] > seg[live]
        out[live[ok]] = c[ok]
        live = live[~ok]
        cand[live] = up[cand[live]]  # only the candidates that ended walk up
        live = live[cand[live] >= 0]
    return out

"""Time intervals: the union of [start, end) intervals, and how much of a window they cover.

Leaf helpers (numpy only), shared by the GPU analysis, the steps, the insights and the diagnoses.
"""

from __future__ import annotations

import numpy as np

__all__ = ["covered_us", "innermost_open", "merge_intervals", "step_of"]


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [start, end) intervals as sorted, disjoint (starts, ends); touching ones merge."""
    if len(starts) == 0:
        return np.array([], dtype=float), np.array([], dtype=float)
    order = np.argsort(starts, kind="stable")
    s = np.asarray(starts, dtype=float)[order]
    run_end = np.maximum.accumulate(np.asarray(ends, dtype=float)[order])
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], run_end[last]


def step_of(win_start: np.ndarray, win_end: np.ndarray, t, *, closed: bool = False,
            last_closed: bool = False) -> np.ndarray:
    """Per instant ``t``, the index of the window (sorted by start, not overlapping: the steps'
    windows, their periods or their CPU spans) that holds it, start ≤ t < end, -1 outside every
    window: the one "which step is this in" (``lab.analysis.steps`` re-exports it). ``closed``:
    every window holds its end too (a step label's CPU span); ``last_closed``: the last one does
    (a step's period runs to the next step's start, the last step's to its own end). Where two
    windows touch, the later one holds the instant they share."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    if not len(win_start):
        return np.full(len(t), -1, dtype=np.int64)
    k = np.searchsorted(win_start, t, side="right") - 1
    kk = np.maximum(k, 0)
    stop = win_end[kk]
    inside = (t <= stop) if closed else (t < stop) | (last_closed & (kk == len(win_start) - 1) & (t == stop))
    return np.where((k >= 0) & inside, k, -1)


def covered_us(starts: np.ndarray, ends: np.ndarray, win_start, win_end) -> np.ndarray:
    """Time covered by merged intervals (from ``merge_intervals``) inside each window [win_start, win_end]."""
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


def innermost_open(starts: np.ndarray, ends: np.ndarray, t: int, chunk: int = 256) -> int:
    """Of events sorted by start, the last with start ≤ t ≤ end, else -1: searched backwards a
    chunk at a time, since the open event is nearly always a few events back (slicing all the
    events before each query was quadratic in key_averages: 2.4 s of 3.9 on a 456k-event trace)."""
    j = int(np.searchsorted(starts, t, side="right"))
    while j > 0:
        lo = max(0, j - chunk)
        hit = np.flatnonzero(ends[lo:j] >= t)
        if len(hit):
            return lo + int(hit[-1])
        j = lo
    return -1

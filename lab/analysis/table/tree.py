"""The FunctionEvent tree of one thread, as torch's ``EventList._populate_cpu_children`` builds it.

Events come per thread in torch's list order (start, −end). ``nested_parents`` finds every
parent at once from nesting depths where a thread's events nest properly, and marks the events
where they do not; ``stack_parents`` replays torch's stack for such a thread
(``lab.analysis.table.key_averages._tree`` uses both).
"""

from __future__ import annotations

import numpy as np

from lab.analysis.columns import stable_order

__all__ = ["nested_parents", "stack_parents"]


def nested_parents(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parent, bad) by nesting depth: depth = earlier events of the thread still open at the
    start; ``bad`` marks events whose depth parent does not contain them."""
    n = len(start)
    if (int(thread.max()) + 1) * (int(end.max()) - int(start.min()) + 1) >= 2**62:
        # Threads × span past int64 (many lanes over a long trace): only the order of the times
        # matters below, so their ranks stand in for them.
        ranks = np.unique(np.concatenate([start, end]), return_inverse=True)[1].reshape(-1)
        start, end = ranks[:n], ranks[n:]
    base = int(start.min())
    width = int(end.max()) - base + 1
    s = thread * width + (start - base)  # one sorted key space for all threads (ns fit int64)
    e = thread * width + (end - base)
    runs = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]])  # where each thread's events begin
    first = np.repeat(runs, np.diff(np.r_[runs, n]))
    # Stable (timsort): the ends come in runs (siblings end in order), ~10x faster than quicksort here.
    ended = np.searchsorted(np.sort(e, kind="stable"), s, side="right") - first
    # Zero-length events sorted after an event at the same start ended "before" it too.
    zero = end == start
    group = np.cumsum(np.r_[True, s[1:] != s[:-1]]) - 1
    group_end = np.r_[np.flatnonzero(s[1:] != s[:-1]) + 1, n][group]
    zeros = np.bincount(group, weights=zero, minlength=group[-1] + 1)[group].astype(np.int64)
    later_zeros = np.where(zero, group_end - np.arange(n), zeros)
    depth = np.arange(n) - first - ended + later_zeros
    local = np.full(n, -1, dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    by_depth = stable_order(depth)
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
    for d in range(1, int(depth.max()) + 1):
        above, here = by_depth[bounds[d - 1]:bounds[d]], by_depth[bounds[d]:bounds[d + 1]]
        at = np.searchsorted(above, here) - 1
        bad[here[at < 0]] = True
        local[here[at >= 0]] = above[at[at >= 0]]
    p = np.maximum(local, 0)
    # Only a proper nesting makes depth and stack agree: a parent that ended before the event
    # started, or ends before it ends, marks a partial overlap in that thread.
    bad |= (local >= 0) & ((thread[p] != thread) | (start >= end[p]) | (end > end[p]))
    return local, bad


def stack_parents(start: list, end: list) -> np.ndarray:
    """torch's EventList._populate_cpu_children for one thread, verbatim."""
    parent = [-1] * len(start)
    stack: list[int] = []
    for i, (s, e) in enumerate(zip(start, end, strict=True)):
        while stack:
            top = stack[-1]
            if s >= end[top] or e > end[top]:
                stack.pop()
            else:
                parent[i] = top
                break
        stack.append(i)
    return np.array(parent, dtype=np.int64)

"""Which events the timeline leaves out by default, and where each mark sits vertically.

- **Python frames** (``with_stack``'s ``python_function`` events) nest 20–30 deep in a training
  step and push the ops they call far down the lane; by default only the outermost
  ``DEFAULT_PYTHON_LEVELS`` Python levels are drawn, and every event under them moves up by
  the frames left out (its depth among the events that are drawn).
- **The profiler's own lanes**: Kineto writes a ``pid -1`` thread (its "Activity Buffer
  Request") and a "Spans" pseudo-process (one "PyTorch Profiler (N)" span over the session).
  They say nothing about the program, so they are hidden by default and labelled when shown.
- **Rows**: each lane gets as many rows as its deepest drawn mark needs (one for a GPU stream
  without annotations), lanes stacked top to bottom; a mark's ``row`` is its lane's first row
  plus its depth, and a bar fills the middle of its row, so the lane label (at the lane's
  middle) and the launch → kernel links (row middle to row middle) line up with the bars.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lab.analysis.columns import codes, parent_rows
from lab.trace.facts import profiler_lanes

__all__ = [
    "BAR_FILL", "DEFAULT_PYTHON_LEVELS", "PROFILER_LANE_NOTE", "PYTHON_CAT", "lane_rows", "profiler_lanes",
    "python_folding",
]  # fmt: skip

PYTHON_CAT = "python_function"
# Three levels show the script, the training loop and the module call (llama_train_stack: the
# ops then sit at depth ≤ 9 instead of ≤ 30); deeper frames are torch's own nn.Module plumbing.
DEFAULT_PYTHON_LEVELS = 3
# A bar fills the middle 80 % of its row: rows stay apart, and the row's middle is on the bar.
BAR_FILL = 0.8
PROFILER_LANE_NOTE = (
    "the profiler's own lanes: pid −1 holds Kineto's buffer requests, “Spans” one span over the "
    "whole profiling session; neither is your program"
)


def python_folding(events: pd.DataFrame, levels: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(depth after folding, bool mask of Python frames left out) for ``levels`` Python levels
    (None: all). An event keeps its depth minus the Python frames above it that are left out."""
    depth = events["depth"].to_numpy().astype(np.int64)
    n = len(events)
    cat, labels = codes(events["cat"])
    py_codes = np.flatnonzero(labels == PYTHON_CAT)
    if levels is None or not len(py_codes):
        return depth, np.zeros(n, dtype=bool)
    is_py = cat == py_codes[0]
    lane, _ = codes(events["lane"])
    parent = parent_rows(depth, lane)
    # Python frames above each event, level by level (a parent is one level up).
    py_above = np.zeros(n, dtype=np.int64)
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
    for d in range(1, len(bounds) - 1):
        here = order[bounds[d]:bounds[d + 1]]
        par = parent[here]
        ok = par >= 0
        py_above[here[ok]] = py_above[par[ok]] + is_py[par[ok]]
    left_out = is_py & (py_above >= levels)
    return depth - np.maximum(py_above - levels, 0), left_out


def lane_rows(lanes: tuple[str, ...], mark_lane: np.ndarray, mark_depth: np.ndarray) -> dict[str, tuple[int, int]]:
    """Per lane, top to bottom: (first row, rows), rows = its deepest mark's depth + 1 (≥ 1)."""
    deepest = pd.Series(np.asarray(mark_depth, dtype=np.int64)).groupby(np.asarray(mark_lane, dtype=object)).max()
    out, first = {}, 0
    for lane in lanes:
        n = int(deepest.get(lane, 0)) + 1
        out[lane] = (first, n)
        first += n
    return out

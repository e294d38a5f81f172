"""What a ``Trace`` says of itself without its frames: ``TraceFacts`` (``trace_facts``).

A page holds these of a trace its reader keeps (``lab.read.Outline``): the metadata, the
counts and flags the Summary and the tabs' choices read, the profiler's own lanes (the
Timeline's toggle) and the events per category (the Trace tab's table), each a few hundred
bytes where the frames are megabytes. ``profiler_lanes`` and ``category_counts`` are computed
here once, for the views and the facts alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.trace.model import Trace, TraceMeta

__all__ = ["TraceFacts", "category_counts", "profiler_lanes", "trace_facts"]


@dataclass(frozen=True, kw_only=True)
class TraceFacts:
    """A trace's metadata, counts and flags, its profiler lanes and categories (see the module doc)."""

    meta: TraceMeta
    event_count: int  # complete events (rows of ``Trace.events``)
    source_bytes: int = 0
    skipped_events: int = 0
    has_gpu: bool = False
    has_memory: bool = False  # profile_memory's allocator records
    has_python: bool = False  # with_stack's Python frames (``python_function`` events)
    profiler_lanes: tuple[str, ...] = ()
    categories: pd.DataFrame  # ``category_counts``

    @property
    def span_us(self) -> float:
        return self.meta.span_us


def profiler_lanes(events: pd.DataFrame) -> np.ndarray:
    """Lane names that are the profiler's own: a negative or non-numeric pid ("-1", "Spans")."""
    pids = events.groupby("lane", observed=True)["pid"].first()
    numeric = pd.to_numeric(pids.astype(str), errors="coerce")
    return np.asarray(pids.index[~(numeric >= 0)].astype(str), dtype=object)


def category_counts(trace: Trace) -> pd.DataFrame:
    """Events and their summed duration per category, most time first (the Trace view's table)."""
    ev = trace.events
    grouped = ev.groupby(ev["cat"].astype(str), observed=True)["dur_us"].agg(["count", "sum"])
    out = grouped.rename(columns={"count": "events", "sum": "total_us"}).reset_index()
    out = out.rename(columns={"cat": "category"})
    return out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def trace_facts(trace: Trace) -> TraceFacts:
    """``trace``'s facts (see the module doc)."""
    return TraceFacts(meta=trace.meta, event_count=trace.event_count, source_bytes=trace.source_bytes,
                      skipped_events=trace.skipped_events, has_gpu=trace.has_gpu, has_memory=trace.has_memory,
                      has_python=trace.has_python,
                      profiler_lanes=tuple(str(x) for x in profiler_lanes(trace.events)),
                      categories=category_counts(trace))

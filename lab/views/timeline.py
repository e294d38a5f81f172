"""``Trace`` → timeline marks with server-side level of detail → Altair chart.

The browser slows down past ~10k marks (st.altair_chart ships every row as Arrow and Vega
draws each one), so at most ``max_marks`` marks ever leave the server, whatever the trace size.

Level of detail, for one window (``start_us``..``end_us``) at a plot width of ``width_px``:

1. Events overlapping the window are selected (vectorized) and clipped to it. If they fit the
   budget, every one is shown as itself.
2. Otherwise events at least one pixel wide stay real marks; shorter ones are merged per
   (lane, depth, pixel bin) into one bar per bin that says "N events" (a bin holding a single
   event shows that event itself).
3. While that is still over budget, the bin (and with it the "short" threshold) doubles up to
   ``MAX_BIN_PX`` pixels; then the deepest rows of every lane are folded into one row of
   merged bars; then the bin keeps growing.
4. User annotations (``record_function`` ranges, ``ProfilerStep#N``) go through this apart
   from other events, with up to half the budget: they are never merged with other events
   and keep their colour, because they are what a learner looks for first.

Nothing is dropped silently: ``shown_events + merged_events + hidden_events == total_events``
and ``note`` says what was merged. Launch → GPU links are marks too: they are drawn only
between events shown as themselves, and only while marks + links fit the budget and the
links are sparse enough to read (``MAX_LINKS_PER_PX``).

The steps live in ``lab/views/timeline_lod.py``, the Altair chart in ``lab/views/timeline_chart.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.trace.load import Trace
from lab.units import fmt_us_fixed
from lab.views.timeline_chart import timeline_chart
from lab.views.timeline_lod import (
    CAT_COLORS,
    LINK_COLUMNS,
    MARK_COLUMNS,
    MAX_LINKS_PER_PX,
    MIN_MARK_PX,
    Columns,
    Grouping,
    build_marks,
    choose_grouping,
    drop_last_lanes,
    empty_marks,
    launch_links,
    overlaps,
    resolve_window,
    select,
)
from lab.vocab import ANNOTATION_CATS

__all__ = [
    "ANNOTATION_CATS", "CAT_COLORS", "DEFAULT_MAX_MARKS", "DEFAULT_WIDTH_PX", "LINK_COLUMNS", "MARK_COLUMNS",
    "TimelineData", "build_timeline", "timeline_chart",
]  # fmt: skip

# Browser-side budget (see module docstring); BENCHMARKS.md "Timeline" has the paint times.
DEFAULT_MAX_MARKS = 5_000
DEFAULT_WIDTH_PX = 1_200


@dataclass(frozen=True)
class TimelineData:
    """What the timeline draws for one window: plain data, at most ``max_marks`` rows in all.

    ``marks`` (columns ``MARK_COLUMNS``): one row per bar. ``start_us``/``end_us`` are clipped
    to the window; ``dur_us`` is the event's own duration (for a merged bar: the sum of its
    events' durations); ``draw_end_us`` widens sub-pixel bars to one pixel so they stay
    visible; ``merged_count`` is 1 for a real event and N for a bar standing for N events
    (name and cat are then the most frequent among them); ``kind`` is the colour key (the
    category, "merged" or "other"); ``depth`` is the row inside the lane.
    ``links`` (``LINK_COLUMNS``): launch → GPU activity pairs whose both ends start in the
    window and are shown as themselves.
    """

    marks: pd.DataFrame
    links: pd.DataFrame
    lanes: tuple[str, ...]  # every lane of the trace, top to bottom
    window: tuple[float, float]  # (start_us, end_us)
    total_events: int  # events overlapping the window
    shown_events: int  # drawn as themselves
    merged_events: int  # folded into merged bars
    note: str = ""
    hidden_events: int = 0  # only when the lanes alone exceed the budget (see note)
    hidden_links: int = 0
    bin_us: float = 0.0  # merge threshold and bin width for non-annotations (0: none merged)
    depth_cap: int | None = None  # rows deeper than this were folded into one merged row
    trace_events: int = 0

    @property
    def mark_count(self) -> int:
        """Marks the browser draws: bars plus link rules."""
        return len(self.marks) + len(self.links)



def build_timeline(
    trace: Trace,
    *,
    start_us: float | None = None,
    end_us: float | None = None,
    max_marks: int = DEFAULT_MAX_MARKS,
    width_px: int = DEFAULT_WIDTH_PX,
) -> TimelineData:
    """Marks for the window ``start_us``..``end_us`` (default: the whole trace), ≤ ``max_marks``.

    ``width_px`` is the plot width the level of detail aims at: one pixel = window / width_px.
    """
    if max_marks < 2:
        raise ValueError(f"max_marks={max_marks}: use at least 2 (annotations get half)")
    if width_px < 1:
        raise ValueError(f"width_px={width_px} must be at least 1 (the plot width in pixels)")
    cols = Columns.read(trace.events)
    w0, w1 = resolve_window(cols.ts_us, cols.end_us, start_us, end_us)
    in_window = overlaps(cols, w0, w1)
    annotations = select(cols, w0, w1, in_window & cols.is_annotation)
    others = select(cols, w0, w1, in_window & ~cols.is_annotation)
    pixel_us = (w1 - w0) / width_px

    ann_group = choose_grouping(annotations, pixel_us, max_marks // 2)
    ann_real, ann_merged, ann_shown = build_marks(trace.events, cols, annotations, ann_group, merged_kind=None)
    group = choose_grouping(others, pixel_us, max_marks - len(ann_real) - len(ann_merged))
    real, merged, shown = build_marks(trace.events, cols, others, group, merged_kind="merged")
    marks = _sorted_marks([ann_real, ann_merged, real, merged], pixel_us, w1)
    shown_rows = np.concatenate([ann_shown, shown])

    notes = _merge_notes(merged, group, ann_merged, ann_group)
    hidden_events = 0
    if len(marks) > max_marks:
        # Only reachable with more lanes than the budget can give a few bars each.
        marks, hidden_events = drop_last_lanes(marks, max_marks)
        kept = np.isin(cols.lane_names[cols.lane[shown_rows]], marks["lane"].unique())
        shown_rows = shown_rows[kept]
        notes.append(
            f"{hidden_events:,} events on the last lanes are not drawn: the trace has more lanes "
            "than the mark budget allows; pick a shorter window"
        )
    link_budget = min(max_marks - len(marks), int(width_px * MAX_LINKS_PER_PX))
    links, hidden_links = launch_links(trace, cols, shown_rows, w0, w1, link_budget)
    if hidden_links:
        notes.append(
            f"{hidden_links:,} launch → GPU links are not drawn at this zoom (too many to read); "
            "zoom in to see them"
        )
    is_merged = marks["merged_count"].to_numpy() > 1
    return TimelineData(
        marks=marks, links=links, lanes=cols.ordered_lanes(), window=(w0, w1),
        total_events=len(annotations.rows) + len(others.rows),
        shown_events=int((~is_merged).sum()),
        merged_events=int(marks["merged_count"].to_numpy()[is_merged].sum()),
        note="; ".join(notes), hidden_events=hidden_events, hidden_links=hidden_links,
        bin_us=group.bin_us or 0.0, depth_cap=group.depth_cap, trace_events=len(trace.events),
    )


def _sorted_marks(parts: list[pd.DataFrame], pixel_us: float, w1: float) -> pd.DataFrame:
    """All marks in draw order, sub-pixel bars widened to ``MIN_MARK_PX`` (never past the window)."""
    parts = [m for m in parts if len(m)]
    marks = pd.concat(parts, ignore_index=True) if parts else empty_marks()
    marks["draw_end_us"] = np.minimum(
        np.maximum(marks["end_us"].to_numpy(dtype=np.float64),
                   marks["start_us"].to_numpy(dtype=np.float64) + pixel_us * MIN_MARK_PX),
        w1,
    )
    marks = marks.sort_values(["lane_order", "depth", "start_us"], kind="stable", ignore_index=True)
    return marks.loc[:, list(MARK_COLUMNS)]


def _merge_notes(merged: pd.DataFrame, group: Grouping, ann_merged: pd.DataFrame, ann_group: Grouping) -> list[str]:
    """What was merged at this zoom, in words (events first, then annotations)."""
    notes = []
    if len(merged) and group.bin_us is not None:
        which = f"shorter than {fmt_us_fixed(group.bin_us, sig_below_10=True)}"
        if group.depth_cap is not None:
            which += f" or deeper than depth {group.depth_cap}"
        notes.append(
            f"{int(merged['merged_count'].sum()):,} events {which} at this zoom were merged into "
            f"{len(merged):,} bars; zoom in to see them"
        )
    if len(ann_merged) and ann_group.bin_us is not None:
        notes.append(
            f"{int(ann_merged['merged_count'].sum()):,} annotations shorter than "
            f"{fmt_us_fixed(ann_group.bin_us, sig_below_10=True)} were merged into {len(ann_merged):,} bars"
        )
    return notes

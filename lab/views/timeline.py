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

Nothing is dropped silently: ``shown_events + merged_events + hidden_events + left_out_events
== total_events`` (left out: Python frames below ``python_levels`` and the profiler's own lanes,
``lab/views/timeline_rows.py``) and ``note`` says what was merged or folded. Launch → GPU links
are marks too: they are drawn only between events shown as themselves, and only while marks +
links fit the budget and the links are sparse enough to read (``MAX_LINKS_PER_PX``).

The steps live in ``lab/views/timeline_lod.py``, the Altair chart in ``lab/views/timeline_chart.py``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from lab.trace.load import Trace
from lab.units import fmt_us_fixed
from lab.views.timeline_chart import outline_layer, timeline_chart
from lab.views.timeline_data import TimelineData
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
from lab.views.timeline_rows import (
    BAR_FILL,
    DEFAULT_PYTHON_LEVELS,
    PROFILER_LANE_NOTE,
    lane_rows,
    profiler_lanes,
    python_folding,
)
from lab.vocab import ANNOTATION_CATS

__all__ = [
    "ANNOTATION_CATS", "BAR_FILL", "CAT_COLORS", "DEFAULT_MAX_MARKS", "DEFAULT_PYTHON_LEVELS", "DEFAULT_WIDTH_PX",
    "LINK_COLUMNS", "MARK_COLUMNS",
    "PROFILER_LANE_NOTE", "TimelineData", "outline_layer", "build_timeline", "timeline_chart",
]  # fmt: skip

# Browser-side budget (see module docstring); BENCHMARKS.md "Timeline" has the paint times.
DEFAULT_MAX_MARKS = 5_000
DEFAULT_WIDTH_PX = 1_200


def build_timeline(
    trace: Trace,
    *,
    start_us: float | None = None,
    end_us: float | None = None,
    max_marks: int = DEFAULT_MAX_MARKS,
    width_px: int = DEFAULT_WIDTH_PX,
    python_levels: int | None = DEFAULT_PYTHON_LEVELS,
    show_profiler_lanes: bool = False,
) -> TimelineData:
    """Marks for the window ``start_us``..``end_us`` (default: the whole trace), ≤ ``max_marks``.

    ``width_px`` is the plot width the level of detail aims at: one pixel = window / width_px.
    ``python_levels``: Python frames drawn, outermost first (None: all); the profiler's own
    lanes are left out unless ``show_profiler_lanes`` (``lab/views/timeline_rows.py``).
    """
    _check(max_marks, width_px, python_levels)
    cols, python_out, own, own_out = _left_out(trace, python_levels, show_profiler_lanes)
    w0, w1 = resolve_window(cols.ts_us, cols.end_us, start_us, end_us)
    in_window = overlaps(cols, w0, w1)
    drawn = in_window & ~python_out & ~own_out
    annotations = select(cols, w0, w1, drawn & cols.is_annotation)
    others = select(cols, w0, w1, drawn & ~cols.is_annotation)
    pixel_us = (w1 - w0) / width_px

    ann_group = choose_grouping(annotations, pixel_us, max_marks // 2)
    ann_real, ann_merged, ann_shown = build_marks(trace.events, cols, annotations, ann_group)
    group = choose_grouping(others, pixel_us, max_marks - len(ann_real) - len(ann_merged))
    real, merged, shown = build_marks(trace.events, cols, others, group)
    marks = _sorted_marks([ann_real, ann_merged, real, merged], pixel_us, w1)
    shown_rows = np.concatenate([ann_shown, shown])
    shown_depth = np.concatenate([ann_real["depth"].to_numpy(), real["depth"].to_numpy()]).astype(np.int64)

    notes = _merge_notes(merged, group, ann_merged, ann_group)
    hidden_events = 0
    if len(marks) > max_marks:
        # Only reachable with more lanes than the budget can give a few bars each.
        marks, hidden_events = drop_last_lanes(marks, max_marks)
        kept = np.isin(cols.lane_names[cols.lane[shown_rows]], marks["lane"].unique())
        shown_rows, shown_depth = shown_rows[kept], shown_depth[kept]
        notes.append(
            f"{hidden_events:,} events on the last lanes are not drawn: the trace has more lanes "
            "than the mark budget allows; pick a shorter window"
        )
    lanes = tuple(lane for lane in cols.ordered_lanes() if show_profiler_lanes or lane not in set(own))
    rows, row_of = _place_rows(lanes, marks, cols, shown_rows, shown_depth)
    link_budget = min(max_marks - len(marks), int(width_px * MAX_LINKS_PER_PX))
    links, hidden_links = launch_links(trace, cols, shown_rows, w0, w1, link_budget, row_of)
    if hidden_links:
        notes.append(
            f"{hidden_links:,} launch → GPU links are not drawn at this zoom (too many to read); "
            "zoom in to see them"
        )
    folded_python = int((in_window & python_out & ~own_out).sum())
    if folded_python:
        notes.append(f"{folded_python:,} Python frames below the outermost {python_levels} levels are folded away")
    return _data(trace, marks, links, lanes, (w0, w1), notes, group, rows, own, show_profiler_lanes,
                 total_events=int(in_window.sum()), hidden_events=hidden_events, hidden_links=hidden_links,
                 folded_python=folded_python, python_levels=python_levels,
                 hidden_profiler_events=int((in_window & own_out).sum()))


def _check(max_marks: int, width_px: int, python_levels: int | None) -> None:
    if max_marks < 2:
        raise ValueError(f"max_marks={max_marks}: use at least 2 (annotations get half)")
    if width_px < 1:
        raise ValueError(f"width_px={width_px} must be at least 1 (the plot width in pixels)")
    if python_levels is not None and python_levels < 1:
        raise ValueError(f"python_levels={python_levels}: use at least 1, or None for every Python frame")


def _data(trace, marks, links, lanes, window, notes, group, rows, own, show_own, **counts) -> TimelineData:
    is_merged = marks["merged_count"].to_numpy() > 1
    return TimelineData(
        marks=marks, links=links, lanes=lanes, window=window,
        shown_events=int((~is_merged).sum()),
        merged_events=int(marks["merged_count"].to_numpy()[is_merged].sum()),
        note="; ".join(notes), bin_us=group.bin_us or 0.0, depth_cap=group.depth_cap, trace_events=len(trace.events),
        lane_rows=tuple((lane, first, n) for lane, (first, n) in rows.items()),
        profiler_lanes=tuple(str(x) for x in own if not show_own or x in lanes),
        **counts,
    )


def _left_out(trace: Trace, python_levels: int | None, show_own: bool):
    """(columns with the folded depths, Python frames left out, the profiler's own lanes, their
    events left out): what ``lab/views/timeline_rows.py`` hides by default."""
    cols = Columns.read(trace.events)
    depth, python_out = python_folding(trace.events, python_levels)
    own = profiler_lanes(trace.events)
    own_out = np.zeros(len(depth), dtype=bool) if show_own else np.isin(cols.lane_names[cols.lane], own)
    return replace(cols, depth=depth), python_out, own, own_out


def _place_rows(lanes, marks: pd.DataFrame, cols: Columns, shown_rows: np.ndarray, shown_depth: np.ndarray):
    """Each lane's rows; sets ``marks["row"]``; returns the rows and each shown event's row
    (NaN for the others), where its links end."""
    rows = lane_rows(lanes, marks["lane"].to_numpy(), marks["depth"].to_numpy())
    marks["row"] = _rows_of(rows, marks["lane"].to_numpy(), marks["depth"].to_numpy())
    row_of = np.full(len(cols.ts_us), np.nan)
    row_of[shown_rows] = _rows_of(rows, cols.lane_names[cols.lane[shown_rows]], shown_depth)
    return rows, row_of


def _rows_of(rows: dict[str, tuple[int, int]], lane: np.ndarray, depth: np.ndarray) -> np.ndarray:
    first = pd.Series({name: f for name, (f, _) in rows.items()}, dtype=np.int64)
    return (first.reindex(np.asarray(lane, dtype=object)).to_numpy(dtype=np.int64) if len(lane)
            else np.zeros(0, dtype=np.int64)) + np.asarray(depth, dtype=np.int64)


def _sorted_marks(parts: list[pd.DataFrame], pixel_us: float, w1: float) -> pd.DataFrame:
    """All marks in draw order, sub-pixel bars widened to ``MIN_MARK_PX`` (never past the window)."""
    parts = [m for m in parts if len(m)]
    marks = pd.concat(parts, ignore_index=True) if parts else empty_marks()
    marks["draw_end_us"] = np.minimum(
        np.maximum(marks["end_us"].to_numpy(dtype=np.float64),
                   marks["start_us"].to_numpy(dtype=np.float64) + pixel_us * MIN_MARK_PX),
        w1,
    )
    # Ink ∝ busy time: a sub-pixel event widened to one pixel, or a merged bar whose events
    # cover 5 % of it, is drawn that faint (the chart maps busy_frac to opacity).
    width = marks["draw_end_us"].to_numpy() - marks["start_us"].to_numpy(dtype=np.float64)
    busy = marks["busy_us"].to_numpy(dtype=np.float64)
    marks["busy_frac"] = np.clip(np.divide(busy, width, out=np.ones_like(busy), where=width > 0), 0.0, 1.0)
    marks["row"] = 0  # placed once the lanes' rows are known
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

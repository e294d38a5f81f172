"""``TimelineData``: what the timeline draws for one window, as plain data.

Its own module so that ``timeline`` (which builds it) and ``timeline_chart`` (which draws it)
both import it from below, with no circle between them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

__all__ = ["TimelineData"]


@dataclass(frozen=True)
class TimelineData:
    """What the timeline draws for one window: plain data, at most ``max_marks`` rows in all.

    ``marks`` (columns ``MARK_COLUMNS``): one row per bar. ``start_us``/``end_us`` are clipped
    to the window; ``dur_us`` is the event's own duration (for a merged bar: the sum of its
    events' durations); ``draw_end_us`` widens sub-pixel bars to one pixel so they stay
    visible; ``merged_count`` is 1 for a real event and N for a bar standing for N events
    (name is then the most frequent among them, cat the one holding most of their time);
    ``kind`` is the colour key (the category, or "other"); ``depth`` is the row inside the
    lane, ``row`` the chart row (``lane_rows``); ``busy_us`` is the time the bar's events cover
    (their union) and ``busy_frac`` = busy_us / (draw_end_us − start_us), the bar's opacity.
    ``links`` (``LINK_COLUMNS``): launch → GPU activity pairs whose both ends start in the
    window and are shown as themselves; ``launch_y``/``gpu_y`` are the middles of their bars' rows.
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
    # (lane, first row, rows) top to bottom: a mark's ``row`` is its lane's first row + depth.
    lane_rows: tuple[tuple[str, int, int], ...] = ()
    folded_python: int = 0  # Python frames below ``python_levels`` left out (in the window)
    python_levels: int | None = None
    profiler_lanes: tuple[str, ...] = ()  # the profiler's own lanes: hidden, or drawn and labelled
    hidden_profiler_events: int = 0

    @property
    def left_out_events(self) -> int:
        """Events of the window not drawn by choice: folded Python frames, the profiler's lanes."""
        return self.folded_python + self.hidden_profiler_events

    @property
    def mark_count(self) -> int:
        """Marks the browser draws: bars plus link rules."""
        return len(self.marks) + len(self.links)

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
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from lab.trace.load import Trace
from lab.vocab import ANNOTATION_CATS, PROFILER_STEP_PREFIX

# Browser-side budget (see module docstring); BENCHMARKS.md "Timeline" has the paint times.
DEFAULT_MAX_MARKS = 5_000
DEFAULT_WIDTH_PX = 1_200
# Events narrower than one pixel cannot be told apart from their neighbours.
MIN_MARK_PX = 1.0
# Coarsen the merge bins up to this width before folding deep rows: a 16 px bar still reads
# as "something happens here", and shallow rows (ops, annotations) matter more than deep ones
# (runtime calls, Python frames) for a first read of a trace.
MAX_BIN_PX = 16.0
# Links stop being readable when they pack tighter than one per ~4 px on average (measured by
# eye on the tiled traces: 640 links across 1,200 px hide the kernels under them).
MAX_LINKS_PER_PX = 0.25
# Tooltip names are cut: some kernel names are ~400 characters of template arguments.
TOOLTIP_NAME_CHARS = 160
# Row height of one depth inside a lane, in pixels: 12 px by default, thinner when lanes ×
# depths would make the chart taller than ~MAX_PLOT_HEIGHT_PX (deep Python stacks), never
# under MIN_ROW_STEP_PX (still a visible, hoverable bar).
ROW_STEP_PX = 12
MIN_ROW_STEP_PX = 3
MAX_PLOT_HEIGHT_PX = 480
# Legend entries per line: "gpu_user_annotation" is ~150 px, and Streamlit's centred layout
# gives ~700 px; more columns get clipped on the right.
LEGEND_COLUMNS = 4
# Largest key range counted with a bincount (8 bytes a slot: 32 MB) before sorting instead;
# a bincount is ~20x faster than hashing or sorting 1M keys.
_DENSE_RANGE_LIMIT = 1 << 22

# Fixed palette: a category keeps its colour whatever else is on screen (Tableau 10 based).
CAT_COLORS = {
    "kernel": "#4c78a8",
    "gpu_memcpy": "#72b7b2",
    "gpu_memset": "#54a24b",
    "gpu_user_annotation": "#b279a2",
    "user_annotation": "#e45756",
    "cpu_op": "#f58518",
    "cuda_runtime": "#eeca3b",
    "cuda_driver": "#9d755d",
    "python_function": "#bab0ac",
    "overhead": "#d6d6d6",
    "merged": "#555555",
    "other": "#ff9da6",
}
_CAT_KINDS = tuple(k for k in CAT_COLORS if k not in ("merged", "other"))

MARK_COLUMNS = (
    "lane", "lane_order", "name", "cat", "kind", "start_us", "end_us", "draw_end_us", "dur_us",
    "depth", "merged_count", "input_dims", "grid", "block", "registers_per_thread",
    "shared_memory_bytes", "occupancy_pct",
)
LINK_COLUMNS = (
    "correlation", "launch_lane", "launch_x_us", "launch_name", "gpu_lane", "gpu_x_us",
    "gpu_name", "delay_us",
)
_TEXT_TOOLTIP_COLUMNS = ("input_dims", "grid", "block")
_NUMBER_TOOLTIP_COLUMNS = ("registers_per_thread", "shared_memory_bytes", "occupancy_pct")


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
    cols = _Columns.read(trace.events)
    w0, w1 = _resolve_window(cols.ts_us, cols.end_us, start_us, end_us)
    in_window = _overlaps(cols, w0, w1)
    annotations = _select(cols, w0, w1, in_window & cols.is_annotation)
    others = _select(cols, w0, w1, in_window & ~cols.is_annotation)
    pixel_us = (w1 - w0) / width_px

    ann_group = _choose_grouping(annotations, pixel_us, max_marks // 2)
    ann_real, ann_merged, ann_shown = _build_marks(trace.events, cols, annotations, ann_group,
                                                   merged_kind=None)
    group = _choose_grouping(others, pixel_us, max_marks - len(ann_real) - len(ann_merged))
    real, merged, shown = _build_marks(trace.events, cols, others, group, merged_kind="merged")

    parts = [m for m in (ann_real, ann_merged, real, merged) if len(m)]
    marks = pd.concat(parts, ignore_index=True) if parts else _empty_marks()
    marks["draw_end_us"] = np.minimum(
        np.maximum(marks["end_us"].to_numpy(dtype=np.float64),
                   marks["start_us"].to_numpy(dtype=np.float64) + pixel_us * MIN_MARK_PX),
        w1,
    )
    marks = marks.sort_values(["lane_order", "depth", "start_us"], kind="stable", ignore_index=True)
    marks = marks.loc[:, list(MARK_COLUMNS)]
    shown_rows = np.concatenate([ann_shown, shown])

    notes = []
    if len(merged):
        which = f"shorter than {_fmt_us(group.bin_us)} µs"
        if group.depth_cap is not None:
            which += f" or deeper than depth {group.depth_cap}"
        notes.append(
            f"{int(merged['merged_count'].sum()):,} events {which} at this zoom were merged into "
            f"{len(merged):,} bars; zoom in to see them"
        )
    if len(ann_merged):
        notes.append(
            f"{int(ann_merged['merged_count'].sum()):,} annotations shorter than "
            f"{_fmt_us(ann_group.bin_us)} µs were merged into {len(ann_merged):,} bars"
        )
    hidden_events = 0
    if len(marks) > max_marks:
        # Only reachable with more lanes than the budget can give a few bars each.
        marks, hidden_events = _drop_last_lanes(marks, max_marks)
        kept = np.isin(cols.lane_names[cols.lane[shown_rows]], marks["lane"].unique())
        shown_rows = shown_rows[kept]
        notes.append(
            f"{hidden_events:,} events on the last lanes are not drawn: the trace has more lanes "
            "than the mark budget allows; pick a shorter window"
        )
    link_budget = min(max_marks - len(marks), int(width_px * MAX_LINKS_PER_PX))
    links, hidden_links = _links(trace, cols, shown_rows, w0, w1, link_budget)
    if hidden_links:
        notes.append(
            f"{hidden_links:,} launch → GPU links are not drawn at this zoom (too many to read); "
            "zoom in to see them"
        )
    is_merged = marks["merged_count"].to_numpy() > 1
    return TimelineData(
        marks=marks,
        links=links,
        lanes=cols.ordered_lanes(),
        window=(w0, w1),
        total_events=len(annotations.rows) + len(others.rows),
        shown_events=int((~is_merged).sum()),
        merged_events=int(marks["merged_count"].to_numpy()[is_merged].sum()),
        note="; ".join(notes),
        hidden_events=hidden_events,
        hidden_links=hidden_links,
        bin_us=group.bin_us or 0.0,
        depth_cap=group.depth_cap,
        trace_events=len(trace.events),
    )


def timeline_chart(data: TimelineData) -> alt.LayerChart:
    """Layered Altair chart: one bar per mark, rules for launch → GPU links, x zoom/pan.

    Lanes are rows (CPU threads first, then GPU streams); nested events stack inside their lane,
    one sub-row per depth. The height follows the rows (a fixed height would squash them) and
    the width follows the container.
    """
    marks = data.marks.copy()
    marks["name"] = [_short_name(n) for n in marks["name"]]
    lanes = list(data.lanes)
    present = set(marks["kind"])
    kinds = [k for k in CAT_COLORS if k in present] or ["kernel"]
    x_scale = alt.Scale(domain=list(data.window), nice=False, zero=False)
    lane_scale = alt.Scale(domain=lanes)
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    bars = (
        alt.Chart(marks)
        .mark_bar(cornerRadius=1)
        .encode(
            x=alt.X("start_us:Q", scale=x_scale, title="time (µs since trace start)"),
            x2="draw_end_us:Q",
            y=alt.Y("lane:N", sort=lanes, scale=lane_scale, axis=alt.Axis(title=None, labelLimit=260)),
            yOffset=alt.YOffset("depth:O", sort="ascending"),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=kinds, range=[CAT_COLORS[k] for k in kinds]),
                legend=alt.Legend(title="category", orient="bottom", columns=LEGEND_COLUMNS),
            ),
            tooltip=[
                alt.Tooltip("name:N", title="name"),
                alt.Tooltip("cat:N", title="category"),
                alt.Tooltip("merged_count:Q", title="events", format=","),
                alt.Tooltip("dur_us:Q", title="duration (µs)", format=",.3f"),
                alt.Tooltip("start_us:Q", title="start (µs)", format=",.3f"),
                alt.Tooltip("input_dims:N", title="input shapes"),
                alt.Tooltip("grid:N", title="grid"),
                alt.Tooltip("block:N", title="block"),
                alt.Tooltip("registers_per_thread:Q", title="registers/thread"),
                alt.Tooltip("shared_memory_bytes:Q", title="shared memory (B)", format=","),
                alt.Tooltip("occupancy_pct:Q", title="est. occupancy %"),
            ],
        )
        .add_params(zoom)
    )
    layers = [bars]
    if len(data.links):
        layers.append(
            alt.Chart(data.links)
            .mark_rule(color="#333333", strokeWidth=0.8, opacity=0.4)
            .encode(
                x=alt.X("launch_x_us:Q", scale=x_scale),
                x2="gpu_x_us:Q",
                y=alt.Y("launch_lane:N", sort=lanes, scale=lane_scale),
                y2="gpu_lane:N",
                tooltip=[
                    alt.Tooltip("launch_name:N", title="launch"),
                    alt.Tooltip("gpu_name:N", title="GPU work"),
                    alt.Tooltip("delay_us:Q", title="launch → GPU start (µs)", format=",.3f"),
                ],
            )
        )
    rows = max(len(lanes), 1) * max(marks["depth"].nunique(), 1)
    step = min(ROW_STEP_PX, max(MIN_ROW_STEP_PX, MAX_PLOT_HEIGHT_PX // rows))
    return alt.layer(*layers).properties(width="container", height=alt.Step(step, **{"for": "offset"}))


# --------------------------------------------------------------------------- columns


@dataclass(frozen=True)
class _Columns:
    """The events' columns as arrays, read once per build (codes index their labels)."""

    ts_us: np.ndarray
    end_us: np.ndarray
    dur_us: np.ndarray
    depth: np.ndarray
    lane: np.ndarray  # codes into lane_names
    lane_names: np.ndarray
    lane_order: np.ndarray  # per lane code
    name: np.ndarray
    name_labels: np.ndarray
    cat: np.ndarray
    cat_labels: np.ndarray
    is_annotation: np.ndarray  # bool per event

    @classmethod
    def read(cls, events: pd.DataFrame) -> "_Columns":
        ts = events["ts_us"].to_numpy(dtype=np.float64)
        dur = events["dur_us"].to_numpy(dtype=np.float64)
        lane, lane_names = _codes(events["lane"])
        if (lane < 0).any():
            raise ValueError("some events have no lane; build traces with lab.trace.load_trace")
        # Every event of a lane carries the same lane_order; a scatter picks it up.
        lane_order = np.zeros(len(lane_names), dtype=np.int64)
        lane_order[lane] = events["lane_order"].to_numpy()
        name, name_labels = _codes(events["name"])
        cat, cat_labels = _codes(events["cat"])
        label_is_annotation = pd.Series(cat_labels, dtype=object).isin(ANNOTATION_CATS).to_numpy()
        label_is_step = pd.Series(name_labels, dtype=object).str.startswith(PROFILER_STEP_PREFIX)
        is_annotation = _lookup(label_is_annotation, cat, False) | _lookup(
            label_is_step.fillna(False).to_numpy(dtype=bool), name, False)
        return cls(ts, ts + dur, dur, events["depth"].to_numpy(), lane, lane_names, lane_order,
                   name, name_labels, cat, cat_labels, is_annotation)

    def ordered_lanes(self) -> tuple[str, ...]:
        present = np.flatnonzero(np.bincount(self.lane, minlength=len(self.lane_names)))
        order = np.lexsort((self.lane_names[present].astype(str), self.lane_order[present]))
        return tuple(str(n) for n in self.lane_names[present][order])


def _codes(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes (−1 = missing) and their labels as Python strings."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        labels = np.asarray([str(v) for v in series.cat.categories], dtype=object)
        return series.cat.codes.to_numpy(), labels
    codes, uniques = pd.factorize(series)
    return codes, np.asarray([str(v) for v in uniques], dtype=object)


def _lookup(per_label: np.ndarray, codes: np.ndarray, missing):
    """``per_label[codes]`` with ``missing`` where the code is −1."""
    if len(per_label) == 0:
        return np.full(len(codes), missing)
    out = per_label[np.maximum(codes, 0)]
    if (codes < 0).any():
        out = np.where(codes >= 0, out, missing)
    return out


def _label(labels: np.ndarray, codes: np.ndarray) -> np.ndarray:
    return _lookup(labels, codes, "").astype(object)


# --------------------------------------------------------------------------- selection


@dataclass(frozen=True)
class _Window:
    """Events overlapping the window as flat arrays; ``rows`` are positions in ``events``."""

    w0: float
    rows: np.ndarray
    start_us: np.ndarray  # clipped to the window
    end_us: np.ndarray  # clipped to the window
    lane: np.ndarray  # int64 lane codes
    depth: np.ndarray  # int64


def _resolve_window(ts: np.ndarray, ends: np.ndarray, start_us, end_us) -> tuple[float, float]:
    lo, hi = (float(ts.min()), float(ends.max())) if len(ts) else (0.0, 1.0)
    w0 = lo if start_us is None else float(start_us)
    w1 = hi if end_us is None else float(end_us)
    if not (np.isfinite(w0) and np.isfinite(w1)):
        raise ValueError(f"window ({start_us}, {end_us}) must be finite numbers of µs")
    if start_us is None and end_us is None and w1 <= w0:
        w1 = w0 + 1.0  # a trace of zero-length events still gets a 1 µs wide view
    if w1 <= w0:
        raise ValueError(f"end_us={w1} must be greater than start_us={w0}; widen the window")
    return w0, w1


def _overlaps(cols: _Columns, w0: float, w1: float) -> np.ndarray:
    # Touching counts: a zero-length event exactly at the window edge is still in it.
    return (cols.ts_us <= w1) & (cols.end_us >= w0)


def _select(cols: _Columns, w0: float, w1: float, mask: np.ndarray) -> _Window:
    rows = np.flatnonzero(mask)
    return _Window(
        w0=w0,
        rows=rows,
        start_us=np.maximum(cols.ts_us[rows], w0),
        end_us=np.minimum(cols.end_us[rows], w1),
        lane=cols.lane[rows].astype(np.int64),
        depth=cols.depth[rows].astype(np.int64),
    )


# --------------------------------------------------------------------------- level of detail


@dataclass(frozen=True, eq=False)
class _Grouping:
    """One level of detail: which events merge, on which row, into which bar."""

    bin_us: float | None  # None: nothing merged
    depth_cap: int | None  # None: every depth keeps its own row
    merge: np.ndarray  # bool per window event
    row_depth: np.ndarray  # the row each event sits on
    gid: np.ndarray  # per merged event: its bar, 0..n_groups-1
    n_groups: int

    @property
    def n_marks(self) -> int:
        return int((~self.merge).sum()) + self.n_groups


def _group(win: _Window, bin_us: float | None, depth_cap: int | None) -> _Grouping:
    n = len(win.rows)
    if bin_us is None or n == 0:
        return _Grouping(None, None, np.zeros(n, dtype=bool), win.depth, np.empty(0, np.int64), 0)
    merge = (win.end_us - win.start_us) < bin_us
    row_depth = win.depth
    if depth_cap is not None:
        # Everything deeper than the cap shares the row just below it, merged.
        deep = win.depth > depth_cap
        merge |= deep
        row_depth = np.where(deep, depth_cap + 1, win.depth)
    # Start ≥ w0, so truncation is the floor.
    bins = ((win.start_us[merge] - win.w0) * (1.0 / bin_us)).astype(np.int64)
    if len(bins) == 0:
        return _Grouping(bin_us, depth_cap, merge, row_depth, bins, 0)
    n_rows = int(row_depth.max()) + 1
    keys = (win.lane[merge] * n_rows + row_depth[merge]) * (int(bins.max()) + 1) + bins
    gid, n_groups, _ = _dense_ids(keys)
    return _Grouping(bin_us, depth_cap, merge, row_depth, gid, n_groups)


def _choose_grouping(win: _Window, pixel_us: float, max_marks: int) -> _Grouping:
    """The finest level of detail that fits: none, growing bins, folded rows, growing bins."""
    if len(win.rows) <= max_marks:
        return _group(win, None, None)  # everything fits: every event as itself
    widest_px = _widest_bin_px(win, pixel_us)
    found = _fit_bins(win, pixel_us, max_marks, None, MIN_MARK_PX, min(MAX_BIN_PX, widest_px))
    if found:
        return found
    # Fold deep rows: the largest depth cap that fits at MAX_BIN_PX (marks grow with the cap).
    max_depth = int(win.depth.max())
    best, left, right = None, 0, max_depth - 1
    while left <= right:
        mid = (left + right) // 2
        grouping = _group(win, MAX_BIN_PX * pixel_us, mid)
        if grouping.n_marks <= max_marks:
            best, left = grouping, mid + 1
        else:
            right = mid - 1
    if best:
        return best
    # Even one folded row per lane is too much at this bin: keep growing the bins.
    cap = 0 if max_depth > 0 else None
    return _fit_bins(win, pixel_us, max_marks, cap, MAX_BIN_PX * 2, widest_px) or _group(
        win, widest_px * pixel_us, cap
    )


def _fit_bins(win, pixel_us, max_marks, depth_cap, first_px, last_px) -> _Grouping | None:
    """Double the bin from ``first_px`` to ``last_px`` until the marks fit."""
    bin_px = first_px
    while bin_px <= last_px:
        grouping = _group(win, bin_px * pixel_us, depth_cap)
        if grouping.n_marks <= max_marks:
            return grouping
        bin_px *= 2
    return None


def _widest_bin_px(win: _Window, pixel_us: float) -> float:
    """A power-of-two bin wider than every event: beyond it, growing the bin changes nothing."""
    span_us = float(win.end_us.max() - win.start_us.min()) if len(win.rows) else 0.0
    px = MIN_MARK_PX
    while px * pixel_us <= span_us:
        px *= 2
    return px


def _dense_ids(keys: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """Keys (int64 ≥ 0) → (ids 0..n-1 in key order, n, the distinct keys)."""
    if len(keys) == 0:
        return keys, 0, keys
    key_range = int(keys.max()) + 1
    if key_range <= _DENSE_RANGE_LIMIT + 2 * len(keys):
        present = np.bincount(keys, minlength=key_range) > 0
        remap = np.cumsum(present) - 1
        return remap[keys], int(remap[-1]) + 1, np.flatnonzero(present)
    uniques, ids = np.unique(keys, return_inverse=True)
    return ids.astype(np.int64).reshape(-1), len(uniques), uniques


def _mode_per_group(gid: np.ndarray, codes: np.ndarray, n_groups: int) -> np.ndarray:
    """The most frequent code in each group (ties: the smallest code; −1 = missing)."""
    dense, n_values, values = _dense_ids(codes.astype(np.int64) + 1)  # missing −1 → 0
    values = values - 1
    if n_groups * n_values <= _DENSE_RANGE_LIMIT:
        counts = np.bincount(gid * n_values + dense, minlength=n_groups * n_values)
        return values[counts.reshape(n_groups, n_values).argmax(axis=1)]
    pair, counts = np.unique(gid * n_values + dense, return_counts=True)
    pair_gid = pair // n_values
    order = np.lexsort((-counts, pair_gid))  # by group, then the most frequent first
    first = np.ones(len(order), dtype=bool)
    first[1:] = pair_gid[order][1:] != pair_gid[order][:-1]
    mode = np.full(n_groups, -1, dtype=np.int64)
    mode[pair_gid[order][first]] = values[pair[order][first] % n_values]
    return mode


# --------------------------------------------------------------------------- marks


def _build_marks(events: pd.DataFrame, cols: _Columns, win: _Window, grouping: _Grouping, *,
                 merged_kind: str | None):
    """(real-event rows, merged-bar rows, positions in ``events`` drawn as themselves)."""
    real_pos = np.flatnonzero(~grouping.merge)
    merged = _empty_marks()
    if grouping.n_groups:
        merged_pos = np.flatnonzero(grouping.merge)
        gid = grouping.gid
        sizes = np.bincount(gid, minlength=grouping.n_groups)
        single = sizes[gid] == 1  # a bin holding one event shows that event
        real_pos = np.sort(np.concatenate([real_pos, merged_pos[single]]))
        if not single.all():
            multi = sizes > 1
            dense = (np.cumsum(multi) - 1)[gid[~single]]
            merged = _merged_marks(cols, win, merged_pos[~single], grouping.row_depth, dense,
                                   int(multi.sum()))
            if merged_kind is not None:
                merged["kind"] = merged_kind
            else:  # merged annotations keep their category's colour
                merged["kind"] = np.where(merged["cat"].isin(_CAT_KINDS), merged["cat"], "other")
    real = _real_marks(events, cols, win, real_pos, grouping.row_depth)
    return real, merged, win.rows[real_pos]


def _real_marks(events, cols: _Columns, win: _Window, pos: np.ndarray, row_depth: np.ndarray):
    rows = win.rows[pos]
    cat = _label(cols.cat_labels, cols.cat[rows])
    out = pd.DataFrame({
        "lane": _label(cols.lane_names, win.lane[pos]),
        "lane_order": cols.lane_order[win.lane[pos]],
        "name": _label(cols.name_labels, cols.name[rows]),
        "cat": cat,
        "kind": np.where(pd.Series(cat, dtype=object).isin(_CAT_KINDS), cat, "other").astype(object),
        "start_us": win.start_us[pos],
        "end_us": win.end_us[pos],
        "dur_us": cols.dur_us[rows],
        "depth": row_depth[pos],  # a folded deep event sits on the folded row
        "merged_count": np.ones(len(pos), dtype=np.int64),
    })
    for c in _TEXT_TOOLTIP_COLUMNS:
        if c in events.columns:
            codes, labels = _codes(events[c])
            out[c] = _label(labels, codes[rows])
        else:
            out[c] = ""
    for c in _NUMBER_TOOLTIP_COLUMNS:
        out[c] = events[c].to_numpy(dtype=np.float64)[rows] if c in events.columns else np.nan
    return out


def _merged_marks(cols: _Columns, win: _Window, pos, row_depth, gid, n) -> pd.DataFrame:
    """One bar per group ``gid`` (0..n-1): extent, count, summed duration, most frequent
    name and category."""
    rows = win.rows[pos]
    start = np.full(n, np.inf)
    np.minimum.at(start, gid, win.start_us[pos])
    end = np.full(n, -np.inf)
    np.maximum.at(end, gid, win.end_us[pos])
    first = np.empty(n, dtype=np.int64)
    first[gid] = pos  # any member: lane and row are the same for the whole group
    lane = win.lane[first]
    return pd.DataFrame({
        "lane": _label(cols.lane_names, lane),
        "lane_order": cols.lane_order[lane],
        "name": _label(cols.name_labels, _mode_per_group(gid, cols.name[rows], n)),
        "cat": _label(cols.cat_labels, _mode_per_group(gid, cols.cat[rows], n)),
        "kind": "merged",
        "start_us": start,
        "end_us": end,
        "dur_us": np.bincount(gid, weights=cols.dur_us[rows], minlength=n),
        "depth": row_depth[first],
        "merged_count": np.bincount(gid, minlength=n).astype(np.int64),
        **{c: "" for c in _TEXT_TOOLTIP_COLUMNS},
        **{c: np.nan for c in _NUMBER_TOOLTIP_COLUMNS},
    })


def _empty_marks() -> pd.DataFrame:
    frame = {c: pd.Series([], dtype=np.float64) for c in MARK_COLUMNS}
    for c in ("lane", "name", "cat", "kind", *_TEXT_TOOLTIP_COLUMNS):
        frame[c] = pd.Series([], dtype=object)
    for c in ("lane_order", "depth", "merged_count"):
        frame[c] = pd.Series([], dtype=np.int64)
    return pd.DataFrame(frame)


def _drop_last_lanes(marks: pd.DataFrame, max_marks: int) -> tuple[pd.DataFrame, int]:
    """Keep whole lanes, top first, while they fit; returns the marks kept and events hidden."""
    per_lane = marks.groupby("lane_order", sort=True).size()
    keep_orders = per_lane.index[per_lane.cumsum().to_numpy() <= max_marks]
    kept = marks["lane_order"].isin(keep_orders)
    hidden = int(marks.loc[~kept, "merged_count"].sum())
    return marks.loc[kept].reset_index(drop=True), hidden


# --------------------------------------------------------------------------- links


def _links(trace: Trace, cols: _Columns, shown_rows: np.ndarray, w0: float, w1: float,
           budget: int) -> tuple[pd.DataFrame, int]:
    """Launch → GPU pairs whose both ends start in the window and are drawn as themselves."""
    flows = trace.flows
    if flows is None or len(flows) == 0 or len(shown_rows) == 0:
        return _empty_links(), 0
    launch = flows["launch_row"].to_numpy(dtype=np.int64)
    gpu = flows["gpu_row"].to_numpy(dtype=np.int64)
    shown = np.zeros(len(cols.ts_us), dtype=bool)
    shown[shown_rows] = True
    inside = shown & (cols.ts_us >= w0) & (cols.ts_us <= w1)
    ok = inside[launch] & inside[gpu]
    n_ok = int(ok.sum())
    if n_ok > max(budget, 0):
        return _empty_links(), n_ok
    launch, gpu = launch[ok], gpu[ok]
    links = pd.DataFrame({
        "correlation": flows["correlation"].to_numpy(dtype=np.int64)[ok],
        "launch_lane": _label(cols.lane_names, cols.lane[launch]),
        "launch_x_us": cols.ts_us[launch],
        "launch_name": _label(cols.name_labels, cols.name[launch]),
        "gpu_lane": _label(cols.lane_names, cols.lane[gpu]),
        "gpu_x_us": cols.ts_us[gpu],
        "gpu_name": _label(cols.name_labels, cols.name[gpu]),
        "delay_us": cols.ts_us[gpu] - cols.ts_us[launch],
    })
    return links, 0


def _empty_links() -> pd.DataFrame:
    frame = {c: pd.Series([], dtype=object) for c in LINK_COLUMNS}
    frame["correlation"] = pd.Series([], dtype=np.int64)
    for c in ("launch_x_us", "gpu_x_us", "delay_us"):
        frame[c] = pd.Series([], dtype=np.float64)
    return pd.DataFrame(frame)


# --------------------------------------------------------------------------- text


def _fmt_us(value: float | None) -> str:
    value = value or 0.0
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2g}" if value < 10 else f"{value:.1f}"


def _short_name(name: str) -> str:
    name = str(name)
    return name if len(name) <= TOOLTIP_NAME_CHARS else name[: TOOLTIP_NAME_CHARS - 1] + "…"

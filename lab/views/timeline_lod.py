"""The timeline's level of detail: which events of a window become marks, merged bars or links.

``build_timeline`` (``lab/views/timeline.py``) describes the steps; this module holds them:
selecting a window's events, choosing the finest grouping that fits the mark budget, building
the real and merged marks, and the launch → GPU links between marks drawn as themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.columns import codes, dense_ids, group_mode
from lab.trace.load import Trace
from lab.vocab import ANNOTATION_CATS, PROFILER_STEP_PREFIX

__all__ = [
    "CAT_COLORS", "LINK_COLUMNS", "MARK_COLUMNS", "MAX_BIN_PX", "MAX_LINKS_PER_PX", "MIN_MARK_PX", "Columns",
    "Grouping", "Window", "build_marks", "choose_grouping", "drop_last_lanes", "empty_marks", "launch_links",
    "overlaps", "resolve_window", "select",
]  # fmt: skip

# Events narrower than one pixel cannot be told apart from their neighbours.
MIN_MARK_PX = 1.0
# Coarsen the merge bins up to this width before folding deep rows: a 16 px bar still reads
# as "something happens here", and shallow rows (ops, annotations) matter more than deep ones
# (runtime calls, Python frames) for a first read of a trace.
MAX_BIN_PX = 16.0
# Links stop being readable when they pack tighter than one per ~4 px on average (measured by
# eye on the tiled traces: 640 links across 1,200 px hide the kernels under them).
MAX_LINKS_PER_PX = 0.25

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
    "other": "#ff9da6",
}
_CAT_KINDS = tuple(k for k in CAT_COLORS if k != "other")

MARK_COLUMNS = (
    "lane", "lane_order", "name", "cat", "kind", "start_us", "end_us", "draw_end_us", "dur_us",
    "depth", "row", "merged_count", "busy_us", "busy_frac", "input_dims", "grid", "block", "registers_per_thread",
    "shared_memory_bytes", "occupancy_pct",
)
LINK_COLUMNS = (
    "correlation", "launch_lane", "launch_x_us", "launch_y", "launch_name", "gpu_lane", "gpu_x_us", "gpu_y",
    "gpu_name", "delay_us",
)
_TEXT_TOOLTIP_COLUMNS = ("input_dims", "grid", "block")
_NUMBER_TOOLTIP_COLUMNS = ("registers_per_thread", "shared_memory_bytes", "occupancy_pct")


# --------------------------------------------------------------------------- columns


@dataclass(frozen=True)
class Columns:
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
    def read(cls, events: pd.DataFrame) -> Columns:
        ts = events["ts_us"].to_numpy(dtype=np.float64)
        dur = events["dur_us"].to_numpy(dtype=np.float64)
        lane, lane_names = codes(events["lane"])
        if (lane < 0).any():
            raise ValueError("some events have no lane; build traces with lab.trace.load_trace")
        # Every event of a lane carries the same lane_order; a scatter picks it up.
        lane_order = np.zeros(len(lane_names), dtype=np.int64)
        lane_order[lane] = events["lane_order"].to_numpy()
        name, name_labels = codes(events["name"])
        cat, cat_labels = codes(events["cat"])
        label_is_annotation = pd.Series(cat_labels, dtype=object).isin(ANNOTATION_CATS).to_numpy()
        label_is_step = pd.Series(name_labels, dtype=object).str.startswith(PROFILER_STEP_PREFIX)
        is_annotation = label_is_annotation[cat] | label_is_step.fillna(False).to_numpy(dtype=bool)[name]
        return cls(ts, ts + dur, dur, events["depth"].to_numpy(), lane, lane_names, lane_order,
                   name, name_labels, cat, cat_labels, is_annotation)

    def ordered_lanes(self) -> tuple[str, ...]:
        present = np.flatnonzero(np.bincount(self.lane, minlength=len(self.lane_names)))
        order = np.lexsort((self.lane_names[present].astype(str), self.lane_order[present]))
        return tuple(str(n) for n in self.lane_names[present][order])


# --------------------------------------------------------------------------- selection


@dataclass(frozen=True)
class Window:
    """Events overlapping the window as flat arrays; ``rows`` are positions in ``events``."""

    w0: float
    rows: np.ndarray
    start_us: np.ndarray  # clipped to the window
    end_us: np.ndarray  # clipped to the window
    lane: np.ndarray  # int64 lane codes
    depth: np.ndarray  # int64


def resolve_window(ts: np.ndarray, ends: np.ndarray, start_us, end_us) -> tuple[float, float]:
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


def overlaps(cols: Columns, w0: float, w1: float) -> np.ndarray:
    # Touching counts: a zero-length event exactly at the window edge is still in it.
    return (cols.ts_us <= w1) & (cols.end_us >= w0)


def select(cols: Columns, w0: float, w1: float, mask: np.ndarray) -> Window:
    rows = np.flatnonzero(mask)
    return Window(
        w0=w0,
        rows=rows,
        start_us=np.maximum(cols.ts_us[rows], w0),
        end_us=np.minimum(cols.end_us[rows], w1),
        lane=cols.lane[rows].astype(np.int64),
        depth=cols.depth[rows].astype(np.int64),
    )


# --------------------------------------------------------------------------- level of detail


@dataclass(frozen=True, eq=False)
class Grouping:
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


def _group(win: Window, bin_us: float | None, depth_cap: int | None) -> Grouping:
    n = len(win.rows)
    if bin_us is None or n == 0:
        return Grouping(None, None, np.zeros(n, dtype=bool), win.depth, np.empty(0, np.int64), 0)
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
        return Grouping(bin_us, depth_cap, merge, row_depth, bins, 0)
    n_rows = int(row_depth.max()) + 1
    keys = (win.lane[merge] * n_rows + row_depth[merge]) * (int(bins.max()) + 1) + bins
    gid, n_groups, _ = dense_ids(keys)
    return Grouping(bin_us, depth_cap, merge, row_depth, gid, n_groups)


def choose_grouping(win: Window, pixel_us: float, max_marks: int) -> Grouping:
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


def _fit_bins(win, pixel_us, max_marks, depth_cap, first_px, last_px) -> Grouping | None:
    """Double the bin from ``first_px`` to ``last_px`` until the marks fit."""
    bin_px = first_px
    while bin_px <= last_px:
        grouping = _group(win, bin_px * pixel_us, depth_cap)
        if grouping.n_marks <= max_marks:
            return grouping
        bin_px *= 2
    return None


def _widest_bin_px(win: Window, pixel_us: float) -> float:
    """A power-of-two bin wider than every event: beyond it, growing the bin changes nothing."""
    span_us = float(win.end_us.max() - win.start_us.min()) if len(win.rows) else 0.0
    px = MIN_MARK_PX
    while px * pixel_us <= span_us:
        px *= 2
    return px


# --------------------------------------------------------------------------- marks


def build_marks(events: pd.DataFrame, cols: Columns, win: Window, grouping: Grouping):
    """(real-event rows, merged-bar rows, positions in ``events`` drawn as themselves).

    A merged bar takes the colour of the category that holds most of its time, and says how
    much of its extent its events cover (``busy_us``): the chart draws it that opaque."""
    real_pos = np.flatnonzero(~grouping.merge)
    merged = empty_marks()
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
            merged["kind"] = np.where(merged["cat"].isin(_CAT_KINDS), merged["cat"], "other")
    real = _real_marks(events, cols, win, real_pos, grouping.row_depth)
    return real, merged, win.rows[real_pos]


def _real_marks(events, cols: Columns, win: Window, pos: np.ndarray, row_depth: np.ndarray):
    rows = win.rows[pos]
    cat = cols.cat_labels[cols.cat[rows]]
    out = pd.DataFrame({
        "lane": cols.lane_names[win.lane[pos]],
        "lane_order": cols.lane_order[win.lane[pos]],
        "name": cols.name_labels[cols.name[rows]],
        "cat": cat,
        "kind": np.where(pd.Series(cat, dtype=object).isin(_CAT_KINDS), cat, "other").astype(object),
        "start_us": win.start_us[pos],
        "end_us": win.end_us[pos],
        "dur_us": cols.dur_us[rows],
        "depth": row_depth[pos],  # a folded deep event sits on the folded row
        "merged_count": np.ones(len(pos), dtype=np.int64),
        "busy_us": win.end_us[pos] - win.start_us[pos],
    })
    for c in _TEXT_TOOLTIP_COLUMNS:
        if c in events.columns:
            col_codes, labels = codes(events[c])
            out[c] = labels[col_codes[rows]]
        else:
            out[c] = ""
    for c in _NUMBER_TOOLTIP_COLUMNS:
        out[c] = events[c].to_numpy(dtype=np.float64)[rows] if c in events.columns else np.nan
    return out


def _merged_marks(cols: Columns, win: Window, pos, row_depth, gid, n) -> pd.DataFrame:
    """One bar per group ``gid`` (0..n-1): extent, count, summed duration, most frequent
    name, the category with the most (clipped) time, and the time its events cover."""
    rows = win.rows[pos]
    start = np.full(n, np.inf)
    np.minimum.at(start, gid, win.start_us[pos])
    end = np.full(n, -np.inf)
    np.maximum.at(end, gid, win.end_us[pos])
    first = np.empty(n, dtype=np.int64)
    first[gid] = pos  # any member: lane and row are the same for the whole group
    lane = win.lane[first]
    return pd.DataFrame({
        "lane": cols.lane_names[lane],
        "lane_order": cols.lane_order[lane],
        "name": cols.name_labels[group_mode(gid, cols.name[rows], n)],
        "cat": cols.cat_labels[_dominant(gid, cols.cat[rows] % len(cols.cat_labels),
                                         win.end_us[pos] - win.start_us[pos], n)],
        "kind": "",
        "start_us": start,
        "end_us": end,
        "dur_us": np.bincount(gid, weights=cols.dur_us[rows], minlength=n),
        "depth": row_depth[first],
        "merged_count": np.bincount(gid, minlength=n).astype(np.int64),
        "busy_us": _covered_us(gid, win.start_us[pos], win.end_us[pos], n),
        **{c: "" for c in _TEXT_TOOLTIP_COLUMNS},
        **{c: np.nan for c in _NUMBER_TOOLTIP_COLUMNS},
    })


def _dominant(gid: np.ndarray, cat: np.ndarray, dur_us: np.ndarray, n: int) -> np.ndarray:
    """Per group, the category code with the largest summed duration (ties: the smallest code)."""
    n_cats = int(cat.max()) + 1 if len(cat) else 1
    time_us = np.bincount(gid * n_cats + cat, weights=dur_us, minlength=n * n_cats).reshape(n, n_cats)
    # A group of zero-length events only: the most frequent category instead.
    counts = np.bincount(gid * n_cats + cat, minlength=n * n_cats).reshape(n, n_cats)
    return np.where(time_us.max(axis=1) > 0, time_us.argmax(axis=1), counts.argmax(axis=1))


def _covered_us(gid: np.ndarray, start: np.ndarray, end: np.ndarray, n: int) -> np.ndarray:
    """Per group, the length of the union of its intervals (nested or overlapping events once)."""
    order = np.lexsort((start, gid))
    g, s, e = gid[order], start[order], end[order]
    reach = pd.Series(e).groupby(g).cummax().to_numpy()  # furthest end so far, this group
    before = np.r_[-np.inf, reach[:-1]]
    before[np.r_[True, g[1:] != g[:-1]]] = -np.inf  # a group's first interval starts fresh
    return np.bincount(g, weights=np.maximum(e - np.maximum(s, before), 0.0), minlength=n)


def empty_marks() -> pd.DataFrame:
    frame = {c: pd.Series([], dtype=np.float64) for c in MARK_COLUMNS}
    for c in ("lane", "name", "cat", "kind", *_TEXT_TOOLTIP_COLUMNS):
        frame[c] = pd.Series([], dtype=object)
    for c in ("lane_order", "depth", "row", "merged_count"):
        frame[c] = pd.Series([], dtype=np.int64)
    return pd.DataFrame(frame)


def drop_last_lanes(marks: pd.DataFrame, max_marks: int) -> tuple[pd.DataFrame, int]:
    """Keep whole lanes, top first, while they fit; returns the marks kept and events hidden."""
    per_lane = marks.groupby("lane_order", sort=True).size()
    keep_orders = per_lane.index[per_lane.cumsum().to_numpy() <= max_marks]
    kept = marks["lane_order"].isin(keep_orders)
    hidden = int(marks.loc[~kept, "merged_count"].sum())
    return marks.loc[kept].reset_index(drop=True), hidden


# --------------------------------------------------------------------------- links


def launch_links(trace: Trace, cols: Columns, shown_rows: np.ndarray, w0: float, w1: float,
           budget: int, row_of: np.ndarray) -> tuple[pd.DataFrame, int]:
    """Launch → GPU pairs whose both ends start in the window and are drawn as themselves;
    ``row_of[event]`` is the chart row a shown event's bar sits on (a link joins row middles)."""
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
        "launch_lane": cols.lane_names[cols.lane[launch]],
        "launch_x_us": cols.ts_us[launch],
        "launch_y": row_of[launch] + 0.5,
        "launch_name": cols.name_labels[cols.name[launch]],
        "gpu_lane": cols.lane_names[cols.lane[gpu]],
        "gpu_x_us": cols.ts_us[gpu],
        "gpu_y": row_of[gpu] + 0.5,
        "gpu_name": cols.name_labels[cols.name[gpu]],
        "delay_us": cols.ts_us[gpu] - cols.ts_us[launch],
    })
    return links, 0


def _empty_links() -> pd.DataFrame:
    frame = {c: pd.Series([], dtype=object) for c in LINK_COLUMNS}
    frame["correlation"] = pd.Series([], dtype=np.int64)
    for c in ("launch_x_us", "launch_y", "gpu_x_us", "gpu_y", "delay_us"):
        frame[c] = pd.Series([], dtype=np.float64)
    return pd.DataFrame(frame)



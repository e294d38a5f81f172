"""Analyses of a ``Trace``: plain functions returning DataFrames or small frozen dataclasses.

Every function here reads only ``Trace.events``, ``Trace.flows`` and ``Trace.meta`` (see
``lab/trace.py`` for the columns) and works the same on a fresh run and on an uploaded trace.
They are vectorized (numpy/pandas, no per-event Python loops) so that ``analyze`` on a
100k-event trace stays well under a second.

Vocabulary used in names and docstrings:

* *GPU activity* — events with ``cat`` in ``GPU_ACTIVITY_CATS`` (kernels, memcpys, memsets):
  work that occupies a stream. ``gpu_user_annotation`` rows are labels, never activity.
* *self time* — an event's duration minus the durations of its direct children in the same
  lane (nesting from the ``depth`` column), as key_averages' "Self CPU".
* *owner* of GPU activity — the CPU op that launched it: the parent of the launching runtime
  call (``cudaLaunchKernel`` …) found through ``Trace.flows``, or, when a trace has no flows,
  the CPU op carrying the same "External id".
* *trace span* — first event start → last event end of the whole trace (every lane);
  *GPU-active window* — first GPU activity start → last GPU activity end.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.run.config import RunConfig
from lab.run.devices import DevicePeak
from lab.trace.load import Trace
from lab.vocab import (
    ELEMENT_BYTES, GEMM_KERNEL_PATTERN, GEMM_OPS, GPU_ACTIVITY_CATS, INPUT_TYPE_DTYPES, LAUNCH_CATS,
    OPERATOR_CATS, PROFILER_STEP_PREFIX, SYNC_NAMES,
)

# CPU-side rows of the key_averages-like table (what torch's own table lists, minus Python frames).
# Workloads whose one GEMM is M×K @ K×N, so a RunConfig gives its shape when the trace lacks it.
CONFIG_GEMM_WORKLOADS = ("matmul_add", "linear")
_BIAS_GEMM_OPS = ("aten::addmm", "aten::baddbmm", "aten::_addmm_activation", "aten::linear")

# A GPU that is busy at least this share of its active window is the bottleneck: the host
# keeps a queue of work ahead of it. Below it the GPU waits for the host between kernels.
# 80 % follows HTA's temporal breakdown practice of treating sustained idle > 20 % as host-bound
# (https://hta.readthedocs.io/en/latest/source/features/temporal_breakdown.html).
GPU_BOUND_BUSY_PCT = 80.0
LARGEST_GAPS = 10  # how many idle gaps ``GpuUtilization.largest_gaps`` keeps


# --------------------------------------------------------------------------- column helpers
# Text columns are categoricals: test and group on their integer codes and turn codes into
# text only for the few rows of a result (building 100k Python strings costs more than the math).


def _codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, categories as an object array with "" appended for code -1)."""
    cat = column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column)
    categories = np.append(np.asarray(cat.categories, dtype=object), "")
    return np.asarray(cat.codes, dtype=np.int64), categories


def mask_in(column: pd.Series, values) -> np.ndarray:
    """Boolean array: the row's text is one of ``values``."""
    codes, categories = _codes(column)
    hit = np.isin(categories.astype(str), list(values))
    hit[-1] = False
    return hit[codes]


def mask_where(column: pd.Series, predicate) -> np.ndarray:
    """Boolean array: ``predicate(text)`` holds for the row's text (evaluated once per category)."""
    codes, categories = _codes(column)
    hit = np.fromiter((bool(predicate(str(c))) for c in categories[:-1]), dtype=bool, count=len(categories) - 1)
    return np.append(hit, False)[codes]


def texts(column: pd.Series, rows: np.ndarray | None = None) -> np.ndarray:
    """The text of ``rows`` (all rows when None) as an object array."""
    codes, categories = _codes(column)
    return categories[codes if rows is None else codes[rows]]


def as_category(column: pd.Series, rows: np.ndarray) -> pd.Categorical:
    """``rows`` of a text column as a categorical (no per-row strings are built)."""
    cat = column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column)
    return pd.Categorical.from_codes(np.asarray(cat.codes)[rows], categories=cat.categories)


# --------------------------------------------------------------------------- links


@dataclass(frozen=True)
class Links:
    """Who contains whom and who launched what, as positions into ``trace.events``.

    ``parent[i]``: direct parent of event i in its lane (-1 at the top).
    ``launch[i]``: for GPU activity i, the CPU row that launched it (-1 if unknown).
    ``owner[i]``: for GPU activity i, the CPU op it belongs to (parent of the launch call), -1 if none.
    """

    parent: np.ndarray
    launch: np.ndarray
    owner: np.ndarray


def build_links(trace: Trace) -> Links:
    ev = trace.events
    n = len(ev)
    parent = _parents(ev["depth"].to_numpy(), ev["lane_order"].to_numpy())
    launch = np.full(n, -1, dtype=np.int64)
    flows = trace.flows
    if len(flows):
        launch[flows["gpu_row"].to_numpy(dtype=np.int64)] = flows["launch_row"].to_numpy(dtype=np.int64)
    is_launch_call = mask_in(ev["cat"], LAUNCH_CATS)
    owner = launch.copy()
    has = owner >= 0
    # The op that owns GPU work is the one around its launch call, not the call itself.
    via_call = has & is_launch_call[np.where(has, owner, 0)]
    owner[via_call] = parent[owner[via_call]]
    # Traces without flows (older Kineto, stripped uploads): fall back to the shared External id.
    is_gpu = mask_in(ev["cat"], GPU_ACTIVITY_CATS)
    orphan = np.flatnonzero(is_gpu & (launch < 0) & (ev["external_id"].to_numpy() >= 0))
    if len(orphan):
        is_op = mask_in(ev["cat"], ("cpu_op", "user_annotation")) & mask_in(ev["lane_kind"], ("cpu",))
        op_ids = pd.Series(np.flatnonzero(is_op), index=ev["external_id"].to_numpy()[is_op])
        op_ids = op_ids[~op_ids.index.duplicated(keep="last")]  # innermost op wins on ties
        found = op_ids.reindex(ev["external_id"].to_numpy()[orphan]).to_numpy()
        ok = ~np.isnan(found)
        owner[orphan[ok]] = found[ok].astype(np.int64)
    return Links(parent=parent, launch=launch, owner=owner)


def _parents(depth: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """Direct parent per row: the nearest earlier row of the same lane one level up.

    Rows are sorted by (lane, start), so a row's parent is the last row before it at
    depth − 1; one searchsorted per depth level instead of a stack walk per event.
    """
    n = len(depth)
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return parent
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    for d in range(1, int(depth.max()) + 1):
        above = order[bounds[d - 1]:bounds[d]]  # positions at depth d-1, ascending
        here = order[bounds[d]:bounds[d + 1]]
        if not len(above) or not len(here):
            continue
        at = np.searchsorted(above, here, side="right") - 1
        ok = at >= 0
        cand = above[np.where(ok, at, 0)]
        ok &= lane[cand] == lane[here]
        parent[here[ok]] = cand[ok]
    return parent


def _device_times(trace: Trace, links: Links) -> tuple[np.ndarray, np.ndarray]:
    """(self, total) GPU activity µs per CPU row: launched by the row / by it or its descendants."""
    ev = trace.events
    n = len(ev)
    dur = ev["dur_us"].to_numpy()
    rows = np.flatnonzero(links.owner >= 0)
    cur = links.owner[rows]
    weights = dur[rows]
    self_us = np.bincount(cur, weights=weights, minlength=n) if len(cur) else np.zeros(n)
    total_us = np.zeros(n)
    while len(cur):
        total_us += np.bincount(cur, weights=weights, minlength=n)
        cur = links.parent[cur]
        keep = cur >= 0
        cur, weights = cur[keep], weights[keep]
    return self_us, total_us


def _self_us(trace: Trace, links: Links) -> np.ndarray:
    dur = trace.events["dur_us"].to_numpy()
    has_parent = links.parent >= 0
    children = np.bincount(links.parent[has_parent], weights=dur[has_parent], minlength=len(dur))
    return np.maximum(dur - children, 0.0)


# --------------------------------------------------------------------------- grouping
# Group-bys on integer keys with numpy (bincount/lexsort): pandas' named aggregation costs
# tens of milliseconds of fixed overhead per call, more than the arithmetic on 100k rows.


def _group_ids(*code_arrays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group id per row, first row of each group), groups numbered in order of first appearance."""
    key = np.zeros(len(code_arrays[0]), dtype=np.int64)
    for codes in code_arrays:
        codes = np.asarray(codes, dtype=np.int64) + 1  # -1 (missing) becomes 0
        key = key * (int(codes.max(initial=0)) + 1) + codes
    gid, _ = pd.factorize(key)
    first = np.full(int(gid.max(initial=-1)) + 1, len(gid), dtype=np.int64)
    np.minimum.at(first, gid, np.arange(len(gid)))
    return gid, first


def _frame(columns: dict, *, sort_by: str | None = None, descending: bool = True) -> pd.DataFrame:
    """One DataFrame from numpy columns, optionally sorted (stable) by one of them.

    Built in one go: assigning columns one by one costs ~0.1 ms each in pandas 3.
    """
    if sort_by is not None:
        key = np.asarray(columns[sort_by], dtype=float)
        order = np.argsort(-key if descending else key, kind="stable")
        columns = {k: np.asarray(v)[order] if np.ndim(v) else v for k, v in columns.items()}
    return pd.DataFrame(columns)


def _group_median(gid: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    if not len(gid):
        return np.full(n_groups, np.nan)
    order = np.lexsort((values, gid))
    g, v = gid[order], values[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, len(g)])
    lo = starts + (sizes - 1) // 2
    hi = starts + sizes // 2
    out = np.full(n_groups, np.nan)
    out[g[starts]] = (v[lo] + v[hi]) / 2.0
    return out


def _group_min_max(gid: np.ndarray, values: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    if not len(gid):
        return np.full(n_groups, np.nan), np.full(n_groups, np.nan)
    order = np.lexsort((values, gid))
    g = gid[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    ends = np.r_[starts[1:] - 1, len(g) - 1]
    lo, hi = np.full(n_groups, np.nan), np.full(n_groups, np.nan)
    lo[g[starts]] = values[order][starts]
    hi[g[ends]] = values[order][ends]
    return lo, hi


def _group_mode(gid: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Most common non-missing value per group (first seen wins ties); NaN where none."""
    values = np.asarray(values)
    ok = ~pd.isna(values)
    out = np.full(n_groups, np.nan, dtype=object if values.dtype == object else float)
    if not ok.any():
        return out
    v_codes, uniques = pd.factorize(values[ok])
    width = len(uniques)
    pairs, pair_keys = pd.factorize(gid[ok].astype(np.int64) * width + v_codes)
    counts = np.bincount(pairs)
    pair_group, pair_value = pair_keys // width, pair_keys % width
    order = np.lexsort((np.arange(len(pair_keys)), -counts, pair_group))
    best = order[np.r_[True, pair_group[order][1:] != pair_group[order][:-1]]]
    out[pair_group[best]] = np.asarray(uniques)[pair_value[best]]
    return out


# --------------------------------------------------------------------------- operators

OPERATOR_COLUMNS = ("name", "cat", "count", "self_us", "total_us", "mean_us", "self_share_pct",
                    "device_us", "self_device_us")


def operator_summary(trace: Trace, *, group_by_shape: bool = False, links: Links | None = None) -> pd.DataFrame:
    """key_averages-like table of CPU-side rows (ops, annotations, runtime calls).

    Columns: name, cat, [input_dims], count, self_us, total_us, mean_us, self_share_pct
    (of all rows' self time, like "Self CPU %"), device_us (GPU activity launched by the op
    or its descendants, like "CUDA total"), self_device_us (launched by the op itself).
    Sorted by self_us, largest first.
    """
    links = links or build_links(trace)
    ev = trace.events
    keys = ["name", "cat"] + (["input_dims"] if group_by_shape else [])
    columns = list(OPERATOR_COLUMNS[:2]) + keys[2:] + list(OPERATOR_COLUMNS[2:])
    rows = np.flatnonzero(mask_in(ev["cat"], OPERATOR_CATS) & mask_in(ev["lane_kind"], ("cpu",)))
    if not len(rows):
        return pd.DataFrame({c: pd.Series(dtype=object if c in keys else float) for c in columns})
    coded = {k: _codes(ev[k]) for k in keys}
    gid, first = _group_ids(*(coded[k][0][rows] for k in keys))
    n_groups = len(first)
    self_dev, total_dev = _device_times(trace, links)

    def total(values):
        return np.bincount(gid, weights=values[rows], minlength=n_groups)

    out = {k: coded[k][1][coded[k][0][rows[first]]] for k in keys}
    count = np.bincount(gid, minlength=n_groups)
    self_us = total(_self_us(trace, links))
    total_us = total(ev["dur_us"].to_numpy())
    total_self = self_us.sum()
    out.update(
        count=count, self_us=self_us, total_us=total_us, mean_us=total_us / count,
        self_share_pct=100.0 * self_us / total_self if total_self > 0 else np.zeros(n_groups),
        device_us=total(total_dev), self_device_us=total(self_dev),
    )
    return _frame({c: out[c] for c in columns}, sort_by="self_us")


# --------------------------------------------------------------------------- kernels

KERNEL_COLUMNS = ("name", "cat", "count", "total_us", "mean_us", "min_us", "max_us", "share_pct",
                  "grid", "block", "registers_per_thread", "shared_memory_bytes", "occupancy_pct")


def kernel_summary(trace: Trace) -> pd.DataFrame:
    """One row per GPU activity name: kernels, memcpys and memsets.

    Columns: name, cat, count, total_us, mean_us, min_us, max_us, share_pct (of the summed
    duration of all GPU activity), and the most common grid, block, registers_per_thread,
    shared_memory_bytes, occupancy_pct of its launches. Sorted by total_us, largest first.
    """
    ev = trace.events
    rows = np.flatnonzero(mask_in(ev["cat"], GPU_ACTIVITY_CATS))
    if not len(rows):
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("name", "cat", "grid", "block") else float)
                             for c in KERNEL_COLUMNS})
    name_codes, name_text = _codes(ev["name"])
    gid, first = _group_ids(name_codes[rows])
    n_groups = len(first)
    dur = ev["dur_us"].to_numpy()[rows]
    out = {"name": name_text[name_codes[rows[first]]], "cat": texts(ev["cat"], rows[first])}
    count = np.bincount(gid, minlength=n_groups)
    total_us = np.bincount(gid, weights=dur, minlength=n_groups)
    total = total_us.sum()
    min_us, max_us = _group_min_max(gid, dur, n_groups)
    out.update(count=count, total_us=total_us, mean_us=total_us / count, min_us=min_us, max_us=max_us,
               share_pct=100.0 * total_us / total if total > 0 else np.zeros(n_groups))
    for col in ("grid", "block"):
        codes, text = _codes(ev[col])
        mode = _group_mode(gid, codes[rows].astype(float), n_groups)
        out[col] = text[np.where(pd.isna(mode), -1, mode).astype(np.int64)]
    for col in ("registers_per_thread", "shared_memory_bytes", "occupancy_pct"):
        out[col] = _group_mode(gid, ev[col].to_numpy(dtype=float)[rows], n_groups).astype(float)
    return _frame({c: out[c] for c in KERNEL_COLUMNS}, sort_by="total_us")


# --------------------------------------------------------------------------- GPU utilization


@dataclass(frozen=True)
class GpuUtilization:
    """How much of the time the GPU(s) had work, from the union of GPU activity intervals.

    ``busy_us`` counts each instant once even when several streams or devices overlap.
    ``trace_span_us`` runs from the first event start to the last event end of the whole trace
    (all lanes, the profiler's own span included); ``active_span_us`` from the first GPU
    activity start to the last GPU activity end. ``busy_pct`` = busy / trace span,
    ``active_busy_pct`` = busy / GPU-active window. ``activity_us`` sums durations (overlap
    counted twice), as key_averages' device total does.
    """

    busy_us: float
    activity_us: float
    trace_span_us: float
    active_start_us: float
    active_end_us: float
    active_span_us: float
    busy_pct: float
    active_busy_pct: float
    # device, count, activity_us, busy_us, active_start_us, active_end_us, active_span_us, active_busy_pct
    per_device: pd.DataFrame
    busy_intervals: pd.DataFrame  # start_us, end_us: the union over all devices, sorted
    gaps: pd.DataFrame  # device, start_us, end_us, dur_us: idle time between activity, per device
    largest_gaps: pd.DataFrame  # the LARGEST_GAPS longest rows of ``gaps``


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


def trace_span_us(trace: Trace) -> float:
    ev = trace.events
    if ev.empty:
        return 0.0
    return float((ev["ts_us"] + ev["dur_us"]).max() - ev["ts_us"].min())


def gpu_utilization(trace: Trace) -> GpuUtilization:
    """Busy time, active window and idle gaps of GPU activity, per device and overall."""
    ev = trace.events
    rows = np.flatnonzero(mask_in(ev["cat"], GPU_ACTIVITY_CATS))
    span = trace_span_us(trace)
    starts = ev["ts_us"].to_numpy(dtype=float)[rows]
    ends = starts + ev["dur_us"].to_numpy(dtype=float)[rows]
    devices = ev["device"].to_numpy()[rows]
    ms, me = merge_intervals(starts, ends)
    busy = float((me - ms).sum())
    per_device = []
    gap_parts: dict[str, list] = {"device": [], "start_us": [], "end_us": []}
    for device in np.unique(devices):
        sel = devices == device
        ds, de = merge_intervals(starts[sel], ends[sel])
        d_busy = float((de - ds).sum())
        d_span = float(de[-1] - ds[0])
        per_device.append({
            "device": int(device), "count": int(sel.sum()),
            "activity_us": float((ends[sel] - starts[sel]).sum()), "busy_us": d_busy,
            "active_start_us": float(ds[0]), "active_end_us": float(de[-1]), "active_span_us": d_span,
            "active_busy_pct": 100.0 * d_busy / d_span if d_span > 0 else 100.0,
        })
        gap_parts["device"].append(np.full(len(de) - 1, int(device), dtype=np.int64))
        gap_parts["start_us"].append(de[:-1])
        gap_parts["end_us"].append(ds[1:])
    gap = {k: np.concatenate(v) if v else np.array([], dtype=np.int64 if k == "device" else float)
           for k, v in gap_parts.items()}
    gap["dur_us"] = gap["end_us"] - gap["start_us"]
    order = np.lexsort((gap["device"], gap["start_us"]))
    gap = {k: v[order] for k, v in gap.items()}
    largest = np.argsort(-gap["dur_us"], kind="stable")[:LARGEST_GAPS]
    device_columns = ["device", "count", "activity_us", "busy_us", "active_start_us", "active_end_us",
                      "active_span_us", "active_busy_pct"]
    active_start = float(ms[0]) if len(ms) else float("nan")
    active_end = float(me[-1]) if len(me) else float("nan")
    active_span = active_end - active_start if len(ms) else 0.0
    return GpuUtilization(
        busy_us=busy,
        activity_us=float((ends - starts).sum()),
        trace_span_us=span,
        active_start_us=active_start,
        active_end_us=active_end,
        active_span_us=active_span,
        busy_pct=100.0 * busy / span if span > 0 else 0.0,
        active_busy_pct=(100.0 * busy / active_span if active_span > 0 else (100.0 if busy > 0 else 0.0)),
        per_device=pd.DataFrame({c: [d[c] for d in per_device] for c in device_columns}),
        busy_intervals=pd.DataFrame({"start_us": ms, "end_us": me}),
        gaps=pd.DataFrame(gap),
        largest_gaps=pd.DataFrame({k: v[largest] for k, v in gap.items()}),
    )


# --------------------------------------------------------------------------- launches


@dataclass(frozen=True)
class LaunchStats:
    """Launch delay (GPU start − CPU launch start, per flow) and the CPU cost of launch calls.

    A long delay means the GPU was still busy with earlier work (queued) or the launch was
    slow to reach it; launch_*_us is the time the host thread spent inside the launch call.
    NaN when the trace has no flows.
    """

    count: int
    delay_median_us: float
    delay_p90_us: float
    delay_max_us: float
    launch_calls: int
    launch_median_us: float
    launch_total_us: float
    # gpu_name, gpu_cat, launch_name, launch_ts_us, gpu_ts_us, delay_us, launch_dur_us, device, stream
    per_launch: pd.DataFrame
    by_name: pd.DataFrame  # gpu_name, count, delay_median_us, delay_max_us, launch_median_us


def launch_delays(trace: Trace) -> LaunchStats:
    ev = trace.events
    flows = trace.flows
    launch_rows = flows["launch_row"].to_numpy(dtype=np.int64)
    gpu_rows = flows["gpu_row"].to_numpy(dtype=np.int64)
    ts = ev["ts_us"].to_numpy()
    dur = ev["dur_us"].to_numpy()
    order = np.argsort(ts[launch_rows], kind="stable")
    launch_rows, gpu_rows = launch_rows[order], gpu_rows[order]
    delays = flows["delay_us"].to_numpy(dtype=float)[order]
    launch_dur = dur[launch_rows]
    per_launch = pd.DataFrame({
        "gpu_name": as_category(ev["name"], gpu_rows),
        "gpu_cat": as_category(ev["cat"], gpu_rows),
        "launch_name": as_category(ev["name"], launch_rows),
        "launch_ts_us": ts[launch_rows],
        "gpu_ts_us": ts[gpu_rows],
        "delay_us": delays,
        "launch_dur_us": launch_dur,
        "device": ev["device"].to_numpy()[gpu_rows],
        "stream": ev["stream"].to_numpy()[gpu_rows],
    })
    # One launch call may start several GPU activities (graphs); count its cost once.
    calls = dur[np.unique(launch_rows)]
    name_codes, name_text = _codes(ev["name"])
    gid, first = _group_ids(name_codes[gpu_rows]) if len(gpu_rows) else (np.array([], np.int64), np.array([], np.int64))
    n_groups = len(first)
    by_name = _frame({
        "gpu_name": name_text[name_codes[gpu_rows[first]]],
        "count": np.bincount(gid, minlength=n_groups),
        "delay_median_us": _group_median(gid, delays, n_groups),
        "delay_max_us": _group_min_max(gid, delays, n_groups)[1],
        "launch_median_us": _group_median(gid, launch_dur, n_groups),
    }, sort_by="count")
    nan = float("nan")
    return LaunchStats(
        count=len(delays),
        delay_median_us=float(np.median(delays)) if len(delays) else nan,
        delay_p90_us=float(np.percentile(delays, 90)) if len(delays) else nan,
        delay_max_us=float(delays.max()) if len(delays) else nan,
        launch_calls=len(calls),
        launch_median_us=float(np.median(calls)) if len(calls) else nan,
        launch_total_us=float(calls.sum()),
        per_launch=per_launch,
        by_name=by_name,
    )


# --------------------------------------------------------------------------- steps

STEP_COLUMNS = ("step", "name", "source", "start_us", "end_us", "cpu_us", "first_child_gap_us",
                "gpu_busy_us", "gpu_idle_us", "gpu_busy_pct", "launched_gpu_us", "launched_count")


def step_rows(trace: Trace) -> tuple[np.ndarray, str]:
    """Positions of the step events and where they came from ("ProfilerStep", "annotation" or "")."""
    ev = trace.events
    on_cpu = mask_in(ev["lane_kind"], ("cpu",))
    marked = (on_cpu & mask_where(ev["name"], lambda name: name.startswith(PROFILER_STEP_PREFIX))
              & mask_in(ev["cat"], ("cpu_op", "user_annotation")))
    if marked.any():
        return np.flatnonzero(marked), "ProfilerStep"
    is_ann = on_cpu & mask_in(ev["cat"], ("user_annotation",))
    if not is_ann.any():
        return np.array([], dtype=np.int64), ""
    name_codes, _ = _codes(ev["name"])
    rows = np.flatnonzero(is_ann)
    depth_all = ev["depth"].to_numpy()
    gid, first = _group_ids(name_codes[rows])
    count = np.bincount(gid)
    depth = np.full(len(first), np.iinfo(np.int64).max)
    np.minimum.at(depth, gid, depth_all[rows].astype(np.int64))
    dur = np.bincount(gid, weights=ev["dur_us"].to_numpy()[rows])
    repeated = np.flatnonzero(count >= 2)
    if not len(repeated):
        return np.array([], dtype=np.int64), ""
    # The outermost repeated label is the step; among equals, the most frequent, then the longest.
    best = repeated[np.lexsort((-dur[repeated], -count[repeated], depth[repeated]))[0]]
    pick = is_ann & (name_codes == name_codes[rows[first[best]]]) & (depth_all == depth[best])
    return np.flatnonzero(pick), "annotation"


def step_breakdown(trace: Trace, *, links: Links | None = None,
                   utilization: GpuUtilization | None = None) -> pd.DataFrame:
    """Per step: CPU time, GPU busy/idle inside the step's window, GPU work it launched.

    Steps are ``ProfilerStep#N`` events when the trace has them, else the outermost
    user annotation that repeats (the ``source`` column says which). ``gpu_busy_us`` is the
    union of all GPU activity clipped to [start_us, end_us] (the CPU window of the step);
    ``launched_gpu_us`` sums the GPU activity whose launch call lies inside the step, wherever
    it ran. ``first_child_gap_us`` = first child's start − the step's start.
    """
    rows, source = step_rows(trace)
    if not len(rows):
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("name", "source") else float) for c in STEP_COLUMNS})
    links = links or build_links(trace)
    utilization = utilization or gpu_utilization(trace)
    ev = trace.events
    ts = ev["ts_us"].to_numpy()
    dur = ev["dur_us"].to_numpy()
    start, end = ts[rows], ts[rows] + dur[rows]
    order = np.argsort(start, kind="stable")
    rows, start, end = rows[order], start[order], end[order]
    # First child: rows are sorted by start inside a lane, so the first row naming the step as parent.
    kids = np.flatnonzero(np.isin(links.parent, rows))
    first_kid = np.full(len(ev), len(ev), dtype=np.int64)
    np.minimum.at(first_kid, links.parent[kids], kids)
    first_kid = first_kid[rows]
    has_kid = first_kid < len(ev)
    gap = np.full(len(rows), np.nan)
    gap[has_kid] = ts[first_kid[has_kid]] - start[has_kid]
    busy = covered_us(utilization.busy_intervals["start_us"].to_numpy(),
                      utilization.busy_intervals["end_us"].to_numpy(), start, end)
    # GPU work launched from inside each step (same lane, launch start within the window).
    launched_us = np.zeros(len(rows))
    launched_n = np.zeros(len(rows), dtype=np.int64)
    gpu_rows = np.flatnonzero(links.launch >= 0)
    if len(gpu_rows):
        lrow = links.launch[gpu_rows]
        lts = ts[lrow]
        k = np.searchsorted(start, lts, side="right") - 1
        ok = k >= 0
        kk = np.where(ok, k, 0)
        lane = ev["lane_order"].to_numpy()
        ok &= (lts <= end[kk]) & (lane[lrow] == lane[rows[kk]])
        launched_us = np.bincount(kk[ok], weights=dur[gpu_rows][ok], minlength=len(rows))
        launched_n = np.bincount(kk[ok], minlength=len(rows))
    cpu = end - start
    return pd.DataFrame({
        "step": np.arange(len(rows)),
        "name": texts(ev["name"], rows),
        "source": source,
        "start_us": start, "end_us": end, "cpu_us": cpu, "first_child_gap_us": gap,
        "gpu_busy_us": busy, "gpu_idle_us": np.maximum(cpu - busy, 0.0),
        "gpu_busy_pct": np.where(cpu > 0, 100.0 * busy / np.where(cpu > 0, cpu, 1.0), 0.0),
        "launched_gpu_us": launched_us, "launched_count": launched_n,
    })


# --------------------------------------------------------------------------- GEMM efficiency

GEMM_COLUMNS = ("op", "kernel", "ts_us", "device", "kernel_us", "kernels_launched", "m", "k", "n", "batch",
                "dtype", "shape_source", "flops", "bytes_moved", "tflops", "peak_tflops", "pct_of_peak",
                "intensity_flops_per_byte", "ridge_flops_per_byte", "bound")


def _parse_list(text: str):
    """Recorded "Input Dims"/"Input type" text → Python list (None when absent or unreadable)."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return None


def _gemm_shape(op: str, dims) -> tuple[int, int, int, int, int] | None:
    """(batch, M, K, N, extra input elements e.g. bias) of one GEMM op from its recorded dims."""
    try:
        if op == "aten::mm":
            (m, k), (_, n) = dims[0], dims[1]
            return 1, m, k, n, 0
        if op in ("aten::addmm", "aten::_addmm_activation"):
            (m, k), (_, n) = dims[1], dims[2]
            return 1, m, k, n, int(np.prod(dims[0])) if dims[0] else 0
        if op == "aten::bmm":
            (b, m, k), (_, _, n) = dims[0], dims[1]
            return b, m, k, n, 0
        if op == "aten::baddbmm":
            (b, m, k), (_, _, n) = dims[1], dims[2]
            return b, m, k, n, int(np.prod(dims[0])) if dims[0] else 0
        if op == "aten::linear":
            a, w = dims[0], dims[1]
            bias = dims[2] if len(dims) > 2 and dims[2] else []
            return 1, int(np.prod(a[:-1])) if len(a) > 1 else 1, a[-1], w[0], int(np.prod(bias)) if bias else 0
        if op == "aten::matmul":
            a, b = dims[0], dims[1]
            if len(a) < 2 or not b:
                return None
            n = b[-1] if len(b) >= 2 else 1
            batch = int(np.prod(a[:-2])) if len(a) > 2 else (int(np.prod(b[:-2])) if len(b) > 2 else 1)
            return batch, a[-2], a[-1], n, 0
    except (TypeError, ValueError, IndexError):
        return None
    return None


def _dtype_of(input_type: str) -> str:
    types = _parse_list(input_type) or []
    for t in types:
        if t in INPUT_TYPE_DTYPES:
            return INPUT_TYPE_DTYPES[t]
    return ""


def device_name(trace: Trace) -> str:
    props = trace.meta.device_properties
    return str(props[0].get("name", "")) if props and isinstance(props[0], dict) else ""


def compute_capability(trace: Trace) -> tuple[int, int] | None:
    props = trace.meta.device_properties
    if not props or not isinstance(props[0], dict) or "computeMajor" not in props[0]:
        return None
    return int(props[0]["computeMajor"]), int(props[0].get("computeMinor", 0))


def peak_for(trace: Trace) -> DevicePeak | None:
    """Datasheet peak of the trace's first GPU, via ``lab.devices.lookup_peak`` (None if unknown)."""
    from lab.run import devices

    lookup = getattr(devices, "lookup_peak", None)
    name = device_name(trace)
    return lookup(name) if lookup and name else None


def gemm_efficiency(trace: Trace, *, peak: DevicePeak | None = None, config: RunConfig | None = None,
                    links: Links | None = None) -> pd.DataFrame:
    """One row per GEMM op instance that ran on the GPU: achieved TFLOP/s vs the device's peak.

    A GEMM is a kernel owned by (launched inside) one of ``GEMM_OPS``, or, when ``config`` is
    given, a kernel whose name matches ``GEMM_KERNEL_PATTERN``. Its shape comes from the op's
    recorded Input Dims, else from ``config`` (``shape_source`` says which; "unknown" leaves
    FLOP columns NaN). ``kernel`` is the op's longest kernel and ``kernel_us`` its duration
    (memsets and helper kernels excluded). FLOPs = 2·batch·M·K·N; bytes_moved = inputs read
    once + output written once; ``bound`` compares FLOPs/byte with the roofline ridge point.
    dtype from "Input type" (float → float32, or tf32 when the kernel name says so).
    """
    links = links or build_links(trace)
    peak = peak if peak is not None else peak_for(trace)
    ev = trace.events
    empty = pd.DataFrame({c: pd.Series(dtype=float) for c in GEMM_COLUMNS})
    is_kernel = mask_in(ev["cat"], ("kernel",))
    if not is_kernel.any():
        return empty
    is_gemm_op = mask_in(ev["name"], GEMM_OPS) & mask_in(ev["lane_kind"], ("cpu",))
    # Nearest GEMM op among each kernel's owner and the owner's ancestors.
    kernels = np.flatnonzero(is_kernel)
    gemm_op = np.full(len(kernels), -1, dtype=np.int64)
    cur = links.owner[kernels].copy()
    while (cur >= 0).any():
        live = cur >= 0
        hit = live & (gemm_op < 0) & is_gemm_op[np.where(live, cur, 0)]
        gemm_op[hit] = cur[hit]
        cur = np.where(live & (gemm_op < 0), links.parent[np.where(live, cur, 0)], -1)
    unlinked = np.zeros(len(kernels), dtype=bool)
    if config is not None:
        looks_gemm = mask_where(ev["name"], lambda name: GEMM_KERNEL_PATTERN.search(name))
        unlinked = (gemm_op < 0) & looks_gemm[kernels]
    keep = (gemm_op >= 0) | unlinked
    if not keep.any():
        return empty
    dur = ev["dur_us"].to_numpy()
    k_rows = kernels[keep]
    # Group key: the op instance, or the kernel itself when no op is known.
    group = np.where(gemm_op[keep] >= 0, gemm_op[keep], -1 - k_rows)
    order = np.lexsort((-dur[k_rows], group))  # per group, longest kernel first
    g_sorted = group[order]
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
    kernels_launched = np.diff(np.r_[starts, len(order)])
    kr = k_rows[order][starts]  # the main (longest) kernel of each group
    op_row = g_sorted[starts]
    has_op = op_row >= 0
    op_row = np.where(has_op, op_row, 0)
    kernel_tf32 = mask_where(ev["name"], lambda name: "tf32" in name.lower())[kr]
    # Parse each distinct (op, dims, types) once: a 100k-event trace has a handful of them.
    name_codes, name_text = _codes(ev["name"])
    dims_codes, dims_text = _codes(ev["input_dims"])
    type_codes, type_text = _codes(ev["input_type"])
    combo, first = _group_ids(np.where(has_op, name_codes[op_row], -1), np.where(has_op, dims_codes[op_row], -1),
                              np.where(has_op, type_codes[op_row], -1))
    table = np.full((len(first), 5), np.nan)
    combo_dtype = np.empty(len(first), dtype=object)
    op_names = np.where(has_op, name_text[name_codes[op_row]], "")
    for c, row in enumerate(first):
        op, at = op_names[row], op_row[row]
        shape = _gemm_shape(op, _parse_list(dims_text[dims_codes[at]])) if has_op[row] else None
        if shape:
            table[c] = shape
        combo_dtype[c] = _dtype_of(type_text[type_codes[at]]) if has_op[row] else ""
    batch, m, k, n, extra = (table[combo, i] for i in range(5))
    extra = np.nan_to_num(extra)
    dtype = combo_dtype[combo]
    kernel_us = dur[kr]
    source = np.where(np.isnan(m), "unknown", "trace").astype(object)
    if config is not None:
        if config.workload in CONFIG_GEMM_WORKLOADS:
            fill = np.isnan(m)
            batch[fill], m[fill], k[fill], n[fill] = 1, config.m, config.k, config.n
            # A fused op (addmm) also reads the bias vector of N elements.
            extra[fill] = np.where(np.isin(op_names[fill], _BIAS_GEMM_OPS), config.n, 0)
            source[fill] = "config"
        dtype[dtype == ""] = config.dtype
    dtype[(dtype == "float32") & kernel_tf32] = "tf32"
    # Per-dtype constants, looked up once per distinct dtype.
    kinds, which = np.unique(dtype.astype(str), return_inverse=True)
    elem = np.array([ELEMENT_BYTES.get(d, np.nan) for d in kinds], dtype=float)[which]
    peak_tflops = np.array([peak.tflops.get(d, np.nan) if peak else np.nan for d in kinds], dtype=float)[which]
    ridge = np.array([(peak.ridge_flops_per_byte(d) or np.nan) if peak else np.nan for d in kinds],
                     dtype=float)[which]
    flops = 2.0 * batch * m * k * n
    bytes_moved = elem * (batch * (m * k + k * n + m * n) + extra)
    with np.errstate(divide="ignore", invalid="ignore"):
        tflops = np.where(kernel_us > 0, flops / kernel_us / 1e6, np.nan)
        intensity = flops / bytes_moved
    bound = np.where(np.isnan(intensity) | np.isnan(ridge), "",
                     np.where(intensity >= ridge, "compute-bound", "memory-bound"))
    columns = dict(
        op=op_names, kernel=name_text[name_codes[kr]], ts_us=ev["ts_us"].to_numpy()[kr],
        device=ev["device"].to_numpy()[kr], kernel_us=kernel_us, kernels_launched=kernels_launched,
        m=m, k=k, n=n, batch=batch, dtype=dtype, shape_source=source, flops=flops, bytes_moved=bytes_moved,
        tflops=tflops, peak_tflops=peak_tflops, pct_of_peak=100.0 * tflops / peak_tflops,
        intensity_flops_per_byte=intensity, ridge_flops_per_byte=ridge, bound=bound,
    )
    return _frame({c: columns[c] for c in GEMM_COLUMNS}, sort_by="ts_us", descending=False)


# --------------------------------------------------------------------------- verdict


@dataclass(frozen=True)
class Verdict:
    """What limits the run, with the numbers behind it.

    kind: "gpu-bound" (GPU busy ≥ GPU_BOUND_BUSY_PCT of its active window), "cpu-bound" (the
    GPU waits for the host), "no-gpu-events" (GPU used, no GPU activity recorded) or "cpu-only".
    """

    kind: str
    explanation: str
    gpu_busy_pct: float  # busy / GPU-active window
    gpu_busy_us: float
    gpu_activity_us: float
    cpu_self_us: float  # self time of CPU-side rows, synchronize waits excluded
    launch_delay_median_us: float


def host_work_us(operators: pd.DataFrame) -> float:
    """Self time of CPU-side rows of ``operator_summary`` minus time spent waiting in synchronize calls."""
    if operators.empty:
        return 0.0
    waiting = operators["name"].isin(SYNC_NAMES)
    return float(operators.loc[~waiting, "self_us"].sum())


def bound_verdict(trace: Trace, *, operators: pd.DataFrame | None = None,
                  utilization: GpuUtilization | None = None, launches: LaunchStats | None = None) -> Verdict:
    operators = operators if operators is not None else operator_summary(trace)
    utilization = utilization or gpu_utilization(trace)
    launches = launches or launch_delays(trace)
    cpu_us = host_work_us(operators)
    numbers = dict(gpu_busy_pct=utilization.active_busy_pct, gpu_busy_us=utilization.busy_us,
                   gpu_activity_us=utilization.activity_us, cpu_self_us=cpu_us,
                   launch_delay_median_us=launches.delay_median_us)
    if utilization.per_device.empty:  # no kernel, memcpy or memset at all
        if used_gpu(trace):
            return Verdict(kind="no-gpu-events", explanation=(
                "The run used a GPU (launch calls or device properties are in the trace) but recorded "
                "no GPU activity, so GPU time cannot be judged."), **numbers)
        return Verdict(kind="cpu-only", explanation=(
            f"No GPU in this trace: the {cpu_us:,.0f} µs of self CPU time in ops is the whole story."),
            **numbers)
    busy_pct = utilization.active_busy_pct
    delay = launches.delay_median_us
    delay_text = f", median launch delay {delay:,.1f} µs" if delay == delay else ""
    if busy_pct >= GPU_BOUND_BUSY_PCT:
        return Verdict(kind="gpu-bound", explanation=(
            f"GPU-bound: the GPU was busy {busy_pct:.0f} % of its active window "
            f"({utilization.busy_us:,.0f} µs of {utilization.active_span_us:,.0f} µs){delay_text}; "
            f"the host keeps work queued, so faster kernels are what would help."), **numbers)
    return Verdict(kind="cpu-bound", explanation=(
        f"CPU-bound: the GPU was busy only {busy_pct:.0f} % of its active window "
        f"({utilization.busy_us:,.0f} µs of {utilization.active_span_us:,.0f} µs) while ops spent "
        f"{cpu_us:,.0f} µs of self CPU time{delay_text}; the GPU waits for the host between kernels."),
        **numbers)


def used_gpu(trace: Trace) -> bool:
    """True when the trace shows a GPU was in use (launch calls or device properties)."""
    has_calls = bool(mask_in(trace.events["cat"], LAUNCH_CATS).any())
    return has_calls or bool(trace.meta.device_properties)


# --------------------------------------------------------------------------- bundle


@dataclass(frozen=True)
class Analysis:
    """Every analysis of one trace, computed once by ``analyze``."""

    operators: pd.DataFrame
    operators_by_shape: pd.DataFrame
    kernels: pd.DataFrame
    utilization: GpuUtilization
    launches: LaunchStats
    steps: pd.DataFrame
    gemm: pd.DataFrame
    verdict: Verdict
    peak: DevicePeak | None
    links: Links


def analyze(trace: Trace, *, peak: DevicePeak | None = None, config: RunConfig | None = None) -> Analysis:
    links = build_links(trace)
    operators = operator_summary(trace, links=links)
    utilization = gpu_utilization(trace)
    launches = launch_delays(trace)
    peak = peak if peak is not None else peak_for(trace)
    return Analysis(
        operators=operators,
        operators_by_shape=operator_summary(trace, group_by_shape=True, links=links),
        kernels=kernel_summary(trace),
        utilization=utilization,
        launches=launches,
        steps=step_breakdown(trace, links=links, utilization=utilization),
        gemm=gemm_efficiency(trace, peak=peak, config=config, links=links),
        verdict=bound_verdict(trace, operators=operators, utilization=utilization, launches=launches),
        peak=peak,
        links=links,
    )

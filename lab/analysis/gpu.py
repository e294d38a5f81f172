"""GPU time: busy intervals, the active window, idle gaps, and launch delays.

* *GPU activity* — events with ``cat`` in ``GPU_ACTIVITY_CATS`` (kernels, memcpys, memsets):
  work that occupies a stream. ``gpu_user_annotation`` rows are labels, never activity.
* *trace span* — first event start → last event end of the whole trace (every lane);
  *GPU-active window* — first GPU activity start → last GPU activity end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lab.analysis.columns import (
    as_category,
    codes,
    frame,
    gpu_activity_rows,
    group_ids,
    group_median,
    group_min_max,
)
from lab.analysis.diagnoses.graphs import graph_replay_rows
from lab.analysis.intervals import covered_us, merge_intervals
from lab.trace.load import Trace

__all__ = [
    "GPU_BOUND_BUSY_PCT", "LARGEST_GAPS", "GpuUtilization", "LaunchStats", "covered_us", "gpu_activity_rows",
    "gpu_utilization", "launch_delays", "merge_intervals", "trace_span_us",
]  # fmt: skip

# A GPU that is busy at least this share of its active window is the bottleneck: the host
# keeps a queue of work ahead of it. Below it the GPU waits for the host between kernels.
# 80 % follows HTA's temporal breakdown practice of treating sustained idle > 20 % as host-bound
# (https://hta.readthedocs.io/en/latest/source/features/temporal_breakdown.html).
GPU_BOUND_BUSY_PCT = 80.0
LARGEST_GAPS = 10  # how many idle gaps ``GpuUtilization.largest_gaps`` keeps


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
    # Rows of Trace.events that are GPU activity (``gpu_activity_rows``), in row order.
    activity_rows: np.ndarray = field(default_factory=lambda: np.array([], dtype=np.int64), repr=False, compare=False)


def trace_span_us(trace: Trace) -> float:
    ev = trace.events
    if ev.empty:
        return 0.0
    return float((ev["ts_us"] + ev["dur_us"]).max() - ev["ts_us"].min())


def gpu_utilization(trace: Trace) -> GpuUtilization:
    """Busy time, active window and idle gaps of GPU activity, per device and overall."""
    ev = trace.events
    rows = gpu_activity_rows(trace)
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
        activity_rows=rows,
    )


# --------------------------------------------------------------------------- launches


@dataclass(frozen=True)
class LaunchStats:
    """Launch delay (GPU start − CPU launch start, per flow) and the CPU cost of launch calls.

    A long delay means the GPU was still busy with earlier work (queued) or the launch was
    slow to reach it; launch_*_us is the time the host thread spent inside the launch call.
    NaN when the trace has no flows. Kernels that CUDA graph replays ran are left out: their one
    cudaGraphLaunch is no per-kernel launch (the graph-replay diagnosis gives the delay per
    replay; counted per kernel, the H200 decode trace showed 222–406 µs "launch delays").
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
    per_kernel = ~np.isin(gpu_rows, graph_replay_rows(trace))
    flows = flows[per_kernel]
    launch_rows, gpu_rows = launch_rows[per_kernel], gpu_rows[per_kernel]
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
    called = np.zeros(len(ev), dtype=bool)  # each launch row once, in row order (np.unique's, without a sort)
    called[launch_rows] = True
    calls = dur[np.flatnonzero(called)]
    name_codes, name_text = codes(ev["name"])
    gid, first = group_ids(name_codes[gpu_rows]) if len(gpu_rows) else (np.array([], np.int64), np.array([], np.int64))
    n_groups = len(first)
    by_name = frame({
        "gpu_name": name_text[name_codes[gpu_rows[first]]],
        "count": np.bincount(gid, minlength=n_groups),
        "delay_median_us": group_median(gid, delays, n_groups),
        "delay_max_us": group_min_max(gid, delays, n_groups)[1],
        "launch_median_us": group_median(gid, launch_dur, n_groups),
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


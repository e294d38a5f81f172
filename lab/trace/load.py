"""``load_trace``: a Chrome trace (torch.profiler / Kineto JSON) → ``Trace``.

The columns of ``Trace.events`` and ``Trace.flows`` are documented in ``lab/trace/model.py``.
How ``load_trace`` works, stage by stage (one module each):

1. ``decode.read_json_bytes``: bytes or a file → JSON text; gzip inflated with bomb guards.
2. ``decode.decode``: JSON → batches of event records (``records.Event``, one schema), bad
   events dropped and counted.
3. ``_build`` (here): each batch → column pieces (``columns``), so the Python objects of one
   batch at a time are alive; then lanes from process/thread metadata (``lanes``), one sort,
   nesting depth (vectorised).
4. ``flows.build_flows``: launch ↔ GPU pairs from ``ac2g`` flow events and correlation ids;
   ``memory.memory_frame``: profile_memory's "[memory]" records (collected by stage 3 in the
   same pass) on the events' clock.
"""

from __future__ import annotations

import contextlib
import gc

import numpy as np
import pandas as pd

from lab.core.settings import HostSettings
from lab.trace.columns import CATEGORY_PARTS, EventParts, FlowParts, MemoryParts, grouped_keys
from lab.trace.decode import Source, decode, read_json_bytes, too_deep
from lab.trace.flows import build_flows
from lab.trace.lanes import Lane, lanes_for, metadata_names, trace_meta
from lab.trace.memory import memory_frame
from lab.trace.model import COLLECTIVE_ARG_COLUMNS, EVENT_COLUMNS, Trace, TraceError, TraceMeta
from lab.trace.records import FLOAT_ARGS, INT_ARGS, Event
from lab.trace.values import MAX_SPAN_US, id_str, relative_us
from lab.vocab import GPU_ACTIVITY_CATS, GPU_LANE_CATS, LAUNCH_CATS

# GPU_ACTIVITY_CATS is re-exported for callers that import it from here (tests/test_trace.py).
__all__ = ["GPU_ACTIVITY_CATS", "Trace", "TraceError", "TraceMeta", "load_trace"]


def load_trace(source, *, max_decompressed_bytes: int | None = None, max_events: int | None = None,
               settings: HostSettings | None = None) -> Trace:
    """Parse ``source`` (bytes, or a path) into a ``Trace``; bad input raises ``TraceError``.

    Limits: an explicit ``max_decompressed_bytes`` / ``max_events`` wins; else ``settings``
    (the ``HostSettings`` the caller read once at start); else ``HostSettings()``'s defaults.
    The environment is never read here.
    """
    cap_bytes, cap_events = _limits(settings, max_decompressed_bytes, max_events)
    try:
        with _gc_paused():
            buf = read_json_bytes(source, cap_bytes)
            source_bytes = len(buf)
            src = decode(buf, cap_events)
            del buf  # the raw events still point into it until their batches are decoded
            return _build(src, source_bytes)
    except TraceError:
        raise
    except RecursionError:
        raise too_deep() from None
    except MemoryError:
        raise TraceError(
            "the trace does not fit in memory; profile fewer steps or upload a smaller trace."
        ) from None


def _limits(settings: HostSettings | None, max_bytes: int | None, max_events: int | None) -> tuple[int, int]:
    if max_bytes is None or max_events is None:
        if settings is None:
            settings = HostSettings()
        if max_bytes is None:
            max_bytes = int(settings.max_trace_decompressed_mb * 2**20)
        if max_events is None:
            max_events = int(settings.max_trace_events)
    return max_bytes, max_events


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector while a trace loads.

    Loading allocates millions of short-lived objects, which keeps triggering full collections
    that walk every live object again: at 1M events this took 11.3 s with the collector on and
    6.4 s with it off (bench/bench_ingest.py's machine). Nothing built here forms cycles, and
    reference counting still frees everything; the collector's previous state is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ---------------------------------------------------------------------------------------------
# Stage 3: records → events frame


def _build(src: Source, source_bytes: int) -> Trace:
    """Records → ``Trace``: column pieces merged, lanes assigned, one sort, depth, flows."""
    parts, metas, flow_parts, memory_parts, skipped = _collect(src)
    cols = {"ts": parts.column("ts"), "dur": parts.column("dur")}
    ints, floats = parts.column("ints"), parts.column("floats")
    cols.update({a: ints[:, i] for i, a in enumerate(INT_ARGS)})
    cols.update({a: floats[:, i] for i, a in enumerate(FLOAT_ARGS)})
    del ints, floats
    cats = {key: parts.categorical(key, as_text=id_str if key in ("pid", "tid") else None) for key in CATEGORY_PARTS}
    collectives = parts.collective_rows, parts.collective_values
    del parts

    names_meta = metadata_names(metas)
    lanes, lane_cols = _assign_lanes(cats, cols, names_meta)
    order, sorted_cols, start_ts, span_us = _sort(cols, lane_cols.pop("order"))
    _check_span(span_us, start_ts)
    cat_codes, cat_uniques = cats["cat"]
    flow_cols = {
        "is_launch": np.isin(cat_uniques, LAUNCH_CATS)[cat_codes][order],
        "is_gpu": np.isin(cat_uniques, GPU_ACTIVITY_CATS)[cat_codes][order],
        "lane_order": sorted_cols["lane_order"], "ts_us": sorted_cols["ts_us"],
        "correlation": sorted_cols["correlation"],
    }  # fmt: skip
    del cat_codes, cat_uniques
    collective_args = _collective_frame(order, collectives)
    events = _events_frame(order, cats, cols, lane_cols, sorted_cols, lanes)  # empties the four dicts
    del cats, cols, lane_cols, sorted_cols
    by_key = {(ln.pid, ln.tid): ln for ln in lanes}
    flow_frame, flow_skipped = build_flows(flow_cols, flow_parts.columns(), start_ts, by_key)
    meta = trace_meta(src.top, names_meta, start_ts, span_us)
    return Trace(events=events, flows=flow_frame, meta=meta, skipped_events=skipped + flow_skipped,
                 source_bytes=source_bytes, collective_args=collective_args,
                 memory=memory_frame(memory_parts.columns(), start_ts, by_key),
                 out_of_memory=memory_frame(memory_parts.columns(out_of_memory=True), start_ts, by_key))


def _sort(cols: dict, lane_order: np.ndarray) -> tuple[np.ndarray, dict, float, float]:
    """The one sort, by (lane, start, longer first). Takes ts / dur / correlation out of
    ``cols``; returns the order, the sorted lane_order / ts_us / dur_us / depth / correlation
    columns, the first event's absolute ts and the span."""
    start_ts = float(cols["ts"].min())
    ts_rel = relative_us(cols.pop("ts"), start_ts)
    dur = cols.pop("dur")
    order = np.lexsort((-dur, ts_rel, lane_order))
    span_us = float((ts_rel + dur).max())
    out = {"lane_order": lane_order[order], "ts_us": ts_rel[order], "dur_us": dur[order]}
    del ts_rel, dur
    out["depth"] = _nesting_depth(out["lane_order"], out["ts_us"], out["ts_us"] + out["dur_us"])
    out["correlation"] = cols.pop("correlation")[order]
    return order, out, start_ts, span_us


def _check_span(span_us: float, start_ts: float) -> None:
    """Refuse a trace whose events lie absurdly far apart: a damaged timestamp or duration (1e17,
    −1e18) would otherwise stretch every interval past int64 nanoseconds in the analyses."""
    if span_us > MAX_SPAN_US:
        raise TraceError(
            f"the trace's events span {span_us:.3g} µs ({span_us / 86_400e6:,.0f} days) from the first, at "
            f"ts={start_ts:.6g} µs, to the end of the last; a profile spans hours at most (limit "
            f"{MAX_SPAN_US:.0e} µs), so some timestamps or durations are damaged: re-export the trace.")


def _collect(src: Source) -> tuple[EventParts, list, FlowParts, MemoryParts, int]:
    """Every batch of records into column pieces; metadata events kept aside."""
    parts, flow_parts, memory_parts = EventParts(), FlowParts(), MemoryParts()
    metas: list[Event] = []
    skipped = 0
    for records, dropped in src.batches:
        skipped += dropped + parts.add(records, metas, flow_parts, memory_parts)
        del records
    if parts.n == 0:
        raise TraceError(
            "the trace has no usable complete ('ph': 'X') events"
            + (f" ({skipped} malformed events skipped)" if skipped else "")
            + "; export it with torch.profiler's export_chrome_trace after the profiled steps ran."
        )
    return parts, metas, flow_parts, memory_parts, skipped


def _assign_lanes(cats: dict, cols: dict, names_meta: dict) -> tuple[list[Lane], dict]:
    """Lanes, one per distinct (pid, tid), and per event (file order): the lane's ``order``,
    ``is_gpu``, and ``device`` / ``stream`` (GPU events: from their args, else from their
    lane; CPU events: -1)."""
    pid_codes, pid_uniques = cats["pid"]
    tid_codes, tid_uniques = cats["tid"]
    n_tid = len(tid_uniques)
    pair = pid_codes.astype(np.int64) * n_tid + tid_codes
    pair_uniques, pair_code = np.unique(pair, return_inverse=True)
    pair_code = pair_code.reshape(-1)
    del pair
    keys = [(pid_uniques[p // n_tid], tid_uniques[p % n_tid]) for p in pair_uniques.tolist()]
    cat_codes, cat_uniques = cats["cat"]
    gpu_cat = np.isin(cat_uniques, GPU_LANE_CATS)[cat_codes]
    gpu_hint = {}
    if gpu_cat.any():
        idx = np.nonzero(gpu_cat)[0]
        for i in idx[np.unique(pair_code[idx], return_index=True)[1]]:
            gpu_hint[keys[pair_code[i]]] = (int(cols["device"][i]), int(cols["stream"][i]))
    lanes = lanes_for(keys, gpu_hint, names_meta)
    by_key = {(ln.pid, ln.tid): ln for ln in lanes}
    lane_of_pair = [by_key[k] for k in keys]
    is_gpu = np.array([ln.kind == "gpu" for ln in lane_of_pair], dtype=bool)[pair_code]
    out = {"order": np.array([ln.order for ln in lane_of_pair], dtype=np.int32)[pair_code], "is_gpu": is_gpu}
    for attr in ("device", "stream"):
        lane_value = np.array([getattr(ln, attr) for ln in lane_of_pair], dtype=np.int64)[pair_code]
        value = cols.pop(attr)  # the last use of the args column: its memory goes now
        out[attr] = np.where(is_gpu, np.where(value >= 0, value, lane_value), -1)
    return lanes, out


def _collective_frame(order: np.ndarray, collectives: tuple[list[int], list[tuple[str, ...]]]) -> pd.DataFrame:
    """``Trace.collective_args``: the events that carry a "Collective name" (their rows in
    ``events``, i.e. after the sort ``order``) and their collective args as text."""
    stored, values = collectives
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    rows = position[np.asarray(stored, dtype=np.int64)] if stored else np.zeros(0, dtype=np.int64)
    out: dict = {"row": rows}
    for k, column in enumerate(COLLECTIVE_ARG_COLUMNS):
        out[column] = np.array([v[k] for v in values], dtype=object)
    return pd.DataFrame(out, columns=["row", *COLLECTIVE_ARG_COLUMNS]).sort_values("row", ignore_index=True)


def _events_frame(order: np.ndarray, cats: dict, cols: dict, lane_cols: dict, sorted_cols: dict,
                  lanes: list[Lane]) -> pd.DataFrame:
    """``Trace.events``: every column in ``order`` (the sort by lane, start, longer first).

    Each unsorted input is popped as its sorted column is made, and the frame keeps the arrays
    it is given (``copy=False``; a dict's default copies every column into consolidated blocks).
    On a 1 GB trace held as bytes (2.5M events) this stage was the load's peak: 2,416 MiB
    resident with both, 1,874 MiB without (bench/bench_large_trace_memory.py's sampler).
    """

    def category(key: str) -> pd.Categorical:
        codes, uniques = cats.pop(key)
        return pd.Categorical.from_codes(codes[order], categories=pd.Index(uniques, dtype=object))

    def taken(key: str) -> np.ndarray:
        return cols.pop(key)[order]

    lane_names = pd.Index([ln.name for ln in lanes], dtype=object)
    frame = {
        "name": category("name"),
        "cat": category("cat"),
        "pid": category("pid"),
        "tid": category("tid"),
        "lane": pd.Categorical.from_codes(sorted_cols["lane_order"], categories=lane_names, ordered=True),
        "lane_kind": pd.Categorical.from_codes(lane_cols.pop("is_gpu")[order].astype(np.int8),
                                               categories=pd.Index(["cpu", "gpu"], dtype=object)),
        **sorted_cols,  # lane_order, ts_us, dur_us, depth, correlation
        "external_id": taken("external_id"),
        "device": np.clip(lane_cols.pop("device")[order], -1, np.iinfo(np.int16).max).astype(np.int16),
        "stream": np.clip(lane_cols.pop("stream")[order], -1, np.iinfo(np.int32).max).astype(np.int32),
        "grid": category("grid"),
        "block": category("block"),
        "registers_per_thread": taken("registers"),
        "shared_memory_bytes": taken("shared_memory"),
        "blocks_per_sm": taken("blocks_per_sm"),
        "warps_per_sm": taken("warps_per_sm"),
        "occupancy_pct": taken("occupancy"),
        "input_dims": category("input_dims"),
        "input_type": category("input_type"),
        "input_strides": category("input_strides"),
        "concrete_inputs": category("concrete_inputs"),
        "copy_bytes": taken("copy_bytes"),
    }
    sorted_cols.clear()
    return pd.DataFrame(frame, columns=list(EVENT_COLUMNS), copy=False)


def _nesting_depth(lane_code: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each event within its lane; input sorted by (lane, start, longer first).

    depth = events of the lane that started before this one and are still open at its start.
    That equals (earlier starts in the lane) − (lane events that ended at or before this start),
    counted with searchsorted over (lane, time) keys instead of a Python stack.
    """
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.int16)
    s, e = grouped_keys((lane_code, start), (lane_code, np.maximum(end, start)))
    # rank in the lane − ends in the lane up to this start: both counts would subtract the
    # events of earlier lanes (every one of them starts and ends below this lane's keys), so
    # position − (all ends at or before this start) is the same number, one searchsorted less.
    # Temporaries go as soon as they are used: at 2.5M events each is 20 MB.
    depth = np.arange(n) - np.searchsorted(np.sort(e), s, side="right")
    # searchsorted also counted ends that are not earlier events: a zero-length event's own
    # end, and zero-length events sorted after this one at the same start (zero-length events
    # are last in their (lane, start) group, since ties put the longer first). Add them back.
    zero = e == s
    del e
    group_start = np.r_[True, (s[1:] != s[:-1])]
    del s
    group_id = np.cumsum(group_start) - 1
    group_end = np.r_[np.nonzero(group_start)[0][1:], n]  # exclusive end per group
    del group_start
    zeros_in_group = np.bincount(group_id, weights=zero, minlength=group_id[-1] + 1).astype(np.int64)
    depth += np.where(zero, group_end[group_id] - np.arange(n), zeros_in_group[group_id])
    return np.clip(depth, 0, np.iinfo(np.int16).max).astype(np.int16)

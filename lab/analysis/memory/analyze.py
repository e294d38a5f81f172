"""Memory over time from profile_memory's records (``Trace.memory``): per device the allocated
and reserved bytes, the peak and what ran at it, and per step the peak, the level at the step's
end and the allocations.

Each record carries the allocator's totals right after it ("Total Allocated", "Total
Reserved"), so the level at any time is the totals of the last record at or before it, and the
peak is the largest "Total Allocated" of the device (its first occurrence). Before a device's
first record the allocated level is that record's total minus its bytes.

``memory_series`` is the same curve with a bounded number of points whatever the trace size
(level of detail as the timeline's, ``lab/views/timeline_lod.py``): only the records where a
level changes are points; past the budget, each pixel column keeps its first, lowest, highest
and last point (the M4 reduction: the drawn line is the same at that width), so the peak is
always drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.columns import mask_in, texts
from lab.analysis.diagnoses.steps import StepSpans, step_spans
from lab.analysis.intervals import step_of
from lab.trace import Trace
from lab.vocab import PROFILER_STEP_PREFIX

__all__ = [
    "DEFAULT_MAX_POINTS", "MEMORY_STEP_COLUMNS", "SERIES_COLUMNS", "SMALL_ALLOCATION_BYTES", "DeviceMemory",
    "MemoryAnalysis", "MemoryPeak", "MemorySeries", "OutOfMemory", "device_names", "memory_analysis",
    "memory_series", "out_of_memory_events",
]  # fmt: skip

# Points sent to the browser for the whole chart: a line's vertices are far cheaper to draw than
# the timeline's bars (DEFAULT_MAX_MARKS = 5,000 rects); 4,000 keeps ~2 px per M4 column at
# 1,200 px for one device's two curves (BENCHMARKS.md "Memory").
DEFAULT_MAX_POINTS = 4_000
DEFAULT_WIDTH_PX = 1_200
# The CUDA caching allocator's small-block pool: requests ≤ 1 MiB are carved from 2 MiB
# segments (kSmallSize / kSmallBuffer, c10/cuda/CUDACachingAllocator.cpp); larger ones get their
# own (20 MiB or rounded) segments. "Small allocation" means the same here.
SMALL_ALLOCATION_BYTES = 1 << 20
_OWNER_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")

MEMORY_STEP_COLUMNS = ("device", "step", "start_us", "end_us", "peak_allocated_bytes", "end_allocated_bytes",
                       "allocations", "frees", "small_allocations", "allocated_bytes", "freed_bytes")
SERIES_COLUMNS = ("device", "kind", "ts_us", "bytes")


@dataclass(frozen=True)
class MemoryPeak:
    """The largest allocated level of one device and what was running then."""

    ts_us: float
    allocated_bytes: int
    reserved_bytes: int  # reserved at that moment
    op: str  # innermost op / runtime call on the allocating thread holding the peak's record, "" if none
    annotation: str  # innermost record_function label holding it (any CPU thread; not ProfilerStep), "" if none
    step: int  # index of the step holding it, -1 if none


@dataclass(frozen=True)
class DeviceMemory:
    device: str  # "cuda:0", "cpu"
    records: int
    allocations: int
    frees: int
    small_allocations: int
    start_allocated_bytes: int  # before the first record
    end_allocated_bytes: int  # after the last one
    max_reserved_bytes: int
    peak: MemoryPeak
    # Reserved bytes added by allocations made while the allocator's cache (reserved − allocated)
    # already held at least the requested size: freed blocks it could not reuse (fragmentation).
    fragmented_growth_bytes: int = 0


@dataclass(frozen=True)
class MemoryAnalysis:
    devices: tuple[DeviceMemory, ...]  # GPUs first (by id), then the CPU
    steps: pd.DataFrame  # MEMORY_STEP_COLUMNS, one row per (device, step); empty without steps
    step_source: str  # "ProfilerStep" | "annotation" | "" (step_spans)

    def device(self, name: str) -> DeviceMemory | None:
        return next((d for d in self.devices if d.device == name), None)

    @property
    def main(self) -> DeviceMemory:
        """The device the insights talk about first: the GPU with the highest peak, else the CPU."""
        gpus = [d for d in self.devices if d.device != "cpu"]
        return max(gpus or list(self.devices), key=lambda d: d.peak.allocated_bytes)


@dataclass(frozen=True)
class MemorySeries:
    """Allocated and reserved bytes over one window, ≤ ``max_points`` rows in all."""

    points: pd.DataFrame  # SERIES_COLUMNS; per (device, kind) in time order, a step function
    window: tuple[float, float]
    records: int  # records in the window, all devices
    reduced: bool  # True when the M4 reduction ran (more change points than the budget)


@dataclass(frozen=True)
class OutOfMemory:
    """One allocation the allocator refused ("[OutOfMemory]") and what was running then."""

    device: str
    ts_us: float
    requested_bytes: int
    allocated_bytes: int  # on that device at that moment
    reserved_bytes: int
    op: str  # as MemoryPeak's
    annotation: str
    step: int


def out_of_memory_events(trace: Trace, *, spans: StepSpans | None = None) -> tuple[OutOfMemory, ...]:
    """Each "[OutOfMemory]" record of the trace, in time order, with the op and label running.
    ``spans``: the trace's ``step_spans`` when already found (``Analysis.findings.steps``)."""
    oom = trace.out_of_memory
    if not len(oom):
        return ()
    names = device_names(oom)
    spans = spans if spans is not None else step_spans(trace)
    out = []
    for i, row in enumerate(oom.itertuples(index=False)):
        op, annotation = _running_at(trace, row.ts_us, int(row.lane_order))
        out.append(OutOfMemory(device=str(names[i]), ts_us=float(row.ts_us), requested_bytes=int(row.bytes),
                               allocated_bytes=int(row.total_allocated_bytes),
                               reserved_bytes=int(row.total_reserved_bytes), op=op, annotation=annotation,
                               step=_step_of(spans, float(row.ts_us))))
    return tuple(out)


def device_names(memory: pd.DataFrame) -> np.ndarray:
    """"cuda:0" / "cpu" for each record (the CPU's records carry Device Id -1)."""
    kind = memory["device_type"].array
    kinds = [str(k) for k in kind.categories]
    pair = np.asarray(kind.codes).astype(np.int64) * 65_536 + memory["device_id"].to_numpy().astype(np.int64) + 32_768
    uniq, inverse = np.unique(pair, return_inverse=True)
    names = [kinds[p // 65_536] if kinds[p // 65_536] == "cpu" else f"{kinds[p // 65_536]}:{p % 65_536 - 32_768}"
             for p in uniq.tolist()]
    return np.asarray(names, dtype=object)[inverse.reshape(-1)]


def _device_order(names: np.ndarray) -> list[str]:
    uniq = list(dict.fromkeys(names.tolist()))
    return sorted(uniq, key=lambda d: (d == "cpu", d.split(":")[0], int(d.split(":")[1]) if ":" in d else 0))


def memory_analysis(trace: Trace, *, spans: StepSpans | None = None) -> MemoryAnalysis | None:
    """Peaks, levels and per-step figures of every device; None when the trace has no records.
    ``spans``: the trace's ``step_spans`` when already found (``analyze`` passes its findings')."""
    m = trace.memory
    if not len(m):
        return None
    names = device_names(m)
    spans = spans if spans is not None else step_spans(trace)
    devices, steps = [], []
    for name in _device_order(names):
        rows = np.flatnonzero(names == name)
        devices.append(_device(trace, name, rows, spans))
        if len(spans):
            steps.append(_steps(trace, name, rows, spans))
    frame = pd.concat(steps, ignore_index=True) if steps else pd.DataFrame(
        {c: pd.Series(dtype=object if c == "device" else np.int64) for c in MEMORY_STEP_COLUMNS})
    return MemoryAnalysis(tuple(devices), frame, spans.source)


def _device(trace: Trace, name: str, rows: np.ndarray, spans) -> DeviceMemory:
    m = trace.memory
    nbytes = m["bytes"].to_numpy()[rows]
    allocated = m["total_allocated_bytes"].to_numpy()[rows]
    reserved = m["total_reserved_bytes"].to_numpy()[rows]
    at = int(np.argmax(allocated))  # the first record reaching the maximum
    ts = float(m["ts_us"].to_numpy()[rows[at]])
    op, annotation = _running_at(trace, ts, int(m["lane_order"].to_numpy()[rows[at]]))
    step = _step_of(spans, ts)
    peak = MemoryPeak(ts, int(allocated[at]), int(reserved[at]), op, annotation, step)
    allocs = nbytes > 0
    return DeviceMemory(
        device=name, records=len(rows), allocations=int(allocs.sum()), frees=int((nbytes < 0).sum()),
        small_allocations=int((allocs & (nbytes <= SMALL_ALLOCATION_BYTES)).sum()),
        start_allocated_bytes=int(allocated[0] - nbytes[0]), end_allocated_bytes=int(allocated[-1]),
        max_reserved_bytes=int(reserved.max()), peak=peak,
        fragmented_growth_bytes=_fragmented_growth(nbytes, allocated, reserved),
    )


def _fragmented_growth(nbytes: np.ndarray, allocated: np.ndarray, reserved: np.ndarray) -> int:
    """Σ reserved growth at allocations whose size the cache held free just before (the
    allocator reserved new segments although that many bytes were cached and unused)."""
    if len(nbytes) < 2:
        return 0
    cached = (reserved[:-1] - allocated[:-1]).astype(np.int64)
    grew = (reserved[1:] - reserved[:-1]).astype(np.int64)
    hit = (nbytes[1:] > 0) & (grew > 0) & (cached >= nbytes[1:])
    return int(grew[hit].sum())


def _step_of(spans, ts: float) -> int:
    """Index of the step whose iteration [start, next start) holds ``ts`` (the last step: up to
    its end, inclusive), -1 if none."""
    return int(step_of(spans.start_us, spans.period_end_us, ts, last_closed=True)[0])


def _running_at(trace: Trace, ts: float, lane_order: int) -> tuple[str, str]:
    """(innermost op on the record's thread holding ``ts``, innermost label on any CPU thread)."""
    ev = trace.events
    start = ev["ts_us"].to_numpy()
    inside = (start <= ts) & (start + ev["dur_us"].to_numpy() >= ts)
    depth = ev["depth"].to_numpy()
    op_rows = np.flatnonzero(inside & (ev["lane_order"].to_numpy() == lane_order) & mask_in(ev["cat"], _OWNER_CATS))
    op = str(texts(ev["name"], op_rows[[np.argmax(depth[op_rows])]])[0]) if len(op_rows) else ""
    labels = np.flatnonzero(inside & mask_in(ev["cat"], ("user_annotation",)))
    names = texts(ev["name"], labels)
    keep = np.array([not str(n).startswith(PROFILER_STEP_PREFIX) for n in names], dtype=bool)
    labels, names = labels[keep], names[keep]
    if not len(labels):
        return op, ""
    mine = ev["lane_order"].to_numpy()[labels] == lane_order
    pick = labels[mine] if mine.any() else labels  # the allocating thread's own label first
    return op, str(texts(ev["name"], pick[[np.argmax(depth[pick])]])[0])


def _steps(trace: Trace, name: str, rows: np.ndarray, spans) -> pd.DataFrame:
    """Per step (its iteration: start → next step's start): peak, level at its end, counts."""
    m = trace.memory
    ts = m["ts_us"].to_numpy()[rows]
    nbytes = m["bytes"].to_numpy()[rows]
    allocated = m["total_allocated_bytes"].to_numpy()[rows]
    start, end = spans.start_us, spans.period_end_us
    lo = np.searchsorted(ts, start, side="left")
    hi = np.searchsorted(ts, end, side="left")  # [start, end): the next step's records are its own
    before = np.concatenate([[allocated[0] - nbytes[0]], allocated])  # level before record i is before[i]
    level_at_start = before[lo]
    out = {c: np.zeros(len(start), dtype=np.int64) for c in MEMORY_STEP_COLUMNS[4:]}
    for k, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
        seg = nbytes[a:b]
        out["peak_allocated_bytes"][k] = max(int(level_at_start[k]), int(allocated[a:b].max()) if b > a else 0)
        out["allocations"][k] = int((seg > 0).sum())
        out["frees"][k] = int((seg < 0).sum())
        out["small_allocations"][k] = int(((seg > 0) & (seg <= SMALL_ALLOCATION_BYTES)).sum())
        out["allocated_bytes"][k] = int(seg[seg > 0].sum())
        out["freed_bytes"][k] = int(-seg[seg < 0].sum())
    out["end_allocated_bytes"] = before[hi].astype(np.int64)
    return pd.DataFrame({"device": name, "step": np.arange(len(start)), "start_us": start, "end_us": end, **out},
                        columns=list(MEMORY_STEP_COLUMNS))


# --------------------------------------------------------------------------- series


def memory_series(trace: Trace, *, start_us: float | None = None, end_us: float | None = None,
                  max_points: int = DEFAULT_MAX_POINTS, width_px: int = DEFAULT_WIDTH_PX) -> MemorySeries:
    """Allocated and reserved bytes per device in the window (default: the whole trace), as
    step-function points: at most ``max_points`` rows, the peak of each curve always among them."""
    m = trace.memory
    span = max(trace.meta.span_us, float(m["ts_us"].max()) if len(m) else 0.0, 1.0)
    w0 = 0.0 if start_us is None else float(start_us)
    w1 = span if end_us is None else float(end_us)
    if not (np.isfinite(w0) and np.isfinite(w1)) or w1 <= w0:
        raise ValueError(f"window ({start_us}, {end_us}) must be finite µs with end > start")
    if max_points < 8 or width_px < 1:
        raise ValueError(f"max_points={max_points} (at least 8) and width_px={width_px} (at least 1)")
    if not len(m):
        return MemorySeries(pd.DataFrame(columns=list(SERIES_COLUMNS)), (w0, w1), 0, False)
    names = device_names(m)
    curves = []
    for name in _device_order(names):
        rows = np.flatnonzero(names == name)
        for kind, column in (("allocated", "total_allocated_bytes"), ("reserved", "total_reserved_bytes")):
            curves.append((name, kind, _window_curve(m, rows, column, w0, w1)))
    curves = [c for c in curves if len(c[2][0]) and not (c[1] == "reserved" and not c[2][1].any())]
    per_curve = _point_budgets([len(t) for _, _, (t, _) in curves], max_points)
    reduced = any(len(t) > b for (_, _, (t, _)), b in zip(curves, per_curve, strict=True))
    parts = []
    for (name, kind, (t, v)), budget in zip(curves, per_curve, strict=True):
        if len(t) > budget >= 4:
            t, v = _m4(t, v, w0, w1, min(budget // 4, width_px))
        elif len(t) > budget:  # a tiny budget: the highest point first, then the last one
            keep = np.unique(np.array([int(np.argmax(v)), len(v) - 1])[:budget])
            t, v = t[keep], v[keep]
        parts.append(pd.DataFrame({"device": name, "kind": kind, "ts_us": t, "bytes": v}))
    ts_all = m["ts_us"].to_numpy()
    points = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(SERIES_COLUMNS))
    return MemorySeries(points, (w0, w1), int(((ts_all >= w0) & (ts_all <= w1)).sum()), reduced)


def _point_budgets(sizes: list[int], max_points: int) -> list[int]:
    """Points each curve may keep: curves that fit keep all theirs; the rest share what is left."""
    budget = [0] * len(sizes)
    left, todo = max_points, sorted(range(len(sizes)), key=lambda i: sizes[i])
    for n, i in enumerate(todo):
        share = left // (len(todo) - n)
        budget[i] = min(sizes[i], share)
        left -= budget[i]
    return budget


def _window_curve(m: pd.DataFrame, rows: np.ndarray, column: str, w0: float, w1: float):
    """One device's level over [w0, w1]: its change points, the level carried in at w0 and out at w1."""
    ts = m["ts_us"].to_numpy()[rows]
    value = m[column].to_numpy()[rows]
    if column == "total_allocated_bytes":  # the level before the first record is known
        ts = np.r_[min(0.0, ts[0]), ts]
        value = np.r_[value[0] - m["bytes"].to_numpy()[rows[0]], value]
    keep = np.r_[True, value[1:] != value[:-1]]  # a step function needs its change points only
    ts, value = ts[keep], value[keep]
    a = int(np.searchsorted(ts, w0, side="right"))  # points ≤ w0: the last one is the level at w0
    b = int(np.searchsorted(ts, w1, side="right"))
    t, v = ts[a:b], value[a:b]
    if a > 0:
        t, v = np.r_[w0, t], np.r_[value[a - 1], v]
    if len(t):
        t, v = np.r_[t, w1], np.r_[v, v[-1]]
    return t.astype(np.float64), v.astype(np.int64)


def _m4(t: np.ndarray, v: np.ndarray, w0: float, w1: float, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """First, lowest, highest and last point of each of ``bins`` equal time columns."""
    col = np.clip(((t - w0) / (w1 - w0) * bins).astype(np.int64), 0, bins - 1)
    starts = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])
    ends = np.r_[starts[1:], len(t)] - 1
    lowest = np.minimum.reduceat(v, starts)
    highest = np.maximum.reduceat(v, starts)
    pick = [starts, ends]
    for target in (lowest, highest):
        hit = v == np.repeat(target, ends - starts + 1)
        first_hit = np.minimum.reduceat(np.where(hit, np.arange(len(v)), len(v)), starts)
        pick.append(first_hit)
    idx = np.unique(np.concatenate(pick))
    return t[idx], v[idx]

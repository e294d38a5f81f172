"""Every microsecond of each step's wall time, attributed to exactly one cause.

The steps are ``StepSpans``' (``ProfilerStep#N``, else the annotation that marks iterations).
A step's window runs from the previous step's completion to its own (``step_windows``): the
one definition of "in a step" and of the step time. A trace without steps is one window, from
its first event to its last.

The window is cut at every boundary of the events that matter into elementary segments, and
each segment gets one label:

1. **GPU busy** (any kernel, memcpy or memset on any device): the class of the work running
   (``classes.WORK_CLASSES``; where two streams overlap, the first class in that list wins).
2. **GPU idle**: what the host thread that runs the steps was doing (``classes.HOST_CAUSES``,
   first match wins): the profiler's own work, a synchronisation call, compilation, the input
   pipeline, the optimizer step, a device allocation (cudaMalloc / cudaFree), a launch call, the
   host side of an op (dispatch), Python between ops (inside a step or annotation but in no op,
   shorter than ``LONG_HOST_GAP_US``), and nothing recorded. Where the step's thread is in no op
   but another thread works (autograd's backward thread), that thread's work is the cause.
3. **A queue drained by a synchronisation**: an idle stretch that began while the host was
   blocked in a synchronize, spent in launch calls, dispatch or Python, is the sync's: had the
   host not waited, that host work would have run while the GPU worked through its queue.
4. **No GPU activity at all** (a CPU trace): the host's op time is the work itself, counted by
   the innermost op's class; unclassified ops are "other ops".

So the causes are disjoint and sum to each window's wall time by construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from lab.analysis.columns import mask_in, mask_where, texts
from lab.analysis.diagnoses.steps import StepSpans, step_spans
from lab.analysis.gemm.kinds import is_gemm_kernel, is_gemm_op
from lab.analysis.operators import Links, build_links
from lab.analysis.steps import step_windows
from lab.explain.classes import (
    CAUSES,
    COLLECTIVE_RANGE_PATTERN,
    COMPILE_PATTERN,
    INPUT_PIPELINE_PATTERN,
    OPTIMIZER_PATTERN,
    kernel_class,
    op_class,
)
from lab.trace import Trace
from lab.vocab import ALLOCATOR_CALLS, GPU_ACTIVITY_CATS, LAUNCH_CATS, SYNC_NAMES

__all__ = ["CAUSE_COLUMNS", "LONG_HOST_GAP_US", "SYNC_DRAIN_TOLERANCE_US", "Attribution", "attribute", "work_classes"]

CAUSE_COLUMNS = tuple(f"{c.key}_us" for c in CAUSES)
_INDEX = {c.key: i for i, c in enumerate(CAUSES)}
# A synchronize returns just after the GPU's last kernel ends; its end may be stamped a little
# before that kernel's end (host and device clocks are aligned by Kineto, not identical).
SYNC_DRAIN_TOLERANCE_US = 2.0
# Host time in no op, in one piece, from which on it is not "Python between ops": CPython's work
# between two eager ops (argument parsing, a module's __call__ and hooks) is 5–100 µs: the p99 of
# the gaps is under 0.15 ms on every H200 recording in tests/data/explain, the longest one without
# planted host work 0.79 ms (a DataLoader's next batch with workers), while a time.sleep, a log
# write or a NumPy call runs for milliseconds (tests/data/heldout: a 6 ms sleep per step).
LONG_HOST_GAP_US = 1000.0


@dataclass(frozen=True)
class Attribution:
    """One row per step (or one row for the whole window): its wall time and, per cause,
    ``<cause>_us``; the causes of a row sum to its ``wall_us``.

    ``source``: "ProfilerStep", "annotation" (a repeated ``record_function`` marks the steps)
    or "window" (no steps: the whole trace). ``host_lane``: the thread whose activity explains
    the GPU's idle time. ``unknown``: what this trace cannot tell (said, not guessed).
    ``sync_sources``: µs attributed to synchronisation, by the op that called the sync.
    ``dispatch_sources``: op dispatch by the innermost op: the median µs and calls per step.
    """

    steps: pd.DataFrame
    source: str
    host_lane: int
    has_gpu: bool
    unknown: tuple[str, ...] = ()
    sync_sources: tuple[tuple[str, float], ...] = ()
    # Dispatch time (the host side of ops, GPU idle) by the innermost op: (name, median µs per step,
    # median calls per step), largest first.
    dispatch_sources: tuple[tuple[str, float, float], ...] = ()

    @property
    def step_us(self) -> float:
        """The one step time: the median wall time of the steps (the window's, without steps)."""
        return float(self.steps["wall_us"].median()) if len(self.steps) else 0.0

    @cached_property
    def _median(self) -> pd.Series:
        if not len(self.steps):
            return pd.Series(0.0, index=[c.key for c in CAUSES])
        med = self.steps[list(CAUSE_COLUMNS)].median()
        med.index = [c.key for c in CAUSES]
        return med

    def median_us(self) -> pd.Series:
        """Per cause, the median over the steps (µs), indexed by cause key (a copy: computed once)."""
        return self._median.copy()

    def total_us(self) -> pd.Series:
        """Per cause, the sum over the steps (µs), indexed by cause key."""
        tot = self.steps[list(CAUSE_COLUMNS)].sum() if len(self.steps) else pd.Series(0.0, index=CAUSE_COLUMNS)
        tot.index = [c.key for c in CAUSES]
        return tot


def work_classes(trace: Trace, links: Links) -> np.ndarray:
    """Per event row, the work class index into ``CAUSES`` of its GPU activity (-1 elsewhere)."""
    ev = trace.events
    out = np.full(len(ev), -1, dtype=np.int64)
    gpu = np.flatnonzero(mask_in(ev["cat"], GPU_ACTIVITY_CATS))
    if not len(gpu):
        return out
    names, cats = texts(ev["name"], gpu), texts(ev["cat"], gpu)
    owner = links.owner[gpu]
    owner_names = np.where(owner >= 0, texts(ev["name"], np.maximum(owner, 0)), "")
    cache: dict[tuple[str, str, str], int] = {}
    for i, key in enumerate(zip(names, cats, owner_names)):
        hit = cache.get(key)
        if hit is None:
            name, cat, owner_name = key
            owned = op_class(owner_name, is_gemm=is_gemm_op(owner_name)) if owner_name else "other_work"
            hit = cache[key] = _INDEX[kernel_class(name, cat=cat, is_gemm=is_gemm_kernel(name), owner_class=owned)]
        out[gpu[i]] = hit
    return out


def attribute(trace: Trace, *, links: Links | None = None, spans: StepSpans | None = None,
              classes: np.ndarray | None = None) -> Attribution:
    """Attribute each step's wall time (the whole window's without steps) to causes. ``classes``:
    ``work_classes(trace, links)`` when the caller has it."""
    ev = trace.events
    links = links if links is not None else build_links(trace)
    spans = spans if spans is not None else step_spans(trace)
    ts, dur = ev["ts_us"].to_numpy(), ev["dur_us"].to_numpy()
    end = ts + dur
    host_lane = spans.lane_order if len(spans) else _busiest_cpu_lane(trace)
    gpu_rows = np.flatnonzero(mask_in(ev["cat"], GPU_ACTIVITY_CATS))
    if len(spans):
        win_start, win_end = step_windows(trace, spans, links)
        names = (list(texts(ev["name"], spans.rows)) if spans.source == "ProfilerStep"
                 else [f"{spans.name} #{i + 1}" for i in range(len(spans))])
        source = spans.source
    else:
        lo = float(ts.min()) if len(ts) else 0.0
        hi = float(end.max()) if len(ts) else 0.0
        win_start, win_end, names, source = np.array([lo]), np.array([hi]), ["whole trace"], "window"
    on_host = np.flatnonzero(ev["lane_order"].to_numpy() == host_lane) if host_lane >= 0 else np.array([], int)
    other_cpu = (np.flatnonzero(mask_in(ev["lane_kind"], ("cpu",)) & (ev["lane_order"].to_numpy() != host_lane)
                                & (dur > 0)) if len(gpu_rows) else np.array([], int))
    syncs = on_host[mask_in(ev["name"], SYNC_NAMES)[on_host]] if len(on_host) else on_host
    bounds = np.unique(np.concatenate([win_start, win_end, ts[gpu_rows], end[gpu_rows], ts[on_host], end[on_host],
                                       end[syncs] + dur[syncs], ts[other_cpu], end[other_cpu]]))
    bounds = bounds[(bounds >= win_start.min()) & (bounds <= win_end.max())]
    if len(bounds) < 2:
        bounds = np.array([float(win_start.min()), float(win_end.max())])
    seg_lo, seg_hi = bounds[:-1], bounds[1:]
    label = np.full(len(seg_lo), _INDEX["unrecorded"], dtype=np.int64)
    classes = classes if classes is not None else work_classes(trace, links)
    busy = np.zeros(len(seg_lo), dtype=bool)
    for idx in sorted(set(classes[gpu_rows].tolist()), reverse=True):  # the first class in WORK_CLASSES wins
        rows = gpu_rows[classes[gpu_rows] == idx]
        hit = _covered(bounds, ts[rows], end[rows])
        label[hit] = idx
        busy |= hit
    host = _host_labels(trace, on_host, bounds, ts, end, has_gpu=bool(len(gpu_rows)))
    label[~busy] = host[~busy]
    _waiting_for_collectives(trace, host_lane, bounds, ts, end, busy, label)
    if len(gpu_rows):
        _work_on_other_threads(trace, other_cpu, bounds, ts, end, busy, label)
    _long_host_gaps(trace, on_host, spans.rows if len(spans) else np.array([], int), bounds, ts, end, label)
    sources: dict[str, float] = {}
    if len(gpu_rows):
        _drained_by_sync(trace, syncs, seg_lo, seg_hi, busy, label, ts, end, links, sources)
    return Attribution(
        steps=_per_window(seg_lo, seg_hi, label, win_start, win_end, names),
        source=source, host_lane=int(host_lane), has_gpu=bool(len(gpu_rows)),
        unknown=_unknowns(trace, gpu_rows, host_lane, has_steps=bool(len(spans))),
        sync_sources=tuple(sorted(sources.items(), key=lambda kv: -kv[1])),
        dispatch_sources=_dispatch_sources(trace, on_host, bounds, label, ts, end, win_start, win_end),
    )


def _covered(bounds: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which segments (between consecutive ``bounds``) lie inside the union of [starts, ends).
    Every start and end is one of the bounds (or outside them), so each interval covers a run of
    whole segments: counted with one cumulative sum, not a search per segment."""
    n = len(bounds)
    if not len(starts):
        return np.zeros(n - 1, dtype=bool)
    lo = np.searchsorted(bounds, starts, side="left")
    hi = np.searchsorted(bounds, ends, side="left")
    depth = np.cumsum(np.bincount(lo, minlength=n + 1)[:n] - np.bincount(hi, minlength=n + 1)[:n])
    return depth[:-1] > 0


def _innermost(mid: np.ndarray, rows: np.ndarray, ts: np.ndarray, end: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """For each segment midpoint, the innermost of ``rows`` (events of one lane) around it, -1 if none.
    Events of one depth on one lane do not overlap, so each depth is one sorted search."""
    out = np.full(len(mid), -1, dtype=np.int64)
    for d in np.unique(depth[rows]):  # outermost first: deeper events overwrite
        at = rows[depth[rows] == d]
        at = at[np.argsort(ts[at], kind="stable")]
        k = np.searchsorted(ts[at], mid, side="right") - 1
        inside = (k >= 0) & (mid < end[at][np.maximum(k, 0)])
        out[inside] = at[k[inside]]
    return out


def _host_labels(trace: Trace, on_host: np.ndarray, bounds: np.ndarray, ts: np.ndarray, end: np.ndarray, *,
                 has_gpu: bool) -> np.ndarray:
    """Each segment's host cause from the host thread's events (``HOST_CAUSES``, first wins)."""
    ev = trace.events
    label = np.full(len(bounds) - 1, _INDEX["unrecorded"], dtype=np.int64)
    if not len(on_host):
        return label
    cat = ev["cat"]
    name = ev["name"]
    kinds = (  # lowest priority first: later ones overwrite
        ("python", mask_in(cat, ("user_annotation", "python_function"))),
        ("dispatch", mask_in(cat, ("cpu_op",))),
        ("launch", mask_in(cat, LAUNCH_CATS)),
        ("allocator", mask_in(name, ALLOCATOR_CALLS)),
        ("optimizer", mask_where(name, lambda n: bool(OPTIMIZER_PATTERN.search(n)))),
        ("input", mask_where(name, lambda n: bool(INPUT_PIPELINE_PATTERN.search(n)))),
        ("compile", mask_where(name, lambda n: bool(COMPILE_PATTERN.search(n)))),
        ("sync", mask_in(name, SYNC_NAMES)),
        ("profiler", mask_in(cat, ("overhead",))),
    )
    host_mask = np.zeros(len(ev), dtype=bool)
    host_mask[on_host] = True
    for key, mask in kinds:
        rows = np.flatnonzero(mask & host_mask)
        label[_covered(bounds, ts[rows], end[rows])] = _INDEX[key]
    if not has_gpu:  # a CPU trace: an op's own time is its work, by the innermost op's class
        ops = np.flatnonzero(mask_in(cat, ("cpu_op",)) & host_mask)
        inner = _innermost((bounds[:-1] + bounds[1:]) / 2, ops, ts, end, ev["depth"].to_numpy())
        at = np.flatnonzero((label == _INDEX["dispatch"]) & (inner >= 0))
        op_names = texts(name, inner[at])
        cls = {n: _INDEX[op_class(n, is_gemm=is_gemm_op(n))] for n in set(op_names.tolist())}
        label[at] = np.array([cls[n] for n in op_names], dtype=np.int64) if len(at) else label[at]
    return label


def _waiting_for_collectives(trace: Trace, host_lane: int, bounds: np.ndarray, ts: np.ndarray, end: np.ndarray,
                             busy: np.ndarray, label: np.ndarray) -> None:
    """Time the step's thread spends in no op (Python, nothing recorded) while a collective runs on
    another thread (gloo's all_reduce on its own thread, the DDP reducer waiting for it) is
    communication: the rank waits for its peers there."""
    ev = trace.events
    other = (ev["lane_order"].to_numpy() != host_lane) & mask_in(ev["lane_kind"], ("cpu",))
    rows = np.flatnonzero(other & mask_where(ev["name"], lambda n: bool(COLLECTIVE_RANGE_PATTERN.search(n))))
    if not len(rows):
        return
    waiting = _covered(bounds, ts[rows], end[rows]) & ~busy
    waiting &= np.isin(label, [_INDEX["python"], _INDEX["unrecorded"]])
    label[waiting] = _INDEX["communication"]


def _work_on_other_threads(trace: Trace, other: np.ndarray, bounds: np.ndarray, ts: np.ndarray, end: np.ndarray,
                           busy: np.ndarray, label: np.ndarray) -> None:
    """GPU idle while the step's thread is in no op (blocked in ``loss.backward()``, joining a
    thread) but another thread of the program works: that thread's work is what the GPU waits for.
    autograd runs a CUDA backward's ops on its own device thread, so without this a training
    step's backward would read as "Python between ops" on the step's thread."""
    if not len(other):
        return
    theirs = _host_labels(trace, other, bounds, ts, end, has_gpu=True)
    gap = np.isin(label, [_INDEX["python"], _INDEX["unrecorded"]])
    take = ~busy & gap & ~np.isin(theirs, [_INDEX["python"], _INDEX["unrecorded"]])
    label[take] = theirs[take]


def _long_host_gaps(trace: Trace, on_host: np.ndarray, step_rows: np.ndarray, bounds: np.ndarray, ts: np.ndarray,
                    end: np.ndarray, label: np.ndarray) -> None:
    """A stretch of "Python between ops" of at least ``LONG_HOST_GAP_US`` in one piece, inside the
    step and nothing else, is host time no recorded event explains (a sleep, I/O, logging, NumPy):
    CPython's own work between two eager ops is tens of µs, so a graph or fusion would not recover
    such a stretch. Python frames recorded by with_stack, and a range the program labelled itself
    (``record_function("load_batch")`` around a read), say what ran there: those stay Python."""
    gap = label == _INDEX["python"]
    if not gap.any() or not len(on_host):
        return
    cat = trace.events["cat"]
    named = on_host[mask_in(cat, ("python_function", "user_annotation"))[on_host]]
    named = named[~np.isin(named, step_rows)]
    if len(named):
        gap &= ~_covered(bounds, ts[named], end[named])
    starts = gap & ~np.concatenate(([False], gap[:-1]))
    run = np.cumsum(starts) - 1
    seg = np.diff(bounds)
    length = np.bincount(run[gap], weights=seg[gap])
    long_run = np.zeros(len(gap), dtype=bool)
    long_run[gap] = length[run[gap]] >= LONG_HOST_GAP_US
    label[long_run] = _INDEX["unrecorded"]


def _drained_by_sync(trace: Trace, syncs: np.ndarray, seg_lo: np.ndarray, seg_hi: np.ndarray,
                     busy: np.ndarray, label: np.ndarray, ts: np.ndarray, end: np.ndarray, links: Links,
                     sources: dict[str, float]) -> None:
    """Relabel as "sync" the launch / dispatch / Python time of an idle stretch that began while
    the host was blocked in a synchronize, for as long as the sync waited: without the wait, that
    host work would have run that much earlier, while the GPU worked through its queue (the
    what-if: remove the sync, and the host's timeline moves earlier by the wait, no more). Then
    total the sync time by the op that called the sync."""
    ev = trace.events
    if not len(syncs):
        return
    syncs = syncs[np.argsort(end[syncs], kind="stable")]
    sync_end, sync_wait = end[syncs], end[syncs] - ts[syncs]
    idle = ~busy
    new_gap = idle & np.concatenate(([True], busy[:-1]))
    gap_id = np.cumsum(new_gap) - 1
    gap_start = seg_lo[new_gap][np.maximum(gap_id, 0)]
    k = np.searchsorted(sync_end, seg_lo, side="right") - 1
    last_end = np.where(k >= 0, sync_end[np.maximum(k, 0)], -np.inf)
    last_wait = np.where(k >= 0, sync_wait[np.maximum(k, 0)], 0.0)
    movable = np.isin(label, [_INDEX["launch"], _INDEX["dispatch"], _INDEX["python"], _INDEX["unrecorded"]])
    drained = (idle & movable & (last_end >= gap_start - SYNC_DRAIN_TOLERANCE_US)
               & (seg_hi <= last_end + last_wait + 1e-9))
    label[drained] = _INDEX["sync"]
    # By source: the op that called the latest sync begun at or before each sync segment
    # (syncs on one thread do not overlap, so ordered by end they are ordered by start).
    is_sync = np.flatnonzero(label == _INDEX["sync"])
    if not len(is_sync):
        return
    k = np.clip(np.searchsorted(ts[syncs], seg_lo[is_sync], side="right") - 1, 0, len(syncs) - 1)
    caller = links.parent[syncs[k]]
    who = np.where(caller >= 0, texts(ev["name"], np.maximum(caller, 0)), texts(ev["name"], syncs[k]))
    per = pd.Series(seg_hi[is_sync] - seg_lo[is_sync]).groupby(who).sum()
    for w, us in per.items():
        sources[str(w)] = sources.get(str(w), 0.0) + float(us)


def _dispatch_sources(trace: Trace, on_host: np.ndarray, bounds: np.ndarray, label: np.ndarray, ts: np.ndarray,
                      end: np.ndarray, win_start: np.ndarray, win_end: np.ndarray
                      ) -> tuple[tuple[str, float, float], ...]:
    """Dispatch time by the innermost op around it: per op, the median over the windows of its µs
    and of its calls (a cold first step, cuBLAS's first call, does not make an op slow)."""
    ev = trace.events
    at = np.flatnonzero(label == _INDEX["dispatch"])
    if not len(at) or not len(on_host):
        return ()
    ops = on_host[mask_in(ev["cat"], ("cpu_op",))[on_host]]
    inner = _innermost((bounds[at] + bounds[at + 1]) / 2, ops, ts, end, ev["depth"].to_numpy())
    ok = inner >= 0
    n_win = len(win_start)

    def window_of(t: np.ndarray) -> np.ndarray:
        w = np.searchsorted(win_start, t, side="right") - 1
        return np.where((w >= 0) & (t < win_end[np.maximum(w, 0)]), w, -1)

    seg = pd.DataFrame({"name": texts(ev["name"], inner[ok]), "w": window_of(bounds[at][ok]),
                        "us": bounds[at + 1][ok] - bounds[at][ok]})
    seg = seg[seg["w"] >= 0]
    calls = pd.DataFrame({"name": texts(ev["name"], ops), "w": window_of(ts[ops])})
    calls = calls[calls["w"] >= 0]
    us = seg.groupby(["name", "w"])["us"].sum().unstack(fill_value=0.0).reindex(columns=range(n_win), fill_value=0.0)
    n = calls.groupby(["name", "w"]).size().unstack(fill_value=0).reindex(columns=range(n_win), fill_value=0)
    med_us = us.median(axis=1).sort_values(ascending=False).head(10)
    med_calls = n.median(axis=1)
    return tuple((str(name), float(v), float(med_calls.get(name, 0.0))) for name, v in med_us.items() if v > 0)


def _per_window(seg_lo: np.ndarray, seg_hi: np.ndarray, label: np.ndarray, win_start: np.ndarray,
                win_end: np.ndarray, names: list[str]) -> pd.DataFrame:
    w = np.searchsorted(win_start, seg_lo, side="right") - 1
    inside = (w >= 0) & (seg_lo < win_end[np.maximum(w, 0)])
    n_win, n_cause = len(win_start), len(CAUSES)
    sums = np.bincount(w[inside] * n_cause + label[inside], weights=(seg_hi - seg_lo)[inside],
                       minlength=n_win * n_cause).reshape(n_win, n_cause)
    out = {"step": np.arange(n_win), "name": names, "start_us": win_start, "end_us": win_end,
           "wall_us": win_end - win_start}
    out.update({col: sums[:, i] for i, col in enumerate(CAUSE_COLUMNS)})
    return pd.DataFrame(out)


def _busiest_cpu_lane(trace: Trace) -> int:
    """Without steps: the CPU thread with the most outermost op time (the program's main thread)."""
    ev = trace.events
    top = mask_in(ev["lane_kind"], ("cpu",)) & mask_in(ev["cat"], ("cpu_op", "user_annotation")) & (
        ev["depth"].to_numpy() == 0)
    if not top.any():
        cpu = mask_in(ev["lane_kind"], ("cpu",))
        return int(pd.Series(ev["lane_order"].to_numpy()[cpu]).mode().iloc[0]) if cpu.any() else -1
    lanes = ev["lane_order"].to_numpy()[top]
    totals = pd.Series(ev["dur_us"].to_numpy()[top]).groupby(lanes).sum()
    return int(totals.idxmax())


def _unknowns(trace: Trace, gpu_rows: np.ndarray, host_lane: int, *, has_steps: bool) -> tuple[str, ...]:
    out = []
    if not has_steps:
        out.append("no steps: the whole trace is one window (profile with a schedule and prof.step(), or wrap each "
                   "iteration in one record_function, for a bar per step)")
    if len(trace.events) and not (trace.events["input_dims"].astype(str) != "").any():
        out.append("no shapes recorded: ops cannot be put against their roof (profile with record_shapes=True)")
    if host_lane < 0:
        out.append("no CPU thread recorded: the GPU's idle time cannot be explained")
    if not len(gpu_rows) and trace.meta.device_properties:
        out.append("no GPU activity recorded: the attribution is the host thread's time only")
    return tuple(out)

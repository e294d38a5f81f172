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
   Nothing recorded next to a DataLoader's ``__next__`` (``NEXT_TO_INPUT_US``: ``iter(loader)``
   starting its workers) is the input pipeline's; what remains is put on the op it follows,
   marked where that op copied device → host (``unrecorded_after``: NumPy or torch.save on a copy).
3. **A queue drained by a synchronisation**: an idle stretch that began while the host was
   blocked in a synchronize, spent in launch calls, dispatch or Python, is the sync's: had the
   host not waited, that host work would have run while the GPU worked through its queue.
4. **No GPU activity at all** (a CPU trace): the host's op time is the work itself, counted by
   the innermost op's class; unclassified ops are "other ops".

So the causes are disjoint and sum to each window's wall time by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from lab.analysis.columns import codes, dense_ids, mask_in, mask_where, texts
from lab.analysis.gemm.kinds import is_gemm_kernel, is_gemm_op
from lab.analysis.gpu import gpu_activity_rows
from lab.analysis.intervals import merge_intervals
from lab.analysis.operators import Links
from lab.analysis.steps import step_of
from lab.explain.classes import (
    CAUSE_INDEX,
    CAUSES,
    COLLECTIVE_RANGE_PATTERN,
    COMPILE_PATTERN,
    INPUT_PIPELINE_PATTERN,
    OPTIMIZER_PATTERN,
    kernel_class,
    op_class,
)
from lab.explain.segments import Segments, innermost
from lab.explain.unrecorded import long_host_gaps, next_to_input, what_unrecorded_follows
from lab.measure import Measures, measure
from lab.trace import Trace
from lab.vocab import ALLOCATOR_CALLS, LAUNCH_CATS, SYNC_NAMES

__all__ = ["CAUSE_COLUMNS", "SYNC_DRAIN_TOLERANCE_US", "Attribution", "attribute", "work_classes"]

CAUSE_COLUMNS = tuple(f"{c.key}_us" for c in CAUSES)
_INDEX = CAUSE_INDEX
# A segment's label (an index into CAUSES) in one byte: the per-segment arrays are the attribution's
# largest (572k segments on the 114 MB trace), and each one eight times smaller is less memory to fill.
_LABEL_DTYPE = np.int8
assert len(CAUSES) <= np.iinfo(_LABEL_DTYPE).max
# A synchronize returns just after the GPU's last kernel ends; its end may be stamped a little
# before that kernel's end (host and device clocks are aligned by Kineto, not identical).
SYNC_DRAIN_TOLERANCE_US = 2.0
_DISPATCH_SOURCES = 10  # the ops with the most dispatch time that ``dispatch_sources`` names


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
    # Host time no recorded event explains, by what the step's thread did just before: (the
    # outermost op that ended last before each stretch began, µs of the stretches after it in the
    # window, whether that op copied device → host), largest first. A stretch after a copy off the
    # GPU is the host working on what it copied (a metric in NumPy, torch.save, a logged value).
    unrecorded_after: tuple[tuple[str, float, bool], ...] = ()
    # The GPU µs (the window's) of the device → host copies whose data the host then worked on.
    unrecorded_copies_us: float = 0.0
    # Of the input pipeline's time, the µs in the window that no event recorded (``NEXT_TO_INPUT_US``).
    input_unrecorded_us: float = 0.0

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


def work_classes(trace: Trace, links: Links, gpu_rows: np.ndarray | None = None) -> np.ndarray:
    """Per event row, the work class index into ``CAUSES`` of its GPU activity (-1 elsewhere).
    ``gpu_rows``: ``Measures.gpu_rows`` when the caller has it."""
    ev = trace.events
    out = np.full(len(ev), -1, dtype=np.int64)
    gpu = gpu_rows if gpu_rows is not None else gpu_activity_rows(trace)
    if not len(gpu):
        return out
    name_codes, name_text = codes(ev["name"])
    cat_codes, cat_text = codes(ev["cat"])
    owner = links.owner[gpu]
    owner_code = np.where(owner >= 0, name_codes[np.maximum(owner, 0)], -1)
    # One class per distinct (kernel name, category, owner op name): classified once each, on codes.
    width_name, width_cat = len(name_text) + 1, len(cat_text) + 1
    key = ((name_codes[gpu] + 1) * width_name + (owner_code + 1)) * width_cat + (cat_codes[gpu] + 1)
    uniques, inverse = np.unique(key, return_inverse=True)
    classes = np.empty(len(uniques), dtype=np.int64)
    for i, k in enumerate(uniques.tolist()):
        rest, cat = divmod(k, width_cat)
        name, owned_by = divmod(rest, width_name)
        kernel, owner_name = str(name_text[name - 1]), str(name_text[owned_by - 1]) if owned_by else ""
        owned = op_class(owner_name, is_gemm=is_gemm_op(owner_name)) if owner_name else "other_work"
        classes[i] = _INDEX[kernel_class(kernel, cat=str(cat_text[cat - 1]), is_gemm=is_gemm_kernel(kernel),
                                         owner_class=owned)]
    out[gpu] = classes[inverse.reshape(-1)]
    return out


def attribute(measured: Measures | Trace, *, classes: np.ndarray | None = None) -> Attribution:
    """Attribute each step's wall time (the whole window's without steps) to causes, from the
    trace's ``Measures`` (its steps, windows, GPU activity rows and links; a bare ``Trace`` is
    measured first). ``classes``: ``work_classes(trace, links)`` when the caller has it."""
    measures = measured if isinstance(measured, Measures) else measure(measured)
    trace, links, spans = measures.trace, measures.links, measures.spans
    ev = trace.events
    ts, dur = ev["ts_us"].to_numpy(), ev["dur_us"].to_numpy()
    end = ts + dur
    host_lane = spans.lane_order if len(spans) else _busiest_cpu_lane(trace)
    gpu_rows = measures.gpu_rows
    if len(spans):
        win_start, win_end = measures.window_start_us, measures.window_end_us
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
    bnd = Segments.of(ts, end, np.concatenate([gpu_rows, on_host, other_cpu]),
                     np.concatenate([win_start, win_end, end[syncs] + dur[syncs]]),
                     lo=float(win_start.min()), hi=float(win_end.max()))
    bounds = bnd.bounds
    seg_lo, seg_hi = bounds[:-1], bounds[1:]
    label = np.full(len(seg_lo), _INDEX["unrecorded"], dtype=_LABEL_DTYPE)
    classes = classes if classes is not None else work_classes(trace, links, gpu_rows)
    busy = np.zeros(len(seg_lo), dtype=bool)
    for idx in sorted(set(classes[gpu_rows].tolist()), reverse=True):  # the first class in WORK_CLASSES wins
        hit = bnd.covered(gpu_rows[classes[gpu_rows] == idx])
        label[hit] = idx
        busy |= hit
    kinds = _host_kinds(trace)
    host = _host_labels(trace, on_host, bnd, links.parent, kinds, has_gpu=bool(len(gpu_rows)))
    label[~busy] = host[~busy]
    _waiting_for_collectives(trace, host_lane, bnd, busy, label)
    if len(gpu_rows):
        _work_on_other_threads(trace, other_cpu, bnd, links.parent, kinds, busy, label)
    long_host_gaps(trace, on_host, spans.rows if len(spans) else np.array([], int), bnd, label)
    input_unrecorded_us = next_to_input(trace, on_host, bnd, label, ts, end, win_start, win_end)
    stretches = label == _INDEX["unrecorded"]  # before a sync's drain takes their first part
    sources: dict[str, float] = {}
    if len(gpu_rows):
        _drained_by_sync(trace, syncs, seg_lo, seg_hi, busy, label, ts, end, links, sources)
    follows = what_unrecorded_follows(trace, on_host, bnd, links, label, gpu_rows, end, stretches=stretches)
    return Attribution(
        steps=_per_window(seg_lo, seg_hi, label, win_start, win_end, names),
        source=source, host_lane=int(host_lane), has_gpu=bool(len(gpu_rows)),
        unknown=_unknowns(trace, gpu_rows, host_lane, has_steps=bool(len(spans))),
        sync_sources=tuple(sorted(sources.items(), key=lambda kv: -kv[1])),
        dispatch_sources=_dispatch_sources(trace, on_host, bnd, links.parent, label, win_start, win_end),
        unrecorded_after=follows[0], unrecorded_copies_us=follows[1],
        input_unrecorded_us=input_unrecorded_us,
    )


# What a host event is, lowest priority first (a segment takes the last kind of any event over
# it): the column tested and the test of its text.
_HOST_KINDS: tuple[tuple[str, str, Callable[[str], bool]], ...] = (
    ("python", "cat", lambda c: c in ("user_annotation", "python_function")),
    ("dispatch", "cat", lambda c: c == "cpu_op"),
    ("launch", "cat", lambda c: c in LAUNCH_CATS),
    ("allocator", "name", lambda n: n in ALLOCATOR_CALLS),
    ("optimizer", "name", lambda n: bool(OPTIMIZER_PATTERN.search(n))),
    ("input", "name", lambda n: bool(INPUT_PIPELINE_PATTERN.search(n))),
    ("compile", "name", lambda n: bool(COMPILE_PATTERN.search(n))),
    ("sync", "name", lambda n: n in SYNC_NAMES),
    ("profiler", "cat", lambda c: c == "overhead"),
)


def _host_kinds(trace: Trace) -> np.ndarray:
    """Per event row, the index into ``_HOST_KINDS`` of the last kind it is (-1: none), each
    test run once per distinct category or name, for every thread's labels."""
    ev = trace.events
    last: dict[str, np.ndarray] = {}
    for column in ("cat", "name"):
        row_codes, texts_of = codes(ev[column])
        kind = np.full(len(texts_of), -1, dtype=np.int8)  # [-1]: a missing text, no kind
        text = [str(t) for t in texts_of[:-1]]
        for i, (_, tested, test) in enumerate(_HOST_KINDS):
            if tested == column:
                kind[:-1][np.fromiter(map(test, text), dtype=bool, count=len(text))] = i
        last[column] = kind[row_codes]
    return np.maximum(last["cat"], last["name"])


def _host_labels(trace: Trace, on_host: np.ndarray, bnd: Segments, parent: np.ndarray, kinds: np.ndarray, *,
                 has_gpu: bool) -> np.ndarray:
    """Each segment's host cause from the host thread's events (``HOST_CAUSES``, first wins).
    ``kinds``: ``_host_kinds(trace)``. A segment takes the highest kind of the events over it:
    painting each event's own (highest) kind, lowest first, gives that, as painting every kind's
    events in that order did."""
    ev = trace.events
    label = np.full(len(bnd.bounds) - 1, _INDEX["unrecorded"], dtype=_LABEL_DTYPE)
    if not len(on_host):
        return label
    cat = ev["cat"]
    name = ev["name"]
    mine = kinds[on_host]
    for i, (key, _, _) in enumerate(_HOST_KINDS):
        label[bnd.covered(on_host[mine == i])] = _INDEX[key]
    if not has_gpu:  # a CPU trace: an op's own time is its work, by the innermost op's class
        ops = on_host[mask_in(cat, ("cpu_op",))[on_host]]
        inner = innermost(np.arange(len(label)), ops, bnd, parent)
        at = np.flatnonzero((label == _INDEX["dispatch"]) & (inner >= 0))
        name_codes, names = codes(name)
        at_codes = name_codes[inner[at]]
        cls = np.full(len(names), -1, dtype=np.int64)  # each op name's class, classified once
        for c in np.flatnonzero(np.bincount(at_codes, minlength=len(names))):
            cls[c] = _INDEX[op_class(str(names[c]), is_gemm=is_gemm_op(str(names[c])))]
        label[at] = cls[at_codes]
    return label


def _no_op(label: np.ndarray) -> np.ndarray:
    """Segments labelled "Python between ops" or "nothing recorded": the thread was in no op.
    (Two comparisons: np.isin over 572k labels took 1.3 ms.)"""
    return (label == _INDEX["python"]) | (label == _INDEX["unrecorded"])


def _waiting_for_collectives(trace: Trace, host_lane: int, bnd: Segments, busy: np.ndarray,
                             label: np.ndarray) -> None:
    """Time the step's thread spends in no op (Python, nothing recorded) while a collective runs on
    another thread (gloo's all_reduce on its own thread, the DDP reducer waiting for it) is
    communication: the rank waits for its peers there."""
    ev = trace.events
    other = (ev["lane_order"].to_numpy() != host_lane) & mask_in(ev["lane_kind"], ("cpu",))
    rows = np.flatnonzero(other & mask_where(ev["name"], lambda n: bool(COLLECTIVE_RANGE_PATTERN.search(n))))
    if not len(rows):
        return
    waiting = bnd.covered(rows) & ~busy
    waiting &= _no_op(label)
    label[waiting] = _INDEX["communication"]


def _work_on_other_threads(trace: Trace, other: np.ndarray, bnd: Segments, parent: np.ndarray, kinds: np.ndarray,
                           busy: np.ndarray, label: np.ndarray) -> None:
    """GPU idle while the step's thread is in no op (blocked in ``loss.backward()``, joining a
    thread) but another thread of the program works: that thread's work is what the GPU waits for.
    autograd runs a CUDA backward's ops on its own device thread, so without this a training
    step's backward would read as "Python between ops" on the step's thread."""
    if not len(other):
        return
    theirs = _host_labels(trace, other, bnd, parent, kinds, has_gpu=True)
    take = ~busy & _no_op(label) & ~_no_op(theirs)
    label[take] = theirs[take]


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
    gaps = np.flatnonzero(~busy & np.concatenate(([True], busy[:-1])))  # where each idle stretch begins
    # Only a segment inside [a sync's end, its end + its wait] can drain (the latest sync before it
    # is that one or a later one, whose stretch holds it too): those few runs, not every segment.
    first = np.searchsorted(seg_lo, sync_end, side="left")
    stop = np.searchsorted(seg_hi, sync_end + sync_wait + 1e-9, side="right")
    run_lo, run_hi = merge_intervals(first[stop > first], stop[stop > first])
    run_lo, run_hi = run_lo.astype(np.int64), run_hi.astype(np.int64)
    if len(gaps) and len(run_lo):
        size = run_hi - run_lo
        at = np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size - run_lo, size)
        gap_start = seg_lo[gaps[np.maximum(np.searchsorted(gaps, at, side="right") - 1, 0)]]
        k = np.searchsorted(sync_end, seg_lo[at], side="right") - 1
        last_end = np.where(k >= 0, sync_end[np.maximum(k, 0)], -np.inf)
        last_wait = np.where(k >= 0, sync_wait[np.maximum(k, 0)], 0.0)
        movable = np.isin(label[at], [_INDEX["launch"], _INDEX["dispatch"], _INDEX["python"], _INDEX["unrecorded"]])
        drained = (~busy[at] & movable & (last_end >= gap_start - SYNC_DRAIN_TOLERANCE_US)
                   & (seg_hi[at] <= last_end + last_wait + 1e-9))
        label[at[drained]] = _INDEX["sync"]
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


def _dispatch_sources(trace: Trace, on_host: np.ndarray, bnd: Segments, parent: np.ndarray, label: np.ndarray,
                      win_start: np.ndarray, win_end: np.ndarray) -> tuple[tuple[str, float, float], ...]:
    """Dispatch time by the innermost op around it: per op, the median over the windows of its µs
    and of its calls (a cold first step, cuBLAS's first call, does not make an op slow)."""
    ev = trace.events
    at = np.flatnonzero(label == _INDEX["dispatch"])
    if not len(at) or not len(on_host):
        return ()
    ops = on_host[mask_in(ev["cat"], ("cpu_op",))[on_host]]
    inner = innermost(at, ops, bnd, parent)
    ok = inner >= 0
    bounds, ts, n_win = bnd.bounds, ev["ts_us"].to_numpy(), len(win_start)
    name_codes, name_text = codes(ev["name"])  # grouped on integer codes, not on strings
    seg_w = step_of(win_start, win_end, bounds[at][ok])
    keep = seg_w >= 0
    seg_name, seg_us = name_codes[inner[ok]][keep], (bounds[at + 1][ok] - bounds[at][ok])[keep]
    if not len(seg_name):
        return ()
    call_w = step_of(win_start, win_end, ts[ops])
    call_name = name_codes[ops][call_w >= 0]
    seg_id, _, names = dense_ids(seg_name)  # only ops that have dispatch time; np.unique's, without its sort
    size = len(names) * n_win  # per (op, window) sums by one bincount each
    us = np.bincount(seg_id.reshape(-1) * n_win + seg_w[keep], weights=seg_us, minlength=size).reshape(-1, n_win)
    pos = np.searchsorted(names, call_name)
    hit = (pos < len(names)) & (names[np.minimum(pos, len(names) - 1)] == call_name)
    n = np.bincount(pos[hit] * n_win + call_w[call_w >= 0][hit], minlength=size).reshape(-1, n_win).astype(float)
    med_us, med_calls = np.median(us, axis=1), np.median(n, axis=1)
    top = [i for i in np.argsort(-med_us, kind="stable")[:_DISPATCH_SOURCES] if med_us[i] > 0]
    return tuple((str(name_text[names[i]]), float(med_us[i]), float(med_calls[i])) for i in top)


def _window_of_segments(seg_lo: np.ndarray, win_start: np.ndarray, win_end: np.ndarray) -> np.ndarray:
    """``step_of`` for the (sorted) segment starts: windows that follow one another without
    overlap hold runs of segments, found by two searches per window instead of one per segment."""
    if len(win_start) > 1 and not ((np.diff(win_start) >= 0).all() and (win_start[1:] >= win_end[:-1]).all()):
        return step_of(win_start, win_end, seg_lo)
    first = np.searchsorted(seg_lo, win_start, side="left")
    size = np.maximum(np.searchsorted(seg_lo, win_end, side="left") - first, 0)
    out = np.full(len(seg_lo), -1, dtype=np.int64)
    at = np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size - first, size)
    out[at] = np.repeat(np.arange(len(win_start)), size)
    return out


def _per_window(seg_lo: np.ndarray, seg_hi: np.ndarray, label: np.ndarray, win_start: np.ndarray,
                win_end: np.ndarray, names: list[str]) -> pd.DataFrame:
    w = _window_of_segments(seg_lo, win_start, win_end)
    inside = w >= 0
    n_win, n_cause = len(win_start), len(CAUSES)
    key, width = w * n_cause + label, seg_hi - seg_lo
    if not inside.all():  # segments between or outside the windows count for none
        key, width = key[inside], width[inside]
    sums = np.bincount(key, weights=width, minlength=n_win * n_cause).reshape(n_win, n_cause)
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
    dims_codes, dims_text = codes(trace.events["input_dims"])
    present = np.bincount(dims_codes + 1, minlength=len(dims_text)) > 0  # [0]: missing, [i + 1]: dims_text[i]
    if len(trace.events) and not (present & np.r_[False, dims_text[:-1].astype(str) != ""]).any():
        out.append("no shapes recorded: ops cannot be put against their roof (profile with record_shapes=True)")
    if host_lane < 0:
        out.append("no CPU thread recorded: the GPU's idle time cannot be explained")
    if not len(gpu_rows) and trace.meta.device_properties:
        out.append("no GPU activity recorded: the attribution is the host thread's time only")
    return tuple(out)

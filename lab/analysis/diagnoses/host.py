"""Host-side causes of an idle GPU: synchronizations inside steps, and host work outside any op.

Both are measured against the GPU's busy time (the union of kernels, memcpys and memsets of
all devices): a sync or a stretch of Python only costs something when the GPU has nothing
queued meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.analysis.diagnoses.comm import comm_op_rows
from lab.analysis.diagnoses.common import (
    ancestor_in,
    covered_us,
    gpu_busy,
    idle_after_us,
    intersect_us,
    mask_in,
    mask_where,
    merge_intervals,
    parents,
    pct,
    texts,
)
from lab.analysis.diagnoses.steps import StepSpans, step_spans
from lab.trace import Trace
from lab.vocab import OPERATOR_CATS, PROFILER_STEP_PREFIX, SYNC_NAMES

__all__ = [
    "HOST_GAP_IDLE_MIN_PCT", "HOST_GAP_MIN_STRETCH_US", "HOST_GAP_MIN_US", "HOST_GAP_WARN_PCT", "HOST_SYNC_CALLS",
    "ITEM_OPS", "SYNC_IDLE_WARN_PCT", "HostGaps", "HostSyncs", "find_host_gaps", "find_host_syncs",
]  # fmt: skip

# Calls that block the host thread until the device catches up. vocab.SYNC_NAMES also lists
# cudaStreamWaitEvent, which makes a *stream* wait on the GPU and returns at once: not a host sync.
HOST_SYNC_CALLS = tuple(name for name in SYNC_NAMES if name != "cudaStreamWaitEvent")
# ``tensor.item()`` → aten::item → aten::_local_scalar_dense: a 1-element device→host copy
# followed by cudaStreamSynchronize (torch's CUDA _local_scalar_dense).
ITEM_OPS = ("aten::item", "aten::_local_scalar_dense")
# Host-side origin of a sync, by its nearest enclosing op.
_SYNC_SOURCES = {
    "aten::_local_scalar_dense": ".item()", "aten::item": ".item()",
    "aten::copy_": "device→host copy (.cpu() / .to('cpu') / .tolist())",
    "aten::_to_copy": "device→host copy (.cpu() / .to('cpu') / .tolist())",
    "aten::nonzero": "aten::nonzero (output size depends on the data)",
}  # fmt: skip
_BARE_SOURCES = {"cudaDeviceSynchronize": "torch.cuda.synchronize()", "cuCtxSynchronize": "torch.cuda.synchronize()",
                 "cudaStreamSynchronize": "stream.synchronize()", "cuStreamSynchronize": "stream.synchronize()",
                 "cudaEventSynchronize": "event.synchronize()", "cuEventSynchronize": "event.synchronize()"}
# A sync whose following GPU idle is ≥ 10 % of step time costs a tenth of the run: warning;
# below, the sync is still named (info), since it caps how far the host can run ahead.
# Measured on the H200 corpus: torch.cuda.synchronize() + a small .cpu() mid-step
# (device_sync) 5.1 % → info, GradScaler's .item() in ResNet-50 AMP 1.2 % → info, .item()
# every step + 2 ms of Python (item_sync) 43 % → warning.
SYNC_IDLE_WARN_PCT = 10.0
# Host time outside any op, per step, that is worth naming: ≥ 500 µs. Measured on the H200
# samples (tests/data, lab/samples): a median of 52–195 µs per step falls outside any op there
# — the Python loop, record_function enter/exit, ProfilerStep bookkeeping (matmul_add: 52–116,
# attention_math: 195) — while the case is 2 ms of pure Python per step. 500 µs sits
# 2.5× above the first and 4× below the second.
HOST_GAP_MIN_US = 500.0
# Only stretches of ≥ 250 µs with no op open count: shorter ones are the glue between two ops
# (dispatch, a model's Python between layers) — ≤ 214 µs on the seed samples, most under 50 µs
# in llama_train's 743 gaps — whereas host work that starves the GPU comes in one piece (the
# .item() trace: two 2.1 ms stretches).
HOST_GAP_MIN_STRETCH_US = 250.0
# … and only when the GPU idles through it for ≥ 10 % of step time (if the GPU has queued work,
# the host's Python overlaps it and costs nothing); ≥ 20 % is a warning.
HOST_GAP_IDLE_MIN_PCT = 10.0
HOST_GAP_WARN_PCT = 20.0


@dataclass(frozen=True)
class HostSyncs:
    """Blocking syncs inside steps (or, without steps, syncs that more GPU work follows)."""

    count: int
    steps: int  # steps read (1 = the whole trace when it has no steps)
    step_source: str
    per_step_median: float
    per_step_max: int
    blocked_us: float  # host time inside the sync calls
    idle_after_us: float  # GPU idle from each sync's end to the next GPU activity, summed
    idle_after_median_us: float
    window_us: float  # step time read (first step start → last step end, or the whole trace)
    idle_pct: float  # idle_after_us / window_us
    item_calls: int  # .item() calls (aten::item with a device→host memcpy) among them
    by_source: tuple[tuple[str, int, float, float], ...]  # (source, count, blocked_us, idle_after_us)
    severity: str


@dataclass(frozen=True)
class HostGaps:
    """Stretches of host time during the steps when no CPU thread runs an op or annotation (each
    ≥ HOST_GAP_MIN_STRETCH_US), and the GPU idle in them."""

    steps: int
    step_source: str
    stretches: int  # stretches ≥ HOST_GAP_MIN_STRETCH_US with no op open
    longest_us: float
    uncovered_us: float  # their total inside the step periods
    uncovered_median_us: float  # per step
    period_us: float  # total step periods (step start → next step start)
    uncovered_pct: float
    gpu_idle_us: float | None  # GPU idle during the uncovered time (None: no GPU in the trace)
    gpu_idle_pct: float | None  # of period_us
    severity: str


def _windows(trace: Trace, steps: StepSpans) -> tuple[np.ndarray, np.ndarray]:
    """Step periods, or the whole trace as one window when it has no steps."""
    if len(steps):
        return steps.start_us, steps.period_end_us
    ev = trace.events
    ts = ev["ts_us"].to_numpy()
    if not len(ts):
        return np.array([0.0]), np.array([0.0])
    return np.array([ts.min()]), np.array([(ts + ev["dur_us"].to_numpy()).max()])


def _sync_sources(trace: Trace, parent: np.ndarray, rows: np.ndarray) -> list[str]:
    """What issued each sync: its nearest enclosing op (".item()", a copy, …); without one, the
    call as Python spells it and the nearest label around it ("event.synchronize() in
    DistributedDataParallel.forward": DDP waiting for the previous step's all-reduce)."""
    ev = trace.events
    names = lambda idx: np.where(idx >= 0, texts(ev["name"], np.maximum(idx, 0)), "")  # noqa: E731
    owners = names(ancestor_in(parent, mask_in(ev["cat"], ("cpu_op",)), rows))
    step = mask_where(ev["name"], lambda n: n.startswith(PROFILER_STEP_PREFIX))
    label = mask_in(ev["cat"], ("user_annotation",)) & ~step
    labels = names(ancestor_in(parent, label, rows))
    calls = texts(ev["name"], rows)
    return [_SYNC_SOURCES.get(o, o) if o else _BARE_SOURCES.get(c, c) + (f" in {a}" if a else "")
            for c, o, a in zip(calls, owners, labels, strict=True)]


def _outer_item(parent: np.ndarray, is_item: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The outermost item op at or above each row (aten::item above _local_scalar_dense), else -1."""
    item = ancestor_in(parent, is_item, rows, self_too=True)
    has = item >= 0
    outer = item.copy()
    outer[has] = ancestor_in(parent, is_item, item[has])
    return np.where(outer >= 0, outer, item)


def _sync_points(trace: Trace, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(start, end, item op or -1, source) of every blocking point on the host: sync calls, and
    .item() calls whose device→host copy is in the trace but no sync call (then the op's span).

    Syncs inside a collective (gloo waits for its staging copies on its own threads) belong to
    the collective, not to the program's loop: they are left to diagnoses.comm.
    """
    ev = trace.events
    ts, end = ev["ts_us"].to_numpy(), ev["ts_us"].to_numpy() + ev["dur_us"].to_numpy()
    rows = np.flatnonzero(mask_in(ev["name"], HOST_SYNC_CALLS) & mask_in(ev["lane_kind"], ("cpu",)))
    in_comm = np.zeros(len(ev), dtype=bool)
    in_comm[comm_op_rows(trace)] = True
    rows = rows[ancestor_in(parent, in_comm, rows) < 0]
    is_item = mask_in(ev["name"], ITEM_OPS)
    item_of = _outer_item(parent, is_item, rows)
    flows = trace.flows
    gpu_rows = flows["gpu_row"].to_numpy()
    d2h = mask_in(ev["cat"], ("gpu_memcpy",))[gpu_rows] & mask_where(ev["name"], lambda n: "DtoH" in n)[gpu_rows]
    copied = _outer_item(parent, is_item, flows["launch_row"].to_numpy()[d2h])
    extra = np.setdiff1d(np.unique(copied[copied >= 0]), item_of)
    start = np.concatenate([ts[rows], ts[extra]])
    stop = np.concatenate([end[rows], end[extra]])
    items = np.concatenate([np.where(np.isin(item_of, copied), item_of, -1), extra])
    sources = _sync_sources(trace, parent, rows) + [".item()"] * len(extra)
    return start, stop, items, sources


def find_host_syncs(trace: Trace, *, steps: StepSpans | None = None) -> HostSyncs | None:
    """Blocking syncs inside steps and the GPU idle that follows each; None when there are none."""
    steps = steps if steps is not None else step_spans(trace)
    start, end, items, sources = _sync_points(trace, parents(trace))
    if not len(start):
        return None
    win_start, win_end = _windows(trace, steps)
    k = np.searchsorted(win_start, start, side="right") - 1
    inside = (k >= 0) & (start < win_end[np.maximum(k, 0)])
    idle = idle_after_us(gpu_busy(trace).intervals, end)
    if not len(steps):
        inside &= np.isfinite(idle)  # no steps: only syncs that more GPU work follows
    if not inside.any():
        return None
    start, end, k, items, idle = start[inside], end[inside], k[inside], items[inside], np.nan_to_num(idle[inside])
    src = np.array(sources, dtype=object)[inside]
    per_step = np.bincount(k, minlength=len(win_start))
    window_us = float(win_end[-1] - win_start[0])
    by_source = [(str(s), int((src == s).sum()), float((end - start)[src == s].sum()), float(idle[src == s].sum()))
                 for s in sorted(set(src), key=lambda s: -float(idle[src == s].sum()))]
    idle_pct = pct(float(idle.sum()), window_us)
    return HostSyncs(
        count=len(start), steps=len(win_start), step_source=steps.source,
        per_step_median=float(np.median(per_step)), per_step_max=int(per_step.max()),
        blocked_us=float((end - start).sum()), idle_after_us=float(idle.sum()),
        idle_after_median_us=float(np.median(idle)), window_us=window_us, idle_pct=idle_pct,
        item_calls=len(np.unique(items[items >= 0])), by_source=tuple(by_source),
        severity="warning" if idle_pct >= SYNC_IDLE_WARN_PCT else "info",
    )


def _main_lane(trace: Trace, steps: StepSpans) -> tuple[int, int]:
    """(lane_order, minimum depth) of the thread whose host time is read."""
    ev = trace.events
    if len(steps):
        return steps.lane_order, int(ev["depth"].to_numpy()[steps.rows].min())
    ops = mask_in(ev["cat"], OPERATOR_CATS) & mask_in(ev["lane_kind"], ("cpu",))
    if not ops.any():
        return -1, 0
    lanes, counts = np.unique(ev["lane_order"].to_numpy()[ops], return_counts=True)
    return int(lanes[np.argmax(counts)]), 0


def _uncovered_stretches(trace: Trace, steps: StepSpans) -> tuple[np.ndarray, ...] | None:
    """(window starts, window ends, stretch starts, stretch ends): the step periods (or the span
    of host ops), and the stretches ≥ HOST_GAP_MIN_STRETCH_US inside them with no op open."""
    ev = trace.events
    lane, min_depth = _main_lane(trace, steps)
    if lane < 0:
        return None
    # Ops on any CPU thread cover: backward runs on the autograd thread (pt_autograd_0) while
    # the main thread waits with no op open — llama_train's main thread has 64 % of its step
    # time outside ops, all but 22 % covered by the autograd thread's. On the steps' own
    # thread, events enclosing the steps (an outer annotation) do not cover.
    # ProfilerStep#N is the profiler's wrapper around everything, so it never covers; a step
    # label of the user's is an annotation like any other and does.
    lane_of = ev["lane_order"].to_numpy()
    covering = mask_in(ev["cat"], OPERATOR_CATS) & mask_in(ev["lane_kind"], ("cpu",))
    covering &= (lane_of != lane) | (ev["depth"].to_numpy() >= min_depth)
    covering &= ~mask_where(ev["name"], lambda n: n.startswith(PROFILER_STEP_PREFIX))
    ts = ev["ts_us"].to_numpy()[covering]
    cs, ce = merge_intervals(ts, ts + ev["dur_us"].to_numpy()[covering])
    if len(steps):
        win_start, win_end = steps.start_us, steps.period_end_us
    elif len(cs):
        win_start, win_end = cs[:1], ce[-1:]
    else:
        return None
    lo, hi = float(win_start[0]), float(win_end[-1])
    gs = np.clip(np.concatenate([[lo], ce]), lo, hi)
    ge = np.clip(np.concatenate([cs, [hi]]), lo, hi)
    long = ge - gs >= HOST_GAP_MIN_STRETCH_US
    return win_start, win_end, gs[long], ge[long]


def find_host_gaps(trace: Trace, *, steps: StepSpans | None = None) -> HostGaps | None:
    """Stretches of host time with no op open on any thread that left the GPU idle; None below
    the thresholds."""
    steps = steps if steps is not None else step_spans(trace)
    found = _uncovered_stretches(trace, steps)
    if found is None:
        return None
    win_start, win_end, gs, ge = found
    period = win_end - win_start
    uncovered = covered_us(gs, ge, win_start, win_end)
    median = float(np.median(uncovered))
    busy = gpu_busy(trace)
    gpu_idle = gpu_idle_pct = None
    if len(busy.rows):
        idle = np.maximum(uncovered - intersect_us((gs, ge), busy.intervals, win_start, win_end), 0.0)
        gpu_idle, gpu_idle_pct = float(idle.sum()), pct(float(idle.sum()), float(period.sum()))
    share = gpu_idle_pct if gpu_idle_pct is not None else pct(float(uncovered.sum()), float(period.sum()))
    if median < HOST_GAP_MIN_US or share < HOST_GAP_IDLE_MIN_PCT:
        return None
    return HostGaps(
        steps=len(period), step_source=steps.source, stretches=len(gs), longest_us=float((ge - gs).max()),
        uncovered_us=float(uncovered.sum()), uncovered_median_us=median, period_us=float(period.sum()),
        uncovered_pct=pct(float(uncovered.sum()), float(period.sum())),
        gpu_idle_us=gpu_idle, gpu_idle_pct=gpu_idle_pct,
        severity="warning" if share >= HOST_GAP_WARN_PCT else "info",
    )

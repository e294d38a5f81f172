"""One rank's time as interval sets: communication, compute, busy, and its collective calls.

What counts as what (HTA's definitions; where HTA has none, the choice is here):

- **Communication**, as a union of intervals (time covered once, however many events overlap):
  the NCCL kernels when the rank has any (HTA's communication kernels); else the host's
  collective ops (``diagnoses.comm.comm_op_rows``: ``c10d::*`` calls, ``gloo:*`` / ``nccl:*``
  ranges, ``record_param_comms``, ``ProcessGroup*``). gloo runs the reduction itself on its
  own CPU threads (``pt_gloo_runloop``) and, with CUDA tensors, only stages them through the
  host with a few copies: on the H200 gloo traces the copies are 5 ms of a 49 ms step while
  gloo's ranges cover 44 ms, so host ops are what gloo's communication time is.
- **Compute**: on a rank with kernels, the kernels that are not NCCL (HTA: computation
  kernels; memcpy and memset are neither). On a CPU-only rank, the ``cpu_op`` events outside
  any collective op, with the collective calls' own time cut out of the ops that contain them
  (DDP calls ``c10d::allreduce_`` from inside autograd's AccumulateGrad hook: that call's
  time is communication, not compute).
- **Overlap** (HTA's comp/comm overlap, its ``get_comm_comp_overlap``): the communication time
  during which compute runs — per device for NCCL kernels (compute kernels on the same GPU);
  for host collectives, against the rank's compute as defined above (on a CUDA rank the GPU's
  compute kernels: the GPU kept working while gloo reduced).
- **Busy**: GPU activity (kernels, memcpys, memsets) on a rank with a GPU, else compute ∪
  communication. **Idle** = the window − busy.
- **The window**: from the first step's start to the last step's period end (``step_spans``),
  the whole trace without steps: ranks are compared over the steps they profiled.
- **By launch** (``comm_launched`` / ``compute_launched``, the rank table's communication and
  compute, as the step table's ``launched_gpu_us``): the work the steps started, wherever it
  ran — a kernel whose launch call (its ac2g flow; without one, the kernel's own start) lies in
  a step's period (its start to the next step's start, the last step's end inclusive), a host
  collective or CPU op that starts in one; unions, not clipped to the window. NCCL kernels run
  after the CPU step has ended (rank 1 of a recorded H200 job: 7,023 µs launched in its two
  steps, 6,383 µs inside the window); the window figures (``comm``, ``compute``) stay, labelled
  "in window", for overlap and idle, which are about the window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.analysis.columns import gpu_activity_rows
from lab.analysis.diagnoses.comm import COMM_KERNEL_PATTERN, comm_op_rows
from lab.analysis.diagnoses.common import (
    ancestor_in,
    gpu_busy,
    intersect_us,
    mask_in,
    mask_where,
    merge_intervals,
    parents,
)
from lab.analysis.diagnoses.steps import StepSpans, step_spans
from lab.analysis.intervals import covered_us, step_of
from lab.trace import Trace

__all__ = [
    "COMM_HOST", "COMM_NCCL", "COMM_NONE", "CALL_PREFIX", "RankTimes", "rank_times", "subtract_intervals",
]  # fmt: skip

COMM_NCCL = "NCCL kernels"
COMM_HOST = "host collective ops"
COMM_NONE = "none"
# The collective *calls* that every rank makes in the same order (the c10d dispatcher's ops:
# c10d::allreduce_, c10d::broadcast_, …): the ones matched across ranks for the straggler.
CALL_PREFIX = "c10d::"

Intervals = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class RankTimes:
    """One rank's interval sets (µs on its own clock) and collective calls, inside its window."""

    window: tuple[float, float]
    steps: int
    step_median_us: float  # NaN without steps
    comm_source: str  # COMM_NCCL | COMM_HOST | COMM_NONE
    comm: Intervals  # inside the window: clip with covered()
    compute: Intervals
    busy: Intervals
    comm_launched: Intervals  # launched in the steps, wherever it ran (not clipped)
    compute_launched: Intervals
    overlap_us: float
    has_gpu: bool
    call_starts_us: np.ndarray  # the collective calls' starts, in order (the whole trace)
    call_name: str  # what the calls are: "c10d::*" ops, NCCL kernels, …

    def covered(self, intervals: Intervals) -> float:
        return float(covered_us(*intervals, *self.window)[0])

    @staticmethod
    def length(intervals: Intervals) -> float:
        return float((intervals[1] - intervals[0]).sum())


def subtract_intervals(a: Intervals, b: Intervals) -> Intervals:
    """A \\ B for two merged interval sets (sorted, disjoint), as a merged set."""
    if not len(a[0]) or not len(b[0]):
        return a
    cuts = np.unique(np.concatenate([a[0], a[1], b[0], b[1]]))
    lo, hi = cuts[:-1], cuts[1:]
    mid = (lo + hi) / 2

    def inside(s: Intervals) -> np.ndarray:
        k = np.searchsorted(s[0], mid, side="right") - 1
        return (k >= 0) & (mid < s[1][np.maximum(k, 0)])

    keep = inside(a) & ~inside(b)
    return merge_intervals(lo[keep], hi[keep])


def _intervals_of(ts: np.ndarray, end: np.ndarray, rows: np.ndarray) -> Intervals:
    """The merged [ts, end) intervals of ``rows``: ``merge_intervals``, the one union."""
    return merge_intervals(ts[rows], end[rows])


def _window(trace: Trace, spans: StepSpans | None) -> tuple[tuple[float, float], int, float]:
    spans = spans if spans is not None else step_spans(trace)
    if len(spans):
        durations = spans.period_end_us - spans.start_us
        return (float(spans.start_us[0]), float(spans.period_end_us[-1])), len(spans), float(np.median(durations))
    ev = trace.events
    return (float(ev["ts_us"].min()), float((ev["ts_us"] + ev["dur_us"]).max())), 0, float("nan")


def _in_steps(trace: Trace, at_us: np.ndarray) -> np.ndarray:
    """Whether each time lies in a step's period (start to the next step's start; the last step
    to its end, inclusive); all True without steps (the window is the whole trace)."""
    spans = step_spans(trace)
    if not len(spans):
        return np.ones(len(at_us), dtype=bool)
    return step_of(spans.start_us, spans.period_end_us, at_us, last_closed=True) >= 0


def _launched_in_steps(trace: Trace, ts: np.ndarray, gpu_rows: np.ndarray) -> np.ndarray:
    """The GPU rows whose launch call (ac2g flow; else their own start) lies in a step."""
    at = ts[gpu_rows].copy()
    flows = trace.flows
    if len(flows) and len(gpu_rows):
        launch = np.full(len(ts), -1, dtype=np.int64)
        launch[flows["gpu_row"].to_numpy(dtype=np.int64)] = flows["launch_row"].to_numpy(dtype=np.int64)
        own = launch[gpu_rows]
        at = np.where(own >= 0, ts[np.maximum(own, 0)], at)
    return gpu_rows[_in_steps(trace, at)]


def _cpu_compute(trace: Trace, ts: np.ndarray, end: np.ndarray, op_rows: np.ndarray, *,
                 launched: bool = False) -> Intervals:
    """CPU ops outside collective ops, each lane's collective calls cut out of them
    (``launched``: only the ops that start in a step)."""
    ev = trace.events
    is_comm = np.zeros(len(ev), dtype=bool)
    is_comm[op_rows] = True
    ops = np.flatnonzero(mask_in(ev["cat"], ("cpu_op",)) & ~is_comm)
    if launched:
        ops = ops[_in_steps(trace, ts[ops])]
    if len(op_rows):
        ops = ops[ancestor_in(parents(trace), is_comm, ops) < 0]
    lane = ev["lane_order"].to_numpy()
    pieces_s, pieces_e = [], []
    for ln in np.unique(lane[ops]):
        mine = _intervals_of(ts, end, ops[lane[ops] == ln])
        cut = _intervals_of(ts, end, op_rows[lane[op_rows] == ln])
        s, e = subtract_intervals(mine, cut)
        pieces_s.append(s)
        pieces_e.append(e)
    if not pieces_s:
        return merge_intervals(np.array([]), np.array([]))
    return merge_intervals(np.concatenate(pieces_s), np.concatenate(pieces_e))


def _overlap_by_device(ts, end, device, comm_rows, compute_rows, window) -> float:
    """HTA: Σ over devices of |communication ∩ compute| on that device, inside the window."""
    total = 0.0
    for d in np.unique(device[comm_rows]):
        c = _intervals_of(ts, end, comm_rows[device[comm_rows] == d])
        k = _intervals_of(ts, end, compute_rows[device[compute_rows] == d])
        total += float(intersect_us(c, k, *window)[0])
    return total


def _calls(trace: Trace, ts: np.ndarray, op_rows: np.ndarray, nccl: np.ndarray) -> tuple[np.ndarray, str]:
    """The collective calls every rank makes in the same order: c10d ops (outermost), else NCCL
    kernels, else the outermost host collective ranges."""
    ev = trace.events
    calls = op_rows[mask_where(ev["name"], lambda n: n.startswith(CALL_PREFIX))[op_rows]]
    label = f"{CALL_PREFIX}* calls"
    if not len(calls):
        calls, label = (nccl, "NCCL kernels") if len(nccl) else (op_rows, "collective ranges")
    if len(calls) and len(op_rows):
        is_call = np.zeros(len(ev), dtype=bool)
        is_call[calls] = True
        calls = calls[ancestor_in(parents(trace), is_call, calls) < 0]
    return np.sort(ts[calls]), label


def rank_times(trace: Trace, *, spans: StepSpans | None = None) -> RankTimes:
    """The interval sets of one rank (see the module doc for what counts as what); ``spans``:
    its ``step_spans`` when already found (``Analysis.findings.steps``)."""
    ev = trace.events
    ts = ev["ts_us"].to_numpy(dtype=float)
    end = ts + ev["dur_us"].to_numpy(dtype=float)
    device = ev["device"].to_numpy()
    window, n_steps, step_median = _window(trace, spans)
    kernels = mask_in(ev["cat"], ("kernel",))
    is_nccl = kernels & mask_where(ev["name"], COMM_KERNEL_PATTERN.search)
    nccl, op_rows = np.flatnonzero(is_nccl), comm_op_rows(trace)
    compute_rows = np.flatnonzero(kernels & ~is_nccl)
    has_gpu = bool(len(gpu_activity_rows(trace)))
    if len(nccl):
        source, comm = COMM_NCCL, merge_intervals(ts[nccl], end[nccl])
    elif len(op_rows):
        source, comm = COMM_HOST, merge_intervals(ts[op_rows], end[op_rows])
    else:
        source, comm = COMM_NONE, merge_intervals(np.array([]), np.array([]))
    compute = _intervals_of(ts, end, compute_rows) if has_gpu else _cpu_compute(trace, ts, end, op_rows)
    comm_launched = (_intervals_of(ts, end, _launched_in_steps(trace, ts, nccl)) if source == COMM_NCCL
                     else _intervals_of(ts, end, op_rows[_in_steps(trace, ts[op_rows])]))
    compute_launched = (_intervals_of(ts, end, _launched_in_steps(trace, ts, compute_rows)) if has_gpu
                        else _cpu_compute(trace, ts, end, op_rows, launched=True))
    if source == COMM_NCCL:
        overlap = _overlap_by_device(ts, end, device, nccl, compute_rows, window)
    else:
        overlap = float(intersect_us(comm, compute, *window)[0]) if len(comm[0]) and len(compute[0]) else 0.0
    if has_gpu:
        busy = gpu_busy(trace).intervals
    else:
        busy = merge_intervals(np.concatenate([comm[0], compute[0]]), np.concatenate([comm[1], compute[1]]))
    call_starts, call_name = _calls(trace, ts, op_rows, nccl)
    return RankTimes(window=window, steps=n_steps, step_median_us=step_median, comm_source=source, comm=comm,
                     compute=compute, busy=busy, comm_launched=comm_launched, compute_launched=compute_launched,
                     overlap_us=overlap, has_gpu=has_gpu, call_starts_us=call_starts,
                     call_name=call_name)

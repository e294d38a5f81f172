"""What the profiler itself did to the trace: a capture window that recorded no ops, and
``with_stack`` / ``profile_memory`` inflating host times.

Flags: torch writes ``"with_stack": 1`` and ``"profile_memory": 1`` at the top of the trace
(``torch.profiler.profile.start_trace``); ``TraceMeta`` keeps both. ``with_stack`` is also
detected from its ``python_function`` events, and ``profile_memory`` from the ``[memory]``
records in ``Trace.memory``; a trace with neither flag nor events reads as unknown.

How much the options inflate host time, measured on the H200 corpus (tests/data/groundtruth,
mean ProfilerStep, same program with and without the option): with_stack 131 → 181 µs (1.39×)
on the seed step and 1.90 → 2.51 ms (1.32×) on the compiled SwiGLU, both host-bound; no
measurable change on GPU-bound training steps (llama 20.1 → 19.2 ms, ResNet-50 47 → 32 ms —
run-to-run spread); profile_memory on the seed 131 → 132 µs. The larger error is in tables, not
in time: a table that counts python_function frames as ops double-counts their time (issue
11: summed self CPU 5,109 vs torch's 2,151 µs). Hence info, with the counts that tell a reader
to take host times with care.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.analysis.columns import gpu_activity_mask
from lab.analysis.diagnoses.common import covered_us, mask_in, mask_where, merge_intervals, pct, texts
from lab.trace import Trace
from lab.vocab import PROFILER_STEP_PREFIX, is_launch_call

__all__ = [
    "EMPTY_MAX_OPS", "EmptyCapture", "ProfilerInflation", "capture_explains_missing_gpu",
    "find_empty_capture", "find_profiler_inflation",
]  # fmt: skip

# A window with no operator event (cpu_op / user_annotation other than ProfilerStep#N) and no
# GPU activity captured no step. The corpus's real empty windows hold 0 (H200: ProfilerStep#2
# and the profiler's exit cudaDeviceSynchronize; CPU: one ProfilerStep or nothing), while a
# tiny program of one or two ops is a real capture, to be judged like any other.
EMPTY_MAX_OPS = 0


@dataclass(frozen=True)
class EmptyCapture:
    """A capture window that recorded no ops: what it did record instead."""

    ops: int  # cpu_op / user_annotation events other than ProfilerStep#N
    op_names: tuple[str, ...]
    profiler_steps: tuple[str, ...]  # ProfilerStep#N recorded (the schedule's step numbers)
    gpu_activities: int
    runtime_calls: int  # cuda_runtime / cuda_driver events
    overhead_events: int  # the profiler's own (Activity Buffer Request …)
    span_us: float
    categories: tuple[tuple[str, int], ...]  # every category captured, with counts
    severity: str = "warning"


@dataclass(frozen=True)
class ProfilerInflation:
    """Profiler options that make host times longer than the program's own."""

    with_stack: bool
    python_events: int
    python_per_op: float  # python_function events per cpu_op
    python_only_pct: float  # host time in Python frames while no thread runs an op / the thread's span
    profile_memory: bool | None  # None: this trace cannot say (see the module docstring)
    memory_events: int
    severity: str = "info"


def _op_mask(trace: Trace) -> np.ndarray:
    ev = trace.events
    step = mask_where(ev["name"], lambda n: n.startswith(PROFILER_STEP_PREFIX))
    return mask_in(ev["cat"], ("cpu_op", "user_annotation")) & ~step


def find_empty_capture(trace: Trace) -> EmptyCapture | None:
    """The trace holds (almost) no op and no GPU activity; None when it captured a program."""
    ev = trace.events
    ops = _op_mask(trace)
    gpu = int(gpu_activity_mask(trace).sum())
    if int(ops.sum()) > EMPTY_MAX_OPS or gpu:
        return None
    steps = np.flatnonzero(mask_where(ev["name"], lambda n: n.startswith(PROFILER_STEP_PREFIX)))
    cats, counts = np.unique(texts(ev["cat"], np.arange(len(ev))).astype(str), return_counts=True)
    return EmptyCapture(
        ops=int(ops.sum()), op_names=tuple(sorted(set(texts(ev["name"], np.flatnonzero(ops))))),
        profiler_steps=tuple(texts(ev["name"], steps[np.argsort(ev["ts_us"].to_numpy()[steps])])),
        gpu_activities=gpu, runtime_calls=int(mask_in(ev["cat"], ("cuda_runtime", "cuda_driver")).sum()),
        overhead_events=int(mask_in(ev["cat"], ("overhead",)).sum()), span_us=float(trace.meta.span_us),
        categories=tuple((str(c) or "(none)", int(n)) for c, n in zip(cats, counts, strict=True)),
    )


def capture_explains_missing_gpu(trace: Trace, empty: EmptyCapture | None) -> bool:
    """True when a trace without GPU activity captured no ops either and launched nothing: the
    window was empty, so "No GPU activity although a GPU was used — check CUPTI" must not fire.
    Launch calls without GPU activity still point at CUPTI (the real empty windows of the
    corpus hold only the profiler's exit cudaDeviceSynchronize, no launch). ``empty``: the
    trace's ``find_empty_capture`` (``Findings.empty_capture``), found once."""
    if empty is None:
        return False
    ev = trace.events
    calls = texts(ev["name"], np.flatnonzero(mask_in(ev["cat"], ("cuda_runtime", "cuda_driver"))))
    return not any(is_launch_call(str(name)) for name in set(calls))


def _python_only_pct(trace: Trace, py: np.ndarray) -> float:
    """Host time inside Python frames while no CPU thread runs an op, on the thread with the most
    frames, as a share of that thread's span (first to last frame or op). Ops of every thread
    cover, as the attribution does: backward's ops run on the autograd thread under a Python frame."""
    ev = trace.events
    lane_of = ev["lane_order"].to_numpy()
    lanes, n = np.unique(lane_of[py], return_counts=True)
    lane = lane_of == lanes[np.argmax(n)]
    ops = (_op_mask(trace) | mask_in(ev["cat"], ("cuda_runtime", "cuda_driver"))) & mask_in(ev["lane_kind"], ("cpu",))
    ts, end = ev["ts_us"].to_numpy(), ev["ts_us"].to_numpy() + ev["dur_us"].to_numpy()
    om = merge_intervals(ts[ops], end[ops])
    pm = merge_intervals(ts[py & lane], end[py & lane])
    mine = (ops | py) & lane
    span = float(end[mine].max() - ts[mine].min())
    in_py = float((pm[1] - pm[0]).sum())
    py_and_op = float(covered_us(*om, pm[0], pm[1]).sum()) if len(om[0]) else 0.0
    return pct(in_py - py_and_op, span)


def find_profiler_inflation(trace: Trace) -> ProfilerInflation | None:
    """with_stack (python_function events) or profile_memory recorded; None when neither."""
    ev = trace.events
    py = mask_in(ev["cat"], ("python_function",))
    memory_events = len(trace.memory)
    flag = getattr(trace.meta, "profile_memory", None)
    profile_memory = bool(flag) if flag is not None else (True if memory_events else None)
    with_stack = bool(py.any()) or bool(getattr(trace.meta, "with_stack", None))
    if not with_stack and not profile_memory:
        return None
    n_ops = int(mask_in(ev["cat"], ("cpu_op",)).sum())
    return ProfilerInflation(
        with_stack=with_stack, python_events=int(py.sum()),
        python_per_op=float(py.sum()) / n_ops if n_ops else 0.0,
        python_only_pct=_python_only_pct(trace, py) if py.any() else 0.0,
        profile_memory=profile_memory, memory_events=memory_events,
    )

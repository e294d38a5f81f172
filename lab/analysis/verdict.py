"""The verdict: what limits the run (the GPU, or the host feeding it), with the numbers behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from lab.analysis.diagnoses.findings import Findings, weigh_verdict
from lab.analysis.gpu import GpuUtilization, LaunchStats, gpu_utilization, launch_delays
from lab.analysis.launches import gpu_use, gpu_work_text
from lab.analysis.operators import operator_summary
from lab.trace.load import Trace
from lab.vocab import COMPILE_PATTERN, SYNC_NAMES

__all__ = ["GPU_BOUND_BUSY_PCT", "Verdict", "bound_verdict", "host_work_us", "used_gpu"]

# A GPU that is busy at least this share of its active window is the bottleneck: the host
# keeps a queue of work ahead of it. Below it the GPU waits for the host between kernels.
# 80 % follows HTA's temporal breakdown practice of treating sustained idle > 20 % as host-bound
# (https://hta.readthedocs.io/en/latest/source/features/temporal_breakdown.html).
GPU_BOUND_BUSY_PCT = 80.0


@dataclass(frozen=True)
class Verdict:
    """What limits the run, with the numbers behind it.

    kind: "gpu-bound" (GPU busy ≥ GPU_BOUND_BUSY_PCT of its active window), "cpu-bound" (the
    GPU waits for the host), "no-gpu-events" (launch calls, no GPU activity recorded),
    "no-gpu-work" (CUDA calls that launch nothing: an allocation-only program) or "cpu-only";
    or, when a diagnosis names the cause first (``lab.analysis.diagnoses.findings.weigh_verdict``),
    "empty-window", "copy-bound", "communication-bound", "sync-bound", "host-bound" or
    "graph-replays", with that cause's numbers in ``cause``.
    """

    kind: str
    explanation: str
    gpu_busy_pct: float  # busy / GPU-active window
    gpu_busy_us: float
    gpu_activity_us: float
    cpu_self_us: float  # self time of CPU-side rows, synchronize waits excluded
    launch_delay_median_us: float
    cause: dict = field(default_factory=dict)  # the weighed cause's numbers (empty: generic verdict)


def host_work_us(operators: pd.DataFrame) -> float:
    """Self time of CPU-side rows of ``operator_summary`` minus time spent waiting in synchronize
    calls, torch.compile's own compile events (``lab.vocab.COMPILE_PATTERN``) and the profiler's
    own rows (cat "overhead": Activity Buffer Request, Lazy Function Loading, Runtime Triggered
    Module Loading — 53.7 ms of the 214 ms "host work" of the H200 cuda_oom trace, none of it the
    program's)."""
    if operators.empty:
        return 0.0
    waiting = operators["name"].isin(SYNC_NAMES) | (operators["cat"].astype(str) == "overhead")
    # torch.compile compiling inside the window is a one-off, not the program's per-launch host work
    # (a first call's 4.0 s of Dynamo/Inductor read as "3,435× more host time than device time").
    compiling = operators["name"].astype(str).str.contains(COMPILE_PATTERN)
    return float(operators.loc[~(waiting | compiling), "self_us"].sum())


def bound_verdict(trace: Trace, *, operators: pd.DataFrame | None = None,
                  utilization: GpuUtilization | None = None, launches: LaunchStats | None = None,
                  findings: Findings | None = None, memory: Any = None) -> Verdict:
    """The generic verdict, unless a diagnosis names the cause first (pageable copies that fill
    the GPU's busy time are not "GPU-bound, faster kernels would help")."""
    verdict = _generic_verdict(trace, operators=operators, utilization=utilization, launches=launches,
                               memory=memory)
    weighed = weigh_verdict(trace, findings)
    if weighed is None or verdict.kind not in weighed.replaces:
        return verdict
    return Verdict(kind=weighed.kind, explanation=weighed.headline, gpu_busy_pct=verdict.gpu_busy_pct,
                   gpu_busy_us=verdict.gpu_busy_us, gpu_activity_us=verdict.gpu_activity_us,
                   cpu_self_us=verdict.cpu_self_us, launch_delay_median_us=verdict.launch_delay_median_us,
                   cause=dict(weighed.numbers))


def _generic_verdict(trace: Trace, *, operators: pd.DataFrame | None,
                     utilization: GpuUtilization | None, launches: LaunchStats | None, memory: Any) -> Verdict:
    operators = operators if operators is not None else operator_summary(trace)
    utilization = utilization or gpu_utilization(trace)
    launches = launches or launch_delays(trace)
    cpu_us = host_work_us(operators)
    numbers: dict[str, Any] = dict(gpu_busy_pct=utilization.active_busy_pct, gpu_busy_us=utilization.busy_us,
                   gpu_activity_us=utilization.activity_us, cpu_self_us=cpu_us,
                   launch_delay_median_us=launches.delay_median_us)
    if utilization.per_device.empty:  # no kernel, memcpy or memset at all
        return _verdict_without_gpu_activity(trace, cpu_us, numbers, memory)
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
    """True when the trace shows work sent to a GPU (a launch call: a kernel, copy, memset or graph
    launch). CUDA calls that launch nothing (cudaMalloc, cudaStreamIsCapturing) and the device
    properties Kineto writes on every CUDA host are no such sign."""
    return gpu_use(trace).launched


def _verdict_without_gpu_activity(trace: Trace, cpu_us: float, numbers: dict, memory: Any) -> Verdict:
    """No GPU activity: lost (launch calls), none sent (calls that launch nothing), or none at all."""
    use = gpu_use(trace)
    if use.launched:
        return Verdict(kind="no-gpu-events", explanation=(
            f"The run sent work to a GPU ({use.launch_calls:,} launch calls among {use.calls_text()}) but "
            "recorded no GPU activity, so GPU time cannot be judged."), **numbers)
    if use.runtime_calls:
        return Verdict(kind="no-gpu-work", explanation=gpu_work_text(use, memory), **numbers)
    listed = (f" The trace lists {use.devices_listed} GPU(s) but has no CUDA call: if the program meant to use "
              "one, profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]."
              if use.devices_listed else "")
    return Verdict(kind="cpu-only", explanation=(
        f"No GPU work in this trace: the {cpu_us:,.0f} µs of self CPU time in ops is the whole story.{listed}"),
        **numbers)

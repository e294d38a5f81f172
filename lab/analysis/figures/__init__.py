"""One definition per figure a lesson, a question or an insight quotes about a trace.

A lesson's check and its questions' reveals (each lesson's module in ``lab.lessons``) and the
claims its text makes (``Lesson.claims``, checked by ``lab.teach.claims``) read the same numbers from here, so a check
and a reveal can never disagree again (they did: the check counted every kernel in the trace, the
reveal only those of the active steps — GeGLU 5 vs 4, SDPA math 17 vs 14 — because a schedule's
warm-up step leaves its last kernels in the trace).

The rules every figure follows (``steps.py``):

- **steps** are the recorded (active) steps: ``Analysis.steps`` (``ProfilerStep#N``, else the
  outermost repeated annotation). A ``schedule``'s wait and warm-up steps are not steps here.
- a step's **kernels** (and copies, memsets) are those *launched* inside its CPU window (the
  launch call's start lies in it; the work itself may run after the step ends: the GPU lags);
- on a trace without kernels (a CPU run) a step's **work** is the CPU operators that start in it.

Modules: ``steps`` (which events are a step's; counts, times and shares per step, launch
delays, phases), ``first_step`` (the cold step against the later ones), ``table`` (key_averages
rows and the op tree), ``copies`` (host ↔ device copies, profile_memory). ``FIGURES`` names each
figure a ``Claim`` may use: ``figure(run, *args) -> float | str``.
"""

from __future__ import annotations

from collections.abc import Callable

from lab.analysis.bundle import Run
from lab.analysis.figures.copies import (
    copy_bytes_per_step,
    copy_call_ratio,
    copy_gb_per_s,
    copy_kinds,
    copy_names,
    memory_largest_allocation_bytes,
    memory_peak_label,
    memory_rise_units,
)
from lab.analysis.figures.first_step import (
    first_step_excess_in_us,
    first_step_ratio,
    first_step_share_pct,
    first_step_us,
    label_first_gaps_us,
    label_gap_share_pct,
    later_step_median_us,
    profiler_overhead_in_first_step_us,
)
from lab.analysis.figures.steps import (
    CALL_CATS,
    call_mean_us,
    call_share_pct,
    calls_per_step,
    event_rows,
    gemm_kernel_us,
    gemm_op_share_pct,
    gemms_per_step,
    gpu_busy_pct,
    in_steps,
    kernel_mean_us,
    kernel_rows,
    kernel_step_index,
    kernel_time_share_pct,
    kernels_matching_per_step,
    kernels_per_step,
    launch_delay_median_us,
    launch_delay_of_step_us,
    launch_delay_share_pct,
    launch_delays_us,
    non_gemm_kernel_us_per_step,
    ops_per_step,
    overhead_ratio,
    phase_ratio,
    phase_us,
    profiled_step_us,
    recorded_steps,
    step_count,
    step_of,
    step_us,
    step_work_rows,
    unprofiled_step_us,
    work_per_step,
)
from lab.analysis.figures.table import (
    child_calls_per_step,
    child_op,
    on_other_thread,
    op_device_us,
    ops_present,
    self_cuda_over_self_cpu,
    self_share_pct,
    shape_row_count,
    shape_rows,
    top_self_cpu_row,
    top_shape,
)

__all__ = [
    "CALL_CATS", "FIGURES", "Run", "call_mean_us", "call_share_pct", "calls_per_step",
    "child_calls_per_step", "child_op", "copy_bytes_per_step", "copy_call_ratio", "copy_gb_per_s", "copy_kinds",
    "copy_names", "event_rows", "first_step_excess_in_us", "first_step_ratio", "first_step_share_pct",
    "first_step_us", "gemm_kernel_us", "gemm_op_share_pct", "gemms_per_step", "gpu_busy_pct", "in_steps",
    "kernel_mean_us", "kernel_rows", "kernel_step_index", "kernel_time_share_pct", "kernels_matching_per_step",
    "kernels_per_step", "label_first_gaps_us", "label_gap_share_pct", "later_step_median_us",
    "launch_delay_median_us", "launch_delay_of_step_us", "launch_delay_share_pct", "launch_delays_us",
    "memory_largest_allocation_bytes", "memory_peak_label", "memory_rise_units", "non_gemm_kernel_us_per_step",
    "on_other_thread", "op_device_us", "ops_per_step", "ops_present", "overhead_ratio", "phase_ratio", "phase_us",
    "profiler_overhead_in_first_step_us", "recorded_steps", "self_cuda_over_self_cpu", "self_share_pct",
    "shape_row_count", "shape_rows", "step_count", "step_of", "step_us", "step_work_rows", "top_self_cpu_row",
    "profiled_step_us", "top_shape", "unprofiled_step_us", "work_per_step",
]  # fmt: skip

FIGURES: dict[str, Callable[..., float | str]] = {
    "kernels_per_step": kernels_per_step,
    "kernels_matching_per_step": kernels_matching_per_step,
    "kernel_time_share_pct": kernel_time_share_pct,
    "calls_per_step": calls_per_step,
    "call_share_pct": call_share_pct,
    "ops_per_step": ops_per_step,
    "op_device_us": op_device_us,
    "step_us": step_us,
    "overhead_ratio": overhead_ratio,
    "first_step_ratio": first_step_ratio,
    "first_step_us": first_step_us,
    "later_step_median_us": later_step_median_us,
    "first_step_share_pct": first_step_share_pct,
    "label_gap_share_pct": label_gap_share_pct,
    "gemm_kernel_us": gemm_kernel_us,
    "gemm_op_share_pct": gemm_op_share_pct,
    "kernel_mean_us": kernel_mean_us,
    "launch_delay_share_pct": launch_delay_share_pct,
    "launch_delay_median_us": launch_delay_median_us,
    "top_self_cpu_row": top_self_cpu_row,
    "gpu_busy_pct": gpu_busy_pct,
    "self_cuda_over_self_cpu": self_cuda_over_self_cpu,
    "self_share_pct": self_share_pct,
    "non_gemm_kernel_us_per_step": non_gemm_kernel_us_per_step,
    "child_calls_per_step": child_calls_per_step,
    "child_op": child_op,
    "ops_present": ops_present,
    "phase_us": phase_us,
    "phase_ratio": phase_ratio,
    "copy_gb_per_s": copy_gb_per_s,
    "copy_call_ratio": copy_call_ratio,
    "memory_peak_label": memory_peak_label,
    "memory_rise_units": memory_rise_units,
    "launch_delay_of_step_us": launch_delay_of_step_us,
    "recorded_steps": recorded_steps,
    "profiled_step_us": profiled_step_us,
    "unprofiled_step_us": unprofiled_step_us,
    "call_mean_us": call_mean_us,
    "copy_kinds": copy_kinds,
    "copy_bytes_per_step": copy_bytes_per_step,
    "memory_largest_allocation_bytes": memory_largest_allocation_bytes,
    "shape_row_count": shape_row_count,
    "top_shape": top_shape,
    "on_other_thread": on_other_thread,
    "work_per_step": lambda run: work_per_step(run)[0],
    "gemms_per_step": lambda run: gemms_per_step(run)[0],
}

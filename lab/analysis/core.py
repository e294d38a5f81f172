"""Compatibility: the names ``lab.analysis.core`` had before it was split by concern.

The analyses now live one concern per module (``columns``, ``operators``, ``gpu``, ``steps``,
``gemm``, ``verdict``, and ``bundle`` for ``analyze``/``Analysis``). This module only re-exports
them for code outside ``lab/analysis`` that still imports ``lab.analysis.core``
(``lab/views/summary.py``, ``tests/test_large_trace.py``, ``tests/test_lessons.py``,
``bench/bench_click_to_result.py``, ``scripts/fidelity.py``); new code imports from
``lab.analysis`` or the concern's module. Delete it once those have moved.
"""

from __future__ import annotations

from lab.analysis.bundle import Analysis, analyze
from lab.analysis.columns import as_category, mask_in, mask_where, texts
from lab.analysis.gemm import (
    CONFIG_GEMM_WORKLOADS,
    GEMM_COLUMNS,
    compute_capability,
    device_name,
    gemm_efficiency,
    peak_for,
)
from lab.analysis.gpu import (
    LARGEST_GAPS,
    GpuUtilization,
    LaunchStats,
    covered_us,
    gpu_utilization,
    launch_delays,
    merge_intervals,
    trace_span_us,
)
from lab.analysis.operators import (
    KERNEL_COLUMNS,
    OPERATOR_COLUMNS,
    Links,
    build_links,
    kernel_summary,
    operator_summary,
)
from lab.analysis.steps import STEP_COLUMNS, step_breakdown, step_rows
from lab.analysis.verdict import GPU_BOUND_BUSY_PCT, Verdict, bound_verdict, host_work_us, used_gpu
from lab.vocab import GEMM_KERNEL_PATTERN, SYNC_NAMES

__all__ = [
    "CONFIG_GEMM_WORKLOADS", "GEMM_COLUMNS", "GEMM_KERNEL_PATTERN", "GPU_BOUND_BUSY_PCT", "KERNEL_COLUMNS",
    "LARGEST_GAPS", "OPERATOR_COLUMNS", "STEP_COLUMNS", "SYNC_NAMES", "Analysis", "GpuUtilization",
    "LaunchStats", "Links", "Verdict", "analyze", "as_category", "bound_verdict", "build_links",
    "compute_capability", "covered_us", "device_name", "gemm_efficiency", "gpu_utilization", "host_work_us",
    "kernel_summary", "launch_delays", "mask_in", "mask_where", "merge_intervals", "operator_summary",
    "peak_for", "step_breakdown", "step_rows", "texts", "trace_span_us", "used_gpu",
]  # fmt: skip

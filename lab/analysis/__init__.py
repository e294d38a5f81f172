"""Stage 3 of the pipeline: a ``Trace`` → analyses (operators, kernels, GPU use, steps, GEMMs)
and comparisons; ``Run`` (a named trace with its analysis) is what a lesson's check and questions
read (``lab.lessons``). What the figures mean is ``lab.judge``'s.

Each analysis is a pure function of a ``Trace`` returning plain data, one concern per module or
sub-package. Sub-packages (each with its facade ``__init__``): ``table`` (torch's key_averages table
derived from the trace), ``diagnoses`` (what bounds the trace), ``gemm`` (efficiency against the
device's peak), ``memory`` (profile_memory's allocations over time), ``ranks`` (a job's ranks
together). Top level: ``bundle`` is the facade (``analyze``
→ ``Analysis``), ``operators`` (launch links, the operator and kernel tables), ``gpu`` (utilization,
idle gaps, launch delays), ``steps``, ``compare``; the TensorBoard plugin's views:
``step_time`` (its step-time breakdown), ``kernels`` (its Kernel view) with ``tensor_cores`` (both
Tensor-Core rules), ``modules`` (its Module view), and ``tensorboard`` (the three together, on
demand: not part of ``analyze``); ``columns`` and ``intervals`` hold helpers they share.
"""

from lab.analysis.bundle import Analysis, AnalysisTables, Run, analyze
from lab.analysis.compare import TOTAL_METRICS, Comparison, compare_analyses
from lab.analysis.gemm.analyze import device_name
from lab.analysis.kernels import KernelView, kernel_view
from lab.analysis.memory import MemoryAnalysis, memory_analysis, memory_series
from lab.analysis.modules import ModuleView, module_view
from lab.analysis.ranks import (
    HEAT_COLUMNS,
    RankRow,
    RanksAnalysis,
    RanksError,
    RankSummary,
    Straggler,
    analyze_ranks,
    combine_ranks,
    rank_frame,
    rank_summary,
)
from lab.analysis.step_time import STEP_TIME_CATEGORIES, StepTime, step_time
from lab.analysis.steps import step_window
from lab.analysis.table import trace_key_averages
from lab.analysis.tensorboard import TensorBoardViews, tensorboard_views

__all__ = [
    "TOTAL_METRICS", "Analysis", "AnalysisTables", "Comparison", "MemoryAnalysis", "Run",
    "analyze", "compare_analyses", "device_name",
    "memory_analysis", "memory_series", "step_window", "trace_key_averages",
    "STEP_TIME_CATEGORIES", "KernelView", "ModuleView", "StepTime", "kernel_view", "module_view", "step_time",
    "TensorBoardViews", "tensorboard_views",
    "RankRow", "RanksAnalysis", "RanksError", "Straggler", "analyze_ranks", "rank_frame",
    "HEAT_COLUMNS", "RankSummary", "combine_ranks", "rank_summary",
]  # fmt: skip

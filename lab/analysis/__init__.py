"""Stage 3 of the pipeline: a ``Trace`` → analyses (operators, kernels, GPU use, steps, GEMMs,
the verdict), insights (rules that cite numbers), lesson signals and comparisons.

Each analysis is a pure function of a ``Trace`` returning plain data, one concern per module:
``operators`` (launch links, the operator and kernel tables), ``gpu`` (utilization, idle gaps,
launch delays), ``steps``, ``gemm`` (efficiency against the device's peak), ``verdict``,
``memory`` (profile_memory's allocations over time); ``bundle`` is the facade (``analyze`` →
``Analysis``). ``columns`` holds the code/group-by helpers they share with the views.
"""

from lab.analysis.bundle import Analysis, analyze
from lab.analysis.compare import TOTAL_METRICS, Comparison, compare_analyses, compare_traces
from lab.analysis.gemm import device_name
from lab.analysis.insights import Insight, find_insights
from lab.analysis.key_averages import trace_key_averages
from lab.analysis.memory import MemoryAnalysis, memory_analysis, memory_series
from lab.analysis.memory_insights import MEMORY_RULES
from lab.analysis.ranks import RankRow, RanksAnalysis, RanksError, Straggler, analyze_ranks, rank_frame
from lab.analysis.ranks_insights import RANK_RULES, rank_insights
from lab.analysis.signals import Run, Signal, lesson_signals

__all__ = [
    "MEMORY_RULES", "TOTAL_METRICS", "Analysis", "Comparison", "Insight", "MemoryAnalysis", "Run", "Signal",
    "analyze", "compare_analyses", "compare_traces", "device_name", "find_insights", "lesson_signals",
    "memory_analysis", "memory_series", "trace_key_averages",
    "RANK_RULES", "RankRow", "RanksAnalysis", "RanksError", "Straggler", "analyze_ranks", "rank_frame", "rank_insights",
]  # fmt: skip

"""``find_insights``: the rules still on the ``Insight`` record (GEMM and memory), over a trace
and its ``Analysis``. Every other rule is a ``lab.judge`` finding; these move there too.
"""

from __future__ import annotations

from lab.analysis.bundle import Analysis, analyze
from lab.analysis.gemm.insights import (  # noqa: F401  (re-exported: the GEMM rules and their thresholds)
    GEMM_COLD_BELOW_MEDIAN,
    GEMM_FEW_INSTANCES,
    GEMM_LOW_PCT_OF_PEAK,
    GEMM_MIN_KERNEL_US,
    GEMM_RULES,
    TF32_MIN_COMPUTE_MAJOR,
    TF32_SWITCH,
    fp32_without_tf32,
    gemm_below_peak,
)
from lab.analysis.insights.record import SEVERITIES, Insight
from lab.analysis.memory.insights import MEMORY_RULES
from lab.trace.load import Trace

__all__ = ["RULES", "find_insights"]

RULES = (
    *GEMM_RULES,  # FP32 without TF32, below the roof, without a rate (lab/analysis/gemm/insights.py)
    *MEMORY_RULES,  # profile_memory: growth, fragmentation, churn, the peak (lab/analysis/memory/insights.py)
)


def find_insights(trace: Trace, analysis: Analysis | None = None, *, rules=RULES) -> list[Insight]:
    """Every rule that fires, critical first (rule order within a severity)."""
    analysis = analysis or analyze(trace)
    found = [insight for rule in rules if (insight := rule(trace, analysis)) is not None]
    return sorted(found, key=lambda insight: SEVERITIES.index(insight.severity))

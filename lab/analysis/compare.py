"""Two traces side by side: what got faster, what appeared or vanished, which insights changed.

``compare_analyses(a, b, ...)`` (analyses already computed) and ``compare_traces(a, b)`` (two
traces, analysed once each) treat A as the baseline: ``delta = B − A`` and ``ratio = B / A``.
Rows are an outer join on the name; a name missing from one trace counts as 0 there
(``status`` says "both", "gone" = only in A, or "new" = only in B; ``ratio`` is NaN when A is 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.bundle import Analysis, analyze
from lab.analysis.insights.rules import Insight, find_insights
from lab.analysis.operators import host_work_us
from lab.analysis.steps import per_iteration_us
from lab.trace.load import Trace

DIFF_COLUMNS = ("name", "cat", "status", "a_count", "b_count", "a_us", "b_us", "delta_us", "ratio")


@dataclass(frozen=True)
class Comparison:
    label_a: str
    label_b: str
    # Per CPU-side op/annotation/runtime call name: self CPU time (sums to the CPU op time total).
    operators: pd.DataFrame
    # Per GPU activity name (kernels, memcpys, memsets): summed GPU time.
    kernels: pd.DataFrame
    # metric, a, b, delta, ratio: whole-trace figures (see ``TOTAL_METRICS``).
    totals: pd.DataFrame
    insights_gone: tuple[str, ...]  # titles that fire on A but not on B
    insights_new: tuple[str, ...]  # titles that fire on B but not on A
    insights_kept: tuple[str, ...]  # titles that fire on both

    def total(self, metric: str) -> tuple[float, float]:
        row = self.totals[self.totals["metric"] == metric]
        if row.empty:
            raise KeyError(f"no total named {metric!r}; known: {', '.join(self.totals['metric'])}")
        return float(row["a"].iloc[0]), float(row["b"].iloc[0])


TOTAL_METRICS = {
    "trace_span_us": "first event start → last event end",
    "gpu_busy_us": "union of GPU activity",
    "gpu_active_span_us": "first → last GPU activity",
    "gpu_active_busy_pct": "GPU busy share of its active window",
    "kernel_time_us": "sum of kernel durations",
    "kernel_count": "number of kernels",
    "memcpy_time_us": "sum of memcpy durations",
    "memset_time_us": "sum of memset durations",
    "cpu_op_time_us": "self CPU time of ops, annotations and runtime calls, synchronize waits excluded",
    "launch_delay_median_us": "median GPU start − launch start",
    "step_median_us": "median step time (lab.analysis.steps.per_iteration_us: the one step time every view shows)",
}


def _diff(a: pd.DataFrame, b: pd.DataFrame, value: str) -> pd.DataFrame:
    """Outer join of two summaries on name, ``value`` as a_us/b_us; sorted by |delta|, largest first."""
    def side(frame: pd.DataFrame, tag: str) -> pd.DataFrame:
        if frame.empty:
            return pd.DataFrame({"name": pd.Series(dtype=object), f"{tag}_cat": pd.Series(dtype=object),
                                 f"{tag}_count": pd.Series(dtype=float), f"{tag}_us": pd.Series(dtype=float)})
        grouped = frame.groupby("name", sort=False).agg(cat=("cat", "first"), count=("count", "sum"),
                                                         us=(value, "sum")).reset_index()
        return grouped.rename(columns={"cat": f"{tag}_cat", "count": f"{tag}_count", "us": f"{tag}_us"})

    out = side(a, "a").merge(side(b, "b"), on="name", how="outer")
    in_a, in_b = out["a_us"].notna(), out["b_us"].notna()
    out["status"] = np.where(in_a & in_b, "both", np.where(in_a, "gone", "new"))
    out["cat"] = out["a_cat"].where(in_a, out["b_cat"])
    for col in ("a_count", "b_count", "a_us", "b_us"):
        out[col] = out[col].fillna(0)
    out["a_count"] = out["a_count"].astype(np.int64)
    out["b_count"] = out["b_count"].astype(np.int64)
    out["delta_us"] = out["b_us"] - out["a_us"]
    a_us = out["a_us"].to_numpy(dtype=float)
    out["ratio"] = np.divide(out["b_us"].to_numpy(dtype=float), a_us, out=np.full(len(out), np.nan), where=a_us > 0)
    out = out.assign(_order=-out["delta_us"].abs()).sort_values("_order", kind="stable")
    return out[list(DIFF_COLUMNS)].reset_index(drop=True)


def _totals(analysis: Analysis) -> dict[str, float]:
    kernels = analysis.kernels
    by_cat = kernels.groupby("cat")["total_us"].sum() if len(kernels) else pd.Series(dtype=float)
    steps = analysis.steps
    return {
        "trace_span_us": analysis.utilization.trace_span_us,
        "gpu_busy_us": analysis.utilization.busy_us,
        "gpu_active_span_us": analysis.utilization.active_span_us,
        "gpu_active_busy_pct": analysis.utilization.active_busy_pct,
        "kernel_time_us": float(by_cat.get("kernel", 0.0)),
        "kernel_count": float(kernels.loc[kernels["cat"] == "kernel", "count"].sum()) if len(kernels) else 0.0,
        "memcpy_time_us": float(by_cat.get("gpu_memcpy", 0.0)),
        "memset_time_us": float(by_cat.get("gpu_memset", 0.0)),
        "cpu_op_time_us": host_work_us(analysis.operators),
        "launch_delay_median_us": analysis.launches.delay_median_us,
        "step_median_us": per_iteration_us(steps),
    }


def compare_analyses(analysis_a: Analysis, analysis_b: Analysis, *, insights_a: list[Insight],
                     insights_b: list[Insight], label_a: str = "A", label_b: str = "B") -> Comparison:
    """Compare B with the baseline A from analyses and insights already computed.

    The page passes its cached ones (``ui/cache.py``: analysed with the run's config and peak),
    so "insights that changed" are exactly the difference of the two Insights tabs.
    """
    totals_a, totals_b = _totals(analysis_a), _totals(analysis_b)
    rows = []
    for metric in TOTAL_METRICS:
        va, vb = totals_a[metric], totals_b[metric]
        ratio = vb / va if va and not math.isnan(va) and va > 0 else float("nan")
        rows.append({"metric": metric, "a": va, "b": vb, "delta": vb - va, "ratio": ratio})
    titles_a = [i.title for i in insights_a]
    titles_b = [i.title for i in insights_b]
    return Comparison(
        label_a=label_a,
        label_b=label_b,
        operators=_diff(analysis_a.operators, analysis_b.operators, "self_us"),
        kernels=_diff(analysis_a.kernels, analysis_b.kernels, "total_us"),
        totals=pd.DataFrame(rows, columns=["metric", "a", "b", "delta", "ratio"]),
        insights_gone=tuple(t for t in titles_a if t not in titles_b),
        insights_new=tuple(t for t in titles_b if t not in titles_a),
        insights_kept=tuple(t for t in titles_a if t in titles_b),
    )


def compare_traces(a: Trace, b: Trace, *, label_a: str = "A", label_b: str = "B") -> Comparison:
    """Compare trace ``b`` with the baseline ``a``, analysing each once (the CLI's ``compare``).

    Traces alone carry no run config, so GEMM shapes come from the traces only; a caller that
    has analyses already (the page) uses ``compare_analyses``.
    """
    analysis_a, analysis_b = analyze(a), analyze(b)
    return compare_analyses(analysis_a, analysis_b, insights_a=find_insights(a, analysis_a),
                            insights_b=find_insights(b, analysis_b), label_a=label_a, label_b=label_b)

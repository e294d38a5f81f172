"""The facade: ``analyze`` runs every analysis of one trace once and bundles the results.

One analyzer per concern, each a pure function of a ``Trace`` (HTA-style):
``operators`` (links, operator and kernel tables), ``gpu`` (utilization, gaps, launch delays),
``steps``, ``gemm`` (efficiency against the device's peak) and ``memory``
(profile_memory's allocations over time).

Not here, by design: what only one tab shows is computed when that tab asks, in a reader job —
the grouped-by-shape tables (``Analysis.key_averages_by_shape``, the Table's toggle) and the
TensorBoard plugin's views (``lab.analysis.tensorboard.tensorboard_views``: step time, Kernel
view, Module view; the "TensorBoard" tab). Inside every ``analyze`` those views took the
transformer trace's analysis from 108 ms to ~0.5 s (BENCHMARKS.md "Analyze").
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property

import numpy as np
import pandas as pd

from lab.analysis.diagnoses.findings import Findings, diagnose
from lab.analysis.gemm.analyze import gemm_figures, peak_for, typical_gemm
from lab.analysis.gpu import GpuUtilization, LaunchStats, gpu_utilization, launch_delays
from lab.analysis.memory.analyze import MemoryAnalysis, memory_analysis
from lab.analysis.operators import Links, build_links, kernel_summary, operator_summary
from lab.analysis.steps import step_breakdown, step_windows
from lab.analysis.table.key_averages import trace_key_averages
from lab.core.config import RunConfig
from lab.core.devices import DevicePeak
from lab.trace.load import Trace

__all__ = ["Analysis", "AnalysisTables", "Run", "analyze"]


@dataclass(frozen=True)
class AnalysisTables:
    """The analyses of one trace without its event-level frames (``Analysis.links``, the trace):
    what the page draws its tables, cards and verdict from, held by the server while the whole
    ``Analysis`` stays in the reader that keeps the trace (``Analysis.tables``)."""

    key_averages: pd.DataFrame  # torch's key_averages() rebuilt from the trace (every row)
    operators: pd.DataFrame  # its CPU-side rows, with categories (lab.analysis.operators)
    kernels: pd.DataFrame
    utilization: GpuUtilization
    launches: LaunchStats
    steps: pd.DataFrame
    gemm: pd.DataFrame
    peak: DevicePeak | None
    findings: Findings  # the diagnoses (lab.analysis.diagnoses.findings), computed once
    # What the GEMM table left out and why (a figure above the device's peak is never shown).
    gemm_notes: tuple[str, ...] = ()
    # The GEMM instance every view quotes (Summary card, roofline point, insight caveat): one row of ``gemm``.
    gemm_typical: pd.Series | None = None
    memory: MemoryAnalysis | None = None  # profile_memory's records (None: the trace has none)
    # Each step's window (lab.analysis.steps.step_windows: start_us, end_us), the one step time.
    step_windows_us: tuple[np.ndarray, np.ndarray] = field(
        default=(np.array([]), np.array([])), repr=False, compare=False)


@dataclass(frozen=True)
class Analysis(AnalysisTables):
    """The analyses of one trace that the judge, the insights and most tabs read, computed
    once by ``analyze``: its ``AnalysisTables`` and the event-level ``links``. Not the
    TensorBoard plugin's views: ``tensorboard_views(trace)``, when the "TensorBoard" tab is
    opened (a reader job)."""

    links: Links = field(kw_only=True)  # who contains whom and who launched what, per event
    # The trace analysed, for the grouped-by-shape tables below: computed when first asked for
    # (the page's "Group by input shape" toggle), not on every analysis — 25 ms of the 52k-event
    # transformer trace's ~150 ms.
    trace: Trace | None = field(default=None, repr=False, compare=False, kw_only=True)

    def tables(self) -> AnalysisTables:
        """This analysis without its frames: the same tables, a plain ``AnalysisTables``."""
        return AnalysisTables(**{f.name: getattr(self, f.name) for f in fields(AnalysisTables)})

    @cached_property
    def key_averages_by_shape(self) -> pd.DataFrame:
        """``key_averages(group_by_input_shape=True)`` rebuilt from the trace."""
        return trace_key_averages(_analysed(self), group_by_input_shape=True)

    @cached_property
    def operators_by_shape(self) -> pd.DataFrame:
        return operator_summary(_analysed(self), group_by_shape=True, key_averages=self.key_averages_by_shape)


def _analysed(analysis: Analysis) -> Trace:
    if analysis.trace is None:
        raise ValueError("this Analysis was built without its trace; call analyze(trace)")
    return analysis.trace


@dataclass(frozen=True)
class Run:
    """One named trace with its analysis: what a lesson's check, its questions and the figures
    (``lab.analysis.figures``) read, one per run of the lesson, in its order."""

    name: str
    trace: Trace
    analysis: Analysis
    # (profiled, unprofiled) median µs per iteration, from the run or the sample's manifest;
    # None where unknown (an upload). Only the profiler-overhead lesson reads it.
    timing: tuple[float, float] | None = None


def analyze(trace: Trace, *, peak: DevicePeak | None = None, config: RunConfig | None = None) -> Analysis:
    links = build_links(trace)
    key_averages = trace_key_averages(trace)
    operators = operator_summary(trace, key_averages=key_averages)
    utilization = gpu_utilization(trace)
    launches = launch_delays(trace)
    peak = peak if peak is not None else peak_for(trace)
    gemm = gemm_figures(trace, peak=peak, config=config, links=links)
    findings = diagnose(trace)  # first: its step spans serve the steps and memory tables too
    memory = memory_analysis(trace, spans=findings.steps)
    windows = step_windows(trace, findings.steps, links, gpu_rows=utilization.activity_rows)
    return Analysis(
        key_averages=key_averages,
        operators=operators,
        kernels=kernel_summary(trace),
        utilization=utilization,
        launches=launches,
        steps=step_breakdown(trace, links=links, utilization=utilization, spans=findings.steps, windows=windows),
        gemm=gemm.rows,
        peak=peak,
        links=links,
        gemm_notes=gemm.notes,
        gemm_typical=typical_gemm(gemm.rows),
        findings=findings,
        trace=trace,
        memory=memory,
        step_windows_us=windows,
    )

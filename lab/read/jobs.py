"""The multi-trace work a reader does, as data: which computation (``JobKind``), over which
traces, returning plain data.

A single trace is read by a ``ReadRequest``; everything that needs several traces already read
— one job's ranks side by side, A/B compare, a lesson's signals and its questions' answers —
and what one tab shows only when opened (the by-shape tables on the Table's first toggle, the
TensorBoard tab's views), is a ``Job``: the server sends the traces and analyses it holds
(pickle-5 frames, no JSON) and gets back only the result, so the Streamlit script thread runs no
analysis. Results:

    RANKS     → ``RanksResult``              (``analyze_ranks``, ``judge_ranks``; ``JobRefused`` with its words)
    RANK_SUMMARIES → ``RanksResult``         (``combine_ranks`` of a directory job's ``RankSummary``s)
    COMPARE   → ``Comparison``               (``compare_analyses``, A = first, B = second)
    SIGNALS   → ``tuple[Signal, ...]``       (``code(lesson, runs)``: the lesson's check)
    ANSWERS   → ``tuple[tuple[str, Answer], ...]``  (``code(lesson, device_kind, runs)``: question key, answer)
    BY_SHAPE  → ``ByShape``                  (key_averages and operators grouped by input shape)
    TENSORBOARD → ``TensorBoardViews``       (``tensorboard_views`` of the one trace: step time, kernels, modules)
    OWN       → ``tuple[tuple[Question, Answer], ...]``  (``code(runs)``: the one trace's own questions, answered)
    VIEW      → what ``code(traces, analyses, explanations, **dict(args))`` returns: what a view draws from
                traces the page holds only the ``Outline`` of (a timeline window, the memory chart's,
                the replay's choices, the ranks' stacked timeline: ``lab.views.queries``)

The lesson, teaching and view code of SIGNALS, ANSWERS, OWN and VIEW is handed by the page in
``Job.code`` (``lab.lessons.lesson_signals``, ``lab.lessons.answer_questions``,
``lab.teach.own_trace.own_answers``, ``lab.views.queries``' functions): a module-level function,
which pickle sends by reference, so the reader runs the page's registry and ``lab.read`` imports
no lesson, teaching or view code.

Run in the reader by ``run_job``; nothing here imports pandas or the analysis at import time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lab.pool import Name

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from lab.analysis import Analysis, RanksAnalysis, RankSummary
    from lab.explain import Explanation
    from lab.judge import Finding
    from lab.read.kept import TraceRef
    from lab.trace import Trace

__all__ = ["ByShape", "Job", "JobInput", "JobKind", "JobRefused", "RanksResult", "run_job"]


class JobKind(Name):
    RANKS = "ranks"
    RANK_SUMMARIES = "ranks from their summaries"
    COMPARE = "compare"
    SIGNALS = "lesson signals"
    ANSWERS = "lesson answers"
    BY_SHAPE = "by shape"
    TENSORBOARD = "tensorboard views"
    OWN = "own trace questions"
    VIEW = "view"


@dataclass(frozen=True, kw_only=True)
class Job:
    """One multi-trace computation (``Task.job``); its traces follow as ``JobInput`` frames."""

    kind: JobKind
    names: tuple[str, ...] = ()  # one per trace: file names (ranks), lesson run names (signals, answers)
    lesson: str | None = None  # the lesson's key (signals, answers)
    device_kind: str = "cpu"  # "cuda" or "cpu": which questions the runs can answer
    labels: tuple[str, str] = ("A", "B")  # compare's labels
    # One per trace (signals, answers): (profiled, unprofiled) µs per iteration, or None.
    timings: tuple[tuple[float, float] | None, ...] = ()
    # SIGNALS, ANSWERS, OWN, VIEW: the function the page hands the reader (the module doc names them).
    code: Callable[..., Any] | None = None
    # VIEW: the keyword arguments of ``code`` (a window, a mark budget…), as (name, value) pairs of
    # hashable values: the page keeps results by the job.
    args: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class JobInput:
    """What the job reads: the traces, their analyses and judged findings, as the server holds them —
    or their ``refs``."""

    traces: tuple[Trace, ...] = ()
    analyses: tuple[Analysis, ...] = ()
    findings: tuple[tuple[Finding, ...], ...] = ()  # each trace's Judgement.findings (COMPARE)
    explanations: tuple[Explanation | None, ...] = ()  # each trace's (VIEW), filled from what a reader keeps
    summaries: tuple[RankSummary, ...] = ()  # RANK_SUMMARIES: each rank's, as its reader sent it back
    # Instead of the traces: the keys of traces a reader keeps (lab.read.kept), one per trace;
    # the reader fills traces, analyses and findings from what it holds, or reads them again.
    refs: tuple[TraceRef, ...] = ()


@dataclass(frozen=True)
class RanksResult:
    analysis: RanksAnalysis
    findings: tuple[Finding, ...]  # lab.judge.judge_ranks: the job's findings, largest saving first


@dataclass(frozen=True)
class ByShape:
    key_averages: pd.DataFrame  # key_averages(group_by_input_shape=True) rebuilt from the trace
    operators: pd.DataFrame


class JobRefused(Exception):
    """The job cannot be done on these traces (e.g. files that are not one job's ranks); the
    message is for the visitor, ``error_type`` names the refusal (``RanksError``)."""

    def __init__(self, message: str, error_type: str):
        super().__init__(message)
        self.error_type = error_type


def _rank_causes(given: JobInput) -> list | None:
    """Each rank's median µs per step by cause (lab.explain's attribution), where analyses came too."""
    if not given.analyses or len(given.analyses) != len(given.traces):
        return None
    explain = importlib.import_module("lab.explain")
    measure = importlib.import_module("lab.measure").measure
    return [explain.attribute(measure(t, analysis=a)).median_us()
            for t, a in zip(given.traces, given.analyses, strict=True)]


def run_job(job: Job, given: JobInput) -> Any:
    """The job's result (see the module doc); runs in a reader."""
    analysis = importlib.import_module("lab.analysis")
    if job.kind in (JobKind.RANKS, JobKind.RANK_SUMMARIES):
        try:
            ranks = (analysis.combine_ranks(list(given.summaries)) if job.kind == JobKind.RANK_SUMMARIES
                     else analysis.analyze_ranks(list(given.traces), list(job.names), analyses=list(given.analyses),
                                                 causes=_rank_causes(given)))
        except analysis.RanksError as exc:
            raise JobRefused(str(exc), type(exc).__name__) from None
        return RanksResult(analysis=ranks, findings=importlib.import_module("lab.judge").judge_ranks(ranks))
    if job.kind == JobKind.COMPARE:
        a, b = given.analyses
        found_a, found_b = given.findings
        return analysis.compare_analyses(a, b, findings_a=found_a, findings_b=found_b, label_a=job.labels[0],
                                         label_b=job.labels[1])
    if job.kind == JobKind.BY_SHAPE:
        (one,) = given.analyses
        return ByShape(key_averages=one.key_averages_by_shape, operators=one.operators_by_shape)
    if job.kind == JobKind.TENSORBOARD:
        (trace,) = given.traces
        return analysis.tensorboard_views(trace)
    if job.kind == JobKind.VIEW:
        if job.code is None:
            raise ValueError("a view job needs the code to run (Job.code), handed by the page")
        explanations = given.explanations or (None,) * len(given.traces)
        return job.code(given.traces, given.analyses, explanations, **dict(job.args))
    timings = job.timings or (None,) * len(job.names)
    runs = [analysis.Run(n, t, a, timing=tm)
            for n, t, a, tm in zip(job.names, given.traces, given.analyses, timings, strict=True)]
    if job.code is None:
        raise ValueError(f"a {job.kind} job needs the code to run (Job.code), handed by the page")
    if job.kind == JobKind.SIGNALS:
        return tuple(job.code(job.lesson, runs))
    if job.kind == JobKind.ANSWERS:
        return tuple(job.code(job.lesson, job.device_kind, runs))
    if job.kind == JobKind.OWN:
        return tuple(job.code(runs))
    raise ValueError(f"unknown job kind {job.kind!r}")

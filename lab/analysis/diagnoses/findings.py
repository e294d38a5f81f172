"""Diagnoses that name the cause: each a pure function of a ``Trace`` returning a
frozen finding with its numbers, or None when the problem is absent.

=========================  ==============================  =====================================
diagnosis                  finder (module)                 finding
=========================  ==============================  =====================================
steps                      ``step_spans`` (steps)           ``StepSpans``
host syncs inside steps    ``find_host_syncs`` (host)       ``HostSyncs``
host work outside ops      ``find_host_gaps`` (host)        ``HostGaps``
pageable copies            ``find_pageable_copies``         ``PageableCopies``
CUDA graph replays         ``find_graph_replays``           ``GraphReplays`` (+ ``graph_replay_rows``)
collectives                ``find_collectives``             ``Collectives``
empty capture window       ``find_empty_capture``           ``EmptyCapture`` (+ ``capture_explains_missing_gpu``)
with_stack/profile_memory  ``find_profiler_inflation``      ``ProfilerInflation``
=========================  ==============================  =====================================

``diagnose`` runs them all (steps once); ``diagnosis_insights`` turns the findings into
``Insight``s; ``DIAGNOSIS_RULES`` are the same as ``rule(trace, analysis)`` functions for
insights.RULES; ``named_cause`` says which cause a diagnosis names first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.analysis.diagnoses.capture import (
    EmptyCapture,
    ProfilerInflation,
    capture_explains_missing_gpu,
    find_empty_capture,
    find_profiler_inflation,
)
from lab.analysis.diagnoses.comm import COMM_BOUND_PCT, Collectives, find_collectives
from lab.analysis.diagnoses.copies import COPY_BOUND_PCT, PageableCopies, find_pageable_copies
from lab.analysis.diagnoses.graphs import GraphReplays, find_graph_replays, graph_replay_rows
from lab.analysis.diagnoses.host import HostGaps, HostSyncs, find_host_gaps, find_host_syncs
from lab.analysis.diagnoses.steps import StepSpans, step_spans
from lab.analysis.diagnoses.text import (
    collectives_insight,
    empty_capture_insight,
    graph_replays_insight,
    host_gaps_insight,
    host_syncs_insight,
    pageable_copies_insight,
    profiler_inflation_insight,
)
from lab.analysis.insights.record import Insight
from lab.trace import Trace

__all__ = [
    "DIAGNOSIS_RULES", "HOST_BOUND_PCT", "SYNC_BOUND_PCT", "Findings",
    "capture_explains_missing_gpu", "diagnose", "findings_of", "diagnosis_insights", "graph_replay_rows", "step_spans",
    "named_cause",
]  # fmt: skip

# GPU idle after syncs, or during host work outside ops, at ≥ 30 % of step time is the run's
# bottleneck, not a detail: the verdict names it (the same bar as COMM_BOUND_PCT; the lab calls
# a GPU busy < 80 % of its window CPU-bound, so 30 % idle from one cause is most of that gap).
SYNC_BOUND_PCT = 30.0
HOST_BOUND_PCT = 30.0


@dataclass(frozen=True)
class Findings:
    """Every diagnosis of one trace (None: that problem is absent)."""

    steps: StepSpans
    syncs: HostSyncs | None
    host_gaps: HostGaps | None
    copies: PageableCopies | None
    graphs: GraphReplays | None
    collectives: Collectives | None
    empty_capture: EmptyCapture | None
    inflation: ProfilerInflation | None


def diagnose(trace: Trace) -> Findings:
    steps = step_spans(trace)
    return Findings(
        steps=steps,
        syncs=find_host_syncs(trace, steps=steps),
        host_gaps=find_host_gaps(trace, steps=steps),
        copies=find_pageable_copies(trace),
        graphs=find_graph_replays(trace, steps=steps),
        collectives=find_collectives(trace, steps=steps),
        empty_capture=find_empty_capture(trace),
        inflation=find_profiler_inflation(trace),
    )


_TO_INSIGHT = (
    ("empty_capture", empty_capture_insight),
    ("copies", pageable_copies_insight),
    ("collectives", collectives_insight),
    ("syncs", host_syncs_insight),
    ("host_gaps", host_gaps_insight),
    ("graphs", graph_replays_insight),
    ("inflation", profiler_inflation_insight),
)


def diagnosis_insights(findings: Findings) -> list[Insight]:
    """One insight per finding that fired, in the order above (callers sort by severity)."""
    return [to_insight(f) for name, to_insight in _TO_INSIGHT if (f := getattr(findings, name)) is not None]


# --- as insights.RULES entries: rule(trace, analysis) -> Insight | None ----------------------


def findings_of(trace: Trace, analysis: Any) -> Findings:
    """The analysis's findings (``Analysis.findings``, computed once by ``analyze``). A rule is
    always handed its trace's ``Analysis`` (``find_insights`` makes one when not given): it never
    runs the diagnoses again, and an analysis without findings is a caller's bug, said so."""
    found = getattr(analysis, "findings", None)
    if not isinstance(found, Findings):
        raise TypeError(f"a rule needs the trace's Analysis (analyze(trace)), got {type(analysis).__name__}")
    return found


def empty_capture_rule(trace: Trace, analysis: Any) -> Insight | None:
    f = findings_of(trace, analysis).empty_capture
    return empty_capture_insight(f) if f else None


def pageable_copies_rule(trace: Trace, analysis: Any) -> Insight | None:
    f = findings_of(trace, analysis).copies
    return pageable_copies_insight(f) if f else None


def collectives_rule(trace: Trace, analysis: Any) -> Insight | None:
    f = findings_of(trace, analysis).collectives
    return collectives_insight(f) if f else None


def host_syncs_rule(trace: Trace, analysis: Any) -> Insight | None:
    f = findings_of(trace, analysis).syncs
    return host_syncs_insight(f) if f else None


def host_gaps_rule(trace: Trace, analysis: Any) -> Insight | None:
    f = findings_of(trace, analysis).host_gaps
    return host_gaps_insight(f) if f else None


def graph_replays_rule(trace: Trace, analysis: Any) -> Insight | None:
    f = findings_of(trace, analysis).graphs
    return graph_replays_insight(f) if f else None


def profiler_inflation_rule(trace: Trace, analysis: Any) -> Insight | None:
    f = findings_of(trace, analysis).inflation
    return profiler_inflation_insight(f) if f else None


DIAGNOSIS_RULES = (
    empty_capture_rule, pageable_copies_rule, collectives_rule, host_syncs_rule, host_gaps_rule,
    graph_replays_rule, profiler_inflation_rule,
)  # fmt: skip


# --- the cause a diagnosis names first ---------------------------------------------------------


def named_cause(findings: Findings) -> str | None:
    """The cause a diagnosis names before any "overhead-bound" reading, or None: an empty window
    (nothing to judge), pageable copies (the GPU is "busy" copying at a fraction of the link's
    speed), communication, syncs or host work the GPU idles for, or CUDA graph replays (launches
    are paid per replay). The judged verdict (``lab.judge``) names each of them as a Finding."""
    f = findings
    if f.empty_capture:
        return "empty-window"
    if f.copies and f.copies.pageable_busy_pct >= COPY_BOUND_PCT:
        return "copy-bound"
    if f.collectives and f.collectives.share_pct >= COMM_BOUND_PCT:
        return "communication-bound"
    if f.syncs and f.syncs.idle_pct >= SYNC_BOUND_PCT:
        return "sync-bound"
    if f.host_gaps and (f.host_gaps.gpu_idle_pct or 0.0) >= HOST_BOUND_PCT:
        return "host-bound"
    return "graph-replays" if f.graphs else None

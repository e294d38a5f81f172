"""Diagnoses that name the cause: each a pure function of a ``Trace`` returning a
frozen finding with its numbers, or None when the problem is absent.

=========================  ==============================  =====================================
diagnosis                  finder (module)                 finding
=========================  ==============================  =====================================
steps                      ``step_spans`` (steps)           ``StepSpans``
CUDA graph replays         ``find_graph_replays``           ``GraphReplays`` (+ ``graph_replay_rows``)
collectives                ``find_collectives``             ``Collectives``
empty capture window       ``find_empty_capture``           ``EmptyCapture`` (+ ``capture_explains_missing_gpu``)
with_stack/profile_memory  ``find_profiler_inflation``      ``ProfilerInflation``
=========================  ==============================  =====================================

``diagnose`` runs them all (steps once); ``lab.judge`` turns their figures into findings
(``lab/judge/context.py``). Host syncs, host work outside ops and pageable copies are causes of
the time attribution (``lab.explain``), judged by ``lab/judge/rules.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.analysis.diagnoses.capture import (
    EmptyCapture,
    ProfilerInflation,
    capture_explains_missing_gpu,
    find_empty_capture,
    find_profiler_inflation,
)
from lab.analysis.diagnoses.comm import Collectives, find_collectives
from lab.analysis.diagnoses.graphs import GraphReplays, find_graph_replays, graph_replay_rows
from lab.analysis.diagnoses.steps import StepSpans, step_spans
from lab.trace import Trace

__all__ = ["Findings", "capture_explains_missing_gpu", "diagnose", "graph_replay_rows", "step_spans"]


@dataclass(frozen=True)
class Findings:
    """Every diagnosis of one trace (None: that problem is absent)."""

    steps: StepSpans
    graphs: GraphReplays | None
    collectives: Collectives | None
    empty_capture: EmptyCapture | None
    inflation: ProfilerInflation | None


def diagnose(trace: Trace) -> Findings:
    steps = step_spans(trace)
    return Findings(
        steps=steps,
        graphs=find_graph_replays(trace, steps=steps),
        collectives=find_collectives(trace, steps=steps),
        empty_capture=find_empty_capture(trace),
        inflation=find_profiler_inflation(trace),
    )

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

``diagnose`` runs them all (steps once); ``lab.judge`` turns their figures into findings
(``lab/judge/context.py``, ``lab/judge/rules.py``).
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
from lab.analysis.diagnoses.copies import PageableCopies, find_pageable_copies
from lab.analysis.diagnoses.graphs import GraphReplays, find_graph_replays, graph_replay_rows
from lab.analysis.diagnoses.host import HostGaps, HostSyncs, find_host_gaps, find_host_syncs
from lab.analysis.diagnoses.steps import StepSpans, step_spans
from lab.trace import Trace

__all__ = ["Findings", "capture_explains_missing_gpu", "diagnose", "graph_replay_rows", "step_spans"]


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

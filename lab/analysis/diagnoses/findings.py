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
insights.RULES; ``weigh_verdict`` says which cause must be named before "GPU-bound /
CPU-bound / overhead-bound".
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
from lab.units import fmt_us

__all__ = [
    "DIAGNOSIS_RULES", "HOST_BOUND_PCT", "SYNC_BOUND_PCT", "Findings", "WeighedVerdict",
    "capture_explains_missing_gpu", "diagnose", "findings_of", "diagnosis_insights", "graph_replay_rows", "step_spans",
    "weigh_verdict",
]  # fmt: skip

# GPU idle after syncs, or during host work outside ops, at ≥ 30 % of step time is the run's
# bottleneck, not a detail: the verdict names it (the same bar as COMM_BOUND_PCT; the lab calls
# a GPU busy < 80 % of its window CPU-bound, so 30 % idle from one cause is most of that gap).
SYNC_BOUND_PCT = 30.0
HOST_BOUND_PCT = 30.0
# bound_verdict kinds a weighed verdict replaces. Copies, communication, syncs and host work are
# causes the generic kinds hide; CUDA graphs only rule out "launch-bound / overhead-bound"
# readings (a GPU-bound graph replay stays GPU-bound).
_GENERIC_KINDS = ("gpu-bound", "cpu-bound", "overhead-bound")
_EMPTY_REPLACES = ("no-gpu-events", "no-gpu-work", "cpu-only", "gpu-bound", "cpu-bound", "overhead-bound")
_GRAPH_REPLACES = ("cpu-bound", "overhead-bound")


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


# --- the verdict -------------------------------------------------------------------------------


@dataclass(frozen=True)
class WeighedVerdict:
    """A cause that must be named before a generic bound verdict.

    kind: "empty-window" | "copy-bound" | "communication-bound" | "sync-bound" | "host-bound" |
    "graph-replays". ``replaces``: the ``bound_verdict`` kinds this verdict overrides.
    """

    kind: str
    headline: str
    numbers: dict = field(default_factory=dict)
    replaces: tuple[str, ...] = _GENERIC_KINDS


def _empty(e: EmptyCapture) -> WeighedVerdict:
    steps = ", ".join(e.profiler_steps) or "no ProfilerStep"
    return WeighedVerdict("empty-window", (
        f"Nothing to judge: the capture window recorded {e.ops} op(s) and {e.gpu_activities} GPU activities "
        f"({steps}); the profile ended before the schedule's active steps ran."),
        dict(ops=e.ops, gpu_activities=e.gpu_activities), _EMPTY_REPLACES)


def _copy_bound(c: PageableCopies) -> WeighedVerdict | None:
    if c.pageable_busy_pct < COPY_BOUND_PCT:
        return None
    rate = f" at {c.pageable_gbps:.1f} GB/s" if c.pageable_gbps is not None else ""
    return WeighedVerdict("copy-bound", (
        f"Copy-bound: copies from pageable host memory take {c.pageable_busy_pct:.0f} % of GPU busy time "
        f"({fmt_us(c.pageable_us)}{rate}); pin the host tensors (pin_memory()) and copy with non_blocking=True."),
        dict(pageable_busy_pct=c.pageable_busy_pct, pageable_us=c.pageable_us, pageable_gbps=c.pageable_gbps))


def _comm_bound(c: Collectives) -> WeighedVerdict | None:
    if c.share_pct < COMM_BOUND_PCT:
        return None
    who = f"rank {c.rank} of {c.world_size}" if c.rank is not None and c.world_size else "this process"
    return WeighedVerdict("communication-bound", (
        f"Communication-bound ({who}{', ' + c.backend if c.backend else ''}): collectives take "
        f"{c.comm_busy_pct:.0f} % of GPU busy time and {c.host_comm_pct:.0f} % of step time on the host; overlap "
        f"them with compute (DDP buckets, no_sync) before tuning kernels."),
        dict(comm_busy_pct=c.comm_busy_pct, host_comm_pct=c.host_comm_pct, overlap_pct=c.overlap_pct,
             rank=c.rank, world_size=c.world_size))


def _sync_or_host(syncs: HostSyncs | None, gaps: HostGaps | None) -> WeighedVerdict | None:
    """Sync-bound when the GPU idles ≥ SYNC_BOUND_PCT after syncs (host work after them is named
    too: the sync is why it cannot overlap kernels); else host-bound on the host-gap idle."""
    sync_idle = syncs.idle_pct if syncs else 0.0
    host_idle = (gaps.gpu_idle_pct or 0.0) if gaps else 0.0
    if syncs and sync_idle >= SYNC_BOUND_PCT:
        gap = ""
        if gaps:
            gap = (f" and {fmt_us(gaps.uncovered_median_us)} of host work outside any op per step runs while the "
                   f"GPU waits" if gaps.step_source else " and host work then runs while the GPU waits")
        return WeighedVerdict("sync-bound", (
            f"Sync-bound: {syncs.count} host sync(s) inside the steps (median {syncs.per_step_median:g} per step, "
            f"mostly {syncs.by_source[0][0]}) empty the GPU's queue{gap}; the GPU then idles {sync_idle:.0f} % of "
            f"the step time. Move the syncs out of the loop."),
            dict(sync_count=syncs.count, gpu_idle_after_sync_pct=sync_idle, host_gap_gpu_idle_pct=host_idle))
    if gaps and host_idle >= HOST_BOUND_PCT:
        return WeighedVerdict("host-bound", (
            f"Host-bound: {fmt_us(gaps.uncovered_us)} of host work outside any op ({gaps.stretches} stretch(es), "
            f"longest {fmt_us(gaps.longest_us)}) leaves the GPU idle {host_idle:.0f} % of the step time; the "
            f"operator table cannot show it (Python between ops)."),
            dict(host_gap_us=gaps.uncovered_us, host_gap_gpu_idle_pct=host_idle))
    return None


def _graphs(g: GraphReplays) -> WeighedVerdict:
    return WeighedVerdict("graph-replays", (
        f"Not launch-bound: {g.replays} CUDA graph replay(s) run {g.kernels_per_replay_median:g} kernels per "
        f"cudaGraphLaunch (median launch delay {fmt_us(g.launch_delay_median_us)} per replay); GPU idle time "
        f"here is host work between replays, not kernel launches."),
        dict(replays=g.replays, kernels_per_replay=g.kernels_per_replay_median,
             launch_delay_median_us=g.launch_delay_median_us), _GRAPH_REPLACES)


def weigh_verdict(trace: Trace, findings: Findings | None = None) -> WeighedVerdict | None:
    """The cause to name first, or None to keep the generic verdict. Order: an empty window
    (nothing to judge), pageable copies (the GPU is "busy" copying at a fraction of the link's
    speed), communication, then syncs and host work (the GPU idles for a named reason), and
    last CUDA graphs (not launch-bound: launches are paid per replay)."""
    f = findings if findings is not None else diagnose(trace)
    if f.empty_capture:
        return _empty(f.empty_capture)
    for weighed in (_copy_bound(f.copies) if f.copies else None,
                    _comm_bound(f.collectives) if f.collectives else None,
                    _sync_or_host(f.syncs, f.host_gaps)):
        if weighed is not None:
            return weighed
    return _graphs(f.graphs) if f.graphs else None

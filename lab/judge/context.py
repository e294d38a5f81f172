"""Rules that need more of the trace than its explanation: what the capture window holds (empty,
no GPU work), collectives across ranks, CUDA graph replays. Each returns a ``Finding`` or None,
like ``rules.RULES``; the figures are the analysis's own (``lab.analysis.diagnoses`` finders and
``lab.analysis.launches.gpu_use``), never computed again here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lab.analysis.diagnoses.capture import EmptyCapture
from lab.analysis.diagnoses.comm import COMM_BOUND_PCT, Collectives
from lab.analysis.diagnoses.graphs import GraphReplays
from lab.analysis.launches import GpuUse, gpu_use, gpu_work_text
from lab.analysis.operators import host_work_us
from lab.explain.explanation import Explanation
from lab.judge.finding import MATERIAL_PCT, Finding
from lab.trace import Trace
from lab.units import fmt_us

__all__ = ["CONTEXT_RULES", "GRAPH_KERNELS_PCT", "LEADING_RULES", "QUIET_FALLBACK_RULES", "TraceContext",
           "context_of", "graphs_replace_launches"]

# CUDA graphs replay at least half the trace's kernels: the kernels are not launched one by one,
# so "launch-bound between tiny kernels" does not hold (a replay pays one cudaGraphLaunch for the
# whole graph; the decode_cudagraphs sample runs 34 kernels a replay).
GRAPH_KERNELS_PCT = 50.0
# Findings about what the trace can be judged on at all: when one fires it is the verdict, ahead
# of any saving (an empty window's "profiler cost" is not the program's).
LEADING_RULES = ("empty_window", "no_gpu_events", "no_gpu_work")
# With no material saving, the verdict is the first of these that fired (in this order).
QUIET_FALLBACK_RULES = ("graph_replays", "at_roof", "cpu_only")


@dataclass(frozen=True)
class TraceContext:
    """What the context rules read: the trace's CUDA calls, the diagnoses' figures and its memory."""

    use: GpuUse
    empty: EmptyCapture | None
    collectives: Collectives | None
    graphs: GraphReplays | None
    memory: Any  # lab.analysis.memory.MemoryAnalysis | None
    cpu_self_us: float  # lab.analysis.operators.host_work_us: the ops' self time, waits excluded


def context_of(trace: Trace, analysis: Any) -> TraceContext:
    """The context of one analysed trace (``lab.analysis.Analysis``)."""
    f = analysis.findings
    return TraceContext(use=gpu_use(trace), empty=f.empty_capture, collectives=f.collectives, graphs=f.graphs,
                        memory=analysis.memory, cpu_self_us=host_work_us(analysis.operators))


def _window(ex: Explanation) -> float:
    return float(ex.attribution.steps["wall_us"].sum())


def empty_window(ex: Explanation, ctx: TraceContext) -> Finding | None:
    e = ctx.empty
    if e is None:
        return None
    steps = ", ".join(e.profiler_steps) or "no ProfilerStep"
    return Finding(
        "empty_window", "profiler", "Nothing to judge: the capture window is empty",
        premise="the window holds no op of the program and no GPU activity beyond the profiler's own",
        evidence=f"the capture window recorded {e.ops} op(s) and {e.gpu_activities} GPU activities ({steps}); "
                 "the profile ended before the schedule's active steps ran",
        suggestion="Call prof.step() once per iteration and run at least wait + warmup + active iterations "
                   "inside the profiler's context (torch.profiler.schedule).",
        saving_us=0.0, base_us=_window(ex), scope="once",
        learn_more="https://pytorch.org/docs/stable/profiler.html#torch.profiler.schedule")


def no_gpu_events(ex: Explanation, ctx: TraceContext) -> Finding | None:
    use = ctx.use
    if use.gpu_activities or not use.launched:
        return None
    return Finding(
        "no_gpu_events", "profiler", "Work was sent to a GPU, but no GPU activity was recorded",
        premise="launch calls in the trace, and not one kernel, copy or memset",
        evidence=f"The run sent work to a GPU ({use.launch_calls:,} launch calls among {use.calls_text()}) but "
                 "recorded no GPU activity, so GPU time cannot be judged",
        suggestion="Profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], and check that CUPTI "
                   "loads (its warnings on stderr).",
        saving_us=0.0, base_us=_window(ex), scope="once")


def no_gpu_work(ex: Explanation, ctx: TraceContext) -> Finding | None:
    use = ctx.use
    if use.gpu_activities or use.launched or not use.runtime_calls:
        return None
    return Finding(
        "no_gpu_work", "other_work", "CUDA calls that launch nothing: no GPU work",
        premise="CUDA runtime calls in the trace, none of which puts work on a stream",
        evidence=gpu_work_text(use, ctx.memory).rstrip("."),
        suggestion="Nothing to speed up on the GPU; judge the host's time (the operator table) instead.",
        saving_us=0.0, base_us=_window(ex), scope="once")


def cpu_only(ex: Explanation, ctx: TraceContext) -> Finding | None:
    use = ctx.use
    if use.gpu_activities or use.runtime_calls:
        return None
    listed = (f" The trace lists {use.devices_listed} GPU(s) but has no CUDA call: if the program meant to use "
              "one, profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
              if use.devices_listed else "")
    return Finding(
        "cpu_only", "other_work", "No GPU work in this trace",
        premise="no CUDA call and no GPU activity in the trace",
        evidence=f"the {ctx.cpu_self_us:,.0f} µs of self CPU time in ops is the whole story.{listed}".rstrip("."),
        suggestion="Judge the host's time: the operator table, sorted by self CPU time.",
        saving_us=0.0, base_us=_window(ex), scope="once")


def communication(ex: Explanation, ctx: TraceContext) -> Finding | None:
    c = ctx.collectives
    step = ex.attribution.step_us
    us = float(ex.attribution.median_us()["communication"])
    if c is None or c.share_pct < COMM_BOUND_PCT or step <= 0 or 100.0 * us / step < MATERIAL_PCT:
        return None
    who = f"rank {c.rank} of {c.world_size}" if c.rank is not None and c.world_size else "this process"
    overlap = f", {c.overlap_pct:.0f} % of it overlapped by compute" if c.overlap_pct is not None else ""
    return Finding(
        "communication", "communication", f"Communication-bound ({who}{', ' + c.backend if c.backend else ''})",
        premise=f"collectives take ≥ {COMM_BOUND_PCT:.0f} % of GPU busy or step time, and the step spends "
                f"≥ {MATERIAL_PCT:.0f} % in communication no compute hides",
        evidence=f"{fmt_us(us)} of the {fmt_us(step)} step in communication; collectives take "
                 f"{c.comm_busy_pct:.0f} % of GPU busy time and {c.host_comm_pct:.0f} % of step time on the "
                 f"host{overlap}",
        suggestion="Overlap the collectives with compute (DDP gradient buckets, no_sync for accumulation steps), "
                   "or communicate less (larger buckets, gradient compression), before tuning kernels.",
        saving_us=us, base_us=step,
        learn_more="https://pytorch.org/docs/stable/notes/ddp.html")


def graph_replays(ex: Explanation, ctx: TraceContext) -> Finding | None:
    g = ctx.graphs
    if g is None:
        return None
    return Finding(
        "graph_replays", "launch", "Not launch-bound: CUDA graph replays",
        premise="kernels replayed by cudaGraphLaunch: one launch call for each whole graph",
        evidence=f"{g.replays} CUDA graph replay(s) run {g.kernels_per_replay_median:g} kernels per "
                 f"cudaGraphLaunch (median launch delay {fmt_us(g.launch_delay_median_us)} per replay); GPU idle "
                 "time here is host work between replays, not kernel launches",
        suggestion="Per-kernel launch delays do not apply to replayed kernels; shorten the host work between "
                   "replays instead.",
        saving_us=0.0, base_us=ex.attribution.step_us,
        learn_more="https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs")


def graphs_replace_launches(ctx: TraceContext) -> bool:
    """True when CUDA graphs replay at least GRAPH_KERNELS_PCT of the kernels: launch_bound's
    premise (kernels launched one by one) does not hold."""
    return ctx.graphs is not None and ctx.graphs.graph_kernel_pct >= GRAPH_KERNELS_PCT


CONTEXT_RULES: tuple[Callable[[Explanation, TraceContext], Finding | None], ...] = (
    empty_window, no_gpu_events, no_gpu_work, cpu_only, communication, graph_replays,
)

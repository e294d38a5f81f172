"""What several lessons' checks and questions read: a trace's operators and kernels, by name, who
runs fewer per step, and the explain model's figures of a run.

A run's ``Explanation`` (``lab.explain``) and ``Judgement`` (``lab.judge``) are made here as the
readers make them (``lab.read.here.parse``: the run's own links, steps and device peak), so a
lesson quoting a cause's share of the steps' time or an op's row of the roof table quotes what
the Summary's bar and roof table show.
"""

from __future__ import annotations

import re

import pandas as pd

from lab.analysis.bundle import Run
from lab.analysis.figures import work_per_step
from lab.explain import Explanation, cause, explain
from lab.judge import Judgement, judge_trace
from lab.lessons.schema import Signal
from lab.trace.load import Trace
from lab.vocab import ADD_KERNEL_NAMES

__all__ = [
    "ADD_KERNEL", "all_on_gpu", "cause_share_pct", "cause_window_pct", "cpu_ops", "explanation_of", "fewer_per_step",
    "judgement_of", "kernel_events", "name_set", "roof_row",
]  # fmt: skip


ADD_KERNEL = re.compile(ADD_KERNEL_NAMES, re.IGNORECASE)


def cpu_ops(trace: Trace):
    ev = trace.events
    return ev[(ev["lane_kind"] == "cpu") & (ev["cat"] == "cpu_op")]


def kernel_events(trace: Trace):
    ev = trace.events
    return ev[ev["cat"] == "kernel"]


def name_set(frame) -> set[str]:
    return set(frame["name"].astype(str))


def fewer_per_step(first: Run, second: Run, what: str) -> Signal:
    # The active steps' work only (lab.analysis.figures): the reveal counts the same.
    a, unit = work_per_step(first)
    b, _ = work_per_step(second)
    return Signal(f"{second.name} runs fewer {unit} per step", b < a, f"{a:.1f} vs {b:.1f} {unit} per step ({what})")


def all_on_gpu(runs: list[Run]) -> bool:
    return all(r.trace.has_gpu for r in runs)


# --------------------------------------------------------------------------- the explain model


def explanation_of(run: Run) -> Explanation:
    """The run's explanation, from its analysis's links, steps and peak (as the readers make it)."""
    analysis = run.analysis
    return explain(run.trace, links=analysis.links, spans=analysis.findings.steps, peak=analysis.peak)


def judgement_of(run: Run) -> Judgement:
    return judge_trace(run.trace, run.analysis, explanation_of(run))


def cause_share_pct(run: Run, key: str) -> float:
    """The share (%) of the step time attributed to the cause ``key`` (``lab.explain.CAUSES``):
    its median µs per step over the median step, the figures of the verdict's "per step" saving."""
    cause(key)  # refuses an unknown key with the known ones
    attribution = explanation_of(run).attribution
    step = attribution.step_us
    return 100.0 * float(attribution.median_us()[key]) / step if step > 0 else 0.0


def cause_window_pct(run: Run, key: str) -> float:
    """The share (%) of the whole profiled window (the steps' summed wall time) attributed to the
    cause ``key``: the figure of a "once, in the window" saving (a compile in the first step)."""
    cause(key)
    attribution = explanation_of(run).attribution
    wall = float(attribution.steps["wall_us"].sum()) if len(attribution.steps) else 0.0
    return 100.0 * float(attribution.total_us()[key]) / wall if wall > 0 else 0.0


def roof_row(run: Run, op: str) -> pd.Series | None:
    """The roof table's row of ``op`` (its largest-GPU-time shape), or None where it has none."""
    roofs = explanation_of(run).roofs
    rows = roofs[roofs["name"] == op]
    return None if rows.empty else rows.sort_values("gpu_us", ascending=False).iloc[0]

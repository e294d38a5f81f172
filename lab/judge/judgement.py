"""``judge``: every rule over one explanation, findings ranked by what their fix would save,
and the verdict — the largest recoverable cause, or where the time went when none is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.explain.classes import cause
from lab.explain.explanation import Explanation, explain
from lab.judge.context import (
    CONTEXT_RULES,
    LEADING_RULES,
    QUIET_FALLBACK_RULES,
    TraceContext,
    context_of,
    graphs_replace_launches,
)
from lab.judge.finding import MATERIAL_PCT, Finding
from lab.judge.rules import RULES
from lab.trace import Trace
from lab.units import fmt_us

__all__ = ["Judgement", "judge", "judge_trace", "window_share_pct"]


@dataclass(frozen=True)
class Judgement:
    findings: tuple[Finding, ...]  # largest saving (as a share of its base) first
    verdict: str  # one sentence: the biggest cause and what fixing it saves
    verdict_finding: Finding | None  # the finding the verdict names (None: no leading or recoverable cause)
    step_us: float  # the one step time (lab.explain.Attribution.step_us)
    # The finding the verdict's sentence is about, a quiet one too (CUDA graph replays, work at its
    # roof, a CPU-only trace); None when the verdict says where the time went.
    named: Finding | None = None


def judge(explanation: Explanation, *, context: TraceContext | None = None) -> Judgement:
    """Every rule over the explanation (and, given the trace's ``context``, the context rules:
    ``lab.judge.context``), ranked by saving. The verdict is a leading finding (an empty window,
    no GPU work) if one fired, else the largest material saving, else a quiet fallback (CUDA graph
    replays, work at its roof, a CPU-only trace), else where the time went."""
    found = [f for rule in RULES if (f := rule(explanation)) is not None]
    if context is not None:
        found += [f for rule in CONTEXT_RULES if (f := rule(explanation, context)) is not None]
        if graphs_replace_launches(context):
            found = [f for f in found if f.rule != "launch_bound"]
    steps = explanation.attribution.steps
    window, n_steps = float(steps["wall_us"].sum()), max(len(steps), 1)
    found.sort(key=lambda f: (-window_share_pct(f, window_us=window, n_steps=n_steps), f.rule))
    step = explanation.attribution.step_us
    lead = next((f for rule in LEADING_RULES for f in found if f.rule == rule), None)
    top = lead or next((f for f in found if f.saving_pct >= MATERIAL_PCT), None)
    quiet = None
    if lead is not None:
        verdict = f"{lead.title}: {lead.evidence}."
    elif top is not None:
        when = "per step" if top.scope == "per step" else "once, in the window"
        verdict = (f"{top.title}: fixing it would save {fmt_us(top.saving_us)} {when} "
                   f"({top.saving_pct:.0f} % of {fmt_us(top.base_us)}). {top.evidence}.")
    else:
        quiet = next((f for rule in QUIET_FALLBACK_RULES for f in found if f.rule == rule), None)
        verdict = f"{quiet.title}: {quiet.evidence}." if quiet is not None else _where_it_went(explanation)
    named = top if top is not None else quiet
    return Judgement(findings=tuple(found), verdict=verdict, verdict_finding=top, step_us=step, named=named)


def judge_trace(trace: Trace, analysis: Any, explanation: Explanation | None = None) -> Judgement:
    """``judge`` with the trace's context, for an analysed trace (``lab.analysis.Analysis``): the
    explanation made from the analysis's links, steps and peak unless given."""
    if explanation is None:
        explanation = explain(trace, links=analysis.links, spans=analysis.findings.steps, peak=analysis.peak)
    return judge(explanation, context=context_of(trace, analysis))


def window_share_pct(finding: Finding, *, window_us: float, n_steps: int) -> float:
    """A finding's saving as a share of the whole profiled window: a per-step saving counts once per
    step, a one-off once. The common measure that ranks a compile inside the window, one slow step
    and a per-step cause against each other."""
    if window_us <= 0:
        return 0.0
    total = finding.saving_us * (n_steps if finding.scope == "per step" else 1)
    return 100.0 * min(total, window_us) / window_us


def _where_it_went(explanation: Explanation) -> str:
    med = explanation.attribution.median_us()
    step = explanation.attribution.step_us
    if step <= 0:
        return "No time to attribute: the trace holds no events."
    top = med.sort_values(ascending=False).head(2)
    parts = ", ".join(f"{cause(k).label} {100 * v / step:.0f} %" for k, v in top.items() if v > 0)
    return f"No recoverable cause found; the {fmt_us(step)} step is {parts}."

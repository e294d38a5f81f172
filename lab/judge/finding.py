"""The one finding record: a cause, the premise checked, the evidence, and what a fix would save.

Modelled on torch's ``_pattern_matcher.py`` (one ``Pattern`` class for every anti-pattern) and
HTA's analyzers: every rule in ``rules.py`` returns this record or nothing, and the verdict is
the finding with the largest saving.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CRITICAL_SAVING_PCT", "MATERIAL_PCT", "NOTE", "SCOPES", "SEVERITIES", "WARNING_SAVING_PCT", "Finding",
           "severity_of"]

SEVERITIES = ("critical", "warning", "info")
# A fix that would save ≥ 30 % of the step is the run's bottleneck, the same bar the lab has
# used for a cause that must be named before "GPU-/CPU-bound" (SYNC_BOUND_PCT, COMM_BOUND_PCT);
# ≥ 10 % is worth doing; below that it is a detail.
CRITICAL_SAVING_PCT = 30.0
WARNING_SAVING_PCT = 10.0
# A cause under 5 % of the step is not reported: run-to-run noise on the H200 samples is 1–6 %
# (the cold/warm 1024³ pairs), so a smaller saving could not be told from noise when checked.
MATERIAL_PCT = 5.0
# What a saving is counted over. "per step": it recurs each step; "once": over the whole window (a
# compile, one slow step, a run that stopped); "note": explains a figure and saves nothing (where the
# memory peak is, GEMMs without a rate, an annotation's row over 100 %, the profiler's own lane):
# never the verdict, listed after every finding with a saving.
NOTE = "note"
SCOPES = ("per step", "once", NOTE)


def severity_of(saving_pct: float) -> str:
    if saving_pct >= CRITICAL_SAVING_PCT:
        return "critical"
    if saving_pct >= WARNING_SAVING_PCT:
        return "warning"
    return "info"


@dataclass(frozen=True)
class Finding:
    """One cause, judged.

    ``saving_us`` is what fixing it would save per step (``scope`` "per step") or once over the
    profiled window (``scope`` "once": a compile inside the window, one slow step), out of
    ``base_us`` (the step time, or the window for "once"); a "note" explains a figure and saves
    nothing. ``premise`` says what had to hold for the rule to fire, ``evidence`` the numbers that
    showed it did, and ``caveat`` what would change those numbers where that is large (the
    profiler's own cost, one cold recording), "" where it is not.
    """

    rule: str  # the rule's name (its function in rules.RULES, context.CONTEXT_RULES or trace_rules.TRACE_RULES)
    cause: str  # a key of lab.explain.CAUSES, or "roof" for ops against their roof
    title: str
    premise: str
    evidence: str
    suggestion: str
    saving_us: float
    base_us: float
    scope: str = "per step"  # one of SCOPES
    learn_more: str = ""
    caveat: str = ""

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {self.scope!r}")

    @property
    def is_note(self) -> bool:
        return self.scope == NOTE

    @property
    def saving_pct(self) -> float:
        return 100.0 * self.saving_us / self.base_us if self.base_us > 0 else 0.0

    @property
    def severity(self) -> str:
        return severity_of(self.saving_pct)

    @property
    def predicted_us(self) -> float:
        """The step (or window) time once fixed, as this finding predicts it."""
        return max(self.base_us - self.saving_us, 0.0)

    def as_dict(self) -> dict:
        return {"rule": self.rule, "cause": self.cause, "title": self.title, "severity": self.severity,
                "saving_us": round(self.saving_us, 3), "saving_pct": round(self.saving_pct, 2),
                "base_us": round(self.base_us, 3), "predicted_us": round(self.predicted_us, 3), "scope": self.scope,
                "premise": self.premise, "evidence": self.evidence, "suggestion": self.suggestion,
                "learn_more": self.learn_more, "caveat": self.caveat}

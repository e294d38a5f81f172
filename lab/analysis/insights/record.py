"""The record every rule returns: one ``Insight``, citing the numbers that triggered it.

A leaf module (no lab imports): the rules in ``rules.py`` and the diagnoses in
``lab/analysis/diagnoses/`` both build Insights, and the rules run the diagnoses.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SEVERITIES", "Insight"]

SEVERITIES = ("critical", "warning", "info")


@dataclass(frozen=True)
class Insight:
    severity: str  # "critical" | "warning" | "info"
    title: str  # constant per rule
    evidence: str  # the numbers that triggered it
    suggestion: str  # what to do
    learn_more: str  # a URL or a document title
    # What would change the figure, where that is large (noise, warm-up, the profiler's own
    # cost), so a learner does not take one recording's number as a law; "" where it is not.
    caveat: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")

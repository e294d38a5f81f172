"""The record every rule returns: one ``Insight``, citing the numbers that triggered it.

A leaf module (no lab imports): the rules in ``insights.py`` and the diagnoses in ``diag_*.py``
both build Insights, and insights.py runs the diagnoses.
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

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")

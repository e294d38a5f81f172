"""The data a lesson check reads and returns: ``Run`` (one of a lesson's runs: its Trace and
Analysis) and ``Signal`` (one thing the check looks for, with the numbers behind it)."""

from __future__ import annotations

from dataclasses import dataclass

from lab.analysis.bundle import Analysis
from lab.trace.load import Trace

__all__ = ["Run", "Signal"]


@dataclass(frozen=True)
class Signal:
    title: str
    present: bool
    evidence: str
    # False where the lesson's effect is not expected on this kind of trace (said in evidence):
    # the page shows it as information, not as a missing signal.
    expected: bool = True


@dataclass(frozen=True)
class Run:
    name: str
    trace: Trace
    analysis: Analysis
    # (profiled, unprofiled) median µs per iteration, from the run or the sample's manifest;
    # None where unknown (an upload). Only the profiler-overhead lesson reads it.
    timing: tuple[float, float] | None = None

"""A lesson's claims: each sentence of a lesson that states what a trace shows, as data to check.

A ``Claim`` names the words of the lesson that state a fact (``says``, verbatim in the lesson's
``text`` or ``explain``), the figure that measures it (a name in ``lab.analysis.figures.FIGURES``,
read from one of the lesson's runs) and the range or value it must have. ``tests/test_claims.py``
checks every claim of every lesson on the recording it refers to: ``device="cuda"`` on the
lesson's H200 recording in ``lab/samples/``, ``device="cpu"`` on a CPU run of the lesson made in
the test. A claim that holds only on some device or version says so in its words ("on the H200").

Pure data: this module imports nothing of the lab, so lessons stay plain data too.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Claim", "claim_between", "claim_equals"]

GPU_RECORDING, CPU_RUN = "cuda", "cpu"


@dataclass(frozen=True, kw_only=True)
class Claim:
    says: str  # the lesson's words that state it, verbatim (in its text or explain)
    figure: str  # a name in lab.analysis.figures.FIGURES
    run: str  # the run it is read from: a run name of this lesson, or "<lesson key>:<run name>"
    args: tuple = ()  # the figure's further arguments (an op name, a kernel-name pattern)
    over: str | None = None  # divide by the same figure of this run (a ratio: "8.0× faster")
    low: float = float("-inf")  # a number holds when low <= value <= high
    high: float = float("inf")
    equals: str | float | None = None  # or it must equal this (a name, a count)
    device: str = GPU_RECORDING  # "cuda": the H200 recording; "cpu": a CPU run of the lesson

    def holds(self, value: float | str) -> bool:
        if self.equals is not None:
            return value == self.equals
        return isinstance(value, (int, float)) and self.low <= float(value) <= self.high


def claim_between(says: str, figure: str, run: str, low: float, high: float, **kw) -> Claim:
    return Claim(says=says, figure=figure, run=run, low=low, high=high, **kw)


def claim_equals(says: str, figure: str, run: str, equals: str | float, **kw) -> Claim:
    return Claim(says=says, figure=figure, run=run, equals=equals, **kw)

"""Checking a lesson's claims (``lab.lessons.Claim``) on the runs they refer to.

``check_claim`` reads the claim's figure (``lab.analysis.figures.FIGURES``) from the named run —
of this lesson, or of another one (``"<lesson>:<run>"``) — divides by the same figure of
``over`` when the claim is a ratio, and says whether it holds. ``runs_of(lesson_key)`` gives a
lesson's runs (``Run``s in the lesson's order) on the device the claim is about: the H200
recordings for ``device="cuda"``, a CPU run for ``device="cpu"`` (tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lab.analysis.figures import FIGURES, Run
from lab.lessons import LESSONS, Claim, Lesson

__all__ = ["ClaimCheck", "all_claims", "check_claim", "claim_value"]


@dataclass(frozen=True)
class ClaimCheck:
    lesson: str
    claim: Claim
    value: float | str
    holds: bool

    @property
    def text(self) -> str:
        value = f"{self.value:.3g}" if isinstance(self.value, float) else repr(self.value)
        want = (repr(self.claim.equals) if self.claim.equals is not None
                else f"in [{self.claim.low:g}, {self.claim.high:g}]")
        return f"{self.lesson}: “{self.claim.says}” — {self.claim.figure}{self.claim.args} = {value}, wanted {want}"


def all_claims(lessons: dict[str, Lesson] = LESSONS) -> list[tuple[str, Claim]]:
    """Every (lesson key, claim) of every lesson: the registry the tests iterate."""
    return [(key, claim) for key, lesson in lessons.items() for claim in lesson.claims]


def _run(lesson_key: str, ref: str, runs_of: Callable[[str], Sequence[Run]]) -> Run:
    key, _, name = ref.rpartition(":")
    key = key or lesson_key
    names = [r.name for r in LESSONS[key].runs]
    return runs_of(key)[names.index(name)]


def claim_value(lesson_key: str, claim: Claim, runs_of: Callable[[str], Sequence[Run]]) -> float | str:
    figure = FIGURES[claim.figure]
    value = figure(_run(lesson_key, claim.run, runs_of), *claim.args)
    if claim.over is not None:
        below = figure(_run(lesson_key, claim.over, runs_of), *claim.args)
        value = float(value) / float(below) if float(below) else float("nan")
    return value


def check_claim(lesson_key: str, claim: Claim, runs_of: Callable[[str], Sequence[Run]]) -> ClaimCheck:
    value = claim_value(lesson_key, claim, runs_of)
    return ClaimCheck(lesson_key, claim, value, claim.holds(value))

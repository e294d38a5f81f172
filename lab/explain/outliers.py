"""Steps far slower than the others: which one, by how much, and where its extra time went."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.explain.attribution import CAUSE_COLUMNS, Attribution
from lab.explain.classes import CAUSES

__all__ = ["OUTLIER_FACTOR", "OUTLIER_MIN_STEPS", "Outlier", "outlier_steps"]

# A step over twice the median is not noise: steps of one loop on the H200 samples vary by
# under 15 % (3-10 steps each), and a step's spread under a busy host rarely doubles it.
OUTLIER_FACTOR = 2.0
# The median needs company: with fewer steps, "the others" is one step.
OUTLIER_MIN_STEPS = 3


@dataclass(frozen=True)
class Outlier:
    step: int  # position among the steps
    name: str  # "ProfilerStep#13", "step #4"
    wall_us: float
    median_us: float
    # Per cause, this step's µs minus the steps' median, largest first (only causes that grew).
    extra_by_cause: tuple[tuple[str, float], ...]

    @property
    def extra_us(self) -> float:
        return self.wall_us - self.median_us


def outlier_steps(attribution: Attribution) -> tuple[Outlier, ...]:
    steps = attribution.steps
    if len(steps) < OUTLIER_MIN_STEPS:
        return ()
    wall = steps["wall_us"].to_numpy()
    median = float(np.median(wall))
    if median <= 0:
        return ()
    causes = steps[list(CAUSE_COLUMNS)].to_numpy()
    typical = np.median(causes, axis=0)
    out = []
    for i in np.flatnonzero(wall > OUTLIER_FACTOR * median):
        extra = causes[i] - typical
        order = np.argsort(-extra)
        grew = tuple((CAUSES[j].key, float(extra[j])) for j in order if extra[j] > 0)
        out.append(Outlier(int(i), str(steps["name"].iloc[i]), float(wall[i]), median, grew))
    return tuple(sorted(out, key=lambda o: -o.extra_us))

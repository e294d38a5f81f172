"""Small statistics shared by the run side and the views (no dependencies: anyone may import it)."""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["median"]


def median(values: Iterable[float]) -> float:
    """Median of the finite values (the mean of the middle two for an even count); NaN when
    there are none. NaN and ±inf are left out: a GEMM row without a peak has a NaN % of peak."""
    finite = sorted(v for v in map(float, values) if math.isfinite(v))
    if not finite:
        return float("nan")
    mid = len(finite) // 2
    return finite[mid] if len(finite) % 2 else (finite[mid - 1] + finite[mid]) / 2

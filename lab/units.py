"""Human-readable numbers with their units, for every view and report."""

from __future__ import annotations

import math


def fmt_us(us: float | None) -> str:
    """12.3 µs, 4.56 ms, 1.23 s; "—" for missing values."""
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return "—"
    if abs(us) < 1000:
        return f"{us:.1f} µs" if abs(us) < 100 else f"{us:.0f} µs"
    if abs(us) < 1_000_000:
        return f"{us / 1000:.2f} ms"
    return f"{us / 1e6:.2f} s"


def fmt_bytes(n: float | None) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "—"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_pct(pct: float | None, digits: int = 1) -> str:
    if pct is None or (isinstance(pct, float) and math.isnan(pct)):
        return "—"
    return f"{pct:.{digits}f} %"


def fmt_tflops(tflops: float | None) -> str:
    if tflops is None or (isinstance(tflops, float) and math.isnan(tflops)):
        return "—"
    # Three significant digits at most: "817 TFLOP/s" fits a metric card at 1280 px, "817.3" does not.
    if tflops >= 100:
        return f"{tflops:.0f} TFLOP/s"
    return f"{tflops:.1f} TFLOP/s" if tflops >= 1 else f"{tflops * 1000:.1f} GFLOP/s"

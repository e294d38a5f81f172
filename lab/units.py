"""Human-readable numbers with their units, for every view and report.

Durations: ``fmt_us`` picks the unit (µs, ms, s) for cards and reports; ``fmt_us_fixed`` always
writes µs, for text that compares durations side by side (insight evidence, timeline notes).
"""

from __future__ import annotations

import math

__all__ = ["fmt_bytes", "fmt_mem_bytes", "fmt_pct", "fmt_tflops", "fmt_us", "fmt_us_fixed"]


def fmt_us(us: float | None) -> str:
    """12.3 µs, 4.56 ms, 1.23 s; "—" for missing values."""
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return "—"
    if abs(us) < 1000:
        return f"{us:.1f} µs" if abs(us) < 100 else f"{us:.0f} µs"
    if abs(us) < 1_000_000:
        return f"{us / 1000:.2f} ms"
    return f"{us / 1e6:.2f} s"


def fmt_us_fixed(us: float, *, sig_below_10: bool = False) -> str:
    """A duration kept in µs, thousands separated: "3,597 µs", "12.5 µs", "3.0 µs" (insight evidence).

    ``sig_below_10`` keeps two significant digits under 10 µs instead of one decimal: "0.047 µs"
    (the timeline's merge threshold, often a small fraction of a µs).
    """
    if us >= 100:
        return f"{us:,.0f} µs"
    if sig_below_10 and us < 10:
        return f"{us:.2g} µs"
    return f"{us:,.1f} µs"


def fmt_bytes(n: float | None) -> str:
    """Decimal units (1 GB = 1e9 B), as copy bandwidths in GB/s are quoted."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "—"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_mem_bytes(n: float | None) -> str:
    """Binary units for memory (1 GiB = 2**30 B), as allocators count: "3.07 GiB", "512 B"."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "—"
    for unit, size in (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_pct(pct: float | None, digits: int = 1) -> str:
    if pct is None or (isinstance(pct, float) and math.isnan(pct)):
        return "—"
    return f"{pct:.{digits}f} %"


def fmt_signed_pct(pct: float, digits: int = 0) -> str:
    """"+12 %", "−3 %", and "0 %" where it rounds to zero (never "−0 %"); "—" for a missing value."""
    if pct is None or math.isnan(pct):
        return "—"
    text = f"{abs(pct):.{digits}f}"
    if not any(ch in "123456789" for ch in text):
        return f"{text} %"
    return ("+" if pct > 0 else "−") + f"{text} %"


def fmt_tflops(tflops: float | None, unit: str = "TFLOP/s") -> str:
    """A rate in tera-units per second: "TFLOP/s", or "TOPS" for integer math (int8 GEMMs)."""
    if tflops is None or (isinstance(tflops, float) and math.isnan(tflops)):
        return "—"
    # Three significant digits at most: "817 TFLOP/s" fits a metric card at 1280 px, "817.3" does not.
    if tflops >= 100:
        return f"{tflops:,.0f} {unit}"
    small = "GOPS" if unit == "TOPS" else "GFLOP/s"
    return f"{tflops:.1f} {unit}" if tflops >= 1 else f"{tflops * 1000:.1f} {small}"

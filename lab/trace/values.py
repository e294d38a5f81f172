"""Single JSON values of a trace, checked: int64 ids, finite times, bounded texts.

Shared by ``records`` (the Python checks of events msgspec's typed decode refused), ``lanes``
(numeric pids / tids, metadata) and ``flows`` (flow ids).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "relative_us",
    "INT64_MAX", "INT64_MIN", "MAX_ABS_US", "MAX_MEMORY_BYTES", "MAX_SPAN_US", "as_int", "finite", "first_int",
    "id_int", "id_str",
    "id_value", "int_or_none", "json_type", "opt_bool", "opt_int", "short_repr",
]  # fmt: skip

# int64 bounds: ids outside them cannot be stored and mean the field is garbage.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Times beyond 1e18 µs (~31,700 years; Unix-epoch µs are ~1.7e15) are garbage, and bounding
# them keeps every sum and product below float overflow.
MAX_ABS_US = 1e18
# A trace's events all lie within this of each other (11.6 days): no profile runs that long,
# and every analysis can hold its times as int64 nanoseconds (1e15 ns, 9,000× below the limit).
MAX_SPAN_US = 1e12
# Byte counts of a [memory] record beyond 2**60 (1 EiB) are garbage; within it their sums stay int64.
MAX_MEMORY_BYTES = float(2**60)


def int_or_none(value):
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if INT64_MIN <= value <= INT64_MAX else None


def finite(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int beyond float range
        return None
    return value if math.isfinite(value) else None


def id_value(value):
    if isinstance(value, str):
        return value
    return int_or_none(value)


def id_str(value) -> str:
    return value if isinstance(value, str) else str(value)


def as_int(text: str):
    """A numeric string as an int64-sized int, else None (ids that big are not numbers)."""
    try:
        return int_or_none(int(text))
    except ValueError:  # not digits, or too many digits for int()
        return None


def id_int(value) -> int:
    """An id (int or numeric string) as an int64, -1 when it is neither."""
    number = as_int(value) if isinstance(value, str) else value
    number = int_or_none(number)
    return -1 if number is None else number


def first_int(*candidates) -> int:
    """The first candidate that is (or spells) a non-negative int64, else -1."""
    for value in candidates:
        number = as_int(value) if isinstance(value, str) else int_or_none(value)
        if number is not None and number >= 0:
            return number
    return -1


def opt_int(value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return as_int(value.strip())
    return None


def opt_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return bool(value)
    return None


def short_repr(value) -> str:
    try:
        return str(value)[:1000]  # bounded: args can hold anything in a hand-edited file
    except (RecursionError, ValueError):
        return "?"


def json_type(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return "null"


def relative_us(ts: np.ndarray, start_ts: float) -> np.ndarray:
    """µs since ``start_ts``, exact to the ns Kineto writes (3 decimals).

    An absolute ts near 5e12 µs parses to a double within 0.49 ns of the written value, so
    ts × 1000 rounds back to the exact ns; the difference of two such doubles does not (it was
    1 ns off for 679 of 1,933 events of a with_stack CPU trace, enough to break the equal ends
    that nesting — and torch's key_averages tree — compare). |ts| ≤ 1e18 after the magnitude
    check: no overflow.
    """
    return (np.rint(ts * 1000.0) - np.rint(start_ts * 1000.0)) / 1000.0

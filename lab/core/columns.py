"""Column contracts shared by the stages: the one spelling of a frame's columns.

``KEY_AVERAGES_COLUMNS``: one row per ``FunctionEventAvg`` of ``key_averages()``, units in the
names. The runner fills it from torch (``RunResult.key_averages``), the trace-derived table
(``lab.analysis.trace_key_averages``) from the Chrome trace, and the views read it.
"""

from __future__ import annotations

__all__ = ["KEY_AVERAGES_COLUMNS"]

KEY_AVERAGES_COLUMNS = (
    "name", "input_shapes", "count",
    "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us",
    "self_cpu_memory_bytes", "cpu_memory_bytes", "self_device_memory_bytes", "device_memory_bytes",
    "flops", "is_user_annotation", "device_type",
)  # fmt: skip

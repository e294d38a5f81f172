"""torch's ``EventList.table()`` text, printed from key_averages rows (``KEY_AVERAGES_COLUMNS``):
a fresh run's torch-computed frame or ``lab.analysis.trace_key_averages`` of any trace.

Character for character as torch prints it (checked against torch's own ``table()`` text for
every trace of the ground-truth corpus: ``scripts/check_groundtruth.py --tables``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lab.vocab import LAUNCH_CATS

__all__ = ["TORCH_SORT_COLUMNS", "profiled_device", "torch_sorted", "torch_table_text"]


# torch's sort keys (``table(sort_by=...)``, cuda_* spellings too) → frame column, or an average.
TORCH_SORT_COLUMNS = {
    "cpu_time_total": "cpu_total_us", "self_cpu_time_total": "self_cpu_us",
    "device_time_total": "device_total_us", "self_device_time_total": "self_device_us",
    "cuda_time_total": "device_total_us", "self_cuda_time_total": "self_device_us",
    "cpu_time": "cpu_avg_us", "device_time": "device_avg_us", "cuda_time": "device_avg_us",
    "count": "count", "flops": "flops", "cpu_memory_usage": "cpu_memory_bytes",
    "self_cpu_memory_usage": "self_cpu_memory_bytes", "device_memory_usage": "device_memory_bytes",
    "self_device_memory_usage": "self_device_memory_bytes",
    "cuda_memory_usage": "device_memory_bytes", "self_cuda_memory_usage": "self_device_memory_bytes",
}


def profiled_device(trace) -> str | None:
    """The ``use_device`` torch's table had for this trace: "cuda" when the profile recorded
    CUDA activity — GPU lanes, or CUDA runtime/driver calls (CUPTI writes those only under
    ProfilerActivity.CUDA). A program that only allocates launches nothing, yet torch's table
    names its device memory columns "CUDA Mem" (alloc_only in the corpus)."""
    if trace.has_gpu or trace.meta.device_properties:
        return "cuda"
    cats = trace.events["cat"]
    return "cuda" if bool(cats.isin(LAUNCH_CATS).any()) else None


def torch_table_text(frame: pd.DataFrame, *, sort_by: str | None = None, row_limit: int = 100,
                       use_device: str | None = None, with_flops: bool = False,
                       profile_memory: bool = False) -> str:
    """torch's ``EventList.table()`` text of key_averages rows (``KEY_AVERAGES_COLUMNS``, e.g.
    ``lab.key_averages.trace_key_averages``), character for character.

    ``sort_by``: a key of ``TORCH_SORT_COLUMNS`` (torch's spelling) or a frame column, largest first
    (ties keep the frame's order, as Python's stable ``sorted(reverse=True)``); None keeps it.
    ``use_device``: the profiled device ("cuda") — the device columns appear when any row has
    self device time. ``with_flops``/``profile_memory``: as the profile was recorded.
    """
    if not len(frame):
        return ""
    rows = frame.reset_index(drop=True) if sort_by is None else torch_sorted(frame, sort_by)
    has_device = bool((rows["self_device_us"] > 0).any())
    device_name = (use_device or ("cuda" if has_device else "")).upper() or "None"
    # torch: device memory columns when profiling a device and some row has self device memory.
    device_memory = bool(use_device) and bool((rows["self_device_memory_bytes"] > 0).any())
    memory = (profile_memory, profile_memory and device_memory)
    widths, headers = _torch_columns(rows, has_device, device_name, with_flops, memory)
    fmt = "".join("{: >" + str(w) + "}  " for w in widths)
    sep = "".join("-" * w + "  " for w in widths)
    # torch adds the rows one by one in the table's order (``_build_table``): the same float sum,
    # not pandas' pairwise one, or a total that is exactly a tie at the last digit (6,645.5 µs
    # seen in CI: torch "6.645ms") is rounded the other way.
    cpu_total = _torch_sum(rows["self_cpu_us"])
    on_device = (rows["device_type"].astype(str).str.lower() != "cpu") & ~rows["is_user_annotation"].astype(bool)
    device_total = _torch_sum(rows.loc[on_device, "self_device_us"])
    flop_scale = _flop_scale(rows) if "FLOPs" in headers[-1] else None
    lines = [sep, fmt.format(*headers), sep]
    for row in rows.head(row_limit if row_limit >= 0 else len(rows)).itertuples(index=False):
        lines.append(fmt.format(*_torch_row(row, cpu_total, device_total, has_device, memory,
                                            "Input Shapes" in headers, flop_scale)))
    lines += [sep, f"Self CPU time total: {_torch_time(cpu_total)}"]
    if has_device:
        lines.append(f"Self {device_name} time total: {_torch_time(device_total)}")
    return "\n".join(lines) + "\n"


def _torch_sum(values: pd.Series) -> float:
    """``sum += value`` from 0 in row order, as torch's table totals are computed."""
    total = 0.0
    for value in values.tolist():
        total += value
    return total


def torch_sorted(frame: pd.DataFrame, sort_by: str) -> pd.DataFrame:
    """Rows largest first by a torch sort key (``TORCH_SORT_COLUMNS``) or a column; equal keys
    keep their order, as torch's ``sorted(..., reverse=True)``."""
    values = _torch_sort_values(frame, TORCH_SORT_COLUMNS.get(sort_by, sort_by))
    return frame.iloc[np.argsort(-values, kind="stable")].reset_index(drop=True)


def _torch_sort_values(rows: pd.DataFrame, column: str) -> np.ndarray:
    count = rows["count"].to_numpy(dtype=np.float64)
    if column in ("cpu_avg_us", "device_avg_us"):
        total = rows["cpu_total_us" if column == "cpu_avg_us" else "device_total_us"].to_numpy(dtype=np.float64)
        return np.divide(total, count, out=np.zeros(len(rows)), where=count > 0)
    if column not in rows.columns:
        raise ValueError(f"sort_by={column!r} is not a key; use one of {sorted(TORCH_SORT_COLUMNS)}")
    return rows[column].to_numpy(dtype=np.float64)


def _torch_columns(rows, has_device, device_name, with_flops, memory: tuple[bool, bool]):
    """(column widths, header texts) as _build_table lays them out; ``memory``: (CPU memory
    columns, device memory columns)."""
    name_width = min(max(len(str(n)) for n in rows["name"]) + 4, 55)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if has_device:
        headers += [f"Self {device_name}", f"Self {device_name} %", f"{device_name} total",
                    f"{device_name} time avg"]
    if memory[0]:
        headers += ["CPU Mem", "Self CPU Mem"]
    if memory[1]:
        headers += [f"{device_name} Mem", f"Self {device_name} Mem"]
    headers.append("# of Calls")
    widths = [name_width] + [12] * (len(headers) - 1)
    shapes = rows["input_shapes"].astype(str)
    if ((shapes != "") & (shapes != "[]")).any():
        headers.append("Input Shapes")
        widths.append(min(max(len(s) for s in shapes) + 4, 80))
    if with_flops and (rows["flops"] > 0).any():
        headers.append(f"Total {_flop_scale(rows)[1]}")
        widths.append(12)
    return widths, headers


def _torch_row(row, cpu_total, device_total, has_device, memory: tuple[bool, bool], shapes, flop_scale) -> list:
    name = str(row.name)
    if len(name) >= 52:
        name = name[:52] + "..."
    count = int(row.count)
    # torch prints 0 as an async range's "CPU total %"; async rows are the only annotations
    # with no self CPU time but a CPU total (c10d's "gloo:all_reduce": 0 of 138,656 µs).
    is_async = bool(row.is_user_annotation) and row.self_cpu_us == 0 < row.cpu_total_us
    values = [name, _torch_share(row.self_cpu_us, cpu_total), _torch_time(row.self_cpu_us),
              0 if is_async else _torch_share(row.cpu_total_us, cpu_total), _torch_time(row.cpu_total_us),
              _torch_time(row.cpu_total_us / count if count else 0.0)]
    if has_device:
        values += [_torch_time(row.self_device_us), _torch_share(row.self_device_us, device_total),
                   _torch_time(row.device_total_us), _torch_time(row.device_total_us / count if count else 0.0)]
    if memory[0]:
        values += [_torch_bytes(row.cpu_memory_bytes), _torch_bytes(row.self_cpu_memory_bytes)]
    if memory[1]:
        values += [_torch_bytes(row.device_memory_bytes), _torch_bytes(row.self_device_memory_bytes)]
    values.append(count)
    if shapes:
        values.append(str(row.input_shapes)[:80])
    if flop_scale is not None:
        values.append("--" if row.flops <= 0 else f"{row.flops * flop_scale[0]:8.3f}")
    return values


def _flop_scale(rows: pd.DataFrame) -> tuple[float, str]:
    smallest = float(rows.loc[rows["flops"] > 0, "flops"].min())
    units = ("FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs")
    level = max(0.0, min(math.log10(smallest) / 3, float(len(units) - 1)))
    return 10 ** (math.floor(level) * -3.0), units[int(level)]


def _torch_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _torch_share(us: float, total: float) -> str:
    return "NaN" if total == 0 else f"{us * 100.0 / total:.2f}%"


def _torch_bytes(n: float) -> str:
    for scale, unit in ((1024.0**3, "GB"), (1024.0**2, "MB"), (1024.0, "KB")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


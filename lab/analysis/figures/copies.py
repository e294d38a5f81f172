"""Figures of host ↔ device copies and of profile_memory: copy names and bandwidth, the launching
call's time against the copy's, the label at the memory peak and how far the step rose."""

from __future__ import annotations

import numpy as np

from lab.analysis.bundle import Run
from lab.analysis.figures.steps import kernel_step_index

__all__ = [
    "copy_bytes_per_step", "copy_call_ratio", "copy_gb_per_s", "copy_kinds", "copy_names",
    "memory_largest_allocation_bytes", "memory_peak_label", "memory_rise_units",
]  # fmt: skip


def copy_names(run: Run) -> list[str]:
    rows, _ = kernel_step_index(run, ("gpu_memcpy",))
    return sorted(set(run.trace.events["name"].astype(str).to_numpy()[rows]))


def copy_kinds(run: Run) -> str:
    """The steps' GPU copy names joined by "; " ("Memcpy HtoD (Pinned -> Device)"); "" without any."""
    return "; ".join(copy_names(run))


def copy_bytes_per_step(run: Run) -> float:
    """Bytes the recorded steps' GPU copies move, per step."""
    rows, _ = kernel_step_index(run, ("gpu_memcpy",))
    return float(run.trace.events["copy_bytes"].to_numpy(dtype=float)[rows].sum()) / max(len(run.analysis.steps), 1)


def copy_gb_per_s(run: Run) -> float:
    """Bytes over duration of the recorded steps' GPU copies, in GB/s (10⁹ bytes per second)."""
    rows, _ = kernel_step_index(run, ("gpu_memcpy",))
    ev = run.trace.events
    dur = float(ev["dur_us"].to_numpy(dtype=float)[rows].sum())
    size = float(ev["copy_bytes"].to_numpy(dtype=float)[rows].sum())
    return size / dur / 1e3 if dur > 0 else float("nan")


def copy_call_ratio(run: Run) -> float:
    """The median over the steps' copies of: the launching call's CPU duration (cudaMemcpyAsync)
    over the copy's GPU duration."""
    rows, _ = kernel_step_index(run, ("gpu_memcpy",))
    if not len(rows):
        return float("nan")
    dur = run.trace.events["dur_us"].to_numpy(dtype=float)
    calls = run.analysis.links.launch[rows]
    return float(np.median(dur[calls] / np.maximum(dur[rows], 1e-9)))


def _main_memory(run: Run):
    memory = run.analysis.memory
    return memory.main if memory is not None and memory.devices else None


def memory_peak_label(run: Run) -> str:
    """The record_function label open at the main device's memory peak ("" if none)."""
    main = _main_memory(run)
    return main.peak.annotation if main is not None else ""


def memory_largest_allocation_bytes(run: Run) -> float:
    """The largest single allocation on the main device (profile_memory), in bytes."""
    main = _main_memory(run)
    if main is None:
        return float("nan")
    mem = run.trace.memory
    size = mem["bytes"].to_numpy(dtype=float)
    return float(size.max()) if len(size) else float("nan")


def memory_rise_units(run: Run) -> float:
    """In the step holding the main device's peak: (peak − the level when the step starts) over
    the step's largest single allocation."""
    main = _main_memory(run)
    if main is None or main.peak.step < 0:
        return float("nan")
    mem = run.trace.memory
    mem = mem[
        (mem["device_type"].astype(str) + ":" + mem["device_id"].astype(str) == main.device)
        | ((main.device == "cpu") & (mem["device_type"].astype(str) == "cpu"))
    ]
    steps = run.analysis.steps
    a, b = float(steps["start_us"].iloc[main.peak.step]), float(steps["end_us"].iloc[main.peak.step])
    ts = mem["ts_us"].to_numpy(dtype=float)
    total = mem["total_allocated_bytes"].to_numpy(dtype=float)
    size = mem["bytes"].to_numpy(dtype=float)
    before, inside = ts < a, (ts >= a) & (ts <= b)
    if not inside.any():
        return float("nan")
    first = np.flatnonzero(inside)[0]
    base = total[before][-1] if before.any() else total[first] - size[first]
    unit = float(size[inside].max())
    return float((total[inside].max() - base) / unit) if unit > 0 else float("nan")

"""The figures the workshop lessons quote, one definition each (issue 23), shared by the lesson
checks (``workshop_detectors``), the questions (``lab.teach.questions_workshop``) and the tests.

Every figure reads one ``Run`` (a Trace and its Analysis; ``timing`` for the profiler's cost)
and counts only the recorded steps: an event belongs to a step when it (or, for GPU work, the
call that launched it) starts inside that step's CPU window (``analysis.steps``).
"""

from __future__ import annotations

import numpy as np

from lab.analysis.gemm.kinds import GEMM_LEAF_OPS, is_gemm_kernel
from lab.analysis.signal_types import Run
from lab.analysis.steps import per_iteration_us

__all__ = [
    "GPU_WORK_CATS", "calls_per_step", "child_op", "copy_call_ratio", "copy_gb_per_s", "copy_names",
    "gemm_kernel_us", "gemms_per_step", "kernel_step_index", "launch_delays_us", "memory_peak_label",
    "memory_rise_units", "op_share_pct", "ops_per_step", "overhead_ratio", "phase_us", "self_share_pct", "shape_rows",
    "step_count", "step_us", "sync_share_pct",
]  # fmt: skip

GPU_WORK_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def step_count(run: Run) -> int:
    return max(len(run.analysis.steps), 1)


def _windows(run: Run) -> tuple[np.ndarray, np.ndarray]:
    steps = run.analysis.steps
    return steps["start_us"].to_numpy(dtype=float), steps["end_us"].to_numpy(dtype=float)


def _step_of(run: Run, ts: np.ndarray) -> np.ndarray:
    """The step index holding each time in ``ts`` (-1 outside every step)."""
    starts, ends = _windows(run)
    out = np.full(len(ts), -1, dtype=int)
    for i, (a, b) in enumerate(zip(starts, ends)):
        out[(ts >= a) & (ts <= b)] = i
    return out


def _rows(run: Run, cats: tuple[str, ...], names: tuple[str, ...] | None = None) -> np.ndarray:
    ev = run.trace.events
    mask = ev["cat"].astype(str).isin(list(cats)).to_numpy().copy()
    if names is not None:
        mask &= ev["name"].astype(str).isin(list(names)).to_numpy()
    return np.flatnonzero(mask)


def kernel_step_index(run: Run, cats: tuple[str, ...] = ("kernel",)) -> tuple[np.ndarray, np.ndarray]:
    """(GPU activity rows, the step each was launched in): only rows whose launch call is known
    and lies inside a step."""
    rows = _rows(run, cats)
    launch = run.analysis.links.launch[rows] if len(rows) else rows
    known = launch >= 0
    rows, launch = rows[known], launch[known]
    ts = run.trace.events["ts_us"].to_numpy(dtype=float)
    step = _step_of(run, ts[launch])
    return rows[step >= 0], step[step >= 0]


def launch_delays_us(run: Run) -> list[float]:
    """Per step, the launch delay of its first kernel: kernel start − its launch call's start."""
    rows, step = kernel_step_index(run)
    ts = run.trace.events["ts_us"].to_numpy(dtype=float)
    launch = run.analysis.links.launch
    out = []
    for i in range(len(run.analysis.steps)):
        mine = rows[step == i]
        if len(mine):
            first = mine[np.argmin(ts[launch[mine]])]
            out.append(float(ts[first] - ts[launch[first]]))
    return out


def calls_per_step(run: Run, name: str) -> float:
    """Calls of the op or runtime call ``name`` that start inside a step, per step."""
    rows = _rows(run, ("cpu_op", "cuda_runtime", "cuda_driver"), (name,))
    ts = run.trace.events["ts_us"].to_numpy(dtype=float)[rows]
    return float((_step_of(run, ts) >= 0).sum()) / step_count(run)


def sync_share_pct(run: Run, name: str = "cudaDeviceSynchronize") -> float:
    """The runtime call ``name``'s time inside the steps over the steps' CPU time, in %."""
    rows = _rows(run, ("cuda_runtime", "cuda_driver"), (name,))
    ev = run.trace.events
    inside = _step_of(run, ev["ts_us"].to_numpy(dtype=float)[rows]) >= 0
    total = float(run.analysis.steps["cpu_us"].sum())
    return 100.0 * float(ev["dur_us"].to_numpy(dtype=float)[rows][inside].sum()) / total if total > 0 else float("nan")


def step_us(run: Run) -> float:
    """One iteration from the trace (``lab.analysis.steps.per_iteration_us``)."""
    return per_iteration_us(run.analysis.steps)


def gemms_per_step(run: Run) -> tuple[float, str]:
    """GEMM kernels launched per step on a GPU trace, else GEMM ops (aten::mm, addmm, …) per step."""
    if run.trace.has_gpu:
        rows, _ = kernel_step_index(run)
        names = run.trace.events["name"].astype(str).to_numpy()[rows]
        return sum(is_gemm_kernel(n) for n in names) / step_count(run), "GEMM kernels"
    return sum(calls_per_step(run, op) for op in GEMM_LEAF_OPS), "GEMM ops"


def _label_windows(run: Run, label: str) -> list[tuple[float, float]]:
    ev = run.trace.events
    rows = np.flatnonzero(
        (
            (ev["cat"].astype(str) == "user_annotation")
            & (ev["lane_kind"].astype(str) == "cpu")
            & (ev["name"].astype(str) == label)
        ).to_numpy()
    )
    ts, dur = ev["ts_us"].to_numpy(dtype=float)[rows], ev["dur_us"].to_numpy(dtype=float)[rows]
    steps = _step_of(run, ts)
    return [(a, a + d) for a, d, s in zip(ts, dur, steps) if s >= 0]


def phase_us(run: Run, label: str) -> float:
    """Per step, the time of the phase labelled ``label``: on a GPU trace the GPU work launched
    while the label was open (from any thread: backward runs on autograd's), else the label's
    CPU duration."""
    windows = _label_windows(run, label)
    if not windows:
        return 0.0
    ev = run.trace.events
    if not run.trace.has_gpu:
        return sum(b - a for a, b in windows) / step_count(run)
    rows, _ = kernel_step_index(run, GPU_WORK_CATS)
    launch_ts = ev["ts_us"].to_numpy(dtype=float)[run.analysis.links.launch[rows]]
    inside = np.zeros(len(rows), dtype=bool)
    for a, b in windows:
        inside |= (launch_ts >= a) & (launch_ts <= b)
    return float(ev["dur_us"].to_numpy(dtype=float)[rows][inside].sum()) / step_count(run)


def copy_names(run: Run) -> list[str]:
    rows, _ = kernel_step_index(run, ("gpu_memcpy",))
    return sorted(set(run.trace.events["name"].astype(str).to_numpy()[rows]))


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


def child_op(run: Run, name: str) -> str:
    """The op most often called directly by ``name`` (its child in the trace), "" if none."""
    ev = run.trace.events
    parent = run.analysis.links.parent
    ops = np.flatnonzero((ev["cat"].astype(str) == "cpu_op").to_numpy())
    names = ev["name"].astype(str).to_numpy()
    kids = [names[i] for i in ops if parent[i] >= 0 and names[parent[i]] == name]
    return max(set(kids), key=kids.count) if kids else ""


def _main_memory(run: Run):
    memory = run.analysis.memory
    return memory.main if memory is not None and memory.devices else None


def memory_peak_label(run: Run) -> str:
    """The record_function label open at the main device's memory peak ("" if none)."""
    main = _main_memory(run)
    return main.peak.annotation if main is not None else ""


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
    start, end = _windows(run)
    a, b = start[main.peak.step], end[main.peak.step]
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


def overhead_ratio(run: Run) -> float:
    """Profiled over unprofiled median time per iteration (``Run.timing``); NaN without timing."""
    if run.timing is None or not run.timing[1] > 0:
        return float("nan")
    return run.timing[0] / run.timing[1]


def self_share_pct(run: Run, op: str) -> float:
    """``op``'s Self CPU over its CPU total in the key_averages table, in %."""
    ka = run.analysis.key_averages
    row = ka[ka["name"].astype(str) == op]
    total = float(row["cpu_total_us"].sum())
    return 100.0 * float(row["self_cpu_us"].sum()) / total if total > 0 else float("nan")


def shape_rows(run: Run, op: str) -> list[tuple[str, int, float]]:
    """``op``'s rows grouped by input shape: (input shapes, calls, Self CUDA µs on a GPU trace
    else Self CPU µs), the largest time first."""
    by = run.analysis.key_averages_by_shape
    rows = by[by["name"].astype(str) == op]
    col = "self_device_us" if run.trace.has_gpu else "self_cpu_us"
    out = [(str(s), int(c), float(t)) for s, c, t in zip(rows["input_shapes"], rows["count"], rows[col])]
    return sorted(out, key=lambda r: -r[2])


def op_share_pct(run: Run, op: str) -> float:
    """The calls of ``op`` that start inside a step: their duration over the steps' CPU time, in %."""
    rows = _rows(run, ("cpu_op",), (op,))
    ev = run.trace.events
    inside = _step_of(run, ev["ts_us"].to_numpy(dtype=float)[rows]) >= 0
    total = float(run.analysis.steps["cpu_us"].sum())
    return 100.0 * float(ev["dur_us"].to_numpy(dtype=float)[rows][inside].sum()) / total if total > 0 else float("nan")


def gemm_kernel_us(run: Run) -> float:
    """The median duration of the steps' GEMM kernels (NaN without any)."""
    rows, _ = kernel_step_index(run)
    ev = run.trace.events
    names = ev["name"].astype(str).to_numpy()[rows]
    dur = ev["dur_us"].to_numpy(dtype=float)[rows]
    gemm = dur[[is_gemm_kernel(n) for n in names]] if len(rows) else dur
    return float(np.median(gemm)) if len(gemm) else float("nan")


def ops_per_step(run: Run) -> float:
    """CPU operators (cpu_op, on CPU lanes) that start inside a step, per step."""
    ev = run.trace.events
    rows = np.flatnonzero(((ev["cat"].astype(str) == "cpu_op") & (ev["lane_kind"].astype(str) == "cpu")).to_numpy())
    return float((_step_of(run, ev["ts_us"].to_numpy(dtype=float)[rows]) >= 0).sum()) / step_count(run)

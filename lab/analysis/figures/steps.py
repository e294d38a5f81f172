"""Which events belong to the recorded steps, and the per-step figures read from them.

An event belongs to a step when it (or, for GPU work, the call that launched it) starts inside
that step's CPU window (``analysis.steps``: ``ProfilerStep#N``, else the outermost repeated
annotation). A ``schedule``'s wait and warm-up steps are no steps here: the kernels a warm-up
step launched last that land in the trace are not counted (they made the check say 5 where the
reveal said 4 on GeGLU, 17 vs 14 on the SDPA math backend).
"""

from __future__ import annotations

import re

import numpy as np

from lab.analysis.bundle import Run
from lab.analysis.gemm.kinds import GEMM_LEAF_OPS, is_gemm_kernel
from lab.analysis.steps import per_iteration_us
from lab.analysis.steps import step_of as window_step_of
from lab.analysis.table.shares import cpu_shares_pct

__all__ = [
    "CALL_CATS", "call_mean_us", "call_share_pct", "calls_per_step", "event_rows",
    "gemm_kernel_us", "gemm_op_share_pct", "gemms_per_step", "gpu_busy_pct", "in_steps", "kernel_mean_us",
    "kernel_rows", "kernel_step_index", "kernel_time_share_pct", "kernels_matching_per_step", "kernels_per_step",
    "launch_delay_median_us", "launch_delay_of_step_us", "launch_delay_share_pct", "launch_delays_us",
    "non_gemm_kernel_us_per_step", "ops_per_step", "overhead_ratio", "phase_ratio", "phase_us", "profiled_step_us",
    "recorded_steps", "step_count", "step_of", "step_us", "step_work_rows", "unprofiled_step_us", "work_per_step",
]  # fmt: skip

# What a "call" is for calls_per_step and call_share_pct: an operator or a CUDA runtime/driver call.
CALL_CATS = ("cpu_op", "cuda_runtime", "cuda_driver")


# --------------------------------------------------------------------------- selection


def step_count(run: Run) -> int:
    return max(len(run.analysis.steps), 1)


def step_of(run: Run, ts: np.ndarray) -> np.ndarray:
    """The step index holding each time in ``ts`` (µs since trace start; -1 outside every step)."""
    steps = run.analysis.steps
    return window_step_of(steps["start_us"].to_numpy(dtype=float), steps["end_us"].to_numpy(dtype=float),
                          np.asarray(ts, dtype=float), closed=True)


def in_steps(run: Run, ts: np.ndarray) -> np.ndarray:
    """Which of the times ``ts`` fall inside a step's CPU window."""
    return step_of(run, ts) >= 0


def event_rows(run: Run, cats: tuple[str, ...], names: tuple[str, ...] | None = None,
               lane_kind: str | None = None) -> np.ndarray:
    """Positions in ``trace.events`` of the events of ``cats`` (named ``names``, on ``lane_kind`` lanes)."""
    ev = run.trace.events
    mask = ev["cat"].astype(str).isin(list(cats)).to_numpy().copy()
    if names is not None:
        mask &= ev["name"].astype(str).isin(list(names)).to_numpy()
    if lane_kind:
        mask &= ev["lane_kind"].astype(str).to_numpy() == lane_kind
    return np.flatnonzero(mask)


def _ts(run: Run) -> np.ndarray:
    return run.trace.events["ts_us"].to_numpy(dtype=float)


def _in_step_rows(run: Run, rows: np.ndarray) -> np.ndarray:
    return rows[in_steps(run, _ts(run)[rows])]


def kernel_step_index(run: Run, cats: tuple[str, ...] | None = ("kernel",)) -> tuple[np.ndarray, np.ndarray]:
    """(GPU activity rows of ``cats``, all of it for None, and the step each was launched in): only
    rows whose launch call is known and starts inside a step (the GPU work itself may run after the
    step ends: the GPU lags)."""
    rows = event_rows(run, cats) if cats is not None else run.analysis.utilization.activity_rows
    launch = run.analysis.links.launch[rows] if len(rows) else rows
    known = launch >= 0
    rows, launch = rows[known], launch[known]
    step = step_of(run, _ts(run)[launch])
    return rows[step >= 0], step[step >= 0]


def kernel_rows(run: Run) -> np.ndarray:
    """The kernels launched from inside a step (positions in ``trace.events``)."""
    return kernel_step_index(run)[0]


def step_work_rows(run: Run) -> tuple[np.ndarray, str]:
    """GPU trace: the kernels launched from inside a step; CPU trace: the CPU operators that
    start inside a step. And which of the two ("kernels" or "operators")."""
    if len(event_rows(run, ("kernel",))):
        return kernel_rows(run), "kernels"
    return _in_step_rows(run, event_rows(run, ("cpu_op",), lane_kind="cpu")), "operators"


def _names(run: Run, rows: np.ndarray) -> np.ndarray:
    return run.trace.events["name"].astype(str).to_numpy()[rows]


def _durations(run: Run, rows: np.ndarray) -> np.ndarray:
    return run.trace.events["dur_us"].to_numpy(dtype=float)[rows]


def _matching(run: Run, rows: np.ndarray, pattern: str) -> np.ndarray:
    regex = re.compile(pattern, re.IGNORECASE)
    return rows[np.array([bool(regex.search(n)) for n in _names(run, rows)], dtype=bool)] if len(rows) else rows


def _gemm_kernel_rows(run: Run) -> np.ndarray:
    rows = kernel_rows(run)
    return rows[np.array([is_gemm_kernel(n) for n in _names(run, rows)], dtype=bool)] if len(rows) else rows


# --------------------------------------------------------------------------- counts per step


def ops_per_step(run: Run) -> float:
    """CPU operators (cpu_op, on CPU lanes) that start inside a step, per step."""
    return len(_in_step_rows(run, event_rows(run, ("cpu_op",), lane_kind="cpu"))) / step_count(run)


def work_per_step(run: Run) -> tuple[float, str]:
    """Kernels launched per step on a GPU trace, else CPU operators per step (and which)."""
    rows, unit = step_work_rows(run)
    return len(rows) / step_count(run), unit


def kernels_per_step(run: Run) -> float:
    """Kernels launched per active step (0 on a trace without kernels)."""
    return len(kernel_rows(run)) / step_count(run)


def kernels_matching_per_step(run: Run, pattern: str) -> float:
    """Per active step: the kernels whose name matches ``pattern`` (a regex, case-insensitive)."""
    return len(_matching(run, kernel_rows(run), pattern)) / step_count(run)


def calls_per_step(run: Run, name: str) -> float:
    """Calls of the operator or runtime call ``name`` that start inside a step, per step."""
    return len(_in_step_rows(run, event_rows(run, CALL_CATS, (name,)))) / step_count(run)


def gemms_per_step(run: Run) -> tuple[float, str]:
    """GEMM kernels launched per step on a GPU trace, else GEMM ops (aten::mm, addmm, …) per step."""
    if run.trace.has_gpu:
        return len(_gemm_kernel_rows(run)) / step_count(run), "GEMM kernels"
    return sum(calls_per_step(run, op) for op in GEMM_LEAF_OPS), "GEMM ops"


# --------------------------------------------------------------------------- times


def step_us(run: Run) -> float:
    """One iteration: the median over the steps of the longer of the CPU window and the GPU work
    it launched (``lab.analysis.steps.per_iteration_us``)."""
    return per_iteration_us(run.analysis.steps)


def recorded_steps(run: Run) -> float:
    """How many steps the trace recorded (``analysis.steps``)."""
    return float(len(run.analysis.steps))


def profiled_step_us(run: Run) -> float:
    """The time per iteration the Summary card "Per iteration, profiled" shows: the median of the
    profiled steps timed apart from the trace (``Run.timing``: CUDA events on a GPU) where the run
    has one, else the trace's own (``step_us``, the card's figure for a recording without timing)."""
    return run.timing[0] if run.timing is not None else step_us(run)


def unprofiled_step_us(run: Run) -> float:
    """The median time per iteration with the profiler off (``Run.timing``); NaN without timing."""
    return run.timing[1] if run.timing is not None else float("nan")


def call_mean_us(run: Run, name: str) -> float:
    """The mean duration of the steps' calls of ``name`` (an op or a runtime call such as cudaLaunchKernel)."""
    dur = _durations(run, _in_step_rows(run, event_rows(run, CALL_CATS, (name,))))
    return float(dur.mean()) if len(dur) else float("nan")


def overhead_ratio(run: Run) -> float:
    """Profiled over unprofiled median time per iteration (``Run.timing``); NaN without timing."""
    if run.timing is None or not run.timing[1] > 0:
        return float("nan")
    return run.timing[0] / run.timing[1]


def call_share_pct(run: Run, name: str) -> float:
    """The calls of ``name`` (an operator or a runtime call such as cudaDeviceSynchronize) that
    start inside a step: their duration over the steps' CPU time, in %."""
    rows = _in_step_rows(run, event_rows(run, CALL_CATS, (name,)))
    total = float(run.analysis.steps["cpu_us"].sum())
    return 100.0 * float(_durations(run, rows).sum()) / total if total > 0 else float("nan")


def gemm_op_share_pct(run: Run) -> float:
    """The GEMM op rows' (``aten::mm``, ``aten::addmm``…) Self CPU % in the Table: their self CPU
    time over the table's "Self CPU time total" (every row's, the steps' own spans included), as
    torch's table and the Table view compute it (``lab.analysis.table.shares``): the lesson quotes
    the figure the Table shows. NaN without a GEMM op row."""
    ka = run.analysis.key_averages
    if ka is None or not len(ka):
        return float("nan")
    self_pct, _ = cpu_shares_pct(ka)
    gemm = ka["name"].astype(str).isin(GEMM_LEAF_OPS).to_numpy().copy()
    if "device_type" in ka.columns:
        gemm &= ka["device_type"].astype(str).str.lower().eq("cpu").to_numpy()
    return float(self_pct[gemm].sum()) if gemm.any() else float("nan")


def kernel_time_share_pct(run: Run, pattern: str) -> float:
    """The share (%) of the active steps' kernel time spent in kernels matching ``pattern``."""
    rows = kernel_rows(run)
    total = float(_durations(run, rows).sum())
    return 100.0 * float(_durations(run, _matching(run, rows, pattern)).sum()) / total if total > 0 else float("nan")


def gemm_kernel_us(run: Run) -> float:
    """The median duration of the active steps' GEMM kernels (NaN without any)."""
    dur = _durations(run, _gemm_kernel_rows(run))
    return float(np.median(dur)) if len(dur) else float("nan")


def kernel_mean_us(run: Run, pattern: str = ".") -> float:
    """The mean duration of the active steps' kernels whose name matches ``pattern``."""
    dur = _durations(run, _matching(run, kernel_rows(run), pattern))
    return float(dur.mean()) if len(dur) else float("nan")


def non_gemm_kernel_us_per_step(run: Run) -> float:
    """Per active step: µs of the kernels that are no GEMM (elementwise, softmax, copies)."""
    rows = kernel_rows(run)
    other = rows[np.array([not is_gemm_kernel(n) for n in _names(run, rows)], dtype=bool)] if len(rows) else rows
    return float(_durations(run, other).sum()) / step_count(run)


def gpu_busy_pct(run: Run) -> float:
    """The GPU's busy share (%) of its active window: from the trace's first GPU activity to its
    last (``lab.analysis.gpu``)."""
    return float(run.analysis.utilization.active_busy_pct)


def _first_launches(run: Run) -> list[tuple[int, int]]:
    """Per step that launched a kernel: (step index, that step's first-launched kernel row)."""
    rows, step = kernel_step_index(run)
    launch_ts = _ts(run)[run.analysis.links.launch[rows]] if len(rows) else np.array([])
    out = []
    for i in range(len(run.analysis.steps)):
        mine = np.flatnonzero(step == i)
        if len(mine):
            out.append((i, int(rows[mine[np.argmin(launch_ts[mine])]])))
    return out


def launch_delays_us(run: Run) -> list[float]:
    """Per step, the launch delay of its first kernel: kernel start − its launch call's start."""
    ts, launch = _ts(run), run.analysis.links.launch
    return [float(ts[row] - ts[launch[row]]) for _, row in _first_launches(run)]


def launch_delay_of_step_us(run: Run, index: int) -> float:
    """The launch delay of step ``index``'s first kernel (-1: the last step), NaN without one."""
    delays = launch_delays_us(run)
    return delays[index] if -len(delays) <= index < len(delays) else float("nan")


def launch_delay_median_us(run: Run) -> float:
    """The median over the steps of their first kernel's launch delay, in µs."""
    delays = launch_delays_us(run)
    return float(np.median(delays)) if delays else float("nan")


def launch_delay_share_pct(run: Run) -> float:
    """The median over the steps of their first kernel's launch delay (``launch_delays_us``) as
    a share (%) of the step's CPU window: the wait a tiny kernel pays before it runs."""
    steps = run.analysis.steps
    span = (steps["end_us"] - steps["start_us"]).to_numpy(dtype=float)
    delays = launch_delays_us(run)
    shares = [100.0 * d / span[i] for d, (i, _) in zip(delays, _first_launches(run)) if span[i] > 0]
    return float(np.median(shares)) if shares else float("nan")


def _label_windows(run: Run, label: str) -> list[tuple[float, float]]:
    rows = _in_step_rows(run, event_rows(run, ("user_annotation",), (label,), lane_kind="cpu"))
    ts, dur = _ts(run)[rows], _durations(run, rows)
    return [(a, a + d) for a, d in zip(ts, dur)]


def phase_us(run: Run, label: str) -> float:
    """Per step, the time of the phase labelled ``label``: on a GPU trace the GPU work launched
    while the label was open (from any thread: backward runs on autograd's), else the label's
    CPU duration."""
    windows = _label_windows(run, label)
    if not windows:
        return 0.0
    if not run.trace.has_gpu:
        return sum(b - a for a, b in windows) / step_count(run)
    rows, _ = kernel_step_index(run, None)
    launch_ts = _ts(run)[run.analysis.links.launch[rows]]
    inside = np.zeros(len(rows), dtype=bool)
    for a, b in windows:
        inside |= (launch_ts >= a) & (launch_ts <= b)
    return float(_durations(run, rows)[inside].sum()) / step_count(run)


def phase_ratio(run: Run, label: str, other: str) -> float:
    """``phase_us`` of ``label`` over that of ``other`` (backward's time over forward's)."""
    below = phase_us(run, other)
    return phase_us(run, label) / below if below > 0 else float("nan")

"""One definition per figure a lesson, a question or an insight quotes about a trace (issue 23).

A lesson's check (``lab.analysis.signals``), its questions' reveals (``lab.teach.questions``)
and the claims its text makes (``Lesson.claims``, checked by ``lab.teach.claims``) read the same
numbers from here, so the check and the reveal can never disagree again (they did: the check
counted every kernel in the trace, the reveal only those of the active steps — GeGLU 5 vs 4,
SDPA math 17 vs 14, because a schedule's warm-up step leaves its last kernels in the trace).

The rules every figure follows:

- **steps** are the recorded (active) steps: ``Analysis.steps`` (``ProfilerStep#N``, else the
  outermost repeated annotation). A ``schedule``'s wait and warm-up steps are not steps here.
- a step's **kernels** are the kernels *launched* inside its CPU window (the launch call's start
  lies in it; the kernel itself may run after the step ends: the GPU lags the host);
- on a trace without kernels (a CPU run) a step's **work** is the CPU operators that start in it.

``FIGURES`` names each figure a ``Claim`` may use: ``figure(run, *args) -> float | str``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from lab.analysis.gemm.kinds import is_gemm_kernel
from lab.analysis.signal_types import Run
from lab.analysis.steps import per_iteration_us
from lab.trace.load import Trace

__all__ = [
    "FIGURES", "Run", "first_step_excess_in_us", "first_step_ratio", "first_step_share_pct", "gemm_kernel_mean_us",
    "kernel_rows", "kernels_matching_per_step", "kernels_per_step", "label_first_gaps_us", "launch_delay_share_pct",
    "op_calls_per_step", "op_device_us", "profiler_overhead_in_first_step_us", "step_count", "step_us",
    "step_work_rows", "top_self_cpu_row", "work_per_step",
]  # fmt: skip


# --------------------------------------------------------------------------- rows


def _rows(run: Run, cat: str, lane_kind: str | None = None) -> np.ndarray:
    ev = run.trace.events
    mask = ev["cat"].astype(str).to_numpy() == cat
    if lane_kind:
        mask &= ev["lane_kind"].astype(str).to_numpy() == lane_kind
    return np.flatnonzero(mask)


def step_count(run: Run) -> int:
    return max(len(run.analysis.steps), 1)


def in_steps(run: Run, ts: np.ndarray) -> np.ndarray:
    """Which of the times ``ts`` (µs since trace start) fall inside a step's CPU window."""
    steps = run.analysis.steps
    inside = np.zeros(len(ts), dtype=bool)
    for start, end in zip(steps["start_us"].to_numpy(dtype=float), steps["end_us"].to_numpy(dtype=float)):
        inside |= (ts >= start) & (ts <= end)
    return inside


def kernel_rows(run: Run) -> np.ndarray:
    """The kernels launched from inside a step (positions in ``trace.events``)."""
    ts = run.trace.events["ts_us"].to_numpy(dtype=float)
    kernels = _rows(run, "kernel")
    if not len(kernels):
        return kernels
    launch = run.analysis.links.launch[kernels]
    known = launch >= 0
    return kernels[known][in_steps(run, ts[launch[known]])]


def step_work_rows(run: Run) -> tuple[np.ndarray, str]:
    """GPU trace: the kernels launched from inside a step; CPU trace: the CPU operators that
    start inside a step. And which of the two ("kernels" or "operators")."""
    kernels = kernel_rows(run)
    if len(kernels) or len(_rows(run, "kernel")):
        return kernels, "kernels"
    ops = _rows(run, "cpu_op", "cpu")
    ts = run.trace.events["ts_us"].to_numpy(dtype=float)
    return ops[in_steps(run, ts[ops])], "operators"


# --------------------------------------------------------------------------- figures


def work_per_step(run: Run) -> tuple[float, str]:
    """Kernels launched per step on a GPU trace, else CPU operators per step (and which)."""
    rows, unit = step_work_rows(run)
    return len(rows) / step_count(run), unit


def kernels_per_step(run: Run) -> float:
    """Kernels launched per active step (0 on a trace without kernels)."""
    return len(kernel_rows(run)) / step_count(run)


def kernels_matching_per_step(run: Run, pattern: str) -> float:
    """Per active step: the kernels whose name matches ``pattern`` (a regex, case-insensitive)."""
    rows = kernel_rows(run)
    names = run.trace.events["name"].astype(str).to_numpy()[rows]
    regex = re.compile(pattern, re.IGNORECASE)
    return sum(bool(regex.search(n)) for n in names) / step_count(run)


def kernel_time_share_pct(run: Run, pattern: str) -> float:
    """The share (%) of the active steps' kernel time spent in kernels matching ``pattern``."""
    rows = kernel_rows(run)
    ev = run.trace.events
    names = ev["name"].astype(str).to_numpy()[rows]
    dur = ev["dur_us"].to_numpy(dtype=float)[rows]
    regex = re.compile(pattern, re.IGNORECASE)
    hit = np.array([bool(regex.search(n)) for n in names], dtype=bool)
    total = float(dur.sum())
    return 100.0 * float(dur[hit].sum()) / total if total > 0 else float("nan")


def _op_rows_in_steps(run: Run, name: str) -> np.ndarray:
    ev = run.trace.events
    ops = _rows(run, "cpu_op", "cpu")
    ops = ops[ev["name"].astype(str).to_numpy()[ops] == name]
    return ops[in_steps(run, ev["ts_us"].to_numpy(dtype=float)[ops])]


def op_calls_per_step(run: Run, name: str) -> float:
    """Calls of the CPU operator ``name`` per active step."""
    return len(_op_rows_in_steps(run, name)) / step_count(run)


def op_device_us(run: Run, name: str) -> float:
    """GPU time of the kernels launched under the operator ``name`` (its key_averages row's
    device total), in µs: 0 for an op that only changes a view."""
    ka = run.analysis.key_averages
    rows = ka[ka["name"].astype(str) == name]
    return float(rows["device_total_us"].sum()) if len(rows) else 0.0


def step_us(run: Run) -> float:
    """One iteration: the median over the steps of the longer of the CPU window and the GPU work
    it launched (``lab.analysis.steps.per_iteration_us``)."""
    return per_iteration_us(run.analysis.steps)


def first_step_ratio(run: Run) -> float:
    """The first step's CPU time over the median of the later steps'."""
    cpu = run.analysis.steps["cpu_us"].to_numpy(dtype=float)
    if len(cpu) < 2:
        return float("nan")
    rest = float(np.median(cpu[1:]))
    return float(cpu[0]) / rest if rest > 0 else float("nan")


def first_step_us(run: Run) -> float:
    """The first recorded step's CPU time, in µs."""
    steps = run.analysis.steps
    return float(steps["cpu_us"].iloc[0]) if len(steps) else float("nan")


def later_step_median_us(run: Run) -> float:
    """The median CPU time of the steps after the first, in µs."""
    cpu = run.analysis.steps["cpu_us"].to_numpy(dtype=float)
    return float(np.median(cpu[1:])) if len(cpu) > 1 else float("nan")


def _first_step(run: Run) -> tuple[float, float, float]:
    """(start, end, excess over the median later step) of the first step, in µs."""
    steps = run.analysis.steps
    cpu = steps["cpu_us"].to_numpy(dtype=float)
    excess = float(cpu[0] - np.median(cpu[1:])) if len(cpu) > 1 else float("nan")
    return float(steps["start_us"].iloc[0]), float(steps["end_us"].iloc[0]), excess


def first_step_excess_in_us(run: Run, name: str) -> float:
    """µs of the first step spent inside its first call of the CPU operator ``name``, beyond
    that op's median duration in the later steps: where the cold step's extra time went."""
    ev = run.trace.events
    rows = _op_rows_in_steps(run, name)
    if not len(rows) or len(run.analysis.steps) < 2:
        return float("nan")
    start, end, _ = _first_step(run)
    ts = ev["ts_us"].to_numpy(dtype=float)[rows]
    dur = ev["dur_us"].to_numpy(dtype=float)[rows]
    first = (ts >= start) & (ts <= end)
    if not first.any() or first.all():
        return float("nan")
    return float(dur[first][0] - np.median(dur[~first]))


def profiler_overhead_in_first_step_us(run: Run) -> float:
    """µs of the profiler's own events (cat "overhead": Activity Buffer Request, Lazy Function
    Loading) that overlap the first step's CPU window."""
    if not len(run.analysis.steps):
        return float("nan")
    start, end, _ = _first_step(run)
    ev = run.trace.events
    rows = _rows(run, "overhead")
    a = ev["ts_us"].to_numpy(dtype=float)[rows]
    b = a + ev["dur_us"].to_numpy(dtype=float)[rows]
    return float(np.clip(np.minimum(b, end) - np.maximum(a, start), 0.0, None).sum())


def first_step_share_pct(run: Run, what: str) -> float:
    """The share (%) of the first step's excess time (over the median later step) that is
    ``what``: "profiler" (its own overhead events) or a CPU operator's name."""
    _, _, excess = _first_step(run) if len(run.analysis.steps) > 1 else (0.0, 0.0, float("nan"))
    part = profiler_overhead_in_first_step_us(run) if what == "profiler" else first_step_excess_in_us(run, what)
    return 100.0 * part / excess if excess > 0 else float("nan")


def label_first_gaps_us(trace: Trace, label: str | None = None) -> list[float]:
    """For each instance of the step label (or the outermost repeated annotation): first child's
    start − the label's start, in order. The cold-start gap lives here in the first step."""
    ev = trace.events
    ann = ev[(ev["cat"] == "user_annotation") & (ev["lane_kind"] == "cpu")]
    if label is None:
        counts = ann["name"].astype(str).value_counts()
        repeated = counts[counts >= 2]
        if repeated.empty:
            return []
        top = ann[ann["name"].astype(str).isin(repeated.index)]
        label = str(top.sort_values(["depth", "ts_us"])["name"].iloc[0])
    rows = ann[ann["name"].astype(str) == label]
    gaps = []
    for lane, depth, start, end in zip(rows["lane"], rows["depth"], rows["ts_us"], rows["ts_us"] + rows["dur_us"]):
        inner = ev[(ev["lane"] == lane) & (ev["depth"] == depth + 1) & (ev["ts_us"] >= start) & (ev["ts_us"] <= end)]
        if len(inner):
            gaps.append(float(inner["ts_us"].min() - start))
    return gaps


def label_gap_share_pct(run: Run) -> float:
    """How much the first step's label → first-op gap exceeds the later steps' median gap, as a
    share (%) of the first step's excess time: what the old cold-vs-warm lesson pointed at."""
    gaps = label_first_gaps_us(run.trace)
    _, _, excess = _first_step(run) if len(run.analysis.steps) > 1 else (0.0, 0.0, float("nan"))
    if len(gaps) < 2 or not excess > 0:
        return float("nan")
    return 100.0 * (gaps[0] - float(np.median(gaps[1:]))) / excess


def gemm_kernel_mean_us(run: Run) -> float:
    """The mean duration of the GEMM kernels (``lab.vocab.is_gemm_kernel``) of the active steps."""
    rows = kernel_rows(run)
    ev = run.trace.events
    names = ev["name"].astype(str).to_numpy()[rows]
    rows = rows[np.array([is_gemm_kernel(n) for n in names], dtype=bool)]
    return float(ev["dur_us"].to_numpy(dtype=float)[rows].mean()) if len(rows) else float("nan")


def kernel_mean_us(run: Run, pattern: str = ".") -> float:
    """The mean duration of the active steps' kernels whose name matches ``pattern``."""
    rows = kernel_rows(run)
    ev = run.trace.events
    regex = re.compile(pattern, re.IGNORECASE)
    names = ev["name"].astype(str).to_numpy()[rows]
    rows = rows[np.array([bool(regex.search(n)) for n in names], dtype=bool)]
    return float(ev["dur_us"].to_numpy(dtype=float)[rows].mean()) if len(rows) else float("nan")


def launch_delay_share_pct(run: Run) -> float:
    """Per active step, the time from the start of its first kernel's launch call to that kernel's
    start, as a share (%) of the step; the median over the steps. The CPU-side wait a tiny kernel
    pays before it runs."""
    steps = run.analysis.steps
    rows = kernel_rows(run)
    if not len(rows) or not len(steps):
        return float("nan")
    ts = run.trace.events["ts_us"].to_numpy(dtype=float)
    launch_ts = ts[run.analysis.links.launch[rows]]
    shares = []
    for start, end in zip(steps["start_us"].to_numpy(dtype=float), steps["end_us"].to_numpy(dtype=float)):
        inside = np.flatnonzero((launch_ts >= start) & (launch_ts <= end))
        if len(inside) and end > start:
            first = inside[np.argmin(launch_ts[inside])]
            shares.append(100.0 * (ts[rows[first]] - launch_ts[first]) / (end - start))
    return float(np.median(shares)) if shares else float("nan")


def gpu_busy_pct(run: Run) -> float:
    """The GPU's busy share (%) of its active window: from the trace's first GPU activity to its
    last (``lab.analysis.gpu``)."""
    return float(run.analysis.utilization.active_busy_pct)


def self_cuda_over_self_cpu(run: Run, name: str) -> float:
    """The key_averages row ``name``: Self CUDA over Self CPU."""
    ka = run.analysis.key_averages
    rows = ka[ka["name"].astype(str) == name]
    cpu = float(rows["self_cpu_us"].sum())
    return float(rows["self_device_us"].sum()) / cpu if cpu > 0 else float("nan")


def non_gemm_kernel_us_per_step(run: Run) -> float:
    """Per active step: µs of the kernels that are no GEMM (elementwise, softmax, copies)."""
    rows = kernel_rows(run)
    ev = run.trace.events
    names = ev["name"].astype(str).to_numpy()[rows]
    other = np.array([not is_gemm_kernel(n) for n in names], dtype=bool)
    return float(ev["dur_us"].to_numpy(dtype=float)[rows][other].sum()) / step_count(run)


def child_calls_per_step(run: Run, parent: str, child: str) -> float:
    """Per active step: calls of the CPU operator ``child`` nested (at any depth) under ``parent``."""
    ev = run.trace.events
    names = ev["name"].astype(str).to_numpy()
    rows = _op_rows_in_steps(run, child)
    up = run.analysis.links.parent
    found = 0
    for row in rows:
        cur = up[row]
        while cur >= 0 and names[cur] != parent:
            cur = up[cur]
        found += cur >= 0
    return found / step_count(run)


def top_self_cpu_row(run: Run) -> str:
    """The key_averages row with the largest Self CPU time (the table's default sort)."""
    ka = run.analysis.key_averages
    return str(ka.loc[ka["self_cpu_us"].idxmax(), "name"]) if len(ka) else ""


def ops_present(run: Run, names: Sequence[str]) -> str:
    """The first of ``names`` that the trace calls as a CPU operator ("" if none): which
    implementation ran (e.g. SDPA's backend op)."""
    called = set(run.trace.events["name"].astype(str))
    return next((n for n in names if n in called), "")


FIGURES: dict[str, Callable[..., float | str]] = {
    "kernels_per_step": kernels_per_step,
    "kernels_matching_per_step": kernels_matching_per_step,
    "kernel_time_share_pct": kernel_time_share_pct,
    "op_calls_per_step": op_calls_per_step,
    "op_device_us": op_device_us,
    "step_us": step_us,
    "first_step_ratio": first_step_ratio,
    "first_step_us": first_step_us,
    "later_step_median_us": later_step_median_us,
    "first_step_share_pct": first_step_share_pct,
    "label_gap_share_pct": label_gap_share_pct,
    "gemm_kernel_mean_us": gemm_kernel_mean_us,
    "kernel_mean_us": kernel_mean_us,
    "launch_delay_share_pct": launch_delay_share_pct,
    "top_self_cpu_row": top_self_cpu_row,
    "gpu_busy_pct": gpu_busy_pct,
    "self_cuda_over_self_cpu": self_cuda_over_self_cpu,
    "non_gemm_kernel_us_per_step": non_gemm_kernel_us_per_step,
    "child_calls_per_step": child_calls_per_step,
    "ops_present": ops_present,
    "work_per_step": lambda run: work_per_step(run)[0],
}

"""What several lessons' answers are built from: the evidence's window and rows, and answers that
read one figure into bands or compare two runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.analysis.figures import event_rows, step_count, step_work_rows, work_per_step
from lab.analysis.steps import step_window
from lab.lessons.schema import Answer, Band, Where, band_of
from lab.units import fmt_us

__all__ = [
    "FEWER", "HALF_BANDS", "MAX_HIGHLIGHT", "NEEDS_KERNELS", "ONE_KERNEL", "SAME_WITHIN", "YES_NO", "banded",
    "cat_rows", "fewer_than", "ka_row", "kernels_per_step", "kernels_where", "labels", "named_rows", "op_share",
    "step_time_ratio", "still_calls", "table_row", "where_window",
]  # fmt: skip


# The most event ids a reveal highlights: a 10-step trace has ~20 kernels; more is noise.
MAX_HIGHLIGHT = 40


def _step_window(run: Run, index: int = 0) -> tuple[float, float]:
    """Step ``index`` whole, its GPU work included: the window the Timeline's "Zoom to" opens."""
    return step_window(run.analysis.steps, index, float(run.analysis.utilization.trace_span_us))


def _in_window(run: Run, rows: np.ndarray, window: tuple[float, float]) -> np.ndarray:
    """The rows wholly inside the window (the next step's label starts at its end: not one of them)."""
    ts = run.trace.events["ts_us"].to_numpy(dtype=float)[rows]
    end = ts + run.trace.events["dur_us"].to_numpy(dtype=float)[rows]
    return rows[(ts >= window[0]) & (ts < window[1]) & (end <= window[1])][:MAX_HIGHLIGHT]


def where_window(run: Run, index: int, rows: np.ndarray, text: str, step: int = 0,
                  window: tuple[float, float] | None = None) -> Where:
    """Step ``step``'s window (or ``window``) and the events of ``rows`` that start in it."""
    window = window or _step_window(run, step)
    shown = _in_window(run, rows, window)
    names = tuple(dict.fromkeys(str(n) for n in run.trace.events["name"].to_numpy()[shown]))
    return Where(text=text, window_us=window, step=step if len(run.analysis.steps) else None, run=index,
                 event_ids=tuple(int(i) for i in shown), event_names=names)


def cat_rows(run: Run, cat: str, lane_kind: str | None = None) -> np.ndarray:
    return event_rows(run, (cat,), lane_kind=lane_kind)


def named_rows(run: Run, names: Sequence[str]) -> np.ndarray:
    return event_rows(run, ("cpu_op",), tuple(names))


def ka_row(run: Run, name: str) -> dict:
    ka = run.analysis.key_averages
    rows = ka[ka["name"].astype(str) == name]
    cols = ("self_cpu_us", "self_device_us", "device_total_us", "count")
    return {c: float(rows[c].sum()) if len(rows) else 0.0 for c in cols}


def kernels_per_step(index: int, bands: Sequence[Band], what: str) -> Callable[[Sequence[Run]], Answer]:
    def answer(runs: Sequence[Run]) -> Answer:
        run = runs[index]
        kernels, _ = step_work_rows(run)
        per_step = len(kernels) / step_count(run)
        memsets = len(cat_rows(run, "gpu_memset")) / step_count(run)
        # A memset is a bar on the GPU lane too, but no kernel (counting bars gave 2 for one kernel).
        also = (f"; the GPU lane also shows {memsets:.0f} Memset (Device) per step, which is not a kernel"
                if memsets else "")
        return Answer(choice=band_of(per_step, bands), measured=per_step,
                      measured_text=(f"{len(kernels)} kernels launched in {step_count(run)} steps: "
                                     f"{per_step:.1f} per step{also}"),
                      where=where_window(run, index, kernels, f"the {what} run's first step: its GPU lane"))
    return answer


def still_calls(index: int, op: str, row_if_not: str, what: str) -> Callable[[Sequence[Run]], Answer]:
    def answer(runs: Sequence[Run]) -> Answer:
        run = runs[index]
        rows = named_rows(run, (op,))
        calls = len(rows)
        row = op if calls else row_if_not
        return Answer(choice="yes" if calls else "no", measured=float(calls),
                      measured_text=f"{calls} {op} call(s) in the {what} run",
                      where=Where(text=f"the {what} run's table: the {row} row", row=row, run=index))
    return answer


FEWER: tuple[str, ...] = ("fewer", "about the same", "more")


# Per-step counts within half a launch of each other read as "about the same".
SAME_WITHIN = 0.5


def fewer_than(first: int, second: int, what: str) -> Callable[[Sequence[Run]], Answer]:
    def answer(runs: Sequence[Run]) -> Answer:
        a, unit = work_per_step(runs[first])
        b, _ = work_per_step(runs[second])
        choice = FEWER[1] if abs(b - a) <= SAME_WITHIN else FEWER[0] if b < a else FEWER[2]
        run = runs[second]
        rows, _ = step_work_rows(run)
        return Answer(choice=choice, measured=b - a,
                      measured_text=f"{a:.1f} vs {b:.1f} {unit} per step ({what})",
                      where=where_window(run, second, rows, f"the second run's first step: its {unit}"))
    return answer


def banded(value: Callable[[Sequence[Run]], float], bands: Sequence[Band], says: Callable[[float], str],
            where: Callable[[Sequence[Run]], Where]) -> Callable[[Sequence[Run]], Answer]:
    """The answer of a question whose choices are bands of one figure: ``value(runs)`` read into
    ``bands``, said by ``says(value)``, shown at ``where(runs)``."""

    def answer(runs: Sequence[Run]) -> Answer:
        v = value(runs)
        return Answer(choice=band_of(v, bands), measured=v, measured_text=says(v), where=where(runs))

    return answer


def labels(bands: Sequence[Band]) -> list[str]:
    return [b.label for b in bands]


def table_row(run_index: int, row: str, text: str, *, view: str = "") -> Where:
    """The evidence in a key_averages row; ``view`` names the view that shows it best, if not the Table."""
    return Where(text=text, row=row, run=run_index, view=view)


def kernels_where(runs: Sequence[Run], index: int, step: int, text: str) -> Where:
    """The GPU work launched in step ``step``, in a window from the step's start to the end of that
    work: the GPU lags the host (the no-sync run's last step ends ~800 µs before its kernels run)."""
    run = runs[index]
    rows, steps = fig.kernel_step_index(run, ("kernel", "gpu_memcpy"))
    rows = rows[steps == step]
    steps_frame = run.analysis.steps
    if not len(steps_frame):
        return where_window(run, index, rows, text, step=step)
    ev = run.trace.events
    start, end = float(steps_frame["start_us"].iloc[step]), float(steps_frame["end_us"].iloc[step])
    if len(rows):
        end = max(end, float((ev["ts_us"].to_numpy(dtype=float) + ev["dur_us"].to_numpy(dtype=float))[rows].max()))
    return where_window(run, index, rows, text, step=step, window=(start, end))


HALF_BANDS = (Band(label="under 50 %", below=50.0), Band(label="50 % or more"))


def step_time_ratio(first: int, second: int, bands: Sequence[Band], what: str) -> Callable[[Sequence[Run]], Answer]:
    """The speed-up the Summary cards show: the runs' "Per iteration, profiled" (``profiled_step_us``)."""
    def answer(runs: Sequence[Run]) -> Answer:
        a, b = fig.profiled_step_us(runs[first]), fig.profiled_step_us(runs[second])
        ratio = a / b if b > 0 else float("nan")
        return Answer(
            choice=band_of(ratio, bands),
            measured=ratio,
            measured_text=f"{fmt_us(a)} vs {fmt_us(b)} per iteration, profiled: {ratio:.2f}× ({what})",
            where=Where(text=f"the Summary card \"Per iteration, profiled\" of the {runs[first].name} and the "
                             f"{runs[second].name} runs", run=first, view="Summary"),
        )

    return answer


def op_share(index: int, op: str, what: str) -> Callable[[Sequence[Run]], Answer]:
    return banded(lambda runs: fig.call_share_pct(runs[index], op), HALF_BANDS,
                   lambda v: f"{op}: {v:.0f} % of the steps' CPU time",
                   lambda runs: table_row(index, op, f"the {what} run's {op} row: CPU total against the step's"))


NEEDS_KERNELS = "it counts GPU kernels, and a CPU run launches none"


YES_NO = ("yes", "no")


ONE_KERNEL = ("one kernel", "a single kernel", "1 kernel", "one fused kernel", "in one kernel")

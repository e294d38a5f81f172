"""Predict, then reveal, for the workshop lessons (issue 23): appended to ``questions.QUESTIONS``.

Every answer is a pure function of the runs that open, through ``lab.analysis.figures``
(one definition per figure, shared with the lesson checks and claims); most are one figure read
into bands (``_banded``). The questions are one table, ``_TABLE``, built by ``_q``: per question
its key, text, choices, answer, the devices whose runs can answer it and why a CPU cannot, and its
``tells`` — the phrases that would give the right choice away, which tests/test_giveaway.py
checks are absent from everything shown before the prediction (``lab.teach.giveaway``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lab.analysis import figures as fig
from lab.analysis.signals import Run
from lab.teach.question_types import ANY_DEVICE, CPU, GPU, Answer, Band, Question, Where, band_of, where_window
from lab.teach.question_types import question as _q

__all__ = ["WORKSHOP_QUESTIONS"]

_NO_QUEUE = "a CPU run has no launch queue and no GPU to wait for"


def _banded(value: Callable[[Sequence[Run]], float], bands: Sequence[Band], says: Callable[[float], str],
            where: Callable[[Sequence[Run]], Where]) -> Callable[[Sequence[Run]], Answer]:
    """The answer of a question whose choices are bands of one figure: ``value(runs)`` read into
    ``bands``, said by ``says(value)``, shown at ``where(runs)``."""

    def answer(runs: Sequence[Run]) -> Answer:
        v = value(runs)
        return Answer(choice=band_of(v, bands), measured=v, measured_text=says(v), where=where(runs))

    return answer


def _labels(bands: Sequence[Band]) -> list[str]:
    return [b.label for b in bands]


def _row(run_index: int, row: str, text: str) -> Where:
    return Where(text=text, row=row, run=run_index)


def _kernels_where(runs: Sequence[Run], index: int, step: int, text: str) -> Where:
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


# --------------------------------------------------------------------------- launch_overlap

_TREND = (
    Band(label="it shrinks", below=1 / 3),
    Band(label="it stays about the same", below=3.0),
    Band(label="it grows"),
)


def _delay_trend(runs: Sequence[Run]) -> Answer:
    delays = fig.launch_delays_us(runs[0])
    ratio = delays[-1] / max(delays[0], 1e-3) if len(delays) >= 2 else float("nan")
    last = max(len(runs[0].analysis.steps) - 1, 0)
    return Answer(
        choice=band_of(ratio, _TREND),
        measured=ratio,
        measured_text=(
            "first kernel's launch delay per step: "
            + " → ".join(f"{d:,.0f} µs" for d in delays)
            + f" ({ratio:.0f}× from first to last)"
        ),
        where=_kernels_where(runs, 0, last, "the last step's kernels, each after its launch's arrow"),
    )


_SHARE = (Band(label="under 25 %", below=25.0), Band(label="25–75 %", below=75.0), Band(label="over 75 %"))
_HALF = (Band(label="under 50 %", below=50.0), Band(label="50 % or more"))


# --------------------------------------------------------------------------- calls

_MOST_CALLS = ("aten::mul", "aten::select", "aten::copy_")
_TIMES = (Band(label="under 4×", below=4.0), Band(label="4–20×", below=20.0), Band(label="over 20×"))


def _most_calls(runs: Sequence[Run]) -> Answer:
    per_step = {op: fig.calls_per_step(runs[0], op) for op in _MOST_CALLS}
    top = max(_MOST_CALLS, key=lambda op: per_step[op])
    return Answer(
        choice=top,
        measured=per_step[top],
        measured_text=", ".join(f"{op} {n:.0f}" for op, n in per_step.items()) + " calls per step",
        where=_row(0, top, f"the loop's {top} row: # of Calls"),
    )


def _step_ratio(first: int, second: int, bands: Sequence[Band], what: str) -> Callable[[Sequence[Run]], Answer]:
    def answer(runs: Sequence[Run]) -> Answer:
        a, b = fig.step_us(runs[first]), fig.step_us(runs[second])
        ratio = a / b if b > 0 else float("nan")
        return Answer(
            choice=band_of(ratio, bands),
            measured=ratio,
            measured_text=f"{a:,.0f} µs vs {b:,.0f} µs per step: {ratio:.2f}× ({what})",
            where=where_window(
                runs[first], first, fig.kernel_step_index(runs[first])[0], f"one step of the {runs[first].name} run"
            ),
        )

    return answer


# --------------------------------------------------------------------------- host_sync

_SYNCS = (Band(label="zero", below=0.5), Band(label="one or two", below=2.5), Band(label="about eight"))
_VERSUS = (
    Band(label="shorter", below=0.8),
    Band(label="about the same (within 20 %)", below=1.2),
    Band(label="longer"),
)
_CHILD = ("aten::_local_scalar_dense", "aten::copy_", "no child op")


def _item_child(runs: Sequence[Run]) -> Answer:
    child = fig.child_op(runs[0], "aten::item")
    choice = child if child in _CHILD else _CHILD[2]
    return Answer(
        choice=choice,
        measured=float(bool(child)),
        measured_text=f"aten::item's child op: {child or 'none'}",
        where=_row(0, child or "aten::item", "the .item() run's table: the op under aten::item"),
    )


# --------------------------------------------------------------------------- cuda_graphs

_GRAPH_KERNELS = ("1: the graph runs as one kernel", "fewer than eager", "as many as eager")
_SPEEDUP = (Band(label="under 1.5×", below=1.5), Band(label="1.5–5×", below=5.0), Band(label="over 5×"))


def _graph_kernels(runs: Sequence[Run]) -> Answer:
    eager = len(fig.kernel_step_index(runs[0])[0]) / fig.step_count(runs[0])
    graphed = len(fig.kernel_step_index(runs[1])[0]) / fig.step_count(runs[1])
    choice = (
        _GRAPH_KERNELS[2] if abs(graphed - eager) <= 0.5 else _GRAPH_KERNELS[0] if graphed <= 1.5 else _GRAPH_KERNELS[1]
    )
    return Answer(
        choice=choice,
        measured=graphed,
        measured_text=f"{eager:.0f} (eager) vs {graphed:.0f} (graphed) kernels per step",
        where=_kernels_where(runs, 1, 0, "the graphed run's first step: its GPU lane"),
    )


_EAGER_OPS = (Band(label="about 16", below=24.0), Band(label="about 32", below=40.0), Band(label="48 or more"))


# --------------------------------------------------------------------------- training_step

_GEMMS = (
    Band(label="2", below=2.5),
    Band(label="3–4", below=4.5),
    Band(label="5–6", below=6.5),
    Band(label="7 or more"),
)
_PHASES = {"forward": "forward", "backward": "backward", "optimizer step": "Optimizer.step#AdamW.step"}


def _gemms(runs: Sequence[Run]) -> Answer:
    n, unit = fig.gemms_per_step(runs[0])
    rows = fig.kernel_step_index(runs[0])[0]
    return Answer(
        choice=band_of(n, _GEMMS),
        measured=n,
        measured_text=f"{n:.0f} {unit} per step",
        where=where_window(runs[0], 0, rows, "the first step: forward, backward and optimizer"),
    )


def _longest_phase(runs: Sequence[Run]) -> Answer:
    times = {choice: fig.phase_us(runs[0], label) for choice, label in _PHASES.items()}
    top = max(times, key=lambda c: times[c])
    unit = "GPU" if runs[0].trace.has_gpu else "CPU"
    return Answer(
        choice=top,
        measured=times[top],
        measured_text=", ".join(f"{c} {t:,.0f} µs" for c, t in times.items()) + f" of {unit} time per step",
        where=_row(0, _PHASES[top], f"the {_PHASES[top]} label's row"),
    )


# --------------------------------------------------------------------------- pinned_copies

_BANDWIDTH = (Band(label="under 1.5×", below=1.5), Band(label="1.5–4×", below=4.0), Band(label="over 4×"))
_BLOCKING = (Band(label="a few µs: it returns at once", below=0.5), Band(label="about as long as the copy"))


def _bandwidth(runs: Sequence[Run]) -> Answer:
    page, pin = fig.copy_gb_per_s(runs[0]), fig.copy_gb_per_s(runs[1])
    ratio = pin / page if page > 0 else float("nan")
    return Answer(
        choice=band_of(ratio, _BANDWIDTH),
        measured=ratio,
        measured_text=f"{page:.1f} GB/s pageable vs {pin:.1f} GB/s pinned ({ratio:.1f}×)",
        where=_kernels_where(runs, 1, 0, "the pinned run's first step: its copy"),
    )


# --------------------------------------------------------------------------- memory_peak

_PEAK_LABELS = ("up", "act", "down")
_ALIVE = (Band(label="1", below=1.5), Band(label="2", below=2.5), Band(label="3 or more"))


def _peak_label(runs: Sequence[Run]) -> Answer:
    label = fig.memory_peak_label(runs[0])
    choice = label if label in _PEAK_LABELS else _PEAK_LABELS[0]
    return Answer(
        choice=choice,
        measured=float(_PEAK_LABELS.index(choice)),
        measured_text=f"the peak is inside '{label}'",
        where=_row(0, label or "aten::mm", "the Memory view: the op and label at the peak"),
    )


# --------------------------------------------------------------------------- profiler_overhead

_OVERHEAD = (Band(label="under 1.2×", below=1.2), Band(label="1.2–2×", below=2.0), Band(label="over 2×"))


def _overhead(index: int) -> Callable[[Sequence[Run]], Answer]:
    def answer(runs: Sequence[Run]) -> Answer:
        run = runs[index]
        ratio = fig.overhead_ratio(run)
        prof, plain = run.timing or (float("nan"), float("nan"))
        return Answer(
            choice=band_of(ratio, _OVERHEAD),
            measured=ratio,
            measured_text=f"{prof:,.1f} µs profiled vs {plain:,.1f} µs unprofiled per step ({ratio:.2f}×)",
            where=_row(
                index,
                "ProfilerStep*",
                f"the {run.name} run's Summary: time per iteration with "
                "and without the profiler (the Table's ProfilerStep* row: the profiled steps)",
            ),
        )

    return answer


# --------------------------------------------------------------------------- self_total_shapes

_SHAPES = ("(M, K, N)", "(2M, K/4, 2N)", "(4M, K/16, 4N)")


def _top_shape(runs: Sequence[Run]) -> Answer:
    rows = fig.shape_rows(runs[0], "aten::mm")
    firsts = [int(s.strip("[]").split(",")[0]) for s, _, _ in rows]
    index = int(round(np.log2(firsts[0] / min(firsts)))) if rows else 0
    return Answer(
        choice=_SHAPES[min(index, 2)],
        measured=rows[0][2] if rows else float("nan"),
        measured_text="; ".join(f"{s}: {t:,.0f} µs" for s, _, t in rows),
        where=_row(0, "aten::mm", "the Table grouped by input shape: the aten::mm rows"),
    )


# --------------------------------------------------------------------------- answers that are one figure in bands

_sync_share = _banded(lambda runs: fig.call_share_pct(runs[1], "cudaDeviceSynchronize"), _SHARE,
                      lambda v: f"cudaDeviceSynchronize: {v:.0f} % of the synced steps' CPU time",
                      lambda runs: _row(1, "cudaDeviceSynchronize",
                                        "the synced run's cudaDeviceSynchronize row: Self CPU"))


def _op_share(index: int, op: str, what: str) -> Callable[[Sequence[Run]], Answer]:
    return _banded(lambda runs: fig.call_share_pct(runs[index], op), _HALF,
                   lambda v: f"{op}: {v:.0f} % of the steps' CPU time",
                   lambda runs: _row(index, op, f"the {what} run's {op} row: CPU total against the step's"))


_once_syncs = _banded(lambda runs: fig.calls_per_step(runs[1], "cudaStreamSynchronize"), _SYNCS,
                      lambda v: f"{v:.1f} cudaStreamSynchronize calls per step",
                      lambda runs: _row(1, "cudaStreamSynchronize",
                                        "the read-once run's cudaStreamSynchronize row: # of Calls"))
_eager_ops = _banded(lambda runs: fig.ops_per_step(runs[0]), _EAGER_OPS,
                     lambda v: f"{v:.1f} operators per step in the eager run (aten::mul and aten::add per iteration)",
                     lambda runs: _row(0, "aten::mul", "the eager run's table: aten::mul and aten::add, # of Calls"))
_blocking = _banded(lambda runs: fig.copy_call_ratio(runs[0]), _BLOCKING,
                    lambda v: f"cudaMemcpyAsync's CPU time is {v:.2f}× its copy's GPU time",
                    lambda runs: _kernels_where(runs, 0, 0, "the pageable run's first step: the call and its copy"))
_alive = _banded(lambda runs: fig.memory_rise_units(runs[0]), _ALIVE,
                 lambda v: f"peak − the step's starting level = {v:.2f} × the step's largest allocation",
                 lambda runs: _row(0, "aten::mm", "the Memory view of one step"))
_matmul_self = _banded(lambda runs: fig.self_share_pct(runs[0], "aten::matmul"), _SHARE,
                       lambda v: f"aten::matmul: Self CPU {v:.1f} % of its total",
                       lambda runs: _row(0, "aten::matmul", "the aten::matmul row: Self CPU and CPU total"))


# --------------------------------------------------------------------------- the questions

_GRAPHS_GPU = "a CPU has no CUDA graphs"
# One row per question: key ("<lesson>.<what>"), text, choices, answer, the devices whose runs
# can answer it, why a CPU run cannot (GPU-only questions), and the tells of its choices.
_TABLE: tuple[tuple, ...] = (
    ("launch_overlap.delay_trend", "Without a sync, how will the launch delay of each step's first kernel change "
     "from the first recorded step to the last?", _labels(_TREND), _delay_trend, (GPU,), _NO_QUEUE,
     {"it grows": ("queue grows", "delay grows", "longer and longer"), "it shrinks": ("delay shrinks",),
      "it stays about the same": ("delay stays",)}),
    ("launch_overlap.sync_share", "In the synced run, what share of the steps' CPU time will cudaDeviceSynchronize "
     "take?", _labels(_SHARE), _sync_share, (GPU,), _NO_QUEUE,
     {"25–75 %": ("60 %", "about 60"), "over 75 %": ("most of the step",)}),
    ("launch_overlap.mm_share", "On this CPU, what share of each step of the first run will the four matmuls "
     "(aten::mm) take?", _labels(_HALF), _op_share(0, "aten::mm", "no-sync"), (CPU,), "",
     {"50 % or more": ("most of each step", "most of the step")}),
    ("calls.most_calls", "In the loop run's table, which of these ops will have the most # of Calls?", _MOST_CALLS,
     _most_calls, ANY_DEVICE, "", {"aten::select": ("192", "three per row", "x[i], s[i] and out[i]")}),
    ("calls.slowdown", "How many times as long as a vectorized step will a loop step be?", _labels(_TIMES),
     _step_ratio(0, 1, _TIMES, "loop vs vectorized"), ANY_DEVICE, "", {"over 20×": ("about 40", "40 times")}),
    ("host_sync.once_syncs", "In the read-once run, how many cudaStreamSynchronize calls will a step make?",
     _labels(_SYNCS), _once_syncs, (GPU,), "a CPU tensor is already on the host: nothing to wait for",
     {"one or two": ("one of each", "a single sync"), "about eight": ("8 `cudaStreamSynchronize`",)}),
    ("host_sync.item_vs_once", "How will a step with .item() after every matmul compare with a read-once step?",
     _labels(_VERSUS), _step_ratio(0, 1, _VERSUS, ".item() each matmul vs read once"), (GPU,),
     "on a CPU .item() waits for nothing",
     {"shorter": ("not the slower one", "syncs cost little"), "longer": ("the syncs make it slower",)}),
    ("host_sync.item_child", "Which op will aten::item call underneath?", _CHILD, _item_child, ANY_DEVICE, "", {}),
    ("cuda_graphs.graph_kernels", "How many kernels per step will the GPU run in the graphed run?", _GRAPH_KERNELS,
     _graph_kernels, (GPU,), "a CPU has no CUDA graphs and runs no kernels",
     {"as many as eager": ("replays them", "same 32 kernels", "the same kernels"),
      _GRAPH_KERNELS[0]: ("one kernel",)}),
    ("cuda_graphs.speedup", "How many times faster will the graphed step be than the eager one?", _labels(_SPEEDUP),
     _step_ratio(0, 1, _SPEEDUP, "eager vs graphed"), (GPU,), _GRAPHS_GPU, {"1.5–5×": ("3× faster", "about 3×")}),
    ("cuda_graphs.eager_ops", "How many operators per step will the eager run call?", _labels(_EAGER_OPS),
     _eager_ops, ANY_DEVICE, "", {"about 32": ("32 operators", "32 ops", "two ops per iteration")}),
    ("training_step.gemms", "How many matrix multiplications (GEMM kernels on a GPU, aten::mm/addmm on a CPU) will "
     "one training step run?", _labels(_GEMMS), _gemms, ANY_DEVICE, "",
     {"5–6": ("5 GEMMs", "five GEMMs", "3 backward"), "3–4": ("4 GEMMs",)}),
    ("training_step.longest_phase", "Which phase will take the most time (GPU time on a GPU, CPU time on a CPU)?",
     tuple(_PHASES), _longest_phase, ANY_DEVICE, "", {"backward": ("backward's GPU work is the longest",)}),
    ("pinned_copies.bandwidth", "How many times the pageable copy's GB/s will the pinned copy reach?",
     _labels(_BANDWIDTH), _bandwidth, (GPU,), "a CPU run copies host to host", {"over 4×": ("7–8×", "55 GB/s")}),
    ("pinned_copies.blocking", "With non_blocking=True from pageable memory, how long will cudaMemcpyAsync keep "
     "the CPU?", _labels(_BLOCKING), _blocking, (GPU,), "a CPU run makes no cudaMemcpyAsync call",
     {"about as long as the copy": ("as long as the copy", "cannot make a pageable copy asynchronous")}),
    ("pinned_copies.copy_share", "On this CPU, what share of each pageable step will aten::copy_ take?",
     _labels(_HALF), _op_share(0, "aten::copy_", "pageable"), (CPU,), "",
     {"50 % or more": ("most of each step", "most of the step")}),
    ("memory_peak.peak_label", "Which label will be open at the step's memory peak?", _PEAK_LABELS, _peak_label,
     ANY_DEVICE, "", {"down": ("peak comes in", "peak is in")}),
    ("memory_peak.alive", "At that peak, how many of the step's own tensors (h, a, y: one size) will be allocated?",
     _labels(_ALIVE), _alive, ANY_DEVICE, "", {"3 or more": ("3 tensors", "three tensors", "all three")}),
    ("profiler_overhead.loop", "How many times as long will a row-loop step take with the profiler on as with it "
     "off?", _labels(_OVERHEAD), _overhead(0), ANY_DEVICE, "", {"1.2–2×": ("1.7×",), "over 2×": ("3×",)}),
    ("profiler_overhead.gemm", "How many times as long will a step of the one GEMM take with the profiler on as "
     "with it off?", _labels(_OVERHEAD), _overhead(1), ANY_DEVICE, "",
     {"under 1.2×": ("within a few percent", "1.02×")}),
    ("self_total_shapes.matmul_self", "What share of aten::matmul's CPU total will its Self CPU be?",
     _labels(_SHARE), _matmul_self, ANY_DEVICE, "", {"under 25 %": ("only dispatches", "5 %")}),
    ("self_total_shapes.top_shape", "Grouped by input shape, which aten::mm shape will take the most time (Self "
     "CUDA on a GPU, Self CPU on a CPU)?", _SHAPES, _top_shape, ANY_DEVICE, "",
     {"(4M, K/16, 4N)": ("16384×256", "larger output")}),
)

WORKSHOP_QUESTIONS: tuple[Question, ...] = tuple(_q(*row) for row in _TABLE)

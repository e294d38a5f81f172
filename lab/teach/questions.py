"""Predict, then reveal: one to three questions per lesson, answered from the trace just opened.

Each ``Question`` is asked before a lesson's run (or its H200 recording) opens; its ``answer``
is a pure function of the runs that then open (``lab.analysis.signals.Run``: name, Trace,
Analysis, in the lesson's order; a pair's questions compare its two runs), never a stored
value, so it is right on whatever device ran it. An ``Answer`` names the right choice, the
number behind it and where to look (a key_averages row, or a timeline window with the events
that prove it). Questions that need a GPU are skipped on CPU runs, with the reason; where a
CPU run can answer the same idea, a CPU phrasing of it is asked instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lab.analysis.figures import (
    Run,
    event_rows,
    first_step_ratio,
    first_step_share_pct,
    gemm_kernel_us,
    gemm_op_share_pct,
    launch_delay_share_pct,
    step_count,
    step_work_rows,
    top_self_cpu_row,
    work_per_step,
)
from lab.analysis.gemm.kinds import is_gemm_kernel
from lab.core.lessons import LESSONS
from lab.teach.question_types import (
    ANY_DEVICE,
    CPU,
    GPU,
    Answer,
    Band,
    Question,
    Where,
    _where_window,
    band_of,
)
from lab.teach.question_types import question as _q
from lab.teach.questions_workshop import WORKSHOP_QUESTIONS
from lab.units import fmt_pct

__all__ = [
    "ANY_DEVICE", "CPU", "GPU", "QUESTIONS", "Answer", "Band", "Question", "Where", "band_of", "questions_for",
    "skipped_for", "step_work_rows", "work_per_step",
]  # fmt: skip

# --------------------------------------------------------------------------- measurements


def _rows(run: Run, cat: str, lane_kind: str | None = None) -> np.ndarray:
    return event_rows(run, (cat,), lane_kind=lane_kind)


def _named(run: Run, names: Sequence[str]) -> np.ndarray:
    return event_rows(run, ("cpu_op",), tuple(names))


def _ka_row(run: Run, name: str) -> dict:
    ka = run.analysis.key_averages
    rows = ka[ka["name"].astype(str) == name]
    cols = ("self_cpu_us", "self_device_us", "device_total_us", "count")
    return {c: float(rows[c].sum()) if len(rows) else 0.0 for c in cols}


# --------------------------------------------------------------------------- answers

_SELF_BANDS = (Band(label="Self CPU", below=1.0), Band(label="Self CUDA"))  # ratio CUDA / CPU


def _self_cpu_vs_cuda(runs: Sequence[Run]) -> Answer:
    row = _ka_row(runs[0], "aten::mm")
    ratio = row["self_device_us"] / row["self_cpu_us"] if row["self_cpu_us"] > 0 else float("inf")
    return Answer(choice=band_of(ratio, _SELF_BANDS), measured=ratio,
                  measured_text=(f"aten::mm: Self CPU {row['self_cpu_us']:,.1f} µs, Self CUDA "
                                 f"{row['self_device_us']:,.1f} µs (CUDA/CPU = {ratio:.2f})"),
                  where=Where(text="the table's aten::mm row of the tiny run: Self CPU and Self CUDA",
                              row="aten::mm", run=0))


_HALF = (Band(label="less than half", below=50.0), Band(label="half or more"))


def _gpu_busy(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    pct = float(run.analysis.utilization.active_busy_pct)
    return Answer(choice=band_of(pct, _HALF), measured=pct,
                  measured_text=f"GPU busy {fmt_pct(pct)} of its active window",
                  where=_where_window(run, 0, _rows(run, "kernel"),
                                      "the tiny run's first step: the GPU lane's kernels and the gaps between them"))


def _gemm_share(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    mm = _named(run, ("aten::mm",))
    # The lesson check's own figure (lab.analysis.signals), so the two boxes say one number.
    pct = gemm_op_share_pct(run)
    return Answer(choice=band_of(pct, _HALF), measured=pct,
                  measured_text=f"aten::mm is {fmt_pct(pct)} of a step's CPU time (medians)",
                  where=_where_window(run, 0, mm, "the tiny run's first step: aten::mm inside it"))


_FIRST_STEP = (Band(label="under 1.5×", below=1.5), Band(label="1.5–5×", below=5.0), Band(label="over 5×"))


def _first_step(runs: Sequence[Run]) -> Answer:
    cold = runs[0]
    cpu = cold.analysis.steps["cpu_us"].to_numpy(dtype=float)
    ratio = first_step_ratio(cold)
    rest = float(cpu[0]) / ratio if ratio > 0 else float("nan")
    step_rows = np.flatnonzero(cold.trace.events["name"].astype(str).str.startswith("ProfilerStep#").to_numpy())
    return Answer(choice=band_of(ratio, _FIRST_STEP), measured=ratio,
                  measured_text=(f"cold first step {cpu[0]:,.0f} µs vs {rest:,.0f} µs median later step: "
                                 f"{ratio:.1f} times as long"),
                  where=_where_window(cold, 0, step_rows, "the cold run's first step, from its label to its last op"))


_SHARE = (Band(label="under 10 %", below=10.0), Band(label="10–50 %", below=50.0), Band(label="over half"))


def _profiler_share(runs: Sequence[Run]) -> Answer:
    cold = runs[0]
    pct = first_step_share_pct(cold, "profiler")
    rows = _rows(cold, "overhead")
    return Answer(choice=band_of(pct, _SHARE), measured=pct,
                  measured_text=(f"the profiler's own events cover {pct:.0f} % of the cold first step's extra time "
                                 f"(first step minus the median later one); most of the rest is inside its first "
                                 f"aten::mm ({first_step_share_pct(cold, 'aten::mm'):.0f} %)"),
                  where=_where_window(cold, 0, rows, "the cold run's first step: the profiler's own lane"))


def _launch_share(runs: Sequence[Run]) -> Answer:
    tiny = runs[0]
    pct = launch_delay_share_pct(tiny)
    launches = np.flatnonzero(np.isin(tiny.trace.events["cat"].astype(str).to_numpy(), ("cuda_runtime", "kernel")))
    return Answer(choice=band_of(pct, _SHARE), measured=pct,
                  measured_text=(f"launch call start → its kernel's start is {pct:.1f} % of a step (median over the "
                                 f"steps): the rest of the step is the CPU's own work — Python, dispatch, the "
                                 f"profiler's per-op records"),
                  where=_where_window(tiny, 0, launches, "the tiny run's first step: a launch call and the arrow "
                                                         "to its kernel"))


_SYNC_ROWS = ("aten::mm", "cudaLaunchKernel", "cudaDeviceSynchronize", "another row")


def _sync_row(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    top = top_self_cpu_row(run)
    ka = run.analysis.key_averages
    share = float(ka.loc[ka["name"].astype(str) == top, "self_cpu_us"].sum()) / float(ka["self_cpu_us"].sum())
    choice = top if top in _SYNC_ROWS else _SYNC_ROWS[-1]
    return Answer(choice=choice, measured=100.0 * share,
                  measured_text=(f"{top} holds {100.0 * share:.0f} % of the table's Self CPU: the host launched "
                                 f"every step quickly, then waited there for the GPU's GEMMs to finish"),
                  where=Where(text="the FP32 run's table sorted by Self CPU: its first row", row=top, run=0))


_SPEEDUP = (Band(label="under 2×", below=2.0), Band(label="2–6×", below=6.0), Band(label="over 6×"))


def _gemm_kernel_name(run: Run) -> str:
    """The GEMM kernel with the largest total time (its table row)."""
    ev = run.trace.events
    rows = _rows(run, "kernel")
    names = ev["name"].astype(str).to_numpy()[rows]
    dur = ev["dur_us"].to_numpy(dtype=float)[rows]
    by_name: dict[str, float] = {}
    for name, d in zip(names, dur):
        if is_gemm_kernel(name):
            by_name[name] = by_name.get(name, 0.0) + float(d)
    return max(by_name, key=lambda n: by_name[n]) if by_name else ""


def _tf32_speedup(runs: Sequence[Run]) -> Answer:
    fp32_us, tf32_us = gemm_kernel_us(runs[0]), gemm_kernel_us(runs[1])
    name = _gemm_kernel_name(runs[1])
    ratio = fp32_us / tf32_us if tf32_us > 0 else float("nan")
    return Answer(choice=band_of(ratio, _SPEEDUP), measured=ratio,
                  measured_text=(f"GEMM kernel {fp32_us:,.0f} µs (FP32) vs {tf32_us:,.0f} µs (TF32): "
                                 f"{ratio:.1f}× faster"),
                  where=Where(text="the GEMM kernel's row in each table (its name says tf32 in the TF32 run)",
                              row=name, run=1))


_KERNELS_123 = (Band(label="1", below=1.5), Band(label="2", below=2.5), Band(label="3 or more"))
_KERNELS_234 = (Band(label="2 or fewer", below=2.5), Band(label="3", below=3.5), Band(label="4 or more"))
_FLASH_KERNELS = (Band(label="1", below=1.5), Band(label="2–3", below=3.5), Band(label="4 or more"))


def _kernels_per_step(index: int, bands: Sequence[Band], what: str) -> Callable[[Sequence[Run]], Answer]:
    def answer(runs: Sequence[Run]) -> Answer:
        run = runs[index]
        kernels, _ = step_work_rows(run)
        per_step = len(kernels) / step_count(run)
        memsets = len(_rows(run, "gpu_memset")) / step_count(run)
        # A memset is a bar on the GPU lane too, but no kernel (issue 23: counting bars gave 2).
        also = (f"; the GPU lane also shows {memsets:.0f} Memset (Device) per step, which is not a kernel"
                if memsets else "")
        return Answer(choice=band_of(per_step, bands), measured=per_step,
                      measured_text=(f"{len(kernels)} kernels launched in {step_count(run)} steps: "
                                     f"{per_step:.1f} per step{also}"),
                      where=_where_window(run, index, kernels, f"the {what} run's first step: its GPU lane"))
    return answer


_YES_NO = ("yes", "no")


def _still_calls(index: int, op: str, row_if_not: str, what: str) -> Callable[[Sequence[Run]], Answer]:
    def answer(runs: Sequence[Run]) -> Answer:
        run = runs[index]
        rows = _named(run, (op,))
        calls = len(rows)
        row = op if calls else row_if_not
        return Answer(choice="yes" if calls else "no", measured=float(calls),
                      measured_text=f"{calls} {op} call(s) in the {what} run",
                      where=Where(text=f"the {what} run's table: the {row} row", row=row, run=index))
    return answer


_BIAS = ("a separate aten::add", "aten::addmm, inside the GEMM")


def _linear_bias(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    add, addmm = len(_named(run, ("aten::add",))), len(_named(run, ("aten::addmm",)))
    choice = _BIAS[0] if add else _BIAS[1]
    return Answer(choice=choice, measured=float(add),
                  measured_text=f"{addmm} aten::addmm call(s), {add} aten::add call(s)",
                  where=Where(text="the table's aten::addmm row (and no aten::add row)",
                              row="aten::add" if add else "aten::addmm", run=0))


def _t_kernel(runs: Sequence[Run]) -> Answer:
    row = _ka_row(runs[0], "aten::t")
    return Answer(choice="yes" if row["device_total_us"] > 0 else "no", measured=row["device_total_us"],
                  measured_text=f"aten::t: {row['count']:.0f} calls, {row['device_total_us']:,.1f} µs on the GPU",
                  where=Where(text="the table's aten::t row: CPU time, no CUDA time", row="aten::t", run=0))


_FEWER: tuple[str, ...] = ("fewer", "about the same", "more")
# Per-step counts within half a launch of each other read as "about the same".
SAME_WITHIN = 0.5


def _fewer_than(first: int, second: int, what: str) -> Callable[[Sequence[Run]], Answer]:
    def answer(runs: Sequence[Run]) -> Answer:
        a, unit = work_per_step(runs[first])
        b, _ = work_per_step(runs[second])
        choice = _FEWER[1] if abs(b - a) <= SAME_WITHIN else _FEWER[0] if b < a else _FEWER[2]
        run = runs[second]
        rows, _ = step_work_rows(run)
        return Answer(choice=choice, measured=b - a,
                      measured_text=f"{a:.1f} vs {b:.1f} {unit} per step ({what})",
                      where=_where_window(run, second, rows, f"the second run's first step: its {unit}"))
    return answer


# --------------------------------------------------------------------------- the questions

_NEEDS_KERNELS = "it counts GPU kernels, and a CPU run launches none"


_ONE_KERNEL = ("one kernel", "a single kernel", "1 kernel", "one fused kernel", "in one kernel")

QUESTIONS: tuple[Question, ...] = (
    _q("tiny_vs_large.self_cpu_vs_cuda", "At 64³, which is larger in the table's aten::mm row: Self CPU or Self CUDA?",
       [b.label for b in _SELF_BANDS], _self_cpu_vs_cuda, (GPU,), "a CPU run has no Self CUDA column",
       tells={"Self CPU": ("far above Self CUDA", "mostly empty", "waiting for launches", "a few microseconds"),
              "Self CUDA": ("far above Self CPU", "busy nearly all")}),
    _q("tiny_vs_large.gpu_busy", "At 64³, what share of its active window will the GPU be busy?",
       [b.label for b in _HALF], _gpu_busy, (GPU,), "a CPU run has no GPU to be busy",
       tells={"less than half": ("mostly empty", "mostly idle", "waiting for launches", "busy 2 %"),
              "half or more": ("busy nearly all",)}),
    _q("tiny_vs_large.launch_share", "At 64³, what share of a step passes between the start of its first launch "
       "call and the start of that kernel on the GPU?", [b.label for b in _SHARE], _launch_share, (GPU,),
       "a CPU run launches no kernels",
       tells={"under 10 %": ("a small part of the step", "the CPU's own work"),
              "over half": ("most of the step is the launch",)}),
    _q("tiny_vs_large.gemm_share", "At 64³ on this CPU, will the matmul itself (aten::mm) be more or less than "
       "half of each step's time?", [b.label for b in _HALF], _gemm_share, (CPU,),
       tells={"less than half": ("cost more than the multiply",), "half or more": ("mostly the GEMM",)}),
    _q("cold_vs_warm.first_step", "In the cold run, how many times as long as the median later step will the "
       "first step be?", [b.label for b in _FIRST_STEP], _first_step,
       tells={"over 5×": ("over 90 times", "10.5 ms", "ninety", "many times its later"),
              "under 1.5×": ("barely slower",)}),
    _q("cold_vs_warm.profiler_share", "Of the time the cold run's first step takes beyond a later step, what share "
       "is the profiler's own work (its lane), not your code's?", [b.label for b in _SHARE], _profiler_share, (GPU,),
       "the profiler's buffer requests are CUPTI's, on a GPU",
       tells={"10–50 %": ("about a quarter", "2.3 ms", "2,338"), "over half": ("most of it is the profiler",)}),
    _q("fp32_vs_tf32.speedup", "How much faster will the TF32 GEMM kernel be than the FP32 one?",
       [b.label for b in _SPEEDUP], _tf32_speedup, (GPU,), "TF32 is a tensor-core mode of NVIDIA GPUs",
       tells={"over 6×": ("8.0×", "8×", "eight times"), "2–6×": ("several times faster", "a few times faster")}),
    _q("fp32_vs_tf32.sync_row", "In the FP32 run's table sorted by Self CPU, which row will come first?", _SYNC_ROWS,
       _sync_row, (GPU,), "a CPU run has no GPU to wait for",
       tells={"cudaDeviceSynchronize": ("the host waits", "waited there")}),
    _q("eager_vs_compile.kernels", "How many kernels per step will the compiled version launch?",
       [b.label for b in _KERNELS_123], _kernels_per_step(1, _KERNELS_123, "compiled"), (GPU,), _NEEDS_KERNELS,
       tells={"1": (*_ONE_KERNEL, "epilogue", "add disappears", "add kernel is gone")}),
    _q("eager_vs_compile.add_op", "Will the compiled version still call aten::add?", _YES_NO,
       _still_calls(1, "aten::add", "aten::addmm", "compiled"), (CPU,),
       tells={"no": ("aten::addmm", "add disappears", "no separate add"), "yes": ("still calls aten::add",)}),
    _q("linear.bias", "Which op will apply nn.Linear's bias?", _BIAS, _linear_bias,
       tells={_BIAS[1]: ("epilogue", "one `aten::addmm`", "no separate add"), _BIAS[0]: ("then adds the bias",)}),
    _q("linear.t_kernel", "Will aten::t (the weight's transpose) launch a GPU kernel?", _YES_NO, _t_kernel, (GPU,),
       "a CPU run launches no kernels",
       tells={"no": ("swaps strides", "only a view", "no kernel", "no GPU kernel", "without a kernel"),
              "yes": ("copies the weight",)}),
    _q("geglu.kernels", "How many kernels per step will the compiled GeGLU MLP launch?",
       [b.label for b in _KERNELS_234], _kernels_per_step(1, _KERNELS_234, "compiled"), (GPU,), _NEEDS_KERNELS,
       tells={"3": ("3 kernels", "three kernels", "into one kernel", "fuses", "fused")}),
    _q("geglu.gelu_op", "Will the compiled version still call aten::gelu?", _YES_NO,
       _still_calls(1, "aten::gelu", "aten::mm", "compiled"), (CPU,),
       tells={"no": ("fuses", "fused", "into one kernel", "no longer")}),
    _q("attention.fewer", "Will SDPA run fewer, about the same, or more kernels (operators on a CPU) per step "
       "than attention written out?", _FEWER, _fewer_than(0, 1, "written out vs SDPA"),
       tells={"fewer": (*_ONE_KERNEL, "never stores", "several kernels")}),
    _q("sdpa_backends.flash_kernels", "How many kernels per step will the FlashAttention backend launch?",
       [b.label for b in _FLASH_KERNELS], _kernels_per_step(1, _FLASH_KERNELS, "flash"), (GPU,), _NEEDS_KERNELS,
       tells={"1": _ONE_KERNEL}),
    _q("sdpa_backends.fewer", "Will FlashAttention run fewer, about the same, or more kernels (operators on a "
       "CPU) per step than the math backend?", _FEWER, _fewer_than(0, 1, "math vs flash"),
       tells={"fewer": (*_ONE_KERNEL, "several kernels"), "about the same": ("same kernels as",)}),
)

# The workshop lessons' questions (issue 23): lab/teach/questions_workshop.py.
QUESTIONS = QUESTIONS + WORKSHOP_QUESTIONS

assert {q.lesson for q in QUESTIONS} == set(LESSONS), "every lesson has questions, and only lessons do"
assert len({q.key for q in QUESTIONS}) == len(QUESTIONS), "question keys are unique"


def questions_for(lesson_key: str, device_kind: str) -> tuple[Question, ...]:
    """The questions asked before ``lesson_key`` opens runs of ``device_kind`` ("cuda" or "cpu")."""
    return tuple(q for q in QUESTIONS if q.lesson == lesson_key and device_kind in q.devices)


def asked_on(lesson_key: str, device_kind: str) -> tuple[Question, ...]:
    """The lesson's prediction form on a host of ``device_kind``: its own questions, then the GPU
    ones the lesson's H200 recording answers (a CPU host asks both), each once."""
    kinds = [device_kind] + (["cuda"] if device_kind != "cuda" else [])
    seen: dict[str, Question] = {}
    for kind in kinds:
        for q in questions_for(lesson_key, kind):
            seen.setdefault(q.key, q)
    return tuple(seen.values())


def skipped_for(lesson_key: str, device_kind: str) -> tuple[tuple[Question, str], ...]:
    """The lesson's GPU questions a CPU run cannot answer, each with why (said on the page)."""
    return tuple((q, f"needs a GPU run: {q.why_gpu}") for q in QUESTIONS
                 if q.lesson == lesson_key and device_kind not in q.devices and q.why_gpu)

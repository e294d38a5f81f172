"""Your own trace as a lesson: predict-then-reveal questions that any trace's data can answer.

A lesson's questions (``lab.lessons``) are written for its runs; these are asked of
whatever trace the page shows — an upload, a sample, a run — and only where its data can
answer them: which op dominates self CPU time, whether the GPU is busy more or less than half
of its active window, the biggest kernel's share of GPU time, launch- or GPU-bound, and which
op holds the memory peak. Each is a ``Question`` like a lesson's (its ``answer`` a pure function
of the one run: Trace and Analysis), so the page reveals it the same way and a room counts it
like a lesson question (keys ``own.*``). The choices are made from the trace (its top ops, in
alphabetical order, so their order does not give the answer away).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lab.analysis import Run
from lab.analysis.gpu import GPU_BOUND_BUSY_PCT
from lab.lessons.checks import judgement_of
from lab.lessons.schema import Answer, Band, Question, Where, band_of
from lab.units import fmt_mem_bytes, fmt_pct, fmt_us
from lab.vocab import GPU_ACTIVITY_CATS, PROFILER_STEP_PREFIX

__all__ = ["OWN_LESSON", "OWN_QUESTION_TEXTS", "own_answers", "own_questions"]

OWN_LESSON = "own"
# Candidates offered for "which op": the top few by the measure, shown alphabetically. Four
# keeps a guess a guess (one in four) without a list to read through.
MAX_CHOICES = 4
_HALF = (Band(label="less than half", below=50.0), Band(label="half or more"))
_SHARE = (Band(label="under 25 %", below=25.0), Band(label="25–50 %", below=50.0),
          Band(label="50–75 %", below=75.0), Band(label="75 % or more"))
# The GPU-bound line (lab.analysis.gpu.GPU_BOUND_BUSY_PCT): busy at least this share of its active
# window, the GPU is the bottleneck; below it, it waits for the host.
_BOUND = (Band(label="launch-bound: the GPU waits for the host", below=GPU_BOUND_BUSY_PCT),
          Band(label="GPU-bound: the GPU is kept busy"))

OWN_QUESTION_TEXTS = {
    "own.top_self_cpu": "Which op takes the most self CPU time in this trace?",
    "own.gpu_busy": "Is the GPU busy more or less than half of its active window?",
    "own.top_kernel_share": "What share of the GPU's time does its biggest kernel (by name) take?",
    "own.bound": (f"Is this trace launch-bound or GPU-bound (GPU busy at least {GPU_BOUND_BUSY_PCT:.0f} % of "
                  "its active window)?"),
    "own.memory_peak_owner": "Which op is running when the allocated memory peaks?",
}


def _q(key: str, choices: Sequence[str], answer) -> Question:
    return Question(key=key, lesson=OWN_LESSON, text=OWN_QUESTION_TEXTS[key], choices=tuple(choices), answer=answer)


def own_questions(run: Run) -> tuple[Question, ...]:
    """The questions ``run``'s trace can answer, in a fixed order; none it cannot (a CPU trace
    has no GPU questions, a trace without profile_memory no memory one)."""
    out = []
    ops = _ops(run)
    if len(ops) >= 2:
        names = [str(n) for n in ops["name"].iloc[:MAX_CHOICES]]
        out.append(_q("own.top_self_cpu", sorted(names), _top_self_cpu))
    if run.trace.has_gpu and run.analysis.utilization.active_span_us > 0:
        out.append(_q("own.gpu_busy", [b.label for b in _HALF], _gpu_busy))
        if (run.analysis.kernels["cat"] == "kernel").any():
            out.append(_q("own.top_kernel_share", [b.label for b in _SHARE], _top_kernel_share))
        out.append(_q("own.bound", [b.label for b in _BOUND], _bound))
    memory = run.analysis.memory
    if memory is not None and memory.main.peak.op:
        owners = _allocating_ops(run, memory.main.peak.op)
        if len(owners) >= 2:
            out.append(_q("own.memory_peak_owner", sorted(owners), _memory_peak_owner))
    return tuple(out)


# --------------------------------------------------------------------------- measurements


def _ops(run: Run):
    """The trace's ops (not labels, runtime calls or steps) by self CPU time, largest first."""
    ops = run.analysis.operators
    ops = ops[(ops["cat"] == "cpu_op") & ~ops["name"].astype(str).str.startswith(PROFILER_STEP_PREFIX)]
    return ops.sort_values("self_us", ascending=False, kind="stable")


def _rows_named(run: Run, name: str, cats: Sequence[str]) -> np.ndarray:
    ev = run.trace.events
    mask = (ev["name"].astype(str) == name).to_numpy() & ev["cat"].astype(str).isin(list(cats)).to_numpy()
    return np.flatnonzero(mask)


def _where_rows(run: Run, rows: np.ndarray, text: str, window: tuple[float, float] | None = None) -> Where:
    ev = run.trace.events
    ts = ev["ts_us"].to_numpy(dtype=float)
    end = ts + ev["dur_us"].to_numpy(dtype=float)
    if window is None:
        window = (float(ts[rows].min()), float(end[rows].max())) if len(rows) else (0.0, 0.0)
    shown = rows[(ts[rows] >= window[0]) & (ts[rows] <= window[1])][:40]
    names = tuple(dict.fromkeys(str(n) for n in ev["name"].to_numpy()[shown]))
    return Where(text=text, window_us=window, run=0, event_ids=tuple(int(i) for i in shown), event_names=names)


# --------------------------------------------------------------------------- answers


def _top_self_cpu(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    ops = _ops(run)
    top = ops.iloc[0]
    total = float(ops["self_us"].sum())
    share = 100.0 * float(top["self_us"]) / total if total > 0 else float("nan")
    return Answer(choice=str(top["name"]), measured=float(top["self_us"]),
                  measured_text=(f"{top['name']}: {fmt_us(float(top['self_us']))} self CPU over {int(top['count'])} "
                                 f"call(s), {fmt_pct(share)} of all ops' self CPU time"),
                  where=Where(text="the Table sorted by self CPU time: its first op row", row=str(top["name"])))


def _gpu_busy(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    util = run.analysis.utilization
    pct = float(util.active_busy_pct)
    rows = np.flatnonzero(run.trace.events["cat"].astype(str).isin(list(GPU_ACTIVITY_CATS)).to_numpy())
    return Answer(choice=band_of(pct, _HALF), measured=pct,
                  measured_text=(f"GPU busy {fmt_pct(pct)} of its active window ({fmt_us(util.busy_us)} of "
                                 f"{fmt_us(util.active_span_us)})"),
                  where=_where_rows(run, rows, "the GPU lanes: the kernels and the gaps between them"))


def _top_kernel_share(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    gpu = run.analysis.kernels  # kernels, memcpys and memsets by name: the GPU's time
    kernels = gpu[gpu["cat"] == "kernel"]
    by_name = kernels.groupby("name", sort=False)["total_us"].sum().sort_values(ascending=False, kind="stable")
    total = float(gpu["total_us"].sum())
    name = str(by_name.index[0])
    pct = 100.0 * float(by_name.iloc[0]) / total if total > 0 else float("nan")
    return Answer(choice=band_of(pct, _SHARE), measured=pct,
                  measured_text=(f"{name[:80]}: {fmt_us(float(by_name.iloc[0]))} of {fmt_us(total)} GPU time, "
                                 f"{fmt_pct(pct)}"),
                  where=Where(text="the Table's GPU kernels: the first row's share", row=name))


def _bound(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    util = run.analysis.utilization
    pct = float(util.active_busy_pct)
    delay = run.analysis.launches.delay_median_us
    rows = np.flatnonzero(run.trace.events["cat"].astype(str).isin(list(GPU_ACTIVITY_CATS)).to_numpy())
    return Answer(choice=band_of(pct, _BOUND), measured=pct,
                  measured_text=(f"GPU busy {fmt_pct(pct)} of its active window (the line is "
                                 f"{GPU_BOUND_BUSY_PCT:.0f} %), median launch delay {fmt_us(delay)}; "
                                 f"the Summary's verdict weighs the causes: {_verdict_title(run)}"),
                  where=_where_rows(run, rows, "the GPU lanes under the CPU's launches: idle gaps mean waiting"))


def _verdict_title(run: Run) -> str:
    """The title of the finding the Summary's verdict names, or "no recoverable cause"."""
    found = judgement_of(run).verdict_finding
    return found.title if found is not None else "no recoverable cause"


def _allocating_ops(run: Run, peak_op: str) -> list[str]:
    """The peak's op and the ops that allocated the most (key_averages' memory columns)."""
    ka = run.analysis.key_averages
    columns = [c for c in ("self_device_memory_bytes", "self_cpu_memory_bytes") if c in ka.columns]
    names = [peak_op]
    if columns:
        mem = ka.assign(_b=ka[columns].clip(lower=0).sum(axis=1))
        mem = mem[(mem["_b"] > 0) & ~mem["name"].astype(str).str.startswith(PROFILER_STEP_PREFIX)]
        for n in mem.sort_values("_b", ascending=False, kind="stable")["name"].astype(str):
            if n not in names:
                names.append(n)
            if len(names) == MAX_CHOICES:
                break
    return names


def _memory_peak_owner(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    peak = run.analysis.memory.main  # type: ignore[union-attr]  # asked only with memory records
    at = peak.peak
    ev = run.trace.events
    ts, end = ev["ts_us"].to_numpy(dtype=float), (ev["ts_us"] + ev["dur_us"]).to_numpy(dtype=float)
    rows = _rows_named(run, at.op, ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"))
    holding = rows[(ts[rows] <= at.ts_us) & (end[rows] >= at.ts_us)]
    window = (float(ts[holding].min()), float(end[holding].max())) if len(holding) else (at.ts_us, at.ts_us)
    return Answer(choice=at.op, measured=float(at.allocated_bytes),
                  measured_text=(f"{peak.device} peaks at {fmt_mem_bytes(at.allocated_bytes)} allocated at "
                                 f"{fmt_us(at.ts_us)}, inside {at.op}" + (f" (label {at.annotation})" if at.annotation
                                                                          else "")),
                  where=_where_rows(run, holding, f"the Memory view's ▼ peak; in the Timeline, {at.op} at that moment",
                                    window=window))


def own_answers(runs: Sequence[Run]) -> tuple[tuple[Question, Answer], ...]:
    """The one trace's own questions, each with its answer: what a reader's OWN job returns."""
    return tuple((q, q.answer(runs)) for q in own_questions(runs[0]))

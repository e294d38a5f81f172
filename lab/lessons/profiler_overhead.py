"""The lesson “The profiler's own cost: profiled vs unprofiled steps”, whole: its text and explanation,
its runs (in the workload's own sizes), its check (``_profiler_overhead``: what the lab looks for in
the runs, a pure function of their analyses), its questions (``QUESTIONS``: each answer computed
from the runs) and its claims (each checked on the H200 recording or a CPU run by
tests/test_claims.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import GemmShape
from lab.lessons.answers import labels, table_row
from lab.lessons.calls import ROW_LOOP
from lab.lessons.checks import all_on_gpu
from lab.lessons.schema import (
    ANY_DEVICE,
    CPU_RUN,
    Answer,
    Band,
    Lesson,
    Question,
    Signal,
    band_of,
    claim_between,
    claim_equals,
    lesson_run,
    question,
)

__all__ = ["LESSON"]


def _profiler_overhead(runs: list[Run]) -> list[Signal]:
    loop, gemm = runs
    a, b = fig.overhead_ratio(loop), fig.overhead_ratio(gemm)
    if math.isnan(a) or math.isnan(b):  # no timing (an upload)
        return [Signal("profiled vs unprofiled timing", False, "these runs carry no timing")]
    present = a > b
    evidence = f"profiled / unprofiled time per step: {a:.2f}× (row loop) vs {b:.2f}× (GEMM)"
    if not present and not all_on_gpu(runs):
        # A wall-clock CPU step of a large GEMM on a shared host moves by more than the profiler's cost.
        evidence += "; on a busy CPU host the GEMM's wall-clock steps vary more than the profiler costs"
    return [Signal("the profiler costs the many-op loop more than the one GEMM", present, evidence,
                   expected=present or all_on_gpu(runs))]


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
            where=table_row(
                index,
                "ProfilerStep*",
                f"the {run.name} run's Summary: time per iteration with "
                "and without the profiler (the Table's ProfilerStep* row: the profiled steps)",
            ),
        )

    return answer


QUESTIONS: tuple[Question, ...] = (
    question("profiler_overhead.loop",
        "How many times as long will a row-loop step take with the profiler on as with it "
     "off?", labels(_OVERHEAD), _overhead(0), ANY_DEVICE, "", {"1.2–2×": ("1.7×",), "over 2×": ("3×",)}),
    question("profiler_overhead.gemm",
        "How many times as long will a step of the one GEMM take with the profiler on as "
     "with it off?", labels(_OVERHEAD), _overhead(1), ANY_DEVICE, "",
     {"under 1.2×": ("within a few percent", "1.02×")}),
)

LESSON = Lesson(
    key="profiler_overhead",
    title="The profiler's own cost: profiled vs unprofiled steps",
    text=(
        "The profiler records every op: a timestamp, a name, shapes (`record_shapes=True`) and, "
        "on a GPU, CUPTI's launch records. That costs host time per op, not per FLOP. The lab "
        "times each step twice, with the profiler on (the recorded steps) and off (up to 10 "
        "iterations after it, within about a second), with CUDA events on a GPU. The runs: the row "
        "loop of the *# of Calls* lesson and the seed's 4096³ bf16 matmul + add (CPU: 512³). "
        "**Look at** the Summary's profiled and unprofiled time per iteration of each."
    ),
    look_for="profiled vs unprofiled time per step of each run (the Summary)",
    runs=(
        replace(ROW_LOOP, name="row loop"),
        lesson_run("one GEMM", "matmul_add", "matmul_add", gpu=GemmShape(m=4096, k=4096, n=4096),
                   cpu=GemmShape(m=512, k=512, n=512)),
    ),
    explain=(
        "The row loop records 512 operators a step, the GEMM 3 on the H200, and the cost follows "
        "the ops: the loop's profiled step is about 1.7× its unprofiled one on the H200, the "
        "GEMM's within a few percent of it. On either device the loop pays the larger share: "
        "judge a program of many small ops from unprofiled timings."
    ),
    claims=(
        claim_equals("The row loop records 512 operators a step", "ops_per_step", "row loop", 512.0),
        claim_equals("The row loop records 512 operators a step", "ops_per_step", "row loop", 512.0,
                     device=CPU_RUN),
        claim_equals("the GEMM 3 on the H200", "ops_per_step", "one GEMM", 3.0),
        claim_between("about 1.7× its unprofiled one", "overhead_ratio", "row loop", 1.5, 1.9),
        claim_between("within a few percent of it", "overhead_ratio", "one GEMM", 0.95, 1.05),
        claim_between("On either device the loop pays the larger share", "overhead_ratio", "row loop", 1.3,
                      float("inf"), over="one GEMM"),
        claim_between("On either device the loop pays the larger share", "overhead_ratio", "row loop", 1.3,
                      float("inf"), over="one GEMM", device=CPU_RUN),
    ),
    check=_profiler_overhead,
    questions=QUESTIONS,
    order=16,
)

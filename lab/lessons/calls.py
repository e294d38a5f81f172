"""The lesson “# of Calls: a Python loop of tiny ops vs one vectorized op”, whole: its text and
explanation, its runs (in the workload's own sizes), its check (``_calls``: what the lab looks for
in the runs, a pure function of their analyses), its questions (``QUESTIONS``: each answer computed
from the runs) and its claims (each checked on the H200 recording or a CPU run by
tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import Rows
from lab.lessons.answers import labels, step_time_ratio, table_row
from lab.lessons.schema import (
    ANY_DEVICE,
    CPU_RUN,
    Answer,
    Band,
    Lesson,
    Question,
    Signal,
    claim_between,
    claim_equals,
    lesson_run,
    question,
)
from lab.units import fmt_us

__all__ = ["LESSON", "ROW_LOOP"]


# The row loop (the profiler-overhead lesson runs it too). active=3: few recorded steps, since the
# loop launches hundreds of kernels a step and the samples stay small.
ROW_LOOP = lesson_run("python loop", "row_loop", "rows", gpu=Rows(rows=64, columns=4096),
                      cpu=Rows(rows=64, columns=256), active=3)


def _calls(runs: list[Run]) -> list[Signal]:
    loop, vec = runs
    mul_loop, mul_vec = fig.calls_per_step(loop, "aten::mul"), fig.calls_per_step(vec, "aten::mul")
    select = fig.calls_per_step(loop, "aten::select")
    ratio = fig.profiled_step_us(loop) / fig.profiled_step_us(vec)
    return [
        Signal(
            "the loop calls aten::mul once per row, the vectorized step once",
            mul_vec == 1 and mul_loop > 1,
            f"aten::mul per step: {mul_loop:.0f} vs {mul_vec:.0f}; aten::select {select:.0f} (three per row)",
        ),
        Signal(
            "the vectorized step is faster",
            ratio > 1.0,
            f"{fmt_us(fig.profiled_step_us(loop))} vs {fmt_us(fig.profiled_step_us(vec))} per step ({ratio:.0f}×)",
        ),
    ]


_MOST_CALLS = ("aten::mul", "aten::select", "aten::copy_")


_TIMES = (Band(label="under 4×", below=4.0), Band(label="4–20×", below=20.0), Band(label="over 20×"))


def _most_calls(runs: Sequence[Run]) -> Answer:
    per_step = {op: fig.calls_per_step(runs[0], op) for op in _MOST_CALLS}
    top = max(_MOST_CALLS, key=lambda op: per_step[op])
    return Answer(
        choice=top,
        measured=per_step[top],
        measured_text=", ".join(f"{op} {n:.0f}" for op, n in per_step.items()) + " calls per step",
        where=table_row(0, top, f"the loop's {top} row: # of Calls"),
    )


QUESTIONS: tuple[Question, ...] = (
    question("calls.most_calls", "In the loop run's table, which of these ops will have the most # of Calls?",
        _MOST_CALLS,
     _most_calls, ANY_DEVICE, "", {"aten::select": ("192", "three per row", "x[i], s[i] and out[i]")}),
    question("calls.slowdown", "How many times as long as a vectorized step will a loop step be?", labels(_TIMES),
     step_time_ratio(0, 1, _TIMES, "loop vs vectorized"), ANY_DEVICE, "", {"over 20×": ("about 55", "55 times")}),
)

LESSON = Lesson(
    key="calls",
    title="# of Calls: a Python loop of tiny ops vs one vectorized op",
    text=(
        "The table's *# of Calls* column says how often each op ran in the recorded steps. A "
        "Python loop over rows turns one piece of math into many small ops, each paying the "
        "dispatcher, the profiler and (on a GPU) a launch. Both runs compute "
        "`out[i] = x[i] * s[i]` for 64 rows of 4096 bf16 values (on a CPU 256 float32): the "
        "first row by row in Python, the second as `x * s[:, None]`. **Look at** # of Calls, "
        "divided by the 3 recorded steps, against what the formula does per row."
    ),
    look_for="the ops whose # of Calls grows with the number of rows; the step time of both runs",
    runs=(
        ROW_LOOP,
        lesson_run("vectorized", "row_vectorized", "rows_vectorized", gpu=Rows(rows=64, columns=4096),
                   cpu=Rows(rows=64, columns=256), active=3),
    ),
    explain=(
        "Per loop step, `aten::select` runs 192 times (x[i], s[i] and out[i] for each of the 64 "
        "rows), `aten::mul` and `aten::copy_` 64 times each; the vectorized step runs one "
        "`aten::mul`. On the H200 that is 64 kernels a step against 1, and a loop step takes "
        "about 55 times as long as a vectorized one (4.7 ms vs 0.09 ms a step, profiled), though the GPU does the "
        "same multiplications: the time is the host's, call by call."
    ),
    claims=(
        claim_equals("divided by the 3 recorded steps", "recorded_steps", "python loop", 3.0),
        claim_equals("divided by the 3 recorded steps", "recorded_steps", "python loop", 3.0, device=CPU_RUN),
        claim_equals("`aten::select` runs 192 times", "calls_per_step", "python loop", 192.0,
                     args=("aten::select",)),
        claim_equals("`aten::select` runs 192 times", "calls_per_step", "python loop", 192.0,
                     args=("aten::select",), device=CPU_RUN),
        claim_equals("`aten::mul` and `aten::copy_` 64 times each", "calls_per_step", "python loop", 64.0,
                     args=("aten::mul",)),
        claim_equals("`aten::mul` and `aten::copy_` 64 times each", "calls_per_step", "python loop", 64.0,
                     args=("aten::copy_",), device=CPU_RUN),
        claim_equals("the vectorized step runs one `aten::mul`", "calls_per_step", "vectorized", 1.0,
                     args=("aten::mul",)),
        claim_equals("64 kernels a step against 1", "kernels_per_step", "python loop", 64.0),
        claim_equals("64 kernels a step against 1", "kernels_per_step", "vectorized", 1.0),
        claim_between("about 55 times as long", "profiled_step_us", "python loop", 45.0, 65.0, over="vectorized"),
    ),
    check=_calls,
    questions=QUESTIONS,
    order=10,
)

"""The lesson “nn.Linear: the weight's transpose and the bias”, whole: its text and explanation, its
runs (in the workload's own sizes), its check (``_linear``: what the lab looks for in the runs, a
pure function of their analyses), its questions (``QUESTIONS``: each answer computed from the runs)
and its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.analysis.bundle import Run
from lab.core.workloads import GemmShape
from lab.lessons.answers import YES_NO, ka_row, named_rows
from lab.lessons.checks import ADD_KERNEL, cpu_ops, kernel_events, name_set
from lab.lessons.schema import CPU_RUN, GPU, Answer, Lesson, Question, Signal, Where, claim_equals, lesson_run, question
from lab.units import fmt_us

__all__ = ["LESSON"]


def _linear(runs: list[Run]) -> list[Signal]:
    (run,) = runs
    ops = run.analysis.operators
    t = ops[ops["name"].astype(str) == "aten::t"]
    device_us = float(t["device_us"].sum()) if "device_us" in t and len(t) else 0.0
    names = name_set(cpu_ops(run.trace))
    add_kernels = [n for n in name_set(kernel_events(run.trace)) if ADD_KERNEL.search(n)]
    return [
        Signal("aten::t runs with no kernel", len(t) > 0 and device_us == 0.0,
               f"aten::t: {int(t['count'].sum()) if len(t) else 0} calls, "
               f"{fmt_us(float(t['self_us'].sum()) if len(t) else 0)} "
               f"CPU, {fmt_us(device_us)} on the device"),
        Signal("aten::addmm carries the bias (no add)", "aten::addmm" in names and "aten::add" not in names
               and not add_kernels, "aten::addmm present, no aten::add"),
    ]


_BIAS = ("a separate aten::add", "aten::addmm, inside the GEMM")


def _linear_bias(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    add, addmm = len(named_rows(run, ("aten::add",))), len(named_rows(run, ("aten::addmm",)))
    choice = _BIAS[0] if add else _BIAS[1]
    return Answer(choice=choice, measured=float(add),
                  measured_text=f"{addmm} aten::addmm call(s), {add} aten::add call(s)",
                  where=Where(text="the table's aten::addmm row (and no aten::add row)",
                              row="aten::add" if add else "aten::addmm", run=0))


def _t_kernel(runs: Sequence[Run]) -> Answer:
    row = ka_row(runs[0], "aten::t")
    return Answer(choice="yes" if row["device_total_us"] > 0 else "no", measured=row["device_total_us"],
                  measured_text=f"aten::t: {row['count']:.0f} calls, {row['device_total_us']:,.1f} µs on the GPU",
                  where=Where(text="the table's aten::t row: CPU time, no CUDA time", row="aten::t", run=0))


QUESTIONS: tuple[Question, ...] = (
    question("linear.bias", "Which op will apply nn.Linear's bias?", _BIAS, _linear_bias,
       tells={_BIAS[1]: ("epilogue", "one `aten::addmm`", "no separate add"), _BIAS[0]: ("then adds the bias",)}),
    question("linear.t_kernel", "Will aten::t (the weight's transpose) launch a GPU kernel?", YES_NO, _t_kernel, (GPU,),
       "a CPU run launches no kernels",
       tells={"no": ("swaps strides", "only a view", "no kernel", "no GPU kernel", "without a kernel"),
              "yes": ("copies the weight",)}),
)

LESSON = Lesson(
    key="linear",
    title="nn.Linear: the weight's transpose and the bias",
    text=(
        "`nn.Linear` stores its weight as N×K (out × in features) and computes x·Wᵀ + b, so it calls "
        "`aten::t` on the weight before the product. **Look at** the table's `aten::t` row, its CPU "
        "and CUDA columns, and which ops and kernels do the product and the bias."
    ),
    look_for="aten::t with no kernel; aten::addmm and no add kernel",
    explain=(
        "A transpose of a contiguous matrix only swaps strides: `aten::t` has CPU time but no GPU "
        "time under it. The product and the bias run as one `aten::addmm`, and no `aten::add` runs. "
        "On the GPU cuBLAS applies the bias in the GEMM epilogue: one kernel per step, `bias` in "
        "its name. On a CPU `aten::addmm` first copies the broadcast bias into the output (an "
        "`aten::copy_` under it)."
    ),
    claims=(
        claim_equals("`aten::t` has CPU time but no GPU time", "op_device_us", "linear", 0.0,
                     args=("aten::t",)),
        claim_equals("run as one `aten::addmm`", "calls_per_step", "linear", 1.0, args=("aten::addmm",)),
        claim_equals("no `aten::add` runs", "calls_per_step", "linear", 0.0, args=("aten::add",)),
        claim_equals("one kernel per step", "kernels_per_step", "linear", 1.0),
        claim_equals("`bias` in its name", "kernels_matching_per_step", "linear", 1.0, args=("bias",)),
        claim_equals("no `aten::add` runs", "calls_per_step", "linear", 0.0, args=("aten::add",),
                     device=CPU_RUN),
        claim_equals("an `aten::copy_` under it", "child_calls_per_step", "linear", 1.0,
                     args=("aten::addmm", "aten::copy_"), device=CPU_RUN),
    ),
    runs=(
        lesson_run("linear", "linear", "linear", gpu=GemmShape(m=4096, k=4096, n=4096),
                   cpu=GemmShape(m=512, k=512, n=512)),
    ),
    check=_linear,
    questions=QUESTIONS,
    order=5,
)

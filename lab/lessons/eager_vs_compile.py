"""The lesson “Eager vs torch.compile: matmul + bias add”, whole: its text and explanation, its runs
(in the workload's own sizes), its check (``_eager_vs_compile``: what the lab looks for in the runs,
a pure function of their analyses), its questions (``QUESTIONS``: each answer computed from the
runs) and its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from lab.analysis.bundle import Run
from lab.core.workloads import GemmShape
from lab.lessons.answers import NEEDS_KERNELS, ONE_KERNEL, YES_NO, kernels_per_step, still_calls
from lab.lessons.checks import ADD_KERNEL, cpu_ops, kernel_events, name_set
from lab.lessons.schema import (
    CPU,
    CPU_RUN,
    GPU,
    Band,
    Lesson,
    Question,
    Signal,
    claim_between,
    claim_equals,
    lesson_run,
    question,
)
from lab.vocab import ADD_KERNEL_NAMES

__all__ = ["LESSON"]


def _bias_fused(eager: Run, compiled: Run) -> list[Signal]:
    if len(kernel_events(compiled.trace)):
        eager_add = [n for n in name_set(kernel_events(eager.trace)) if ADD_KERNEL.search(n)]
        comp_add = [n for n in name_set(kernel_events(compiled.trace)) if ADD_KERNEL.search(n)]
        bias_gemm = [n for n in name_set(kernel_events(compiled.trace)) if "bias" in n.lower()]
        return [
            Signal("eager launches a separate add kernel", bool(eager_add), f"{len(eager_add)} add kernel name(s)"),
            Signal("compiled has no add kernel", not comp_add, f"{len(comp_add)} add kernel name(s)"),
            Signal("the bias is inside the GEMM", bool(bias_gemm) or "aten::addmm" in name_set(cpu_ops(compiled.trace)),
                   bias_gemm[0][:80] if bias_gemm else "aten::addmm"),
        ]
    e_ops, c_ops = name_set(cpu_ops(eager.trace)), name_set(cpu_ops(compiled.trace))
    gemm_or_add = sorted(o for o in c_ops if o.startswith(("aten::mm", "aten::add")))
    return [
        Signal("eager runs aten::add after the matmul", "aten::add" in e_ops, "aten::add in the eager trace"),
        Signal("compiled runs aten::addmm and no aten::add", "aten::addmm" in c_ops and "aten::add" not in c_ops,
               f"compiled ops include: {', '.join(gemm_or_add)}"),
    ]


def _eager_vs_compile(runs: list[Run]) -> list[Signal]:
    return _bias_fused(*runs)


_KERNELS_123 = (Band(label="1", below=1.5), Band(label="2", below=2.5), Band(label="3 or more"))


QUESTIONS: tuple[Question, ...] = (
    question("eager_vs_compile.kernels", "How many kernels per step will the compiled version launch?",
       [b.label for b in _KERNELS_123], kernels_per_step(1, _KERNELS_123, "compiled"), (GPU,), NEEDS_KERNELS,
       tells={"1": (*ONE_KERNEL, "epilogue", "add disappears", "add kernel is gone")}),
    question("eager_vs_compile.add_op", "Will the compiled version still call aten::add?", YES_NO,
       still_calls(1, "aten::add", "aten::addmm", "compiled"), (CPU,),
       tells={"no": ("aten::addmm", "add disappears", "no separate add"), "yes": ("still calls aten::add",)}),
)

LESSON = Lesson(
    key="eager_vs_compile",
    title="Eager vs torch.compile: matmul + bias add",
    text=(
        "Eager mode runs `torch.matmul` then `torch.add`, op by op. `torch.compile` traces the pair "
        "and hands the graph to Inductor, which may call other ops and kernels than the code names. "
        "Compilation itself takes seconds; the lab measures it separately and keeps it out of the "
        "profile. **Look at** the operators and the kernel table of both runs, and the time per "
        "step."
    ),
    look_for="the compiled trace has addmm/a bias GEMM and no separate add kernel",
    explain=(
        "The compiled graph calls `aten::addmm`. On the GPU cuBLAS applies the bias in the GEMM's "
        "epilogue: one kernel per step, whose name mentions `bias`, and no add kernel (the other bar "
        "on the GPU lane each step is a `Memset (Device)`, not a kernel). On a CPU `aten::addmm` "
        "runs too, but it first copies the broadcast bias into the output (an `aten::copy_` under "
        "it): the epilogue is a GPU library's. The compiled step is not faster when profiled: each "
        "call goes through the compiled wrapper's own Python and guards, recorded by the profiler — "
        "on the H200 the profiled compiled step is about twice the eager one, while un-profiled the "
        "two take the same time (211.5 vs 216.5 µs, CUDA events). Judge compiled code's speed "
        "un-profiled, and read its profile for what runs."
    ),
    claims=(
        claim_equals("one kernel per step", "kernels_per_step", "compiled", 1.0),
        claim_equals("whose name mentions `bias`", "kernels_matching_per_step", "compiled", 1.0,
                     args=("bias",)),
        claim_equals("and no add kernel", "kernels_matching_per_step", "compiled", 0.0,
                     args=(ADD_KERNEL_NAMES,)),
        claim_equals("The compiled graph calls `aten::addmm`", "calls_per_step", "compiled", 1.0,
                     args=("aten::addmm",)),
        claim_between("about twice the eager one", "profiled_step_us", "compiled", 1.6, 2.4, over="eager"),
        claim_equals("an `aten::copy_` under", "child_calls_per_step", "compiled", 1.0,
                     args=("aten::addmm", "aten::copy_"), device=CPU_RUN),
        claim_equals("On a CPU `aten::addmm` runs too", "calls_per_step", "compiled", 1.0,
                     args=("aten::addmm",), device=CPU_RUN),
    ),
    runs=(
        lesson_run("eager", "matmul_add", "matmul_add", gpu=GemmShape(m=4096, k=4096, n=4096),
                   cpu=GemmShape(m=512, k=512, n=512)),
        lesson_run("compiled", "matmul_add", "matmul_add_compiled", gpu=GemmShape(m=4096, k=4096, n=4096),
                   cpu=GemmShape(m=512, k=512, n=512), compile=True),
    ),
    check=_eager_vs_compile,
    questions=QUESTIONS,
    order=4,
)

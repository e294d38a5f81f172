"""The lesson “Attention: written out vs scaled_dot_product_attention”, whole: its text and
explanation, its runs (in the workload's own sizes), its check (``_attention``: what the lab looks
for in the runs, a pure function of their analyses), its questions (``QUESTIONS``: each answer
computed from the runs) and its claims (each checked on the H200 recording or a CPU run by
tests/test_claims.py).
"""

from __future__ import annotations

from lab.analysis.bundle import Run
from lab.core.workloads import Attention
from lab.lessons.answers import FEWER, ONE_KERNEL, fewer_than
from lab.lessons.checks import fewer_per_step
from lab.lessons.schema import CPU_RUN, Lesson, Question, Signal, claim_between, claim_equals, lesson_run, question

__all__ = ["LESSON"]


# The ops that name which backend SDPA ran (lab.analysis.figures.ops_present).
SDPA_BACKEND_OPS = ("aten::_cudnn_attention_forward", "aten::_flash_attention_forward",
                    "aten::_scaled_dot_product_flash_attention", "aten::_efficient_attention_forward",
                    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
                    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math")


def _attention(runs: list[Run]) -> list[Signal]:
    naive, sdpa = runs
    return [fewer_per_step(naive, sdpa, "one fused attention op instead of matmul, softmax, matmul")]


QUESTIONS: tuple[Question, ...] = (
    question("attention.fewer", "Will SDPA run fewer, about the same, or more kernels (operators on a CPU) per step "
       "than attention written out?", FEWER, fewer_than(0, 1, "written out vs SDPA"),
       tells={"fewer": (*ONE_KERNEL, "never stores", "several kernels")}),
)

LESSON = Lesson(
    key="attention",
    title="Attention: written out vs scaled_dot_product_attention",
    text=(
        "Written out, attention is `softmax(q·kᵀ·scale)·v`: a matmul that materializes a heads × "
        "tokens × tokens score matrix, a scale, a softmax that reads and writes it again, and a "
        "second matmul. `F.scaled_dot_product_attention` (SDPA) picks one of its backends at run "
        "time (math, FlashAttention, memory-efficient, cuDNN) from the device, dtype and shapes. "
        "**Look at** the kernels per step, the operator under the SDPA call (it names the backend "
        "that ran), and the time per step. M = tokens, K = head dim, N = heads."
    ),
    look_for="fewer kernels and no score-matrix round trip with SDPA",
    explain=(
        "Written out: 4 kernels per step on the H200 (two bf16 GEMMs, the scale, the softmax) and no "
        "copies — the transposes are views, with no kernel. On the H200 with torch 2.11 SDPA chose "
        "the cuDNN backend (`aten::_cudnn_attention_forward`): one fused kernel of about 151 µs a step "
        "that never stores the scores, against 1.4 ms a step written out. The backend depends on "
        "the GPU, dtype, shapes and torch version; on a CPU SDPA runs "
        "`aten::_scaled_dot_product_flash_attention_for_cpu`."
    ),
    claims=(
        claim_equals("4 kernels per step on the H200", "kernels_per_step", "written out", 4.0),
        claim_equals("no copies", "kernels_matching_per_step", "written out", 0.0, args=("copy",)),
        claim_equals("the transposes are views, with no kernel", "op_device_us", "written out", 0.0,
                     args=("aten::transpose",)),
        claim_equals("SDPA chose the cuDNN backend", "ops_present", "sdpa", "aten::_cudnn_attention_forward",
                     args=(SDPA_BACKEND_OPS,)),
        claim_equals("one fused kernel", "kernels_per_step", "sdpa", 1.0),
        claim_between("about 151 µs a step", "kernel_mean_us", "sdpa", 140.0, 160.0),
        claim_between("against 1.4 ms a step written out", "profiled_step_us", "written out", 1300.0, 1500.0),
        claim_equals("on a CPU SDPA runs", "ops_present", "sdpa",
                     "aten::_scaled_dot_product_flash_attention_for_cpu", args=(SDPA_BACKEND_OPS,),
                     device=CPU_RUN),
    ),
    runs=(
        lesson_run("written out", "attention_naive", "attention", gpu=Attention(tokens=4096, head_dim=64, heads=16),
                   cpu=Attention(tokens=512, head_dim=64, heads=8)),
        lesson_run("sdpa", "attention_sdpa", "attention_sdpa", gpu=Attention(tokens=4096, head_dim=64, heads=16),
                   cpu=Attention(tokens=512, head_dim=64, heads=8)),
    ),
    check=_attention,
    questions=QUESTIONS,
    order=7,
)

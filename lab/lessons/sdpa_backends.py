"""The lesson “SDPA backends: math vs FlashAttention”, whole: its text and explanation, its runs (in
the workload's own sizes), its check (``_sdpa_backends``: what the lab looks for in the runs, a pure
function of their analyses), its questions (``QUESTIONS``: each answer computed from the runs) and
its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from lab.analysis.bundle import Run
from lab.core.workloads import Attention
from lab.lessons.answers import FEWER, NEEDS_KERNELS, ONE_KERNEL, fewer_than, kernels_per_step
from lab.lessons.checks import fewer_per_step
from lab.lessons.schema import (
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

__all__ = ["LESSON"]


def _sdpa_backends(runs: list[Run]) -> list[Signal]:
    math, flash = runs
    return [fewer_per_step(math, flash, "FlashAttention keeps its tiles on chip; the math backend runs "
                                         "PyTorch ops, in fp32 for half-precision inputs")]


_FLASH_KERNELS = (Band(label="1", below=1.5), Band(label="2–3", below=3.5), Band(label="4 or more"))


QUESTIONS: tuple[Question, ...] = (
    question("sdpa_backends.flash_kernels", "How many kernels per step will the FlashAttention backend launch?",
       [b.label for b in _FLASH_KERNELS], kernels_per_step(1, _FLASH_KERNELS, "flash"), (GPU,), NEEDS_KERNELS,
       tells={"1": ONE_KERNEL}),
    question("sdpa_backends.fewer", "Will FlashAttention run fewer, about the same, or more kernels (operators on a "
       "CPU) per step than the math backend?", FEWER, fewer_than(0, 1, "math vs flash"),
       tells={"fewer": (*ONE_KERNEL, "several kernels"), "about the same": ("same kernels as",)}),
)

LESSON = Lesson(
    key="sdpa_backends",
    title="SDPA backends: math vs FlashAttention",
    text=(
        "`scaled_dot_product_attention` has several implementations; force one with "
        "`torch.nn.attention.sdpa_kernel(SDPBackend.…)`. The math backend is written in PyTorch ops "
        "and runs on any device and dtype; FlashAttention computes attention in tiles that stay on "
        "chip. **Look at** the kernel names, their count and dtypes per step, and the time per "
        "step. (The memory-efficient backend runs on CUDA only: pick `attention_efficient` as the "
        "workload on a GPU.)"
    ),
    look_for="the math backend launches several kernels per step, flash one",
    explain=(
        "The math backend is not the written-out attention of the previous lesson. For bf16 or fp16 "
        "inputs it upcasts to fp32 (copy kernels), runs both matmuls as FP32 GEMMs on the CUDA cores "
        "(`…_ffma` kernels) and uses a NaN-safe softmax (`aten::_safe_softmax`: `isneginf`, `all` "
        "and `where` around an fp32 softmax) before copying back to bf16: 14 kernels per step on the "
        "H200 against 4 written out, and about 3 times the written-out step (4.3 vs 1.4 ms). "
        "FlashAttention runs one kernel per step, about 240 µs."
    ),
    claims=(
        claim_equals("14 kernels per step", "kernels_per_step", "math", 14.0),
        claim_equals("against 4 written out", "kernels_per_step", "attention:written out", 4.0),
        claim_equals("runs both matmuls as FP32 GEMMs on the CUDA cores", "kernels_matching_per_step", "math",
                     2.0, args=("ffma",)),
        claim_between("it upcasts to fp32 (copy kernels)", "kernels_matching_per_step", "math", 2.0, 6.0,
                      args=("copy",)),
        claim_equals("`isneginf`", "kernels_matching_per_step", "math", 1.0, args=("isneginf",)),
        claim_equals("an fp32 softmax", "kernels_matching_per_step", "math", 1.0,
                     args=(r"SoftMaxForward\w*<float",)),
        claim_equals("uses a NaN-safe softmax", "calls_per_step", "math", 1.0,
                     args=("aten::_safe_softmax",)),
        claim_between("about 3 times the written-out step", "profiled_step_us", "math", 2.7, 3.4,
                      over="attention:written out"),
        claim_equals("FlashAttention runs one kernel per step", "kernels_per_step", "flash", 1.0),
        claim_between("about 240 µs", "kernel_mean_us", "flash", 225.0, 255.0),
        claim_equals("uses a NaN-safe softmax", "calls_per_step", "math", 1.0,
                     args=("aten::_safe_softmax",), device=CPU_RUN),
    ),
    runs=(
        lesson_run("math", "attention_math", "sdpa_math", gpu=Attention(tokens=4096, head_dim=64, heads=16),
                   cpu=Attention(tokens=512, head_dim=64, heads=8)),
        lesson_run("flash", "attention_flash", "sdpa_flash", gpu=Attention(tokens=4096, head_dim=64, heads=16),
                   cpu=Attention(tokens=512, head_dim=64, heads=8)),
    ),
    check=_sdpa_backends,
    questions=QUESTIONS,
    order=8,
)

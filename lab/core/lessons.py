"""The lessons that follow the seed exercise: one change at a time, as presets.

A ``Lesson`` fills the form with one run, or two runs to compare side by side. Sizes differ
by device: a 4096³ GEMM takes ~0.2 ms on an H200 but seconds on a laptop CPU, so each lesson
names the sizes that show its point on each. ``lesson_configs`` refuses plainly when a lesson
needs hardware the host lacks (TF32 needs NVIDIA tensor cores).
"""

from __future__ import annotations

from lab.core.lesson_types import Lesson, LessonRun, _cpu, _gpu, lesson_configs
from lab.core.lessons_workshop import WORKSHOP_LESSONS

__all__ = ["LESSONS", "Lesson", "LessonRun", "lesson_configs"]


# Cold: record from the very first iteration. Warm: un-profiled iterations first, and the
# profiler's own schedule warm-up (its first recorded step carries its set-up costs too).
_COLD = dict(warmup_iters=0, wait=0, warmup=0, active=5)
_WARM = dict(warmup_iters=3, wait=1, warmup=1, active=5)

LESSONS: dict[str, Lesson] = {
    lesson.key: lesson
    for lesson in (
        Lesson(
            key="tiny_vs_large",
            title="Tiny vs large: overhead-bound or compute-bound?",
            text=(
                "A 64×64 matmul does 0.5 MFLOP: the GPU finishes it in a few microseconds, while "
                "Python, the dispatcher and the kernel launch cost tens of microseconds on the CPU. "
                "The table shows it as *Self CPU* far above *Self CUDA*; the timeline shows the GPU "
                "lane mostly empty, waiting for launches. At 4096³ the same code is one long GEMM "
                "kernel and the GPU is busy nearly all the time. **Try:** compare the GPU busy % and "
                "the CPU/GPU verdict of both runs. Small work wants batching, CUDA graphs or "
                "`torch.compile(mode=\"reduce-overhead\")`; large work wants a faster kernel."
            ),
            look_for="overhead-bound verdict on the tiny run, GPU-bound on the large one",
            runs=(
                # Ten active steps: tiny steps cost microseconds, and medians over ten shrug off
                # the odd step stalled by a busy machine.
                LessonRun("tiny", _gpu(m=64, k=64, n=64, dtype="bfloat16", active=10),
                          _cpu(m=64, k=64, n=64, active=10)),
                LessonRun("large", _gpu(m=4096, k=4096, n=4096, dtype="bfloat16"),
                          _cpu(m=1024, k=1024, n=1024)),
            ),
        ),
        Lesson(
            key="cold_vs_warm",
            title="Cold vs warm: why the first step is slow",
            text=(
                "The first time an operator runs, PyTorch loads kernels, creates cuBLAS handles and "
                "workspaces, and the profiler allocates its buffers. Profiling that step measures "
                "set-up, not your model. The cold run records from the very first iteration; the "
                "warm one runs a few iterations first. **Look at** the gap between the start of the "
                "step label and its first operator in the first step versus the others, and at the "
                "first step's duration. This is why `torch.profiler.schedule` has `wait` and "
                "`warmup` steps. On a CPU host the lab's worker has already run matmuls, so the "
                "difference there is small: open the H200 recording to see the real cost."
            ),
            look_for="the cold run's first-step gap is larger than the warm run's",
            runs=(
                LessonRun("cold", _gpu(m=1024, k=1024, n=1024, **_COLD),
                          _cpu(m=256, k=256, n=256, **_COLD)),
                LessonRun("warm", _gpu(m=1024, k=1024, n=1024, **_WARM),
                          _cpu(m=256, k=256, n=256, **_WARM)),
            ),
        ),
        Lesson(
            key="fp32_vs_tf32",
            title="FP32 vs TF32 on tensor cores",
            text=(
                "By default PyTorch computes float32 matmuls in full FP32 on the CUDA cores. Ampere "
                "and newer GPUs can run them on tensor cores in TF32 (10-bit mantissa inputs, FP32 "
                "accumulation), several times faster. **Look at** the GEMM kernel's name (`tf32` "
                "appears in it) and its duration, then the achieved TFLOP/s against the peak. Enable "
                "it with `torch.backends.cuda.matmul.allow_tf32 = True` or "
                "`torch.set_float32_matmul_precision(\"high\")` when the precision suits you."
            ),
            look_for="the FP32 run is flagged 'FP32 matmul without TF32'; the TF32 kernel is faster",
            runs=(
                LessonRun("float32", _gpu(m=4096, k=4096, n=4096, dtype="float32"), None),
                LessonRun("tf32", _gpu(m=4096, k=4096, n=4096, dtype="tf32"), None),
            ),
            cpu_refusal=(
                "TF32 is a tensor-core mode of NVIDIA GPUs (Ampere or newer); this host has none. "
                "Open the H200 samples fp32 and tf32 to see the difference."
            ),
        ),
        Lesson(
            key="eager_vs_compile",
            title="Eager vs torch.compile: the bias add disappears",
            text=(
                "Eager mode runs `matmul` then `add`: two kernels, and the matmul's output makes a "
                "round trip through memory before the add reads it back. `torch.compile` rewrites "
                "the pair as `addmm`, and cuBLAS applies the bias in the GEMM's epilogue: one kernel "
                "(its name mentions `bias`). Compilation itself takes seconds; the lab measures it "
                "separately and keeps it out of the profile. **Look at** the kernel table of both "
                "runs: the elementwise add kernel is gone in the compiled one."
            ),
            look_for="the compiled trace has addmm/a bias GEMM and no separate add kernel",
            runs=(
                LessonRun("eager", _gpu(m=4096, k=4096, n=4096, dtype="bfloat16"),
                          _cpu(m=512, k=512, n=512)),
                LessonRun("compiled", _gpu(m=4096, k=4096, n=4096, dtype="bfloat16", compile=True,
                                           step_label="matmul_add_compiled"),
                          _cpu(m=512, k=512, n=512, compile=True, step_label="matmul_add_compiled")),
            ),
        ),
        Lesson(
            key="linear",
            title="nn.Linear: a transpose with no kernel, the bias in the epilogue",
            text=(
                "`nn.Linear` stores its weight as N×K, so it calls `aten::t` to view it as K×N. A "
                "transpose of a contiguous matrix only swaps strides: **look for** `aten::t` in the "
                "table with CPU time but no GPU kernel under it. The product and the bias then run as "
                "one `aten::addmm`, with the bias applied in the GEMM epilogue — no separate add."
            ),
            look_for="aten::t with no kernel; aten::addmm and no add kernel",
            runs=(
                LessonRun("linear", _gpu(workload="linear", m=4096, k=4096, n=4096, dtype="bfloat16",
                                         step_label="linear"),
                          _cpu(workload="linear", m=512, k=512, n=512, step_label="linear")),
            ),
        ),
        Lesson(
            key="geglu",
            title="GeGLU MLP: compile fuses gelu · mul into one kernel",
            text=(
                "A GeGLU MLP splits the first projection in two halves and multiplies "
                "`gelu(a)` by `g`. Eager mode runs a gelu kernel and a mul kernel, each reading and "
                "writing an M×N tensor; `torch.compile` generates one Triton (GPU) or C++ (CPU) "
                "kernel that does both in one pass. **Look at** the kernel count per step and the "
                "time spent outside the two GEMMs."
            ),
            look_for="fewer kernels per step in the compiled run; a generated fused kernel",
            runs=(
                LessonRun("eager", _gpu(workload="geglu_mlp", m=4096, k=4096, n=8192, dtype="bfloat16",
                                        step_label="geglu"),
                          _cpu(workload="geglu_mlp", m=256, k=256, n=512, step_label="geglu")),
                LessonRun("compiled", _gpu(workload="geglu_mlp", m=4096, k=4096, n=8192,
                                           dtype="bfloat16", compile=True, step_label="geglu_compiled"),
                          _cpu(workload="geglu_mlp", m=256, k=256, n=512, compile=True,
                               step_label="geglu_compiled")),
            ),
        ),
        Lesson(
            key="attention",
            title="Attention: written out vs scaled_dot_product_attention",
            text=(
                "Written out, attention materializes a heads×tokens×tokens score matrix, then the "
                "softmax reads and writes it again: several kernels and a lot of memory traffic. "
                "`F.scaled_dot_product_attention` picks a fused backend (FlashAttention or "
                "memory-efficient on GPUs) that never stores the scores. **Look at** the kernel "
                "count per step, the copies (`aten::contiguous`, `aten::clone`, transposes) that the "
                "written-out version hides, and the time per step. M = tokens, K = head dim, N = heads."
            ),
            look_for="fewer kernels and no score-matrix round trip with SDPA",
            runs=(
                LessonRun("written out", _gpu(workload="attention_naive", m=4096, k=64, n=16,
                                              dtype="bfloat16", step_label="attention"),
                          _cpu(workload="attention_naive", m=512, k=64, n=8, step_label="attention")),
                LessonRun("sdpa", _gpu(workload="attention_sdpa", m=4096, k=64, n=16, dtype="bfloat16",
                                       step_label="attention_sdpa"),
                          _cpu(workload="attention_sdpa", m=512, k=64, n=8, step_label="attention_sdpa")),
            ),
        ),
        Lesson(
            key="sdpa_backends",
            title="SDPA backends: math vs FlashAttention",
            text=(
                "`scaled_dot_product_attention` has several implementations. The math backend is the "
                "reference: the same kernels as the written-out version. FlashAttention computes "
                "attention in tiles that stay on chip, in one kernel. Force one with "
                "`torch.nn.attention.sdpa_kernel(SDPBackend.…)`. **Look at** the kernel names and "
                "counts. (The memory-efficient backend runs on CUDA only: pick `attention_efficient` "
                "as the workload on a GPU.)"
            ),
            look_for="the math backend launches several kernels per step, flash one",
            runs=(
                LessonRun("math", _gpu(workload="attention_math", m=4096, k=64, n=16, dtype="bfloat16",
                                       step_label="sdpa_math"),
                          _cpu(workload="attention_math", m=512, k=64, n=8, step_label="sdpa_math")),
                LessonRun("flash", _gpu(workload="attention_flash", m=4096, k=64, n=16,
                                        dtype="bfloat16", step_label="sdpa_flash"),
                          _cpu(workload="attention_flash", m=512, k=64, n=8, step_label="sdpa_flash")),
            ),
        ),
    )
}

# The workshop lessons (issue 23): lab/core/lessons_workshop.py.
LESSONS.update({lesson.key: lesson for lesson in WORKSHOP_LESSONS})

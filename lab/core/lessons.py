"""The lessons that follow the seed exercise: one change at a time, as presets.

A ``Lesson`` fills the form with one run, or two runs to compare side by side. Sizes differ
by device: a 4096³ GEMM takes ~0.2 ms on an H200 but seconds on a laptop CPU, so each lesson
names the sizes that show its point on each. ``lesson_configs`` refuses plainly when a lesson
needs hardware the host lacks (TF32 needs NVIDIA tensor cores).
"""

from __future__ import annotations

from lab.core.claims import CPU_RUN, claim_between, claim_equals
from lab.core.lesson_types import Lesson, LessonRun, lesson_configs, lesson_run
from lab.core.lessons_workshop import WORKSHOP_LESSONS
from lab.vocab import ADD_KERNEL_NAMES

__all__ = ["ACTIVE_WINDOW", "LESSONS", "SDPA_BACKEND_OPS", "Lesson", "LessonRun", "lesson_configs"]


# Cold: record from the very first iteration. Warm: un-profiled iterations first, and the
# profiler's own schedule warm-up (its first recorded step carries its set-up costs too).
_COLD = dict(warmup_iters=0, wait=0, warmup=0, active=5)
_WARM = dict(warmup_iters=3, wait=1, warmup=1, active=5)

# The ops that name which backend SDPA ran (lab.analysis.figures.ops_present).
SDPA_BACKEND_OPS = ("aten::_cudnn_attention_forward", "aten::_flash_attention_forward",
                    "aten::_scaled_dot_product_flash_attention", "aten::_efficient_attention_forward",
                    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
                    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math")
# The active window, defined where a lesson first uses it (lab.analysis.gpu).
ACTIVE_WINDOW = ("The GPU's *active window* is the span from the trace's first GPU activity to its last; "
                 "its *busy share* is the part of that span in which a kernel, copy or memset runs.")

LESSONS: dict[str, Lesson] = {
    lesson.key: lesson
    for lesson in (
        Lesson(
            key="tiny_vs_large",
            title="Tiny vs large: overhead-bound or compute-bound?",
            text=(
                "A 64×64 matmul does 0.5 MFLOP; a 4096³ one does 137 GFLOP, 262,144 times the work. Both "
                "run the same Python: a matmul and a bias add, each dispatched on the CPU and launched as "
                f"GPU work. {ACTIVE_WINDOW} **Try:** open both runs and compare the table's *Self CPU* and "
                "*Self CUDA* columns, the GPU's busy share, the launch → kernel arrows in the Timeline, "
                "and the CPU/GPU verdict."
            ),
            look_for="overhead-bound verdict on the tiny run, GPU-bound on the large one",
            explain=(
                "At 64³ the GPU finishes each kernel in about 2 µs, while Python, the dispatcher, the "
                "launches and the profiler's own records take about 150 µs a step on the CPU (H200 host): "
                "the table's aten::mm row has Self CPU far "
                "above Self CUDA, and on the H200 the GPU was busy 2 % of its active window. The wait "
                "from a launch call to its kernel is a small part of the step: the step is the CPU's own "
                "work. At 4096³ each step is a GEMM kernel and an add kernel and the GPU is busy nearly "
                "all the time; the add is still about a fifth of the GPU time on the H200. Small work "
                "wants batching, CUDA graphs or `torch.compile(mode=\"reduce-overhead\")`; large work "
                "wants a faster kernel, or the add fused into the GEMM."
            ),
            claims=(
                claim_between("finishes each kernel in about 2 µs", "gemm_kernel_us", "tiny", 1.0, 3.0),
                claim_between("about 150 µs a step", "step_us", "tiny", 120.0, 180.0),
                claim_between("Self CPU far above Self CUDA", "self_cuda_over_self_cpu", "tiny", 0.0, 0.2,
                              args=("aten::mm",)),
                claim_between("busy 2 % of its active window", "gpu_busy_pct", "tiny", 1.0, 3.5),
                claim_between("a small part of the step", "launch_delay_share_pct", "tiny", 0.0, 15.0),
                claim_equals("a GEMM kernel and an add kernel", "kernels_per_step", "large", 2.0),
                claim_between("busy nearly all the time", "gpu_busy_pct", "large", 90.0, 100.0),
                claim_between("about a fifth of the GPU time", "kernel_time_share_pct", "large", 15.0, 25.0,
                              args=(ADD_KERNEL_NAMES,)),
            ),
            runs=(
                # Ten active steps: tiny steps cost microseconds, and medians over ten shrug off
                # the odd step stalled by a busy machine.
                lesson_run("tiny", "matmul_add", "matmul_add", (64, 64, 64), (64, 64, 64), active=10),
                lesson_run("large", "matmul_add", "matmul_add", (4096, 4096, 4096), (1024, 1024, 1024)),
            ),
        ),
        Lesson(
            key="cold_vs_warm",
            title="Cold vs warm: why the first step is slow",
            text=(
                "The first time an operator runs, PyTorch loads its kernels and creates cuBLAS handles and "
                "workspaces, and the profiler allocates its buffers. The cold run records from the very "
                "first iteration; the warm one runs three un-profiled iterations first, then records with "
                "`torch.profiler.schedule(wait=1, warmup=1, active=5)`. **Look at** each run's first step in "
                "the Timeline: its length against the later steps, which operator inside it is long, and "
                "the profiler's own lane. On a CPU host the lab's worker has already run matmuls, so the "
                "difference there is small: open the H200 recording to see the real cost."
            ),
            look_for="the cold run's first step is many times its later steps; the warm run's is not",
            explain=(
                "On the H200 the cold run's first step took over 90 times as long as its later steps "
                "(10.5 ms against a median 113 µs). Most of the extra time is inside that step's first "
                "`aten::mm` (cuBLAS loading its kernel, creating its handle and workspace), and about a "
                "quarter is the profiler's own *Activity Buffer Request* and *Lazy Function Loading* on its "
                "lane, which is not your code. The warm run's first step is a few times its later ones, not "
                "ninety: its start-up happened before the recording. That is what `schedule`'s `wait` and "
                "`warmup` steps and un-profiled warm-up iterations are for."
            ),
            claims=(
                claim_between("over 90 times as long", "first_step_ratio", "cold", 90.0, float("inf")),
                claim_between("(10.5 ms", "first_step_us", "cold", 10_000.0, 11_000.0),
                claim_between("against a median 113 µs)", "later_step_median_us", "cold", 105.0, 120.0),
                claim_between("Most of the extra time is inside that step's first", "first_step_share_pct", "cold",
                              50.0, 100.0, args=("aten::mm",)),
                claim_between("about a quarter is the profiler's own", "first_step_share_pct", "cold", 15.0, 35.0,
                              args=("profiler",)),
                claim_between("a few times its later ones, not ninety", "first_step_ratio", "warm", 1.0, 5.0),
            ),
            runs=(
                lesson_run("cold", "matmul_add", "matmul_add", (1024, 1024, 1024), (256, 256, 256),
                           gpu_dtype="float32", **_COLD),
                lesson_run("warm", "matmul_add", "matmul_add", (1024, 1024, 1024), (256, 256, 256),
                           gpu_dtype="float32", **_WARM),
            ),
        ),
        Lesson(
            key="fp32_vs_tf32",
            title="FP32 vs TF32 on tensor cores",
            text=(
                "By default PyTorch computes float32 matmuls in full FP32 on the CUDA cores. Ampere and "
                "newer GPUs can run them on tensor cores in TF32 (inputs rounded to a 10-bit mantissa, FP32 "
                "accumulation). Since torch 2.9 the switch is `torch.backends.cuda.matmul.fp32_precision = "
                "\"tf32\"`; before it, `torch.backends.cuda.matmul.allow_tf32 = True` or "
                "`torch.set_float32_matmul_precision(\"high\")` — use one style in a program, as torch 2.9 "
                "and later refuse a mix of the two. The lab calls `torch.cuda.synchronize()` once after the "
                "last recorded step, so every kernel ends inside the profile. **Look at** the GEMM kernel's "
                "name and duration in both runs, the achieved TFLOP/s against the peak, and the top rows "
                "of each table sorted by Self CPU."
            ),
            look_for="the FP32 run is flagged 'FP32 matmul without TF32'; the TF32 kernel is faster",
            explain=(
                "The TF32 kernel's name carries `tf32` and the FP32 one's does not (it runs on `ffma`, the "
                "CUDA cores). On the H200 the TF32 GEMM kernel ran 8.0× faster at 4096³. In both tables the "
                "top Self CPU row is `cudaDeviceSynchronize`: the host launched every step's kernels ahead "
                "of the GPU and then waited there for it — a sync's wait is counted as the CPU time of the "
                "call that waits."
            ),
            claims=(
                claim_between("ran 8.0× faster", "gemm_kernel_us", "float32", 7.5, 8.5, over="tf32"),
                claim_equals("The TF32 kernel's name carries `tf32`", "kernels_matching_per_step", "tf32", 1.0,
                             args=("tf32",)),
                claim_equals("the FP32 one's does not", "kernels_matching_per_step", "float32", 0.0,
                             args=("tf32",)),
                claim_equals("it runs on `ffma`", "kernels_matching_per_step", "float32", 1.0, args=("ffma",)),
                claim_equals("the top Self CPU row is `cudaDeviceSynchronize`", "top_self_cpu_row", "float32",
                             "cudaDeviceSynchronize"),
                claim_equals("In both tables the", "top_self_cpu_row", "tf32", "cudaDeviceSynchronize"),
            ),
            runs=(
                lesson_run("float32", "matmul_add", "matmul_add", (4096, 4096, 4096), None, gpu_dtype="float32"),
                lesson_run("tf32", "matmul_add", "matmul_add", (4096, 4096, 4096), None, gpu_dtype="tf32"),
            ),
            cpu_refusal=(
                "TF32 is a tensor-core mode of NVIDIA GPUs (Ampere or newer); this host has none. "
                "Open the H200 samples fp32 and tf32 to see the difference."
            ),
        ),
        Lesson(
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
                claim_between("about twice the eager one", "step_us", "compiled", 1.6, 2.4, over="eager"),
                claim_equals("an `aten::copy_` under", "child_calls_per_step", "compiled", 1.0,
                             args=("aten::addmm", "aten::copy_"), device=CPU_RUN),
                claim_equals("On a CPU `aten::addmm` runs too", "calls_per_step", "compiled", 1.0,
                             args=("aten::addmm",), device=CPU_RUN),
            ),
            runs=(
                lesson_run("eager", "matmul_add", "matmul_add", (4096, 4096, 4096), (512, 512, 512)),
                lesson_run("compiled", "matmul_add", "matmul_add_compiled", (4096, 4096, 4096), (512, 512, 512),
                           compile=True),
            ),
        ),
        Lesson(
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
                lesson_run("linear", "linear", "linear", (4096, 4096, 4096), (512, 512, 512)),
            ),
        ),
        Lesson(
            key="geglu",
            title="GeGLU MLP: eager vs torch.compile",
            text=(
                "A GeGLU MLP splits the first projection in two halves a and g and multiplies `gelu(a)` by "
                "`g` before the second projection. Eager mode runs each op as written; `torch.compile` hands "
                "the graph to Inductor, which generates its own Triton (GPU) or C++ (CPU) code for the "
                "elementwise part. **Look at** the kernels per step, their names, and the time spent "
                "outside the two GEMMs."
            ),
            look_for="fewer kernels per step in the compiled run; a generated fused kernel",
            explain=(
                "Eager mode launches the two GEMMs, a gelu kernel and a mul kernel: 4 kernels per step on "
                "the H200, each elementwise kernel reading and writing an M×N tensor. Compiled, gelu and mul "
                "become one generated kernel (`triton_poi_fused_gelu_mul…`): 3 kernels per step, and the "
                "time outside the GEMMs drops from about 195 to 55 µs a step. On a CPU the compiled run "
                "calls no `aten::gelu`, but its step need not be faster (the lesson check says why)."
            ),
            claims=(
                claim_equals("4 kernels per step", "kernels_per_step", "eager", 4.0),
                claim_equals("3 kernels per step", "kernels_per_step", "compiled", 3.0),
                claim_equals("become one generated kernel", "kernels_matching_per_step", "compiled", 1.0,
                             args=(r"^triton_.*gelu.*mul",)),
                claim_between("from about 195", "non_gemm_kernel_us_per_step", "eager", 185.0, 205.0),
                claim_between("to 55 µs a step", "non_gemm_kernel_us_per_step", "compiled", 50.0, 60.0),
                claim_equals("calls no `aten::gelu`", "calls_per_step", "compiled", 0.0, args=("aten::gelu",),
                             device=CPU_RUN),
            ),
            runs=(
                lesson_run("eager", "geglu_mlp", "geglu", (4096, 4096, 8192), (256, 256, 512)),
                lesson_run("compiled", "geglu_mlp", "geglu_compiled", (4096, 4096, 8192), (256, 256, 512),
                           compile=True),
            ),
        ),
        Lesson(
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
                claim_between("against 1.4 ms a step written out", "step_us", "written out", 1300.0, 1500.0),
                claim_equals("on a CPU SDPA runs", "ops_present", "sdpa",
                             "aten::_scaled_dot_product_flash_attention_for_cpu", args=(SDPA_BACKEND_OPS,),
                             device=CPU_RUN),
            ),
            runs=(
                lesson_run("written out", "attention_naive", "attention", (4096, 64, 16), (512, 64, 8)),
                lesson_run("sdpa", "attention_sdpa", "attention_sdpa", (4096, 64, 16), (512, 64, 8)),
            ),
        ),
        Lesson(
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
                claim_between("about 3 times the written-out step", "step_us", "math", 2.7, 3.4,
                              over="attention:written out"),
                claim_equals("FlashAttention runs one kernel per step", "kernels_per_step", "flash", 1.0),
                claim_between("about 240 µs", "kernel_mean_us", "flash", 225.0, 255.0),
                claim_equals("uses a NaN-safe softmax", "calls_per_step", "math", 1.0,
                             args=("aten::_safe_softmax",), device=CPU_RUN),
            ),
            runs=(
                lesson_run("math", "attention_math", "sdpa_math", (4096, 64, 16), (512, 64, 8)),
                lesson_run("flash", "attention_flash", "sdpa_flash", (4096, 64, 16), (512, 64, 8)),
            ),
        ),
    )
}

# The workshop lessons (issue 23): lab/core/lessons_workshop.py.
LESSONS.update({lesson.key: lesson for lesson in WORKSHOP_LESSONS})

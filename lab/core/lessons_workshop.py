"""The lessons a workshop needs beyond the seed's (issue 23), added to ``lessons.LESSONS``.

Their texts say what to look at and why, never the answer to a question asked before the run
opens (lab.teach.questions_workshop); figures quoted are those of the bundled H200 recordings
(torch 2.11, CUDA 13), tested in tests/test_lessons_workshop.py.
"""

from __future__ import annotations

from lab.core.lesson_types import Lesson, LessonRun, _cpu, _gpu

__all__ = ["WORKSHOP_LESSONS"]

_BF16 = dict(dtype="bfloat16")
# Few recorded steps: the loops launch hundreds of kernels a step, and the samples stay small.
_FEW = dict(active=3)

WORKSHOP_LESSONS: tuple[Lesson, ...] = (
    Lesson(
        key="launch_overlap",
        title="Launch delay and CPU/GPU overlap, and what a sync does to the table",
        text=(
            "A CUDA launch only queues work: the launch call (`cudaLaunchKernel`; `cuLaunchKernelEx` for "
            "cuBLAS's GEMMs on the H200 recording) returns while the GPU is still busy with earlier "
            "kernels, so the host runs ahead and the queue grows. In the Timeline each "
            "launch has an arrow to its kernel; the arrow's horizontal length is the *launch delay* "
            "(kernel start − launch start). Both runs do four 4096³ bf16 matmuls a step (on a CPU "
            "256³); the second ends each step with `torch.cuda.synchronize()`, as hand-written "
            "timing loops often do. **Look at** the arrows of the first and the last step of each "
            "run, and the Table's *Self CPU* column of the synced run. A CPU run has no queue and no "
            "sync to wait in: open the H200 recording."
        ),
        look_for="how the launch delay changes from step to step in each run; which row holds the synced "
        "run's Self CPU",
        runs=(
            LessonRun(
                "no sync",
                _gpu(workload="matmul_chain", m=4096, k=4096, n=4, step_label="chain", **_BF16),
                _cpu(workload="matmul_chain", m=256, k=256, n=4, step_label="chain"),
            ),
            LessonRun(
                "sync each step",
                _gpu(workload="matmul_chain_sync", m=4096, k=4096, n=4, step_label="chain_sync", **_BF16),
                _cpu(workload="matmul_chain_sync", m=256, k=256, n=4, step_label="chain_sync"),
            ),
        ),
    ),
    Lesson(
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
            LessonRun(
                "python loop",
                _gpu(workload="row_loop", m=64, k=4096, n=1, step_label="rows", **_BF16, **_FEW),
                _cpu(workload="row_loop", m=64, k=256, n=1, step_label="rows", **_FEW),
            ),
            LessonRun(
                "vectorized",
                _gpu(workload="row_vectorized", m=64, k=4096, n=1, step_label="rows_vectorized", **_BF16, **_FEW),
                _cpu(workload="row_vectorized", m=64, k=256, n=1, step_label="rows_vectorized", **_FEW),
            ),
        ),
    ),
    Lesson(
        key="host_sync",
        title="A host sync in the loop: .item()",
        text=(
            "`.item()`, `.tolist()`, `print(t)` or `if t > 0:` need a value the GPU has not computed "
            "yet: the host copies it back (a device→host `Memcpy`) and waits in "
            "`cudaStreamSynchronize` until every queued kernel has run. Both runs do eight 2048³ bf16 "
            "matmuls a step (on a CPU 128³) and read one value of each result: the first with "
            "`.item()` after every matmul, the second keeps the values on the device and reads them "
            "all at the end of the step. **Look at** the GPU lane between the GEMM kernels, the "
            "`cudaStreamSynchronize` rows and the step time."
        ),
        look_for="the gaps in the GPU lane of each run; the cudaStreamSynchronize calls per step",
        runs=(
            LessonRun(
                "item() each matmul",
                _gpu(workload="chain_item", m=2048, k=2048, n=8, step_label="item_each", **_BF16),
                _cpu(workload="chain_item", m=128, k=128, n=8, step_label="item_each"),
            ),
            LessonRun(
                "read once",
                _gpu(workload="chain_item_once", m=2048, k=2048, n=8, step_label="item_once", **_BF16),
                _cpu(workload="chain_item_once", m=128, k=128, n=8, step_label="item_once"),
            ),
        ),
    ),
    Lesson(
        key="cuda_graphs",
        title="CUDA graphs: one launch replays a whole step",
        text=(
            "Sixteen iterations of `y = y * a + b` on a 256×256 bf16 tensor: each op's kernel runs in "
            "a few microseconds, less than it takes the host to launch it. A `torch.cuda.CUDAGraph` "
            "records the step's kernels once (the capture happens before profiling) and replays them "
            'with one `cudaGraphLaunch`; `torch.compile(mode="reduce-overhead")` does this capture '
            "for you. **Look at** the CPU lane and the runtime calls of both runs, the GPU lane, and "
            "the step time. On a CPU there is nothing to capture: its 'graphed' run is eager."
        ),
        look_for="the runtime calls per step in each run; what the GPU lane shows under a replay",
        runs=(
            LessonRun(
                "eager",
                _gpu(workload="small_ops", m=256, k=256, n=16, step_label="small_ops", **_BF16),
                _cpu(workload="small_ops", m=64, k=64, n=16, step_label="small_ops"),
            ),
            LessonRun(
                "graphed",
                _gpu(workload="small_ops_graphed", m=256, k=256, n=16, step_label="small_ops_graphed", **_BF16),
                _cpu(workload="small_ops_graphed", m=64, k=64, n=16, step_label="small_ops_graphed"),
            ),
        ),
    ),
    Lesson(
        key="training_step",
        title="A training step: forward, backward, optimizer",
        text=(
            "A two-layer MLP (Linear K→N, GELU, Linear N→K) on 4096 rows, K = 2048, N = 8192, bf16 "
            "(on a CPU 128 rows, 64 → 256, float32), trained with MSE loss and AdamW. The step is "
            "labelled `forward` and `backward`; the optimizer step labels itself "
            "(`Optimizer.step#AdamW.step`). Backward ops appear in the table as "
            "`autograd::engine::evaluate_function: <Op>Backward0`, each wrapping the aten ops that "
            "compute its gradients, and run on autograd's own thread. **Look at** the GEMMs of each "
            "phase and the time between the labels. Which gradients does the first layer need?"
        ),
        look_for="the matrix multiplications in each phase; the time of each phase",
        runs=(
            LessonRun(
                "train step",
                _gpu(workload="train_mlp", m=4096, k=2048, n=8192, step_label="train", **_BF16),
                _cpu(workload="train_mlp", m=128, k=64, n=256, step_label="train"),
            ),
        ),
    ),
    Lesson(
        key="pinned_copies",
        title="Host→device copies: pageable vs pinned memory",
        text=(
            "The GPU's copy engines read host memory by DMA, which needs page-locked (*pinned*) "
            "memory. From ordinary (*pageable*) memory the driver stages the data through a pinned "
            "buffer of its own (NVIDIA's CUDA documentation). Both runs copy a 4096×4096 float32 host "
            "tensor (64 MiB) to the GPU "
            "with `copy_(src, non_blocking=True)`; the second pins it first with `pin_memory()`. The "
            "trace names each copy `Memcpy HtoD (Pageable -> Device)` or `(Pinned -> Device)`. "
            "**Look at** each copy's duration (GB/s = bytes / time) and how long `cudaMemcpyAsync` "
            "keeps the CPU. On a CPU both runs copy host to host (1024×1024): no DMA, no pinning."
        ),
        look_for="the Memcpy rows' durations; cudaMemcpyAsync's CPU time against its copy's",
        runs=(
            LessonRun(
                "pageable",
                _gpu(workload="copy_pageable", m=4096, k=4096, n=1, step_label="copy_pageable"),
                _cpu(workload="copy_pageable", m=1024, k=1024, n=1, step_label="copy_pageable"),
            ),
            LessonRun(
                "pinned",
                _gpu(workload="copy_pinned", m=4096, k=4096, n=1, step_label="copy_pinned"),
                _cpu(workload="copy_pinned", m=1024, k=1024, n=1, step_label="copy_pinned"),
            ),
        ),
    ),
    Lesson(
        key="memory_peak",
        title="profile_memory: who holds the peak",
        text=(
            "With `profile_memory=True` the trace records every allocation and free of the caching "
            "allocator, with the total allocated after each: the **Memory** view draws that curve "
            "and names the op and label running at its peak. The step: `h = x @ W1` (label `up`), "
            "`a = gelu(h)` (`act`), `y = a @ W2` (`down`); x is 4096×8192 bf16 and h, a and y are "
            "each 4096×8192 (64 MiB; on a CPU 256×512 float32). `h` is a Python local that is never "
            "deleted. **Look at** the curve inside one step and what each label allocates."
        ),
        look_for="the allocations inside each label; the curve's highest point in a step",
        runs=(
            LessonRun(
                "memory",
                _gpu(workload="memory_mlp", m=4096, k=8192, n=8192, step_label="mlp", profile_memory=True, **_BF16),
                _cpu(workload="memory_mlp", m=256, k=512, n=512, step_label="mlp", profile_memory=True),
            ),
        ),
    ),
    Lesson(
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
            LessonRun(
                "row loop",
                _gpu(workload="row_loop", m=64, k=4096, n=1, step_label="rows", **_BF16, **_FEW),
                _cpu(workload="row_loop", m=64, k=256, n=1, step_label="rows", **_FEW),
            ),
            LessonRun("one GEMM", _gpu(m=4096, k=4096, n=4096, **_BF16), _cpu(m=512, k=512, n=512)),
        ),
    ),
    Lesson(
        key="self_total_shapes",
        title="Self vs Total, and grouping by input shape",
        text=(
            "*Total* time of an op includes the ops it calls; *Self* time is what is left when they "
            "are taken out. `torch.matmul` dispatches to `aten::mm`, which launches the kernel (on a "
            "CPU, computes the product). The step multiplies three pairs of equal FLOPs: (M, K, N), "
            "(2M, K/4, 2N) and (4M, K/16, 4N), with M = K = N = 4096 bf16 (on a CPU 256 float32), so "
            "`aten::mm` is one row of 3 calls per step. `key_averages(group_by_input_shape=True)` "
            "(the Table's *Group by input shape*) splits it by shape. **Look at** aten::matmul's "
            "Self and Total, then the by-shape rows of aten::mm."
        ),
        look_for="aten::matmul's Self against its Total; aten::mm's rows by shape",
        runs=(
            LessonRun(
                "shapes",
                _gpu(workload="matmul_shapes", m=4096, k=4096, n=4096, step_label="shapes", **_BF16),
                _cpu(workload="matmul_shapes", m=256, k=256, n=256, step_label="shapes"),
            ),
        ),
    ),
)

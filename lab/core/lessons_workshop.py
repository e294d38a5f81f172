"""The lessons a workshop needs beyond the seed's (issue 23), added to ``lessons.LESSONS``.

Each lesson is one row of ``WORKSHOP_LESSONS``: its text (shown before the predictions: where to
look, never the answer to a question of ``lab.teach.questions_workshop``), its runs (one
``lesson_run`` row each: workload, step label, GPU and CPU sizes), what the check looks for, the
``explain`` shown after the runs opened (the figures of the bundled H200 recordings, torch 2.11,
CUDA 13) and the ``claims``: every sentence about what a trace shows, as a figure checked on its
recording (``device="cuda"``) or on a CPU run (``device="cpu"``) by tests/test_claims.py.
"""

from __future__ import annotations

from dataclasses import replace

from lab.core.claims import CPU_RUN, claim_between, claim_equals
from lab.core.lesson_types import Lesson, lesson_run

__all__ = ["WORKSHOP_LESSONS"]

_MIB_64 = 64 * 2**20
_BACKWARD_OP = "autograd::engine::evaluate_function"
# active=3: few recorded steps, since the loop launches hundreds of kernels a step and the samples stay small.
_ROW_LOOP = lesson_run("python loop", "row_loop", "rows", (64, 4096, 1), (64, 256, 1), active=3)

WORKSHOP_LESSONS: tuple[Lesson, ...] = (
    Lesson(
        key="launch_overlap",
        title="Launch delay and CPU/GPU overlap, and what a sync does to the table",
        text=(
            "A CUDA launch only queues work: the launch call (`cudaLaunchKernel`; `cuLaunchKernelEx` for "
            "cuBLAS's GEMMs on the H200 recording) returns while the GPU is still busy with earlier "
            "kernels, so the host can run ahead of the GPU. In the Timeline each "
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
            lesson_run("no sync", "matmul_chain", "chain", (4096, 4096, 4), (256, 256, 4)),
            lesson_run("sync each step", "matmul_chain_sync", "chain_sync", (4096, 4096, 4), (256, 256, 4)),
        ),
        explain=(
            "Without a sync the first kernel of each step waits longer every step: 14 µs in the first, "
            "over 800 µs in the third on the H200, because the host queues a step's GEMMs faster than "
            "the GPU runs them. With a sync each step the delay stays near 13 µs, and "
            "`cudaDeviceSynchronize` holds about 60 % of the synced steps' CPU time: the host's wait "
            "is booked as the Self CPU of the sync row, not of the ops that made the GPU busy. The "
            "no-sync table has one `cudaDeviceSynchronize` too, outside the steps: the lab's own, "
            "when the recording ends."
        ),
        claims=(
            claim_equals("`cuLaunchKernelEx` for cuBLAS's GEMMs on the H200 recording", "calls_per_step",
                         "no sync", 4.0, args=("cuLaunchKernelEx",)),
            claim_equals("four 4096³ bf16 matmuls a step", "gemms_per_step", "no sync", 4.0),
            claim_equals("four 4096³ bf16 matmuls a step", "gemms_per_step", "sync each step", 4.0),
            claim_equals("(on a CPU 256³)", "gemms_per_step", "no sync", 4.0, device=CPU_RUN),
            claim_equals("ends each step with `torch.cuda.synchronize()`", "calls_per_step", "sync each step", 1.0,
                         args=("cudaDeviceSynchronize",)),
            claim_between("14 µs in the first", "launch_delay_of_step_us", "no sync", 10.0, 20.0, args=(0,)),
            claim_between("over 800 µs in the third", "launch_delay_of_step_us", "no sync", 800.0, 1000.0,
                          args=(-1,)),
            claim_between("the delay stays near 13 µs", "launch_delay_of_step_us", "sync each step", 10.0, 20.0,
                          args=(-1,)),
            claim_between("about 60 % of the synced steps' CPU time", "call_share_pct", "sync each step", 55.0, 65.0,
                          args=("cudaDeviceSynchronize",)),
            claim_equals("The no-sync table has one `cudaDeviceSynchronize` too", "top_self_cpu_row", "no sync",
                         "cudaDeviceSynchronize"),
            claim_equals("outside the steps", "calls_per_step", "no sync", 0.0, args=("cudaDeviceSynchronize",)),
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
            _ROW_LOOP,
            lesson_run("vectorized", "row_vectorized", "rows_vectorized", (64, 4096, 1), (64, 256, 1), active=3),
        ),
        explain=(
            "Per loop step, `aten::select` runs 192 times (x[i], s[i] and out[i] for each of the 64 "
            "rows), `aten::mul` and `aten::copy_` 64 times each; the vectorized step runs one "
            "`aten::mul`. On the H200 that is 64 kernels a step against 1, and a loop step takes "
            "about 40 times as long as a vectorized one (4.8 ms vs 0.12 ms), though the GPU does the "
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
            claim_between("about 40 times as long", "step_us", "python loop", 30.0, 50.0, over="vectorized"),
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
            lesson_run("item() each matmul", "chain_item", "item_each", (2048, 2048, 8), (128, 128, 8)),
            lesson_run("read once", "chain_item_once", "item_once", (2048, 2048, 8), (128, 128, 8)),
        ),
        explain=(
            "The `.item()` step makes 8 `cudaStreamSynchronize` calls and 8 device→host copies; the "
            "read-once step makes one of each (after a `cat` kernel gathers the values). "
            "`aten::item` does its work in `aten::_local_scalar_dense`, on any device. On the H200 "
            "recording the syncs cost little time, though: a 2048³ matmul is about 24 µs of GPU work, "
            "so both steps are host-bound (the GPU is busy under half of its window in either run) and "
            "the `.item()` step is not the slower one, profiled or not. A sync hurts where the GPU "
            "has a long queue to drain: larger work, or a sync inside a loop that launches ahead."
        ),
        claims=(
            claim_equals("eight 2048³ bf16 matmuls a step", "gemms_per_step", "item() each matmul", 8.0),
            claim_equals("eight 2048³ bf16 matmuls a step", "gemms_per_step", "read once", 8.0),
            claim_equals("(on a CPU 128³)", "gemms_per_step", "read once", 8.0, device=CPU_RUN),
            claim_equals("makes 8 `cudaStreamSynchronize` calls", "calls_per_step", "item() each matmul", 8.0,
                         args=("cudaStreamSynchronize",)),
            claim_equals("8 device→host copies", "calls_per_step", "item() each matmul", 8.0,
                         args=("cudaMemcpyAsync",)),
            claim_equals("makes one of each", "calls_per_step", "read once", 1.0, args=("cudaStreamSynchronize",)),
            claim_equals("makes one of each", "calls_per_step", "read once", 1.0, args=("cudaMemcpyAsync",)),
            claim_equals("a `cat` kernel gathers the values", "kernels_matching_per_step", "read once", 1.0,
                         args=("CatArray",)),
            claim_equals("does its work in `aten::_local_scalar_dense`", "child_op", "item() each matmul",
                         "aten::_local_scalar_dense", args=("aten::item",)),
            claim_equals("does its work in `aten::_local_scalar_dense`", "child_op", "item() each matmul",
                         "aten::_local_scalar_dense", args=("aten::item",), device=CPU_RUN),
            claim_between("about 24 µs of GPU work", "gemm_kernel_us", "item() each matmul", 20.0, 28.0),
            claim_between("busy under half of its window", "gpu_busy_pct", "item() each matmul", 0.0, 50.0),
            claim_between("busy under half of its window", "gpu_busy_pct", "read once", 0.0, 50.0),
            claim_between("is not the slower one, profiled", "step_us", "item() each matmul", 0.0, 1.0,
                          over="read once"),
            claim_between("or not", "unprofiled_step_us", "item() each matmul", 0.0, 1.0, over="read once"),
        ),
    ),
    Lesson(
        key="cuda_graphs",
        title="CUDA graphs: one launch replays a whole step",
        text=(
            "Sixteen iterations of `y = y * a + b` on a 256×256 bf16 tensor: each op's kernel runs in "
            "about a microsecond on the H200, less than it takes the host to launch it. A "
            "`torch.cuda.CUDAGraph` records the step's work once (the capture happens before "
            'profiling) and replays it with one `cudaGraphLaunch`; `torch.compile(mode="reduce-overhead")` '
            "does this capture for you. **Look at** the CPU lane and the runtime calls of both runs, "
            "the GPU lane, and the step time. On a CPU there is nothing to capture: its 'graphed' run is eager."
        ),
        look_for="the runtime calls per step in each run; what the GPU lane shows under a replay",
        runs=(
            lesson_run("eager", "small_ops", "small_ops", (256, 256, 16), (64, 64, 16)),
            lesson_run("graphed", "small_ops_graphed", "small_ops_graphed", (256, 256, 16), (64, 64, 16)),
        ),
        explain=(
            "Eager, each step calls 32 operators (`aten::mul` and `aten::add` per iteration) and makes 32 "
            "`cudaLaunchKernel` calls of about 7 µs each for 32 kernels. "
            "Graphed, the CPU lane shows one `cudaGraphLaunch` and no operator at all, and the GPU "
            "still runs the same 32 kernels. The graphed step is about 3× faster profiled and about "
            "7× unprofiled on the H200: the profiler's per-op records weigh most on the eager run, "
            "which has the ops."
        ),
        claims=(
            claim_between("runs in about a microsecond on the H200", "kernel_mean_us", "eager", 0.5, 2.0),
            claim_between("less than it takes the host to launch it", "call_mean_us", "eager", 2.0, 20.0,
                          args=("cudaLaunchKernel",)),
            claim_equals("replays it with one `cudaGraphLaunch`", "calls_per_step", "graphed", 1.0,
                         args=("cudaGraphLaunch",)),
            claim_between("its 'graphed' run is eager", "ops_per_step", "graphed", 0.99, 1.01, over="eager",
                          device=CPU_RUN),
            claim_equals("each step calls 32 operators", "ops_per_step", "eager", 32.0),
            claim_equals("each step calls 32 operators", "ops_per_step", "eager", 32.0, device=CPU_RUN),
            claim_equals("makes 32 `cudaLaunchKernel` calls", "calls_per_step", "eager", 32.0,
                         args=("cudaLaunchKernel",)),
            claim_equals("for 32 kernels", "kernels_per_step", "eager", 32.0),
            claim_equals("no operator at all", "ops_per_step", "graphed", 0.0),
            claim_equals("the same 32 kernels", "kernels_per_step", "graphed", 32.0),
            claim_between("about 3× faster profiled", "step_us", "eager", 2.5, 4.0, over="graphed"),
            claim_between("7× unprofiled", "unprofiled_step_us", "eager", 6.0, 9.0,
                          over="graphed"),
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
            "compute its gradients, and, on a GPU, run on autograd's own thread. **Look at** the GEMMs "
            "of each phase and the time between the labels. Which gradients does the first layer need?"
        ),
        look_for="the matrix multiplications in each phase; the time of each phase",
        runs=(lesson_run("train step", "train_mlp", "train", (4096, 2048, 8192), (128, 64, 256)),),
        explain=(
            "A step runs 5 GEMMs: 2 forward, each an `aten::addmm` with the bias applied by cuBLAS "
            "on the GPU, and 3 backward — the second layer needs the gradients of its weight and of "
            "its input, the first layer only its weight's, since x needs no gradient. On the H200 "
            "backward's GPU work is the longest phase, about 1.6× the forward's; AdamW's update of "
            "the four parameters runs as 16 multi-tensor kernels a step (torch's `foreach` path)."
        ),
        claims=(
            claim_between("labelled `forward` and `backward`", "phase_us",
                          "train step", 1.0, float("inf"), args=("backward",)),
            claim_between("the optimizer step labels itself", "phase_us", "train step", 1.0, float("inf"),
                          args=("Optimizer.step#AdamW.step",)),
            claim_equals("`autograd::engine::evaluate_function: <Op>Backward0`", "calls_per_step", "train step",
                         2.0, args=(f"{_BACKWARD_OP}: AddmmBackward0",)),
            claim_equals("on a GPU, run on autograd's own thread", "on_other_thread", "train step", 1.0,
                         args=(_BACKWARD_OP, "forward")),
            claim_equals("on a GPU, run on autograd's own thread", "on_other_thread", "train step", 0.0,
                         args=(_BACKWARD_OP, "forward"), device=CPU_RUN),
            claim_equals("A step runs 5 GEMMs", "gemms_per_step", "train step", 5.0),
            claim_equals("A step runs 5 GEMMs", "gemms_per_step", "train step", 5.0, device=CPU_RUN),
            claim_equals("2 forward, each an `aten::addmm`", "calls_per_step", "train step", 2.0,
                         args=("aten::addmm",)),
            claim_equals("with the bias applied by cuBLAS", "kernels_matching_per_step", "train step", 2.0,
                         args=("bias",)),
            claim_equals("and 3 backward", "calls_per_step", "train step", 3.0, args=("aten::mm",)),
            claim_between("backward's GPU work is the longest phase", "phase_ratio", "train step", 1.05,
                          float("inf"), args=("backward", "Optimizer.step#AdamW.step")),
            claim_between("about 1.6× the forward's", "phase_ratio", "train step", 1.4, 1.8,
                          args=("backward", "forward")),
            claim_equals("runs as 16 multi-tensor kernels a step", "kernels_matching_per_step", "train step", 16.0,
                         args=("multi_tensor",)),
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
            lesson_run("pageable", "copy_pageable", "copy_pageable", (4096, 4096, 1), (1024, 1024, 1),
                       gpu_dtype="float32"),
            lesson_run("pinned", "copy_pinned", "copy_pinned", (4096, 4096, 1), (1024, 1024, 1), gpu_dtype="float32"),
        ),
        explain=(
            "On the H200 recording the pageable copy runs at about 7 GB/s and `cudaMemcpyAsync` "
            "lasts as long as the copy itself: `non_blocking=True` cannot make a pageable copy "
            "asynchronous. The pinned copy runs at about 55 GB/s, 7–8× faster, and its call returns "
            "after about 1 % of the copy's time, so the host is free while the DMA runs."
        ),
        claims=(
            claim_equals("(64 MiB)", "copy_bytes_per_step", "pageable", float(_MIB_64)),
            claim_equals("`Memcpy HtoD (Pageable -> Device)`", "copy_kinds", "pageable",
                         "Memcpy HtoD (Pageable -> Device)"),
            claim_equals("`(Pinned -> Device)`", "copy_kinds", "pinned", "Memcpy HtoD (Pinned -> Device)"),
            claim_equals("copy host to host (1024×1024): no DMA", "copy_kinds", "pageable", "", device=CPU_RUN),
            claim_equals("copy host to host (1024×1024): no DMA", "calls_per_step", "pinned", 1.0,
                         args=("aten::copy_",), device=CPU_RUN),
            claim_between("about 7 GB/s", "copy_gb_per_s", "pageable", 5.0, 9.0),
            claim_between("lasts as long as the copy itself", "copy_call_ratio", "pageable", 0.9, 1.1),
            claim_between("about 55 GB/s", "copy_gb_per_s", "pinned", 45.0, 65.0),
            claim_between("7–8× faster", "copy_gb_per_s", "pinned", 7.0, 8.5, over="pageable"),
            claim_between("about 1 % of the copy's time", "copy_call_ratio", "pinned", 0.0, 0.03),
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
            lesson_run("memory", "memory_mlp", "mlp", (4096, 8192, 8192), (256, 512, 512), profile_memory=True),
        ),
        explain=(
            "The peak comes in `down`, on the GPU and on a CPU: `h` is still alive (nothing freed it), "
            "`a` too, and `y` is being allocated, so the curve stands 3 tensors above the step's "
            "start. Freeing `h` after `act` (`del h`) would lower the peak by one tensor."
        ),
        claims=(
            claim_equals("(64 MiB;", "memory_largest_allocation_bytes", "memory", float(_MIB_64)),
            claim_equals("on a CPU 256×512 float32)", "memory_largest_allocation_bytes", "memory",
                         float(256 * 512 * 4), device=CPU_RUN),
            claim_equals("The peak comes in `down`", "memory_peak_label", "memory", "down"),
            claim_equals("The peak comes in `down`", "memory_peak_label", "memory", "down", device=CPU_RUN),
            claim_equals("3 tensors above the step's", "memory_rise_units", "memory", 3.0),
            claim_equals("3 tensors above the step's", "memory_rise_units", "memory", 3.0, device=CPU_RUN),
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
            replace(_ROW_LOOP, name="row loop"),
            lesson_run("one GEMM", "matmul_add", "matmul_add", (4096, 4096, 4096), (512, 512, 512)),
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
        runs=(lesson_run("shapes", "matmul_shapes", "shapes", (4096, 4096, 4096), (256, 256, 256)),),
        explain=(
            "aten::matmul's Self CPU is about 5 % of its total on the H200 host (under 15 % on either "
            "device): it only dispatches, and `aten::mm` holds the rest. By shape, the 16384×256 @ "
            "256×16384 product takes the most GPU time on the H200: the same FLOPs as the square one, "
            "but a 16× larger output to write."
        ),
        claims=(
            claim_equals("`aten::mm` is one row of 3 calls per step", "calls_per_step", "shapes", 3.0,
                         args=("aten::mm",)),
            claim_equals("`aten::mm` is one row of 3 calls per step", "calls_per_step", "shapes", 3.0,
                         args=("aten::mm",), device=CPU_RUN),
            claim_equals("splits it by shape", "shape_row_count", "shapes", 3.0, args=("aten::mm",)),
            claim_equals("splits it by shape", "shape_row_count", "shapes", 3.0, args=("aten::mm",), device=CPU_RUN),
            claim_between("about 5 % of its total on the H200 host", "self_share_pct", "shapes", 2.0, 10.0,
                          args=("aten::matmul",)),
            claim_between("under 15 % on either", "self_share_pct", "shapes", 0.0, 15.0, args=("aten::matmul",),
                          device=CPU_RUN),
            claim_equals("the 16384×256 @ 256×16384 product takes the most GPU time", "top_shape", "shapes",
                         "[[16384, 256], [256, 16384]]", args=("aten::mm",)),
        ),
    ),
)

"""Hand-made Kineto traces of the problems the diagnoses name (tests/test_diagnoses.py).

Each builder returns the raw JSON document (a dict), so tests compute their expectations from
the same events by brute force and load it with ``load(doc)``. Events come from
``tests/tracebuild.py`` (one CPU thread pid 100 / tid 100, GPU 0 stream 7); a few more event
kinds are added here: memcpys and kernels on other streams, python_function frames, graph
launches, NCCL kernels.
"""

from __future__ import annotations

import json

from lab.trace import Trace, load_trace
from tests.tracebuild import CPU_PID, CPU_TID, H200_PROPS, annotation, document, kernel, launch, op

SIDE_STREAM = 13


def load(doc: dict) -> Trace:
    return load_trace(json.dumps(doc).encode())


def gpu(name: str, ts: float, dur: float, corr: int, *, cat: str = "kernel", stream: int = 7, **args) -> dict:
    ev = kernel(name, ts, dur, corr, cat=cat)
    ev["tid"] = stream
    ev["args"].update(stream=stream, **args)
    return ev


def runtime(name: str, ts: float, dur: float, corr: int) -> dict:
    return launch(ts, dur, corr, name=name)


def pyframe(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": CPU_PID, "tid": CPU_TID, "ts": ts, "dur": dur,
            "args": {"Python id": 1}}


def step_marker(n: int, ts: float, dur: float) -> dict:
    return annotation(f"ProfilerStep#{n}", ts, dur)


def finish(events: list[dict], **top) -> dict:
    doc = document(events, device_properties=[H200_PROPS])
    doc.update(top)
    return doc


def item_sync(n_steps: int = 4, *, host_work_us: float = 2000.0, gemm_us: float = 150.0) -> dict:
    """``loss.item()`` each step after 6 GEMMs, then ``host_work_us`` of pure Python (no op)."""
    events, t, corr = [], 1000.0, 1
    for i in range(n_steps):
        step_start = t
        events.append(annotation("forward", t + 5, 6 * 20 + 10))
        gpu_t = t + 30
        for j in range(6):
            events.append(op("aten::mm", t + 10 + 20 * j, 15))
            events.append(launch(t + 12 + 20 * j, 8, corr))
            gpu_t = max(gpu_t, t + 20 + 20 * j)
            events.append(kernel("nvjet_sm90_gemm", gpu_t, gemm_us, corr))
            gpu_t += gemm_us
            corr += 1
        item_t = t + 140
        sync_end = gpu_t + 6  # the memcpy (5 µs) after the last GEMM, then the sync returns
        events.append(op("aten::item", item_t, sync_end + 2 - item_t))
        events.append(op("aten::_local_scalar_dense", item_t + 1, sync_end + 1 - item_t - 1))
        events.append(runtime("cudaMemcpyAsync", item_t + 2, 6, corr))
        events.append(gpu("Memcpy DtoH (Device -> Pageable)", gpu_t, 5, corr, cat="gpu_memcpy"))
        corr += 1
        events.append(runtime("cudaStreamSynchronize", item_t + 10, sync_end - item_t - 10, corr))
        corr += 1
        t = sync_end + 2 + host_work_us  # pure Python: no event
        events.append(step_marker(i + 1, step_start, t - step_start))
        t += 1
    return finish(events)


def copy_then_host_work(n_steps: int = 3, *, mb: float = 32.0, host_work_us: float = 5000.0,
                        op_between_us: float = 0.0, gbps: float = 2.0, gemm_us: float = 25.0,
                        wait_in_sync: bool = False) -> dict:
    """Per step: 4 GEMMs of ``gemm_us``, then ``.cpu()`` of ``mb`` MiB: aten::to queues its device →
    host copy behind them; cudaMemcpyAsync to pageable memory blocks until the copy is done, then
    a cudaStreamSynchronize returns at once (``wait_in_sync``: the copy call returns at once and
    the sync waits, as ``_local_scalar_dense`` does); then, after an op of ``op_between_us`` that
    launches nothing (none at 0), ``host_work_us`` in no op (NumPy on the copy)."""
    events, t, corr = [], 1000.0, 1
    nbytes = int(mb * 2**20)
    copy_us = nbytes / gbps / 1e3
    for i in range(n_steps):
        start = t
        for j in range(4):
            events.append(op("aten::mm", t + 5 + 12 * j, 10))
            events.append(launch(t + 6 + 12 * j, 6, corr))
            events.append(kernel("nvjet_sm90_gemm", t + 20 + gemm_us * j, gemm_us, corr))
            corr += 1
        copy_at = max(t + 20 + 4 * gemm_us, t + 160)
        t += 150
        done = copy_at + copy_us
        events.append(op("aten::to", t, done + 3 - t))
        events.append(op("aten::copy_", t + 1, done + 2 - t - 1))
        call_end = t + 10 if wait_in_sync else done
        events.append(runtime("cudaMemcpyAsync", t + 2, call_end - t - 2, corr))
        events.append(gpu("Memcpy DtoH (Device -> Pageable)", copy_at, copy_us, corr, cat="gpu_memcpy", bytes=nbytes))
        corr += 1
        events.append(runtime("cudaStreamSynchronize", call_end + 0.5, max(done + 1 - call_end - 0.5, 1.0), corr))
        corr += 1
        t = done + 5
        if op_between_us:
            events.append(op("aten::add", t, op_between_us))
            t += op_between_us + 2
        t += host_work_us
        events.append(step_marker(i + 1, start, t - start))
        t += 1
    return finish(events)


def pageable_copies(n_steps: int = 3, *, mb: int = 64, pageable_gbps: float = 6.0, pinned_gbps: float = 50.0,
                    record_shapes: bool = True) -> dict:
    """Per step: an H2D copy from pageable memory (the host waits in cudaMemcpyAsync), one from
    pinned memory on a side stream, and 4 GEMMs."""
    events, t, corr = [], 1000.0, 1
    nbytes = mb * 2**20
    numel = nbytes // 4
    pageable_us, pinned_us = nbytes / pageable_gbps / 1e3, nbytes / pinned_gbps / 1e3
    shapes = {"Input Dims": [[numel], [numel], []], "Input type": ["float", "float", "Scalar"]} if record_shapes else {}
    for i in range(n_steps):
        start = t
        events.append(op("aten::copy_", t + 2, pageable_us + 20, **shapes))
        events.append(runtime("cudaMemcpyAsync", t + 5, pageable_us + 10, corr))
        events.append(gpu("Memcpy HtoD (Pageable -> Device)", t + 10, pageable_us, corr, cat="gpu_memcpy",
                          stream=SIDE_STREAM, bytes=nbytes))
        corr += 1
        t += pageable_us + 30
        events.append(op("aten::copy_", t, 20, **shapes))
        events.append(runtime("cudaMemcpyAsync", t + 2, 8, corr))
        events.append(gpu("Memcpy HtoD (Pinned -> Device)", t + 12, pinned_us, corr, cat="gpu_memcpy",
                          stream=SIDE_STREAM, bytes=nbytes))
        corr += 1
        for j in range(4):
            events.append(op("aten::mm", t + 25 + 12 * j, 10))
            events.append(launch(t + 26 + 12 * j, 6, corr))
            events.append(kernel("nvjet_sm90_gemm", t + 40 + 30 * j, 25, corr))
            corr += 1
        t += 200
        events.append(step_marker(i + 1, start, t - start))
        t += 1
    return finish(events)


def graph_decode(n_steps: int = 3, *, replays_per_step: int = 4, kernels_per_replay: int = 20) -> dict:
    """CUDA graph replays: one cudaGraphLaunch starts ``kernels_per_replay`` kernels, all
    carrying its correlation id."""
    events, t, corr = [], 1000.0, 1
    for i in range(n_steps):
        start = t
        events.append(annotation("decode_step", t + 1, replays_per_step * 100))
        for r in range(replays_per_step):
            lt = t + 10 + 100 * r
            events.append(op("## Call CompiledFxGraph ##", lt - 5, 30))
            events.append(runtime("cudaGraphLaunch", lt, 15, corr))
            kt = lt + 20 + 3 * r  # per-replay launch delay 20, 23, 26, ... µs
            for _ in range(kernels_per_replay):
                events.append(kernel("triton_poi_fused_add", kt, 3, corr))
                kt += 4
            corr += 1
        t += replays_per_step * 100 + 20
        events.append(step_marker(i + 1, start, t - start))
        t += 1
    return finish(events)


def ddp_nccl(n_steps: int = 3, *, comm_us: float = 400.0, compute_us: float = 300.0, overlap_us: float = 100.0,
             rank: int = 1, world_size: int = 2) -> dict:
    """Per step: compute kernels on stream 7, then an NCCL all-reduce on stream 20 overlapping
    the last ``overlap_us`` of compute; c10d::allreduce_ + record_param_comms on the host."""
    events, t, corr = [], 1000.0, 1
    for i in range(n_steps):
        start = t
        # backward waits for its kernels: the host sits inside autograd, not outside any op
        events.append(op("autograd::engine::evaluate_function", t + 1, compute_us + comm_us + 40))
        events.append(op("aten::mm", t + 2, 10))
        events.append(launch(t + 3, 5, corr))
        events.append(kernel("nvjet_sm90_gemm", t + 20, compute_us, corr))
        corr += 1
        events.append(op("c10d::allreduce_", t + 15, 30))
        events.append(op("record_param_comms", t + 16, 25))
        events.append(launch(t + 18, 5, corr))
        events.append(gpu("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 20 + compute_us - overlap_us, comm_us, corr,
                          stream=20))
        corr += 1
        t += compute_us + comm_us + 50
        events.append(step_marker(i + 1, start, t - start))
        t += 1
    info = {"backend": "nccl", "rank": rank, "world_size": world_size, "pg_count": 1}
    return finish(events, distributedInfo=info)


def empty_window() -> dict:
    """What a schedule whose active window opened at the last prof.step() records."""
    events = [step_marker(3, 1000.0, 40.0), runtime("cudaStreamIsCapturing", 1005.0, 1.0, 1),
              runtime("cudaEventRecordWithFlags", 1007.0, 2.0, 2),
              {"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": -1, "tid": 0, "ts": 990.0,
               "dur": 30.0, "args": {}}]
    return finish(events)


def with_stack(n_steps: int = 3) -> dict:
    """The seed step under with_stack: python_function frames around and between the ops."""
    events, t, corr = [], 1000.0, 1
    for _ in range(n_steps):
        events.append(pyframe("train.py(12): step", t, 300))
        events.append(annotation("matmul_add", t + 10, 250))
        events.append(pyframe("torch/functional.py(40): matmul", t + 20, 120))
        events.append(op("aten::mm", t + 60, 60))
        events.append(launch(t + 90, 10, corr))
        events.append(kernel("nvjet_sm90_gemm", t + 110, 100, corr))
        events.append(op("aten::add", t + 200, 40))
        events.append(launch(t + 210, 10, corr + 1))
        events.append(kernel("elementwise_kernel<add>", t + 215, 10, corr + 1))
        corr += 2
        t += 320
    return finish(events)


def phases(n_iters: int = 3, *, label: str = "d2h", long_us: float = 900.0) -> dict:
    """Iterations made of two labelled phases, ``label`` (long) then 'compute' (short): no one
    annotation holds an iteration."""
    events, t, corr = [], 1000.0, 1
    for _ in range(n_iters):
        events.append(annotation(label, t, long_us))
        events.append(op("aten::copy_", t + 5, long_us - 10))
        events.append(annotation("compute", t + long_us + 5, 60))
        events.append(op("aten::mm", t + long_us + 10, 40))
        events.append(launch(t + long_us + 20, 8, corr))
        events.append(kernel("nvjet_sm90_gemm", t + long_us + 35, 30, corr))
        corr += 1
        t += long_us + 80
    return finish(events)


def nested_steps(n_iters: int = 3, *, inner: str = "d2h") -> dict:
    """An outer 'train_step' label each iteration with a repeated inner label inside it."""
    events, t, corr = [], 1000.0, 1
    for _ in range(n_iters):
        events.append(annotation("train_step", t, 400))
        events.append(annotation(inner, t + 300, 80))
        events.append(op("aten::mm", t + 10, 200))
        events.append(launch(t + 20, 8, corr))
        events.append(kernel("nvjet_sm90_gemm", t + 35, 150, corr))
        events.append(op("aten::copy_", t + 310, 60))
        corr += 1
        t += 420
    return finish(events)


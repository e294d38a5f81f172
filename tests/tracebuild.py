"""Tiny hand-made Kineto traces for tests: a few events written out by hand, loaded with load_trace.

Times are absolute µs as in a real trace; one CPU thread (pid 100, tid 100) and one GPU stream
(pid 0, tid 7). ``build`` adds the process/thread metadata and an ac2g flow pair for every
correlation id that has both a launch call and GPU activity, as Kineto writes them.
"""

from __future__ import annotations

import json

from lab.trace.load import Trace, load_trace

CPU_PID, CPU_TID = 100, 100
GPU_PID, GPU_TID = 0, 7
H200_PROPS = {"id": 0, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0, "numSms": 132}


def op(name: str, ts: float, dur: float, *, cat: str = "cpu_op", **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": CPU_PID, "tid": CPU_TID, "ts": ts, "dur": dur,
            "args": args}


def annotation(name: str, ts: float, dur: float) -> dict:
    return op(name, ts, dur, cat="user_annotation")


def launch(ts: float, dur: float, correlation: int, *, name: str = "cudaLaunchKernel") -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": CPU_PID, "tid": CPU_TID, "ts": ts, "dur": dur,
            "args": {"correlation": correlation, "cbid": 211}}


def kernel(name: str, ts: float, dur: float, correlation: int, *, cat: str = "kernel") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": GPU_PID, "tid": GPU_TID, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": GPU_TID, "correlation": correlation}}


def gpu_annotation(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": GPU_PID, "tid": GPU_TID, "ts": ts,
            "dur": dur, "args": {}}


def document(events: list[dict], *, device_properties: list[dict] | None = None) -> dict:
    meta = [
        {"ph": "M", "name": "process_name", "pid": CPU_PID, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": CPU_PID, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "thread_name", "pid": CPU_PID, "tid": CPU_TID, "args": {"name": "thread 100 (python3)"}},
    ]
    if any(e["pid"] == GPU_PID for e in events):
        meta += [
            {"ph": "M", "name": "process_name", "pid": GPU_PID, "tid": 0, "args": {"name": "python3"}},
            {"ph": "M", "name": "process_labels", "pid": GPU_PID, "tid": 0, "args": {"labels": "GPU 0"}},
            {"ph": "M", "name": "thread_name", "pid": GPU_PID, "tid": GPU_TID, "args": {"name": "stream 7 "}},
        ]
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}
    flows = []
    for e in events:
        corr = e.get("args", {}).get("correlation")
        if e["pid"] == GPU_PID and corr in launches:
            src = launches[corr]
            flows += [{"ph": "s", "id": corr, "pid": src["pid"], "tid": src["tid"], "ts": src["ts"], "cat": "ac2g",
                       "name": "ac2g"},
                      {"ph": "f", "id": corr, "pid": e["pid"], "tid": e["tid"], "ts": e["ts"], "cat": "ac2g",
                       "name": "ac2g", "bp": "e"}]
    doc = {"schemaVersion": 1, "traceEvents": meta + events + flows}
    if device_properties is not None:
        doc["deviceProperties"] = device_properties
    return doc


def build(events: list[dict], *, device_properties: list[dict] | None = None) -> Trace:
    return load_trace(json.dumps(document(events, device_properties=device_properties)).encode())


def matmul_add_steps(n_steps: int, *, first_extra_us: float = 0.0, step_us: float = 100.0,
                     gemm_us: float = 40.0, add_us: float = 5.0, gemm_name: str = "sm90_xmma_gemm_bf16bf16_bf16f32",
                     dims=((256, 256), (256, 256)), input_type=("c10::BFloat16", "c10::BFloat16"),
                     device_properties: list[dict] | None = None) -> Trace:
    """``n_steps`` labelled matmul+add steps; the first one ``first_extra_us`` longer (a cold start)."""
    events, t, corr = [], 1000.0, 1
    for i in range(n_steps):
        extra = first_extra_us if i == 0 else 0.0
        dur = step_us + extra
        events.append(annotation("matmul_add", t, dur))
        mm_start = t + 5 + extra
        events.append(op("aten::mm", mm_start, 40, **{"Input Dims": [list(d) for d in dims],
                                                       "Input type": list(input_type), "External id": corr}))
        events.append(launch(mm_start + 20, 10, corr))
        events.append(kernel(gemm_name, mm_start + 35, gemm_us, corr))
        events.append(op("aten::add", mm_start + 50, 30, **{"Input Dims": [[dims[0][0], dims[1][1]], [dims[1][1]], []],
                                                           "External id": corr + 1}))
        events.append(launch(mm_start + 60, 10, corr + 1))
        events.append(kernel("void at::native::elementwise_kernel<add>", mm_start + 35 + gemm_us + 2, add_us, corr + 1))
        t += dur + 20
        corr += 2
    props = [H200_PROPS] if device_properties is None else device_properties
    return build(events, device_properties=props)


def memory(ts: float, nbytes: int, total_allocated: int, *, total_reserved: int | None = None, device_type: int = 1,
           device_id: int = 0, addr: int = 0x7F0000000000, tid: int = CPU_TID) -> dict:
    """One profile_memory "[memory]" instant as Kineto writes it (Device Type 1 = CUDA, 0 = CPU)."""
    reserved = total_reserved if total_reserved is not None else max(total_allocated, 0) + (2 << 20)
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": CPU_PID, "tid": tid,
            "ts": ts, "args": {"Total Reserved": reserved, "Total Allocated": total_allocated, "Bytes": nbytes,
                               "Device Id": device_id, "Device Type": device_type, "Addr": addr}}

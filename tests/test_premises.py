"""Alarms check their premises: each rule fires only when what it claims is true of
the trace. Hand-made traces modelled on the issue's recordings; expectations by brute force
from the raw JSON documents, never from the code under test.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
import tracebuild as tb

from lab.analysis import analyze
from lab.analysis.operators import host_work_us
from lab.judge import judge_trace
from lab.trace import load_trace
from lab.units import fmt_mem_bytes
from lab.vocab import is_launch_call

GIB = 1 << 30
FRAGMENTATION_TITLE = "Reserved memory far above allocated: fragmentation"
LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync",
            "cudaMemsetAsync", "cudaGraphLaunch", "cudaMemcpy", "cuMemcpyHtoDAsync_v2", "cuMemsetD32Async",
            "cudaLaunchCooperativeKernel", "cuGraphLaunch", "hipLaunchKernel")
NOT_LAUNCHES = ("cudaMalloc", "cudaFree", "cudaStreamIsCapturing", "cudaDeviceSynchronize", "cudaEventRecord",
                "cudaLaunchHostFunc", "cudaGetDeviceProperties", "cudaStreamWaitEvent", "cudaMemGetInfo")


def _said(trace, analysis) -> list:
    """Everything the page says of a trace: its judged findings."""
    return list(judge_trace(trace, analysis).findings)


def _load(doc: dict):
    trace = load_trace(json.dumps(doc).encode())
    analysis = analyze(trace)
    return trace, analysis, _said(trace, analysis)


def _runtime(name: str, ts: float, dur: float, corr: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": tb.CPU_PID, "tid": tb.CPU_TID, "ts": ts,
            "dur": dur, "args": {"correlation": corr, "cbid": 20}}


def allocation_only(n_allocs: int = 155, nbytes: int = 8 << 20) -> dict:
    """An allocation-only program as the issue's H200 recording: each torch.empty on the GPU is an
    aten::empty holding cudaStreamIsCapturing + cudaMalloc and a [memory] record; syncs between;
    the profiler's exit cudaDeviceSynchronize. No kernel, copy or memset launch."""
    events, t, corr, level = [], 1000.0, 1, 0
    for i in range(n_allocs):
        events.append(tb.op("aten::empty", t, 30.0, **{"External id": i + 1}))
        events.append(_runtime("cudaStreamIsCapturing", t + 2, 1.0, corr))
        events.append(_runtime("cudaMalloc", t + 5, 20.0, corr + 1))
        level += nbytes
        events.append(tb.memory(t + 26, nbytes, level, total_reserved=level, addr=0x7F0000000000 + i * nbytes))
        events.append(_runtime("cudaDeviceSynchronize", t + 32, 3.0, corr + 2))
        t, corr = t + 40.0, corr + 3
    events.append(_runtime("cudaDeviceSynchronize", t + 10, 5.0, corr))
    return tb.document(events, device_properties=[tb.H200_PROPS])


def test_launch_calls_are_told_apart_from_calls_that_launch_nothing():
    assert all(is_launch_call(n) for n in LAUNCHES)
    assert not any(is_launch_call(n) for n in NOT_LAUNCHES)


def test_allocation_only_program_is_described_not_alarmed():
    doc = allocation_only()
    trace, analysis, found = _load(doc)
    runtime = [e for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"]
    counts = Counter(e["name"] for e in runtime)
    assert len(runtime) == 466 and not any(is_launch_call(n) for n in counts)
    records = [e["args"] for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    peak = max(r["Total Allocated"] for r in records)
    judged = judge_trace(trace, analysis)
    assert judged.named.rule == "no_gpu_work"
    assert not [i for i in found if i.severity == "critical"]
    # cudaMalloc holds the host (the symptom), but no GPU activity waits for it (the premise).
    assert sum(e["dur"] for e in runtime if e["name"] == "cudaMalloc") > 0
    assert "allocator_calls" not in [f.rule for f in judged.findings]
    assert not any("CUPTI" in i.evidence + i.suggestion for i in found)
    assert "No GPU activity recorded although a GPU was used" not in [i.title for i in found]
    (described,) = [i for i in found if getattr(i, "rule", "") == "no_gpu_work"]
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    for text in (described.evidence, judged.verdict):
        assert f"{len(runtime):,} CUDA runtime/driver call(s)" in text
        assert f"{top[0][0]} ×{top[0][1]:,}" in text and "none launches a kernel, copy or memset" in text
        assert f"cuda:0 peaked at {fmt_mem_bytes(peak)} allocated" in text
        assert f"{len(records):,} allocation(s)" in text


@pytest.mark.parametrize("name", LAUNCHES[:7])
def test_a_launch_without_gpu_activity_still_points_at_cupti(name):
    doc = tb.document([tb.op("aten::mm", 0, 50), _runtime(name, 10, 5, 1)], device_properties=[tb.H200_PROPS])
    trace, analysis, found = _load(doc)
    named = judge_trace(trace, analysis).named
    assert named.rule == "no_gpu_events" and named.title == "No GPU activity recorded although a GPU was used"
    assert "CUPTI" in named.suggestion


def test_device_properties_alone_are_no_gpu_use():
    """Kineto lists the host's GPUs in every trace of a CUDA build, CPU-only programs included."""
    doc = tb.document([tb.op("aten::mm", 0, 50), tb.op("aten::add", 60, 10)], device_properties=[tb.H200_PROPS])
    trace, analysis, found = _load(doc)
    cpu_only = next(f for f in judge_trace(trace, analysis).findings if f.rule == "cpu_only")
    assert "lists 1 GPU(s)" in cpu_only.evidence
    assert not [i for i in found if i.severity == "critical"]


# --------------------------------------------------------------------------- fragmentation


def _memory_doc(steps: list[tuple[float, float]]) -> dict:
    """[memory] records inside one op: each (Δallocated GiB, reserved GiB after)."""
    events, level = [tb.annotation("ProfilerStep#1", 1000.0, 1000.0), tb.op("aten::work", 1010.0, 900.0)], 0
    for i, (delta, reserved) in enumerate(steps):
        level += int(delta * GIB)
        events.append(tb.memory(1020.0 + 10 * i, int(delta * GIB), level, total_reserved=int(reserved * GIB)))
    return tb.document(events, device_properties=[tb.H200_PROPS])


def _brute_fragmentation(doc: dict) -> tuple[int, int, int]:
    """(peak allocated, max reserved, reserved grown at allocations the cache could have served)."""
    rec = [e["args"] for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    grown = sum(b["Total Reserved"] - a["Total Reserved"] for a, b in zip(rec, rec[1:])
                if b["Bytes"] > 0 and b["Total Reserved"] > a["Total Reserved"]
                and a["Total Reserved"] - a["Total Allocated"] >= b["Bytes"])
    return max(r["Total Allocated"] for r in rec), max(r["Total Reserved"] for r in rec), grown


# The recording: 5.25 GiB reserved over 3.60 GiB allocated, reserved still growing after frees.
GROWING_AFTER_FREES = [(2.0, 2.0), (1.6, 3.6), (-1.6, 3.6), (1.0, 4.6), (-1.0, 4.6), (0.65, 5.25)]
# Same 1.65 GiB gap and ratio, but reserved all at once before any free: an earlier working set.
RESERVED_UP_FRONT = [(0.5, 5.25), (3.1, 5.25), (-1.6, 5.25), (1.0, 5.25)]


def test_fragmentation_fires_on_a_large_gap_that_grows_after_frees():
    doc = _memory_doc(GROWING_AFTER_FREES)
    peak, reserved, grown = _brute_fragmentation(doc)
    assert 1.45 < reserved / peak < 1.5 and reserved - peak >= GIB and grown > 0
    trace, analysis, _ = _load(doc)
    found = {f.title: f for f in judge_trace(trace, analysis).findings}
    assert FRAGMENTATION_TITLE in found
    assert f"({reserved / peak:.2f}×)" in found[FRAGMENTATION_TITLE].evidence
    assert f"reserved {fmt_mem_bytes(grown)} more after frees" in found[FRAGMENTATION_TITLE].evidence


def test_fragmentation_silent_when_the_gap_never_grew_after_frees():
    doc = _memory_doc(RESERVED_UP_FRONT)
    peak, reserved, grown = _brute_fragmentation(doc)
    assert reserved / peak < 1.5 and reserved - peak >= GIB and grown == 0
    trace, analysis, _ = _load(doc)
    assert FRAGMENTATION_TITLE not in {f.title for f in judge_trace(trace, analysis).findings}


# --------------------------------------------------------------------------- host work is the program's


def _overhead(ts: float, dur: float, name: str = "Activity Buffer Request") -> dict:
    return {"ph": "X", "cat": "overhead", "name": name, "pid": -1, "tid": 0, "ts": ts, "dur": dur, "args": {}}


def test_launch_bound_does_not_count_the_profilers_own_time_as_host_work():
    """Launch-bound claims the GPU waits for the program's host work; the profiler's buffer
    requests and module loading (cat overhead) are not the program's (H200 cuda_oom: 53.7 ms of
    the 214 ms counted before): they are the profiler's, a cause of their own."""
    events = [tb.op("aten::mm", 0, 100, **{"External id": 1}), tb.launch(20, 10, 1), tb.kernel("gemm", 40, 50, 1),
              _overhead(200, 3000), _overhead(3300, 900, "Runtime Triggered Module Loading")]
    doc = tb.document(events, device_properties=[tb.H200_PROPS])
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    program_us = sum(e["dur"] for e in xs if e["cat"] == "cpu_op")  # one op, nothing nested in it
    profiler_us = sum(e["dur"] for e in xs if e["cat"] == "overhead")
    assert profiler_us > 10 * program_us
    trace, analysis, found = _load(doc)
    assert host_work_us(analysis.operators) == pytest.approx(program_us)
    rules = {f.rule: f for f in judge_trace(trace, analysis).findings}
    assert "launch_bound" not in rules and "slow_host_op" not in rules
    assert rules["profiler_cost"].saving_us <= profiler_us


def test_the_real_allocation_only_recording_is_described_not_alarmed():
    """The H200 recording (tests/data/groundtruth/cuda/alloc_only): torch.empty blocks, frees and
    empty_cache, no launch. No critical verdict, no CUPTI advice; its memory told from the JSON's
    [memory] records (brute force: peak, reserved, allocations, frees, the op around the peak)."""
    import gzip
    from pathlib import Path

    path = Path(__file__).parent / "data" / "groundtruth" / "cuda" / "alloc_only.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    trace = load_trace(path)
    analysis = analyze(trace)
    found = _said(trace, analysis)
    runtime = Counter(e["name"] for e in raw if e.get("cat") in ("cuda_runtime", "cuda_driver"))
    assert runtime and not any(is_launch_call(n) for n in runtime)
    assert not [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    records = sorted((e for e in raw if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    assert {(r["args"]["Device Type"], r["args"]["Device Id"]) for r in records} == {(1, 0)}
    peak = max(records, key=lambda r: r["args"]["Total Allocated"])
    reserved = max(r["args"]["Total Reserved"] for r in records)
    allocs = sum(r["args"]["Bytes"] > 0 for r in records)
    frees = sum(r["args"]["Bytes"] < 0 for r in records)
    around = [e for e in raw if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
              and e["tid"] == peak["tid"] and e["ts"] <= peak["ts"] <= e["ts"] + e["dur"]]
    op = min((e for e in around if e["cat"] == "cpu_op"), key=lambda e: e["dur"])["name"]
    label = min((e for e in around if e["cat"] == "user_annotation"), key=lambda e: e["dur"])["name"]

    judged = judge_trace(trace, analysis)
    assert judged.named.rule == "no_gpu_work"
    assert not [i for i in found if i.severity == "critical"]
    # No advice about CUPTI (the one mention left names the profiler's own buffer requests).
    assert not any("CUPTI" in i.suggestion or "CUPTI" in i.title for i in found)
    assert [i.title for i in found if "CUPTI" in i.evidence] == ["Profiler overhead in the timeline"]
    assert "No GPU activity recorded although a GPU was used" not in [i.title for i in found]
    (described,) = [i for i in found if getattr(i, "rule", "") == "no_gpu_work"]
    for text in (described.evidence, judged.verdict):
        assert f"{sum(runtime.values()):,} CUDA runtime/driver call(s)" in text
        assert "none launches a kernel, copy or memset" in text
        assert (f"cuda:0 peaked at {fmt_mem_bytes(peak['args']['Total Allocated'])} allocated "
                f"({fmt_mem_bytes(reserved)} reserved at most) over {allocs} allocation(s) and {frees} free(s)") in text
    main = analysis.memory.main
    assert (main.allocations, main.frees, main.max_reserved_bytes) == (allocs, frees, reserved)
    assert main.peak.allocated_bytes == peak["args"]["Total Allocated"]
    assert (main.peak.op, main.peak.annotation) == (op, label) == ("aten::empty", "allocate")
    (at_peak,) = [f for f in judged.findings if f.title == "Memory peak and what was running"]
    assert f"inside {op}, in record_function '{label}'" in at_peak.evidence

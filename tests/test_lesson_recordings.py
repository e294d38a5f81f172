"""The lessons of ``tests/recording_brute.LESSON_KEYS``: every claim their texts and checks make,
tested on their H200 recordings by brute force from the raw JSON (tests/recording_brute.py); the
lab's figures equal those brute-force figures; and no question's right answer can be read before
its prediction.

Claim → test (lesson text, or the check's title shown after the run opens):
- launch_overlap "four 4096³ bf16 matmuls a step", "each launch has an arrow to its kernel":
  test_launch_overlap_setup; "the launch delay grows step after step" (no sync) / "stays short"
  (sync), "cudaDeviceSynchronize holds the synced steps' CPU time": test_launch_delay_and_sync.
- calls "64 rows", aten::mul once per row, aten::select three times, "the vectorized step is
  faster": test_calls.
- host_sync "a device→host Memcpy and a wait in cudaStreamSynchronize" per .item(), once per step
  reading once; aten::item → aten::_local_scalar_dense; the read-once step is *not* faster on this
  recording, and a GEMM kernel is shorter than the host's time per matmul: test_host_sync.
- cuda_graphs "each op's kernel runs in a few microseconds, less than it takes the host to launch
  it", "one cudaGraphLaunch", the GPU still runs every kernel, the graphed step is faster:
  test_cuda_graphs.
- training_step evaluate_function rows "run on autograd's own thread", "Optimizer.step#AdamW.step",
  five GEMMs: test_training_step.
- pinned_copies "64 MiB", "Memcpy HtoD (Pageable -> Device)" / "(Pinned -> Device)", pinned
  faster, cudaMemcpyAsync holds the CPU for a pageable copy: test_pinned_copies.
- memory_peak "h, a and y are each … 64 MiB", peak in `down` with three alive: test_memory_peak.
- profiler_overhead: the loop's profiled/unprofiled ratio above the GEMM's: test_profiler_overhead.
- self_total_shapes "torch.matmul dispatches to aten::mm", "one row of 3 calls per step", the three
  shapes by input: test_self_total_shapes.
"""

from __future__ import annotations

import functools
import re
import statistics

import pytest

from lab.analysis import Run, analyze, figures
from lab.analysis.gemm.kinds import is_gemm_kernel
from lab.lessons import LESSONS, questions_for
from lab.samples import lesson_samples
from lab.trace.load import load_trace
from tests import recording_brute as b

KEYS = list(b.LESSON_KEYS)
MIB = 2**20


@functools.cache
def recording(key: str) -> tuple[list[dict], list[Run]]:
    """(raw JSON, Run) per run of lesson ``key``'s H200 recording, in the lesson's order."""
    samples = lesson_samples(LESSONS[key].runs)
    assert samples, f"{key} has no H200 recording"
    datas, runs = [], []
    for run, sample in zip(LESSONS[key].runs, samples):
        data = sample.read_bytes()
        trace = load_trace(data)
        t = sample.timing
        runs.append(Run(run.name, trace, analyze(trace), timing=(t["profiled_median_us"], t["unprofiled_median_us"])))
        datas.append(b.raw(data))
    return datas, runs


def events(key: str) -> list[list[dict]]:
    return [b.xs(d) for d in recording(key)[0]]


def test_every_recording_is_small_and_from_the_h200():
    for key in KEYS:
        for sample in lesson_samples(LESSONS[key].runs):
            assert sample.device == "NVIDIA H200" and sample.torch.startswith("2.11")
            assert sample.path.stat().st_size <= 150_000, sample.file


def test_launch_overlap_setup():
    for data in recording("launch_overlap")[0]:
        ev = b.xs(data)
        assert b.gemms_per_step(ev) == 4
        # "cuLaunchKernelEx for cuBLAS's GEMMs on the H200 recording"
        assert {call["name"] for k, call, _ in b.launched(ev) if is_gemm_kernel(k["name"])} == {"cuLaunchKernelEx"}
        # The Timeline's arrows are the ac2g flows: every kernel has one, from its launch.
        arrows = {e["id"] for e in data["traceEvents"] if e.get("cat") == "ac2g"}
        assert {k["args"]["correlation"] for k in ev if k.get("cat") == "kernel"} <= arrows


def test_launch_delay_and_sync():
    free, synced = events("launch_overlap")
    d_free, d_sync = b.first_kernel_delays(free), b.first_kernel_delays(synced)
    assert all(x < y for x, y in zip(d_free, d_free[1:])) and d_free[-1] >= 3 * d_free[0]  # 13.9 → 812 µs
    assert max(d_sync) <= 3 * min(d_sync) and max(d_sync) < 50  # 17 → 12 µs
    assert b.share_pct(synced, "cudaDeviceSynchronize", b.LAUNCH_CATS) > 50  # 60 %
    assert b.share_pct(free, "cudaDeviceSynchronize", b.LAUNCH_CATS) == 0  # only the timer's, after the steps
    _, runs = recording("launch_overlap")
    assert figures.launch_delays_us(runs[0]) == pytest.approx(d_free, abs=1e-2)
    want = b.share_pct(synced, "cudaDeviceSynchronize", b.LAUNCH_CATS)
    assert figures.call_share_pct(runs[1], "cudaDeviceSynchronize") == pytest.approx(want)


def test_calls():
    loop, vec = events("calls")
    rows = LESSONS["calls"].runs[0].gpu.m
    assert rows == 64
    assert b.calls_per_step(loop, "aten::mul") == rows and b.calls_per_step(vec, "aten::mul") == 1
    assert b.calls_per_step(loop, "aten::select") == 3 * rows
    assert b.step_us(loop) / b.step_us(vec) > 20  # 4,780 vs 123 µs
    _, runs = recording("calls")
    assert figures.step_us(runs[0]) == pytest.approx(b.step_us(loop))


def test_host_sync():
    each, once = events("host_sync")
    for ev, syncs in ((each, 8), (once, 1)):
        assert b.calls_per_step(ev, "cudaStreamSynchronize") == syncs
        dtoh = [g for g, _, _ in b.launched(ev, ("gpu_memcpy",)) if "DtoH" in g["name"]]
        assert len(dtoh) / len(b.step_windows(ev)) == syncs
    assert b.child_op(each, "aten::item") == "aten::_local_scalar_dense"
    # On this recording reading once is not faster: the GPU waits for the host in both runs.
    assert b.step_us(once) > b.step_us(each)
    gemm_us = statistics.median(k["dur"] for k, _, _ in b.launched(once) if is_gemm_kernel(k["name"]))
    host_per_matmul = statistics.median(bb - a for a, bb in b.step_windows(once)) / 8
    assert gemm_us < host_per_matmul  # 23.7 vs 147 µs
    _, runs = recording("host_sync")
    assert figures.gemm_kernel_us(runs[1]) == pytest.approx(gemm_us)


def test_cuda_graphs():
    eager, graphed = events("cuda_graphs")
    kernel_us = statistics.median(e["dur"] for e in eager if e.get("cat") == "kernel")
    launch_us = statistics.median(e["dur"] for e in eager if e["name"] == "cudaLaunchKernel")
    assert kernel_us < launch_us  # ~1 µs of GPU work per op vs a longer launch call
    assert kernel_us < 5  # "a few microseconds"
    assert b.calls_per_step(graphed, "cudaGraphLaunch") == 1 and b.calls_per_step(graphed, "cudaLaunchKernel") == 0
    per_step = [len(b.launched(ev)) / len(b.step_windows(ev)) for ev in (eager, graphed)]
    assert per_step == [32, 32]
    assert b.step_us(graphed) < b.step_us(eager)


def test_training_step():
    (ev,) = events("training_step")
    prefix = "autograd::engine::evaluate_function: "
    backward = [e for e in ev if e.get("cat") == "cpu_op" and e["name"].startswith(prefix)]
    names = {e["name"].split(": ", 1)[1] for e in backward}
    assert {"AddmmBackward0", "GeluBackward0", "MseLossBackward0"} <= names
    step_tids = {e["tid"] for e in ev if e["name"].startswith("ProfilerStep#")}
    assert {e["tid"] for e in backward}.isdisjoint(step_tids)  # autograd's own thread
    # "each wrapping the aten ops that compute its gradients": AddmmBackward0 → aten::mm
    addmm = [e for e in backward if e["name"].endswith("AddmmBackward0")]
    assert all(any(c["name"] == "aten::mm" for c in ev if b.contains(e, c)) for e in addmm)
    assert any(e["name"] == "Optimizer.step#AdamW.step" for e in ev)
    assert b.gemms_per_step(ev) == 5


def test_pinned_copies():
    pageable, pinned = events("pinned_copies")
    for ev, kind in ((pageable, "Pageable"), (pinned, "Pinned")):
        copies = [g for g, _, _ in b.launched(ev, ("gpu_memcpy",))]
        assert {g["name"] for g in copies} == {f"Memcpy HtoD ({kind} -> Device)"}
        assert {g["args"]["bytes"] for g in copies} == {64 * MIB}
    assert b.copy_gb_per_s(pinned) > 4 * b.copy_gb_per_s(pageable)  # 54.8 vs 7.1 GB/s
    assert b.copy_call_ratio(pageable) >= 0.9 and b.copy_call_ratio(pinned) < 0.1
    _, runs = recording("pinned_copies")
    assert figures.copy_gb_per_s(runs[1]) == pytest.approx(b.copy_gb_per_s(pinned))


def test_memory_peak():
    (data,) = recording("memory_peak")[0]
    allocations = [m["args"]["Bytes"] for m in b._memory(data) if m["args"]["Bytes"] > 0]
    assert set(allocations) == {64 * MIB}  # h, a and y, each 4096×8192 bf16
    assert b.memory_peak_label(data) == "down"
    assert b.memory_rise_units(data) == 3


def test_profiler_overhead():
    _, runs = recording("profiler_overhead")
    loop, gemm = (figures.overhead_ratio(r) for r in runs)
    assert loop > 1.5 and gemm < 1.05  # 1.72× vs 1.02×


def test_self_total_shapes():
    (ev,) = events("self_total_shapes")
    matmul = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::matmul"]
    assert all(any(c["name"] == "aten::mm" for c in b.direct_children(ev, op)) for op in matmul)
    assert len(matmul) / len(b.step_windows(ev)) == 3
    times = b.shape_times(ev, "aten::mm")
    assert sorted(times) == sorted(['[[4096, 4096], [4096, 4096]]', '[[8192, 1024], [1024, 8192]]',
                                    '[[16384, 256], [256, 16384]]'])
    assert b.self_share_pct(ev, "aten::matmul") < 25
    _, runs = recording("self_total_shapes")
    assert [(s, c) for s, c, _ in figures.shape_rows(runs[0], "aten::mm")] == [
        (s, 3) for s in sorted(times, key=lambda d: -times[d])]


# --------------------------------------------------------------------------- give-aways


def _says_something(label: str) -> bool:
    return bool(re.search(r"[A-Za-z]", label)) and label.lower() not in ("yes", "no")


def _found(word: str, text: str) -> bool:
    plain = text.replace("`", "").lower()
    a = r"\b" if word[:1].isalnum() else ""
    z = r"\b" if word[-1:].isalnum() else ""
    return re.search(a + re.escape(word.replace("`", "").lower()) + z, plain) is not None


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("kind", ["cuda", "cpu"])
def test_no_choice_is_named_before_the_prediction_unless_all_are(key, kind):
    """What the page shows before the predictions (the lesson's title, text and "Look for", and the
    form's questions) never names one choice of a question without naming all of them: the right
    one, whichever it is on a given run, cannot be read there."""
    lesson = LESSONS[key]
    asked = {q.key: q for k in dict.fromkeys([kind, "cuda"]) for q in questions_for(key, k)}
    for q in asked.values():
        others = [o for o in asked.values() if o is not q]
        text = "\n".join([lesson.title, lesson.text, lesson.look_for, q.text]
                         + [o.text for o in others] + [c for o in others for c in o.choices])
        labels = [c for c in q.choices if _says_something(c)]
        named = [c for c in labels if _found(c, text)]
        assert not named or len(named) == len(labels), f"{q.key}: {named} named before the prediction"

"""The GEMM, memory and rank findings check their premises: each one's symptom present and its
premise absent leaves it silent; where it fires, its saving is the what-if its words claim.
Hand-made traces; expectations by brute force from the raw JSON documents.
"""

from __future__ import annotations

import json

import pytest
import tracebuild as tb

from lab.analysis import analyze
from lab.analysis.gemm.analyze import GEMM_MIN_KERNEL_US
from lab.analysis.gemm.bound import LATENCY_IDEAL_US
from lab.core.devices import DevicePeak
from lab.judge import gemm_rules as G
from lab.judge import judge_trace
from lab.judge.finding import MATERIAL_PCT
from lab.judge.rules import GEMM_REACHABLE_PCT, MEMORY_REACHABLE_PCT
from lab.trace import load_trace

# A device 10× an H200 in bf16 compute: every recorded GEMM is far under its roof there.
FAST = DevicePeak("Fast 10 PFLOP/s", {"bfloat16": 10_000.0}, 5000.0, "test")


def _judged(doc_or_trace, peak: DevicePeak | None = None) -> dict:
    trace = load_trace(json.dumps(doc_or_trace).encode()) if isinstance(doc_or_trace, dict) else doc_or_trace
    judgement = judge_trace(trace, analyze(trace, peak=peak))
    return {f.rule: f for f in judgement.findings} | {"__verdict__": judgement.verdict_finding}


def _gemm_steps(*, n: int, dims: int, gemm_us: float, step_us: float) -> dict:
    """``n`` labelled steps, each one bf16 aten::mm of dims³ (its kernel ``gemm_us``) in ``step_us``."""
    events, t = [], 1000.0
    for i in range(n):
        events.append(tb.annotation("step", t, step_us))
        events.append(tb.op("aten::mm", t + 5, 40, **{"Input Dims": [[dims, dims], [dims, dims]],
                                                      "Input type": ["c10::BFloat16", "c10::BFloat16"],
                                                      "External id": i + 1}))
        events.append(tb.launch(t + 20, 10, i + 1))
        events.append(tb.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", t + 35, gemm_us, i + 1))
        t += step_us + 20
    return tb.document(events, device_properties=[tb.H200_PROPS])


def _kernels(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]


# --------------------------------------------------------------------------- GEMM below its roof


def test_gemm_below_roof_fires_with_its_roof_saving():
    doc = _gemm_steps(n=3, dims=4096, gemm_us=400.0, step_us=500.0)
    (k, *_) = _kernels(doc)
    tflops = 2 * 4096**3 / k["dur"] / 1e6
    # bf16 4096³: 1365 FLOP/B under FAST's ridge of 2000: the bandwidth roof at its intensity.
    roof = 4096**3 * 2 / (2 * 3 * 4096**2) * FAST.memory_bandwidth_gbs / 1e3
    assert 100 * tflops / roof < G.GEMM_LOW_PCT_OF_PEAK
    found = _judged(doc, FAST)["gemm_below_roof"]
    want = k["dur"] * (1 - (100 * tflops / roof) / MEMORY_REACHABLE_PCT)  # per step: one GEMM a step
    assert found.saving_us == pytest.approx(want, rel=1e-3)
    starts = [e["ts"] for e in doc["traceEvents"] if e.get("name") == "step"]
    assert found.base_us == pytest.approx(starts[1] - starts[0]) and found.scope == "per step"  # start to start


def test_gemm_below_roof_silent_on_a_long_latency_bound_gemm():
    """Symptom: a GEMM kernel of ≥ 100 µs at a tiny share of its roof. Premise absent: 256³ would take
    under the latency floor even at the roof, so it is latency-bound, and no roof saving exists."""
    doc = _gemm_steps(n=3, dims=256, gemm_us=400.0, step_us=500.0)
    (k, *_) = _kernels(doc)
    assert k["dur"] >= GEMM_MIN_KERNEL_US
    assert 2 * 256**3 / (FAST.tflops["bfloat16"] * 1e6) < LATENCY_IDEAL_US  # µs at the compute roof
    assert "gemm_below_roof" not in _judged(doc, FAST)


def test_gemm_below_roof_silent_when_the_gap_is_not_material():
    """Symptom: long GEMMs far under the roof. Premise absent: the gap is under 5 % of a 100 ms step."""
    doc = _gemm_steps(n=3, dims=4096, gemm_us=400.0, step_us=100_000.0)
    (k, *_) = _kernels(doc)
    assert 100 * k["dur"] / 100_000.0 < MATERIAL_PCT  # even the whole GEMM is under the bar
    assert "gemm_below_roof" not in _judged(doc, FAST)


def test_gemm_below_roof_silent_near_the_h200_roof():
    """Symptom: GEMMs under the roof. Premise absent: on the H200 the 4096³ GEMM at 400 µs runs at 344
    TFLOP/s = 35 % of 989: below the bar, yes; at 170 µs 81 %: not."""
    doc = _gemm_steps(n=3, dims=4096, gemm_us=170.0, step_us=200.0)
    (k, *_) = _kernels(doc)
    assert 2 * 4096**3 / k["dur"] / 1e6 / 989.5 > GEMM_REACHABLE_PCT / 100
    assert "gemm_below_roof" not in _judged(doc)


# --------------------------------------------------------------------------- GEMMs without a rate


def _unshaped(gemm_us: float, other_us: float) -> dict:
    """aten::mm without Input Dims (record_shapes=False) launching a GEMM kernel, and another kernel."""
    events = [tb.annotation("step", 1000, 2000), tb.op("aten::mm", 1005, 40, **{"External id": 1}),
              tb.launch(1020, 10, 1), tb.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 1035, gemm_us, 1),
              tb.op("aten::relu", 1100, 40, **{"External id": 2}), tb.launch(1110, 10, 2),
              tb.kernel("void at::native::elementwise_kernel<relu>", 1040 + gemm_us, other_us, 2)]
    return tb.document(events, device_properties=[tb.H200_PROPS])


def test_gemm_without_rate_is_a_note_and_never_the_verdict():
    doc = _unshaped(gemm_us=300.0, other_us=100.0)
    ks = _kernels(doc)
    share = 100 * ks[0]["dur"] / sum(k["dur"] for k in ks)
    judged = _judged(doc)
    note = judged["gemm_without_rate"]
    assert f"{share:.0f} % of the kernels' time" in note.evidence
    assert note.scope == "note" and note.saving_us == 0 and note.severity == "info"
    assert judged["__verdict__"] is None or judged["__verdict__"].rule != "gemm_without_rate"


def test_gemm_without_rate_silent_when_the_gemms_are_a_small_share():
    doc = _unshaped(gemm_us=50.0, other_us=950.0)
    ks = _kernels(doc)
    assert 100 * ks[0]["dur"] / sum(k["dur"] for k in ks) < G.GEMM_UNRATED_MIN_SHARE_PCT
    assert "gemm_without_rate" not in _judged(doc)


# --------------------------------------------------------------------------- memory


def _leaky_steps(*, with_oom: bool) -> dict:
    """Four steps, each keeping 4 KiB more (a leak candidate) around a GEMM; optionally a refused
    allocation in the last, as Kineto writes it ("[OutOfMemory]")."""
    events, level, t = [], 0, 1000.0
    for k in range(4):
        events.append(tb.annotation(f"ProfilerStep#{k + 1}", t, 1000.0))
        events.append(tb.op("aten::mm", t + 10, 900.0, **{"External id": k + 1}))
        events += [tb.launch(t + 20, 10, k + 1), tb.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", t + 40, 600, k + 1)]
        for i, nbytes in enumerate((1 << 20, 4096, -(1 << 20))):
            level += nbytes
            events.append(tb.memory(t + 20 + i * 200.0, nbytes, level))
        t += 1000.0
    if with_oom:
        events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[OutOfMemory]", "pid": tb.CPU_PID,
                       "tid": tb.CPU_TID, "ts": t - 100.0,
                       "args": {"Bytes": 400 << 30, "Total Allocated": level, "Total Reserved": level + (2 << 20),
                                "Device Id": 0, "Device Type": 1}})
    return tb.document(events, device_properties=[tb.H200_PROPS])


def test_memory_notes_never_lead_and_sort_after_savings():
    doc = _leaky_steps(with_oom=False)
    steps = [e for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    records = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    ends = [[r for r in records if s["ts"] <= r["ts"] <= s["ts"] + s["dur"]][-1]["args"]["Total Allocated"]
            for s in steps]  # brute force: the allocated level at each step's end rises every step
    assert len(ends) >= 3 and all(b > a for a, b in zip(ends, ends[1:]))
    trace = load_trace(json.dumps(doc).encode())
    judgement = judge_trace(trace, analyze(trace))
    rules = [f.rule for f in judgement.findings]
    assert {"memory_growth", "peak_owner"} <= set(rules) and "out_of_memory" not in rules
    notes = [i for i, f in enumerate(judgement.findings) if f.scope == "note"]
    assert notes == list(range(len(rules) - len(notes), len(rules)))  # every note after every saving
    assert judgement.verdict_finding is None or judgement.verdict_finding.scope != "note"
    assert judgement.named is None or judgement.named.scope != "note"


def test_out_of_memory_needs_the_refusal_record():
    """Symptom: memory rising to the end. Premise: an [OutOfMemory] record; without one, silent; with
    one, it is the verdict and its saving is the whole window (the run stopped there)."""
    quiet = _leaky_steps(with_oom=False)
    assert not [e for e in quiet["traceEvents"] if e.get("name") == "[OutOfMemory]"]
    assert "out_of_memory" not in _judged(quiet)
    loud = _judged(_leaky_steps(with_oom=True))
    oom = loud["out_of_memory"]
    assert loud["__verdict__"] is oom and oom.scope == "once" and oom.saving_us == oom.base_us > 0
    assert "400.00 GiB was refused" in oom.evidence

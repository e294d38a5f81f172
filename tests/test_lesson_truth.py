"""Errors the code once made (not the lesson text), each on the H200 recording that showed it.

The text errors are tests/test_claims.py's (claims and retracted sentences). Here: the GEMM
label at 64³ (latency-bound, not memory-bound), "GEMM far below peak" on a memory-bound
attention GEMM, the TF32 switch the insight names, the FP32 insight's "use bfloat16" on inputs
already bf16, the cold-step insight on a schedule that already skipped steps, and the lesson
check counting kernels the reveal does not (a warm-up step's kernel landing in the trace).
"""

from __future__ import annotations

import re

import corpus
import numpy as np
import pytest
from lessonruns import h200_runs, raw_events

from lab.analysis import analyze
from lab.analysis.gemm.bound import BOUNDS, bound_of
from lab.core.devices import lookup_peak
from lab.judge import judge_trace
from lab.lessons import LESSONS, lesson_signals, questions_for
from lab.samples import list_samples
from lab.teach.roofline import Roofline, RunSummary, classify
from lab.trace.load import load_trace

H200 = lookup_peak("NVIDIA H200")


def sample(stem: str):
    s = next(s for s in list_samples() if s.file.startswith(stem))
    trace = corpus.trace(s.path)
    return trace, analyze(trace)


# --------------------------------------------------------------------------- 7. the 64³ GEMM's label


def test_the_64_cubed_gemm_is_latency_bound_everywhere():
    """1.9 µs for 24 KB: 0.3 TFLOP/s against a ~100 TFLOP/s roof at its 21 FLOP/B. The GEMM table,
    the room's roofline and the classifier say the same."""
    _, analysis = sample("matmul_add_64x64x64")
    gemm = analysis.gemm
    assert set(gemm["bound"]) == {"latency-bound"}, set(gemm["bound"])
    row = gemm.iloc[0]
    roof = min(H200.tflops["bfloat16"], row["intensity_flops_per_byte"] * H200.memory_bandwidth_gbs / 1e3)
    assert row["tflops"] < 0.1 * roof  # brute force: under a tenth of the roof at its intensity
    point = RunSummary(workload="matmul_add", m=64, k=64, n=64, dtype="bfloat16", device="H200",
                       tflops=float(row["tflops"]), intensity_flops_per_byte=float(row["intensity_flops_per_byte"]))
    room = Roofline(device="H200", dtype="bfloat16", peak_tflops=H200.tflops["bfloat16"],
                    bandwidth_gbs=H200.memory_bandwidth_gbs, source="test")
    assert classify(point, room) == "latency-bound"


@pytest.mark.parametrize("stem, want", [("matmul_add_4096x4096x4096_bfloat16", "compute-bound"),
                                        ("attention_naive", "memory-bound"),
                                        ("matmul_add_1024x1024x1024_float32_cuda_warm", "compute-bound")])
def test_the_classifier_on_the_other_recordings(stem, want):
    _, analysis = sample(stem)
    # A GEMM kernel no op owns (its op fell before the trace) has no shape, hence no bound ("").
    assert set(analysis.gemm["bound"]) - {""} == {want}


def test_bound_of_by_hand():
    # ridge of an H200 in bf16: 989.5e12 / 4.8e12 ≈ 206 FLOP/B.
    got = bound_of([800.0, 200.0, 5.0, np.nan], [1365.0, 62.0, 62.0, 62.0], 989.5, 4800.0)
    assert list(got) == ["compute-bound", "memory-bound", "latency-bound", ""]
    assert set(BOUNDS) == {"latency-bound", "memory-bound", "compute-bound"}
    # A long kernel far under its roof is slow, not latency-bound: the int8 8192³ GEMM at 6.5 % of
    # 1,979 TOPS (8.5 ms; its ideal time at the roof 556 µs) is judged by its side of the ridge.
    assert list(bound_of([128.7, 5.0], [5461.0, 62.0], 1979.0, 4800.0, [1.1e12, 1e6])) == [
        "compute-bound", "latency-bound"]


# --------------------------------------------------------------------------- 6. "far below peak" on a memory-bound GEMM


def test_gemm_below_roof_is_silent_on_the_memory_bound_attention_gemm():
    """QKᵀ 4096×64×4096 bf16: 62 FLOP/B, 211 TFLOP/s = 21 % of the compute peak but 71 % of the
    bandwidth roof at its intensity: no loss to warn about."""
    trace, analysis = sample("attention_naive")
    rows = analysis.gemm.dropna(subset=["tflops"])  # the GEMM no op owns has no rate
    by_hand = 100.0 * rows["tflops"] / (rows["intensity_flops_per_byte"] * H200.memory_bandwidth_gbs / 1e3)
    assert (by_hand > 60).all() and (rows["pct_of_peak"] < 30).all()
    assert rows["pct_of_roof"].to_numpy() == pytest.approx(by_hand.to_numpy())
    assert judged("gemm_below_roof", trace, analysis) is None


def test_gemm_below_roof_still_fires_under_the_roof():
    """The same recording judged on a device twice as fast in memory: now 36 % of its roof."""
    from lab.core.devices import DevicePeak

    trace = load_trace(sample_bytes("attention_naive"))
    fast = DevicePeak("Fast HBM", dict(H200.tflops), 2 * H200.memory_bandwidth_gbs, "test")
    insight = judged("gemm_below_roof", trace, analyze(trace, peak=fast))
    assert insight is not None and "memory-bound" in insight.evidence and "bandwidth roof" in insight.evidence


def judged(rule: str, trace, analysis):
    """The judge's finding of ``rule`` on the trace, None when it stayed silent."""
    return next((f for f in judge_trace(trace, analysis).findings if f.rule == rule), None)


def sample_bytes(stem: str) -> bytes:
    return next(s for s in list_samples() if s.file.startswith(stem)).read_bytes()


# --------------------------------------------------------------------------- 5. the TF32 switch; "use bfloat16"


def test_fp32_insight_names_both_tf32_switches():
    trace, analysis = sample("matmul_add_4096x4096x4096_float32")
    insight = judged("tf32_gemms", trace, analysis)
    assert insight is not None
    assert "fp32_precision = 'tf32'" in insight.suggestion and "torch ≥ 2.9" in insight.suggestion
    assert "allow_tf32 = True" in insight.suggestion and "or use bfloat16" in insight.suggestion


def test_fp32_insight_on_the_math_sdpa_trace_does_not_say_use_bfloat16():
    """Its inputs are bf16: the math backend upcast them (aten::_scaled_dot_product_attention_math
    has BFloat16 inputs, its aten::bmm float ones, in the raw JSON)."""
    raw = raw_events(sample_bytes("attention_math"))
    math = [e for e in raw if e["name"] == "aten::_scaled_dot_product_attention_math"]
    assert math and all("c10::BFloat16" in e["args"]["Input type"] for e in math)
    trace, analysis = sample("attention_math")
    insight = judged("tf32_gemms", trace, analysis)
    assert insight is not None
    assert "use bfloat16" not in insight.suggestion
    assert "aten::_scaled_dot_product_attention_math" in insight.evidence


# --------------------------------------------------------------------------- the cold first step (judged: slow_step)


def _slow_step(stem: str):
    trace, analysis = sample(stem)
    return analysis, next((f for f in judge_trace(trace, analysis).findings if f.rule == "slow_step"), None)


def test_cold_step_silent_where_the_schedule_already_skipped_steps():
    """The TF32 recording used schedule(wait=1, warmup=1): its first recorded step is
    ProfilerStep#2, 2.9× the later ones only through a 100 µs label gap. Advising schedule()
    there was advice the trace already followed."""
    analysis, found = _slow_step("matmul_add_4096x4096x4096_tf32")
    assert str(analysis.steps["name"].iloc[0]) == "ProfilerStep#2"
    assert found is None


def test_cold_step_still_fires_on_the_cold_recording():
    _, found = _slow_step("matmul_add_1024x1024x1024_float32_cuda_cold")
    assert found is not None and "schedule(wait=1, warmup=1" in found.suggestion


# --------------------------------------------------------------------------- 8. kernels per step: check == reveal


def _per_step(text: str) -> list[float]:
    a, b = re.search(r"([\d.]+) vs ([\d.]+) kernels per step", text).groups()
    return [float(a), float(b)]


@pytest.mark.parametrize("key", ["geglu", "attention", "sdpa_backends"])
def test_the_lesson_check_and_the_reveal_count_the_same_kernels(key):
    """Both count the kernels launched inside the active steps (lab.analysis.figures). Before,
    the check divided every kernel of the trace by the steps: GeGLU 5 vs 4, SDPA math 17 vs 14,
    because a warm-up step's last kernel lands in the trace."""
    runs = list(h200_runs(key))
    (fewer,) = [s for s in lesson_signals(key, runs) if "fewer" in s.title]
    check = _per_step(fewer.evidence)
    for q in questions_for(key, "cuda"):
        answer = q.answer(runs)
        if q.key.endswith(".fewer"):
            assert _per_step(answer.measured_text) == check, (fewer.evidence, answer.measured_text)
        elif q.key.endswith("kernels"):
            assert answer.measured == check[1], (fewer.evidence, answer.measured_text)


def test_a_warm_up_kernel_lands_in_the_geglu_trace_and_is_not_counted():
    runs = h200_runs("geglu")
    for run, want in zip(runs, (4.0, 3.0)):
        total = int((run.trace.events["cat"] == "kernel").sum())
        assert total > want * len(run.analysis.steps)  # the trace holds more (15 and 11)
    (fewer,) = [s for s in lesson_signals("geglu", list(runs)) if "fewer" in s.title]
    assert fewer.evidence.startswith("4.0 vs 3.0 kernels per step")


def test_insights_quote_no_far_below_peak_on_any_lesson_recording():
    """No lesson recording gets the below-roof warning: every long GEMM there is ≥ 50 % of its roof."""
    for key in [k for k, lesson in LESSONS.items() if not lesson.host_only]:  # those have recordings
        for run in h200_runs(key):
            rules = {f.rule for f in judge_trace(run.trace, run.analysis).findings}
            assert "gemm_below_roof" not in rules, key

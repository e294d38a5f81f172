"""Each insight rule still on the Insight record (GEMM) fires on a trace that shows its pattern and
stays silent on one that does not; the others are judged findings now (tests/test_judge_trace_rules.py).

Real H200 traces where they show the pattern (or its absence), otherwise small traces written
by hand. Firing conditions are re-derived from the raw JSON where a threshold is involved.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tracebuild import H200_PROPS, matmul_add_steps

from lab.analysis import analyze
from lab.analysis.insights import rules as I
from lab.core.devices import DevicePeak
from lab.trace.load import load_trace

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def real():
    out = {}
    for name in ("matmul_add_1024_fp32", "matmul_add_4096_bf16", "matmul_add_4096_bf16_compiled"):
        trace = load_trace(DATA / f"{name}.json.gz")
        out[name] = (trace, analyze(trace))
    return out


def fire(rule, trace, analysis=None):
    return rule(trace, analysis or analyze(trace))


# ---- FP32 without TF32 ---------------------------------------------------------------------


def test_fp32_without_tf32_fires_on_the_fp32_trace(real):
    insight = fire(I.fp32_without_tf32, *real["matmul_add_1024_fp32"])
    assert insight is not None and "compute capability 9.0" in insight.evidence


def test_fp32_without_tf32_silent_for_bf16_tf32_and_old_gpus(real):
    assert fire(I.fp32_without_tf32, *real["matmul_add_4096_bf16"]) is None
    fp32 = dict(input_type=("float", "float"))
    assert fire(I.fp32_without_tf32, matmul_add_steps(3, gemm_name="cutlass_tf32_gemm", **fp32)) is None
    volta = [{**H200_PROPS, "name": "Tesla V100", "computeMajor": 7}]
    assert fire(I.fp32_without_tf32, matmul_add_steps(3, device_properties=volta, **fp32)) is None
    # A float32 GEMM kernel (the kernel name decides the dtype when it names one: a bf16 kernel
    # under float inputs is autocast at work, not FP32 math).
    fp32_kernel = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma"
    big = dict(dims=((4096, 4096), (4096, 4096)), gemm_us=2700.0, step_us=3000.0)  # 51 TFLOP/s: compute-bound
    assert fire(I.fp32_without_tf32, matmul_add_steps(3, gemm_name=fp32_kernel, **fp32, **big)) is not None
    assert fire(I.fp32_without_tf32, matmul_add_steps(3, **fp32, **big)) is None  # the default kernel is bf16
    # The premise: a 256³ fp32 GEMM in 40 µs is latency-bound (0.8 TFLOP/s): TF32 would not speed it up.
    assert fire(I.fp32_without_tf32, matmul_add_steps(3, gemm_name=fp32_kernel, **fp32)) is None


# ---- GEMM below peak -----------------------------------------------------------------------


def test_gemm_below_peak_fires_against_a_higher_peak():
    trace = load_trace(DATA / "matmul_add_4096_bf16.json.gz")
    fake = DevicePeak("Fake 10 PFLOP/s", {"bfloat16": 10_000.0}, 5000.0, "test")
    insight = fire(I.gemm_below_peak, trace, analyze(trace, peak=fake))
    assert insight is not None and "10 of 10 GEMM kernels" in insight.evidence


def test_gemm_below_peak_silent_at_80_pct_of_h200(real):
    trace, analysis = real["matmul_add_4096_bf16"]
    assert (analysis.gemm["pct_of_peak"] > I.GEMM_LOW_PCT_OF_PEAK).all()
    assert fire(I.gemm_below_peak, trace, analysis) is None


def test_gemm_below_peak_ignores_short_kernels():
    fake = DevicePeak("Fake", {"bfloat16": 10_000.0}, 5000.0, "test")
    trace = matmul_add_steps(3, gemm_us=40.0)  # < GEMM_MIN_KERNEL_US
    assert fire(I.gemm_below_peak, trace, analyze(trace, peak=fake)) is None


# ---- find_insights -------------------------------------------------------------------------


def test_find_insights_sorted_by_severity(real):
    for trace, analysis in real.values():
        found = I.find_insights(trace, analysis)
        ranks = [I.SEVERITIES.index(i.severity) for i in found]
        assert ranks == sorted(ranks)
        for i in found:
            assert i.evidence and i.suggestion and i.learn_more


def test_insight_rejects_unknown_severity():
    with pytest.raises(ValueError, match="severity"):
        I.Insight("fatal", "t", "e", "s", "l")

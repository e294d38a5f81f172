"""The GEMM findings (lab/judge/gemm_rules.py) fire on a trace that shows their pattern and stay
silent on one that does not; the other rules' are tests/test_judge_trace_rules.py.

Real H200 traces where they show the pattern (or its absence), otherwise small traces written
by hand. Firing conditions are re-derived from the raw JSON where a threshold is involved.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from tracebuild import H200_PROPS, matmul_add_steps

from lab.analysis import analyze
from lab.core.devices import DevicePeak
from lab.judge import gemm_rules as G
from lab.judge import judge_trace
from lab.trace.load import load_trace

DATA = Path(__file__).parent / "data"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
SYNC = ("cudaDeviceSynchronize", "cudaStreamSynchronize")


def _raw(name: str) -> dict:
    return json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes()))


@pytest.fixture(scope="module")
def real():
    out = {}
    for name in ("matmul_add_1024_fp32", "matmul_add_4096_bf16", "matmul_add_4096_bf16_compiled"):
        trace = load_trace(DATA / f"{name}.json.gz")
        out[name] = (trace, analyze(trace))
    return out


def fire(rule, trace, analysis=None):
    return rule(trace, analysis or analyze(trace))


# ---- FP32 without TF32 (the judge's tf32_gemms, its words from the trace: lab/judge/gemm_rules.py) ----------


def judged(rule: str, trace, analysis=None):
    """The judge's finding of ``rule`` on the trace, None when it stayed silent."""
    findings = judge_trace(trace, analysis or analyze(trace)).findings
    return next((f for f in findings if f.rule == rule), None)


def test_tf32_gemms_fires_on_the_fp32_trace(real):
    finding = judged("tf32_gemms", *real["matmul_add_1024_fp32"])
    assert finding is not None and "compute capability 9.0" in finding.evidence


def test_tf32_gemms_silent_for_bf16_tf32_and_old_gpus(real):
    assert judged("tf32_gemms", *real["matmul_add_4096_bf16"]) is None
    fp32 = dict(input_type=("float", "float"))
    big = dict(dims=((4096, 4096), (4096, 4096)), gemm_us=2700.0, step_us=3000.0)  # 51 TFLOP/s: compute-bound
    assert judged("tf32_gemms", matmul_add_steps(3, gemm_name="cutlass_tf32_gemm", **fp32, **big)) is None
    volta = [{**H200_PROPS, "name": "Tesla V100", "computeMajor": 7}]
    assert judged("tf32_gemms", matmul_add_steps(3, device_properties=volta, **fp32, **big)) is None
    fp32_kernel = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma"
    assert judged("tf32_gemms", matmul_add_steps(3, gemm_name=fp32_kernel, **fp32, **big)) is not None
    # The kernel name decides the dtype when it names one: a bf16 kernel under float inputs is
    # autocast at work, not FP32 math.
    assert judged("tf32_gemms", matmul_add_steps(3, **fp32, **big)) is None
    # The premise: a 256³ fp32 GEMM in 40 µs is latency-bound (0.8 TFLOP/s): TF32 would not speed it up.
    assert judged("tf32_gemms", matmul_add_steps(3, gemm_name=fp32_kernel, **fp32)) is None


# ---- GEMM below its roof (lab/judge/gemm_rules.py) ------------------------------------------


def test_gemm_below_roof_fires_against_a_higher_peak():
    trace = load_trace(DATA / "matmul_add_4096_bf16.json.gz")
    fake = DevicePeak("Fake 10 PFLOP/s", {"bfloat16": 10_000.0}, 5000.0, "test")
    finding = judged("gemm_below_roof", trace, analyze(trace, peak=fake))
    assert finding is not None and "10 of 10 GEMM kernels" in finding.evidence
    assert finding.saving_us > 0 and finding.cause == "gemm"


def test_gemm_below_roof_silent_at_80_pct_of_h200(real):
    trace, analysis = real["matmul_add_4096_bf16"]
    assert (analysis.gemm["pct_of_peak"] > G.GEMM_LOW_PCT_OF_PEAK).all()
    assert judged("gemm_below_roof", trace, analysis) is None


def test_gemm_below_roof_ignores_short_kernels():
    fake = DevicePeak("Fake", {"bfloat16": 10_000.0}, 5000.0, "test")
    trace = matmul_add_steps(3, gemm_us=40.0)  # < GEMM_MIN_KERNEL_US
    assert judged("gemm_below_roof", trace, analyze(trace, peak=fake)) is None

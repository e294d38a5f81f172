"""Each insight rule fires on a trace that shows its pattern and stays silent on one that does not.

Real H200 traces where they show the pattern (or its absence), otherwise small traces written
by hand. Firing conditions are re-derived from the raw JSON where a threshold is involved.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from tracebuild import H200_PROPS, annotation, build, gpu_annotation, kernel, launch, matmul_add_steps, op

from lab.analysis import analyze
from lab.analysis.insights import rules as I
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


def titles(trace, analysis=None) -> list[str]:
    return [i.title for i in I.find_insights(trace, analysis)]


# ---- overhead-bound ------------------------------------------------------------------------


def _host_over_gpu(name: str) -> float:
    """Self CPU time over GPU time by brute force: on the one CPU thread, every event nests in a
    top-level one, so the sum of self times equals the sum of top-level durations; the
    profiler's own overhead events (pid -1) inside them are the profiler's, not host work."""
    xs = [e for e in _raw(name)["traceEvents"] if e.get("ph") == "X"]
    cpu = sorted((e for e in xs if str(e["pid"]) == "417"), key=lambda e: (e["ts"], -e["dur"]))
    top, end = [], -1.0
    for e in cpu:
        if e["ts"] >= end:
            top.append(e)
            end = e["ts"] + e["dur"]
    profiler = sum(o["dur"] for o in xs if o.get("cat") == "overhead"
                   and any(t["ts"] <= o["ts"] and o["ts"] + o["dur"] <= t["ts"] + t["dur"] for t in top))
    host = sum(e["dur"] for e in top if e["name"] not in SYNC) - profiler
    return host / sum(e["dur"] for e in xs if e.get("cat") in GPU_CATS)


def test_overhead_bound_on_the_small_fp32_run_counts_the_programs_host_work(real):
    """1024³ fp32: 8.2× host over GPU with the profiler's 2.7 ms Activity Buffer Request inside
    aten::mm, 3.7× without it — below the bar, so silent (it fired on the profiler's time before)."""
    ratio = _host_over_gpu("matmul_add_1024_fp32")
    insight = fire(I.overhead_bound, *real["matmul_add_1024_fp32"])
    assert (insight is not None) == (ratio >= I.OVERHEAD_BOUND_RATIO)
    if insight is not None:
        assert f"{ratio:.1f}×" in insight.evidence


def test_overhead_bound_silent_on_the_big_bf16_run(real):
    assert _host_over_gpu("matmul_add_4096_bf16") < I.OVERHEAD_BOUND_RATIO
    assert fire(I.overhead_bound, *real["matmul_add_4096_bf16"]) is None


def test_overhead_bound_critical_like_the_64x64_case():
    # 2.3 ms of CPU for 23 µs of GPU (100×).
    trace = build([op("aten::mm", 0, 2300), launch(100, 10, 1), kernel("gemm", 200, 23, 1)])
    insight = fire(I.overhead_bound, trace)
    assert insight.severity == "critical" and "100.0×" in insight.evidence


# ---- cold first step -----------------------------------------------------------------------


def test_cold_first_step_fires_on_the_cold_fp32_trace(real):
    insight = fire(I.cold_first_step, *real["matmul_add_1024_fp32"])
    assert insight is not None
    assert "3,597 µs" in insight.evidence and "Activity Buffer Request" in insight.evidence


def test_cold_first_step_silent_when_steps_are_even():
    assert fire(I.cold_first_step, matmul_add_steps(5)) is None


def test_cold_first_step_fires_on_a_hand_made_cold_start():
    insight = fire(I.cold_first_step, matmul_add_steps(5, first_extra_us=400.0))
    assert insight is not None and "5.0×" in insight.evidence


def test_cold_first_step_needs_three_steps():
    assert fire(I.cold_first_step, matmul_add_steps(2, first_extra_us=1000.0)) is None


# ---- long synchronize ----------------------------------------------------------------------


def test_long_sync_fires_when_the_gpu_idles_during_it():
    events = [op("aten::mm", 0, 30), launch(5, 10, 1), kernel("tiny", 20, 10, 1),
              op("cudaDeviceSynchronize", 40, 500, cat="cuda_runtime")]
    insight = fire(I.long_synchronize, build(events, device_properties=[H200_PROPS]))
    assert insight is not None and "500 µs" in insight.evidence and "0 %" in insight.evidence


def test_long_sync_silent_when_the_gpu_is_busy(real):
    # bf16: the 545 µs cudaDeviceSynchronize waits for kernels that run during all of it.
    raw = _raw("matmul_add_4096_bf16")
    sync = max((e for e in raw["traceEvents"] if e.get("name") == "cudaDeviceSynchronize"), key=lambda e: e["dur"])
    assert sync["dur"] > I.SYNC_MIN_TOTAL_US
    assert fire(I.long_synchronize, *real["matmul_add_4096_bf16"]) is None


# ---- many tiny kernels ---------------------------------------------------------------------


def _tiny_kernels(n: int, dur: float, every: float):
    events = []
    for i in range(n):
        events += [launch(i * every, 8, i + 1), kernel("void tiny_kernel", i * every + 10, dur, i + 1)]
    return build(events, device_properties=[H200_PROPS])


def test_many_tiny_kernels_fires_when_launch_bound():
    insight = fire(I.many_tiny_kernels, _tiny_kernels(40, 3.0, 20.0))
    assert insight is not None and "40 kernels" in insight.evidence and "3.0 µs" in insight.evidence


def test_many_tiny_kernels_silent_on_real_fp32(real):
    assert fire(I.many_tiny_kernels, *real["matmul_add_1024_fp32"]) is None  # median kernel ~30 µs


def test_many_tiny_kernels_silent_when_gpu_stays_busy():
    assert fire(I.many_tiny_kernels, _tiny_kernels(40, 3.0, 3.0)) is None


# ---- unfused bias add ----------------------------------------------------------------------


def test_unfused_add_fires_on_eager_bf16(real):
    insight = fire(I.unfused_bias_add, *real["matmul_add_4096_bf16"])
    assert insight is not None and insight.severity == "warning"
    assert insight.evidence.startswith("10 add kernel(s) (412 µs")


def test_unfused_add_silent_on_compiled(real):
    trace, analysis = real["matmul_add_4096_bf16_compiled"]
    assert fire(I.unfused_bias_add, trace, analysis) is None
    assert analysis.kernels["name"].str.contains("bias").any()


# ---- profiler overhead ---------------------------------------------------------------------


def test_profiler_overhead_fires_on_real_trace(real):
    insight = fire(I.profiler_overhead_event, *real["matmul_add_4096_bf16"])
    assert insight is not None and "Activity Buffer Request" in insight.evidence
    assert "3,743 µs" in insight.evidence and "step 0" in insight.evidence


def test_profiler_overhead_silent_without_overhead_events():
    assert fire(I.profiler_overhead_event, matmul_add_steps(3)) is None


# ---- annotation over 100 % -----------------------------------------------------------------


def test_annotation_over_100_fires_on_bf16(real):
    raw = _raw("matmul_add_4096_bf16")
    xs = [e for e in raw["traceEvents"] if e.get("ph") == "X"]
    pct = 100 * sum(e["dur"] for e in xs if e.get("cat") == "gpu_user_annotation") / sum(
        e["dur"] for e in xs if e.get("cat") in GPU_CATS)
    assert pct > 100
    insight = fire(I.annotation_over_100_pct, *real["matmul_add_4096_bf16"])
    assert insight is not None and f"{pct:.0f} %" in insight.evidence


def test_annotation_over_100_silent_without_gpu_annotations():
    assert fire(I.annotation_over_100_pct, matmul_add_steps(3)) is None


def test_annotation_over_100_silent_when_annotation_is_shorter():
    events = [launch(0, 5, 1), kernel("k", 10, 50, 1), gpu_annotation("label", 10, 30)]
    assert fire(I.annotation_over_100_pct, build(events)) is None


# ---- CUPTI missing -------------------------------------------------------------------------


def test_cupti_missing_fires_with_launches_but_no_kernels():
    trace = build([op("aten::mm", 0, 50), launch(10, 5, 1)], device_properties=[H200_PROPS])
    insight = fire(I.cupti_missing, trace)
    assert insight is not None and insight.severity == "critical"
    assert "1 launch call(s) among 1 CUDA runtime/driver call(s) (cudaLaunchKernel ×1)" in insight.evidence
    assert I.find_insights(trace)[0] == insight  # critical comes first


def test_cupti_missing_silent_on_real_and_cpu_only(real):
    assert fire(I.cupti_missing, *real["matmul_add_4096_bf16"]) is None
    assert fire(I.cupti_missing, build([op("aten::mm", 0, 50)])) is None


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


# ---- find_insights -------------------------------------------------------------------------


def test_find_insights_sorted_by_severity(real):
    for trace, analysis in real.values():
        found = I.find_insights(trace, analysis)
        ranks = [I.SEVERITIES.index(i.severity) for i in found]
        assert ranks == sorted(ranks)
        for i in found:
            assert i.evidence and i.suggestion and i.learn_more


def test_real_traces_expected_titles(real):
    eager = titles(*real["matmul_add_4096_bf16"])
    compiled = titles(*real["matmul_add_4096_bf16_compiled"])
    assert "Bias add runs as a separate kernel after the GEMM" in eager
    assert "Bias add runs as a separate kernel after the GEMM" not in compiled


def test_insight_rejects_unknown_severity():
    with pytest.raises(ValueError, match="severity"):
        I.Insight("fatal", "t", "e", "s", "l")


def test_cold_first_step_fires_on_a_slow_start_gap_alone():
    # Same step durations, but the first step's first op starts 228 µs after its label (5 µs later on).
    events, corr = [], 1
    for i in range(4):
        t = 1000.0 + 400 * i
        gap = 228.0 if i == 0 else 5.0
        events += [annotation("step", t, 300), op("aten::mm", t + gap, 40, **{"External id": corr})]
    insight = fire(I.cold_first_step, build(events))
    assert insight is not None and "228 µs before its first op" in insight.evidence
    # A gap only a few µs longer than the later ones is noise, even at a large ratio.
    for e in events:
        if e["name"] == "aten::mm" and e["ts"] == 1228.0:
            e["ts"] = 1000.0 + 20.0
    assert fire(I.cold_first_step, build(events)) is None


def test_steps_overlapping_matches_brute_force():
    """The binary-search overlap used by the profiler-overhead rule equals the all-pairs check."""
    import numpy as np

    from lab.analysis.insights.rules import _steps_overlapping

    rng = np.random.default_rng(7)
    for _ in range(300):
        starts = np.cumsum(rng.uniform(1, 5, 25))
        gaps = np.diff(np.append(starts, starts[-1] + 5))
        ends = starts + rng.uniform(0.1, 0.9, 25) * gaps
        a = rng.uniform(0, starts[-1] + 5, 9)
        b = a + rng.uniform(0, 10, 9)
        brute = np.flatnonzero(((starts[:, None] < b[None, :]) & (ends[:, None] > a[None, :])).any(axis=1))
        assert list(_steps_overlapping(starts, ends, a, b)) == list(brute)

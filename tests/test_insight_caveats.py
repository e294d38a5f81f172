"""What would change an insight's figure (issue 26): a caveat where the profiler's cost, warm-up
or one sample make the number soft, none where the number holds; rendered under the insight."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from tracebuild import build, kernel, launch, matmul_add_steps, op

from lab.analysis import analyze
from lab.analysis.gemm.analyze import GEMM_MIN_KERNEL_US
from lab.analysis.insights import rules as I
from lab.core.devices import DevicePeak
from lab.judge import gemm_rules as G
from lab.judge import judge_trace
from lab.trace.load import load_trace

DATA = Path(__file__).parent / "data"


def judged(rule: str, trace, analysis=None):
    """The judge's finding of ``rule`` on the trace, None when it stayed silent."""
    return next((f for f in judge_trace(trace, analysis or analyze(trace)).findings if f.rule == rule), None)


def fire(rule, trace, analysis=None):
    return rule(trace, analysis or analyze(trace))


def test_overhead_bound_says_the_profiler_cost_of_short_ops():
    # 200 ops of 3 µs for 23 µs of GPU: the profiler's per-op cost is a large part of each.
    trace = build([op("aten::add", 10.0 * i, 3.0) for i in range(200)] + [launch(1, 2, 1), kernel("k", 5, 23, 1)])
    insight = fire(I.overhead_bound, trace)
    assert insight is not None and "profiler" in insight.caveat and "3.0 µs" in insight.caveat


def test_overhead_bound_has_no_caveat_when_ops_are_long():
    trace = build([op("aten::mm", 0, 2300), launch(100, 10, 1), kernel("gemm", 200, 23, 1)])
    insight = fire(I.overhead_bound, trace)
    assert insight is not None and insight.caveat == ""  # one 2.3 ms op: the profiler's cost is noise


def test_cold_first_step_says_one_sample_varies():
    insight = fire(I.cold_first_step, matmul_add_steps(5, first_extra_us=400.0))
    assert insight is not None and "run to run" in insight.caveat


def test_gemm_below_roof_names_the_median_instance_when_the_worst_is_the_first():
    trace = load_trace(DATA / "matmul_add_4096_bf16.json.gz")
    fake = DevicePeak("Fake 10 PFLOP/s", {"bfloat16": 10_000.0}, 5000.0, "test")
    analysis = analyze(trace, peak=fake)
    insight = judged("gemm_below_roof", trace, analysis)
    big = analysis.gemm[analysis.gemm["kernel_us"] >= GEMM_MIN_KERNEL_US]
    worst = big.loc[big["pct_of_peak"].idxmin()]
    assert insight is not None and len(big) >= G.GEMM_FEW_INSTANCES
    if float(worst["ts_us"]) > float(big["ts_us"].min()):  # a warm instance, one of many: the figure holds
        assert insight.caveat == ""
    else:
        assert f"{statistics.median(big['tflops']):.1f} TFLOP/s" in insight.caveat


def test_gemm_below_roof_says_few_instances():
    fake = DevicePeak("Fake", {"bfloat16": 10_000.0}, 5000.0, "test")
    # 4096³ bf16 in 400 µs: 344 TFLOP/s, a few % of the fake roof (a latency-bound GEMM has no roof to reach).
    trace = matmul_add_steps(2, dims=((4096, 4096), (4096, 4096)), gemm_us=400.0, step_us=500.0)
    insight = judged("gemm_below_roof", trace, analyze(trace, peak=fake))
    assert insight is not None and "only 2 long GEMM instance(s)" in insight.caveat


def test_many_tiny_kernels_says_the_launch_cost_is_the_profiler_s_too():
    kernels = [launch(10.0 * i, 8, i) for i in range(40)] + [kernel("tiny", 10.0 * i + 9, 3.0, i) for i in range(40)]
    insight = fire(I.many_tiny_kernels, build(kernels))
    assert insight is not None and "CUPTI" in insight.caveat


def test_profiler_overhead_badge_says_its_noise_and_never_minus_zero():
    from lab.core.result import Timing
    from lab.units import fmt_signed_pct
    from lab.views.summary import _overhead_text, overhead_noise_pct

    assert fmt_signed_pct(-0.3) == "0 %" and fmt_signed_pct(12.4) == "+12 %" and fmt_signed_pct(-3.0) == "−3 %"
    # Three iterations each, as a run times them: a spread of ±20 µs on 100 µs.
    timing = Timing(method="wall clock", profiled_us=(96.0, 104.0, 140.0), unprofiled_us=(80.0, 100.0, 120.0))
    noise = overhead_noise_pct(timing)
    assert noise == pytest.approx(100 * ((40 / 2) ** 2 + (44 / 2) ** 2) ** 0.5 / 100.0)
    assert _overhead_text(timing.overhead_pct, noise) == f"+4 % overhead, within ±{noise:.0f} % noise"
    steady = Timing(method="wall clock", profiled_us=(130.0, 130.5, 131.0), unprofiled_us=(100.0, 100.2, 100.4))
    assert _overhead_text(steady.overhead_pct, overhead_noise_pct(steady)) == "+30 % overhead, ±1 % noise"
    assert "−0" not in _overhead_text(-0.2, overhead_noise_pct(steady))

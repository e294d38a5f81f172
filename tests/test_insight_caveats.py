"""What would change an insight's figure: a caveat where the profiler's cost, warm-up
or one sample make the number soft, none where the number holds; rendered under the insight. The
judged findings' caveats (launch-bound, the cold first step) are tests/test_judge_trace_rules.py's."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from tracebuild import matmul_add_steps

from lab.analysis import analyze
from lab.analysis.gemm.analyze import GEMM_MIN_KERNEL_US
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

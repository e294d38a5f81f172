"""compare_traces (lab.views) / compare_analyses: eager vs compiled bf16 (the add kernel goes, the GEMM gains a
bias epilogue), and the page's Compare against its Insights tabs."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import corpus
import pytest
from tracebuild import H200_PROPS, build, kernel, launch, matmul_add_steps, op

from lab.analysis import analyze
from lab.analysis.compare import TOTAL_METRICS, compare_analyses
from lab.core.config import RunConfig
from lab.core.devices import lookup_peak
from lab.judge import judge_trace
from lab.samples import list_samples
from lab.views.report import compare_traces

DATA = Path(__file__).parent / "data"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _xs(name: str) -> list[dict]:
    raw = json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes()))
    return [e for e in raw["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture(scope="module")
def eager_vs_compiled():
    eager = corpus.trace(DATA / "matmul_add_4096_bf16.json.gz")
    compiled = corpus.trace(DATA / "matmul_add_4096_bf16_compiled.json.gz")
    return compare_traces(eager, compiled, label_a="eager", label_b="compiled")


def test_add_kernel_gone_and_bias_in_the_gemm(eager_vs_compiled):
    kernels = eager_vs_compiled.kernels
    eager_xs = _xs("matmul_add_4096_bf16")
    add_name = next(e["name"] for e in eager_xs if e.get("cat") == "kernel" and "elementwise" in e["name"])
    add_row = kernels[kernels["name"] == add_name].iloc[0]
    assert add_row["status"] == "gone" and add_row["b_us"] == 0 and add_row["b_count"] == 0
    assert add_row["a_us"] == pytest.approx(sum(e["dur"] for e in eager_xs if e["name"] == add_name), abs=1e-6)
    assert add_row["delta_us"] == pytest.approx(-add_row["a_us"])
    new = kernels[kernels["status"] == "new"]
    assert len(new) == 1 and "bias" in new["name"].iloc[0]
    compiled_gemm = sum(e["dur"] for e in _xs("matmul_add_4096_bf16_compiled") if e["name"] == new["name"].iloc[0])
    assert new["b_us"].iloc[0] == pytest.approx(compiled_gemm, abs=1e-6)
    assert math.isnan(new["ratio"].iloc[0])
    gone = set(kernels.loc[kernels["status"] == "gone", "name"])
    assert not any("bias" in name for name in gone)
    assert "Bias add runs as a separate kernel after the GEMM" in eager_vs_compiled.findings_gone
    assert not any("Bias add" in t for t in eager_vs_compiled.findings_new + eager_vs_compiled.findings_kept)


def test_totals_against_brute_force(eager_vs_compiled):
    for side, name in (("a", "matmul_add_4096_bf16"), ("b", "matmul_add_4096_bf16_compiled")):
        xs = _xs(name)
        index = 0 if side == "a" else 1
        assert eager_vs_compiled.total("kernel_time_us")[index] == pytest.approx(
            sum(e["dur"] for e in xs if e.get("cat") == "kernel"), abs=1e-6)
        assert eager_vs_compiled.total("kernel_count")[index] == sum(1 for e in xs if e.get("cat") == "kernel")
        assert eager_vs_compiled.total("memset_time_us")[index] == pytest.approx(
            sum(e["dur"] for e in xs if e.get("cat") == "gpu_memset"), abs=1e-6)
    totals = eager_vs_compiled.totals.set_index("metric")
    assert list(totals.index) == list(TOTAL_METRICS)
    row = totals.loc["kernel_count"]
    assert (row["a"], row["b"], row["delta"], row["ratio"]) == (20, 10, -10, 0.5)
    with pytest.raises(KeyError, match="known"):
        eager_vs_compiled.total("nope")


def test_operators_outer_join(eager_vs_compiled):
    ops = eager_vs_compiled.operators.set_index("name")
    assert ops.loc["aten::mm", "status"] == "gone" and ops.loc["aten::mm", "b_us"] == 0
    assert ops.loc["aten::addmm", "status"] == "new" and ops.loc["aten::addmm", "a_us"] == 0
    assert ops.loc["cudaMemsetAsync", "status"] == "both"
    both = ops.loc["cudaMemsetAsync"]
    assert both["ratio"] == pytest.approx(both["b_us"] / both["a_us"])
    deltas = eager_vs_compiled.operators["delta_us"].abs().tolist()
    assert deltas == sorted(deltas, reverse=True)


def test_a_trace_against_itself_changes_nothing():
    trace = corpus.trace(DATA / "matmul_add_1024_fp32.json.gz")
    same = compare_traces(trace, trace)
    assert (same.kernels["delta_us"] == 0).all() and (same.operators["delta_us"] == 0).all()
    assert set(same.kernels["status"]) == {"both"}
    assert (same.kernels["ratio"] == 1).all()
    assert not same.findings_gone and not same.findings_new and same.findings_kept
    assert (same.totals["delta"].fillna(0) == 0).all()


def test_hand_made_faster_gemm():
    slow, fast = matmul_add_steps(3, gemm_us=80.0), matmul_add_steps(3, gemm_us=40.0)
    diff = compare_traces(slow, fast, label_a="slow", label_b="fast")
    row = diff.kernels.set_index("name").loc["sm90_xmma_gemm_bf16bf16_bf16f32"]
    assert (row["a_us"], row["b_us"], row["delta_us"], row["ratio"]) == (240.0, 120.0, -120.0, 0.5)
    assert diff.label_a == "slow" and diff.label_b == "fast"


def test_gpu_vs_cpu_only_trace():
    gpu = build([op("aten::mm", 0, 50), launch(10, 5, 1), kernel("gemm", 20, 30, 1)])
    cpu = build([op("aten::mm", 0, 500)])
    diff = compare_traces(gpu, cpu)
    assert diff.kernels.set_index("name").loc["gemm", "status"] == "gone"
    assert diff.total("gpu_busy_us") == (30.0, 0.0)


# ---- the page's Compare uses the Insights tabs' analyses and findings ---------------------------

FP32_NO_TF32 = "FP32 GEMMs without TF32"


def _insights_tab(trace, config):
    """What ui/cache.py computes for a run's Insights tab: analysed with its config and the device's peak, judged."""
    analysis = analyze(trace, peak=lookup_peak("NVIDIA H200"), config=config)
    return analysis, judge_trace(trace, analysis).findings


def _compiled_fp32_steps():
    """A compiled fp32 GEMM (3 ms for 4096³: 46 TFLOP/s, under the H200's FP32 peak): the kernel
    runs inside a graph op that records no shapes or dtypes, so only the run's config says it is
    a 4096³ float32 GEMM."""
    events = []
    for i in range(3):
        t = 1000.0 + 4000.0 * i
        events += [op("CompiledFunction", t, 100), launch(t + 20, 10, i + 1),
                   kernel("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_ffma", t + 40, 3000, i + 1)]
    return build(events, device_properties=[H200_PROPS])


def _pairs():
    by_file = {s.file: s for s in list_samples()}
    for a, b in (("matmul_add_4096_bf16.json.gz", "matmul_add_4096_bf16_compiled.json.gz"),
                 ("matmul_add_4096x4096x4096_bfloat16_cuda.json.gz",
                  "matmul_add_compiled_4096x4096x4096_bfloat16_cuda.json.gz")):
        sa, sb = by_file[a], by_file[b]
        yield (corpus.trace(sa.path), RunConfig(**sa.config)), (corpus.trace(sb.path), RunConfig(**sb.config))
    bf16 = corpus.trace(DATA / "matmul_add_4096_bf16.json.gz")
    yield ((bf16, RunConfig(m=4096, k=4096, n=4096, dtype="bfloat16")),
           (_compiled_fp32_steps(), RunConfig(m=4096, k=4096, n=4096, dtype="float32", compile=True)))


@pytest.mark.parametrize("pair", list(_pairs()), ids=["samples-seed", "samples-recorded", "fp32-compiled"])
def test_compare_findings_are_the_difference_of_the_insights_tabs(pair):
    (trace_a, config_a), (trace_b, config_b) = pair
    analysis_a, tab_a = _insights_tab(trace_a, config_a)
    analysis_b, tab_b = _insights_tab(trace_b, config_b)
    cmp = compare_analyses(analysis_a, analysis_b, findings_a=tab_a, findings_b=tab_b)
    rules_a, rules_b = [f.rule for f in tab_a], [f.rule for f in tab_b]  # matched by rule: titles carry numbers
    assert cmp.findings_gone == tuple(f.title for f in tab_a if f.rule not in rules_b)
    assert cmp.findings_new == tuple(f.title for f in tab_b if f.rule not in rules_a)
    assert cmp.findings_kept == tuple(f.title for f in tab_a if f.rule in rules_b)
    # The same analyses give the same tables as comparing the traces.
    plain = compare_traces(trace_a, trace_b)
    assert cmp.kernels.equals(plain.kernels) and cmp.operators.equals(plain.operators)


def test_compare_without_the_config_would_miss_an_insight_the_tab_shows():
    # The page passes its cached analyses, so the Insights tab and Compare agree. Since GEMMs are
    # found by their kernels, the traces alone find the compiled fp32 GEMM too.
    bf16 = corpus.trace(DATA / "matmul_add_4096_bf16.json.gz")
    fp32 = _compiled_fp32_steps()
    analysis_a, tab_a = _insights_tab(bf16, RunConfig(m=4096, k=4096, n=4096, dtype="bfloat16"))
    analysis_b, tab_b = _insights_tab(fp32, RunConfig(m=4096, k=4096, n=4096, dtype="float32", compile=True))
    # The TF32 finding is the judge's (lab/judge/gemm_rules.py): the config's shapes give the GEMM its rate.
    assert FP32_NO_TF32 in [f.title for f in judge_trace(fp32, analysis_b).findings]
    assert FP32_NO_TF32 not in [f.title for f in judge_trace(bf16, analysis_a).findings]
    assert FP32_NO_TF32 in compare_analyses(analysis_a, analysis_b, findings_a=tab_a, findings_b=tab_b).findings_new

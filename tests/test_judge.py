"""Findings: each rule fires on its cause with a saving, and stays silent where its symptom is
present but its premise is not. Rates are checked against bytes over kernel time by hand."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import corpus
import pytest
from tracebuild import H200_PROPS, annotation, build, kernel, launch, op

from lab.analysis import analyze
from lab.analysis.gemm.analyze import peak_for
from lab.explain import WORK_CLASSES, explain
from lab.judge import Finding, judge, judge_trace
from lab.judge.finding import MATERIAL_PCT
from lab.judge.rules import RULES
from lab.trace import load_trace

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "lab" / "samples"
CUDA = REPO / "tests" / "data" / "groundtruth" / "cuda"
CPU = REPO / "tests" / "data" / "groundtruth" / "cpu"


def _judged(path: Path):
    """As the page judges it: the analysed trace's explanation, judged with its context."""
    return corpus.explanation(path), corpus.judgement(path)


def _rules(path: Path) -> list[str]:
    return [f.rule for f in _judged(path)[1].findings]


# --- each cause is named where the trace has it -------------------------------------------------


@pytest.mark.parametrize("path, rule", [
    (SAMPLES / "copy_pageable_4096x4096x1_float32_cuda.json.gz", "pageable_copies"),
    (SAMPLES / "small_ops_256x256x16_bfloat16_cuda.json.gz", "launch_bound"),
    (SAMPLES / "matmul_add_4096x4096x4096_float32_cuda.json.gz", "tf32_gemms"),
    (SAMPLES / "chain_item_2048x2048x8_bfloat16_cuda.json.gz", "sync_waits"),
    (SAMPLES / "attention_naive_4096x64x16_bfloat16_cuda.json.gz", "attention_written_out"),
    (SAMPLES / "geglu_mlp_4096x4096x8192_bfloat16_cuda.json.gz", "below_roof"),
    (SAMPLES / "matmul_chain_4096x4096x4_bfloat16_cuda.json.gz", "at_roof"),
    # A CPU trace: the interpreter between ops (30 % of the step) outweighs the DataLoader (17 %).
    (CPU / "module_dataloader.json.gz", "python_overhead"),
], ids=lambda v: v.name if isinstance(v, Path) else v)
def test_the_verdict_names_the_cause(path, rule):
    ex, j = _judged(path)
    named = j.verdict_finding.rule if j.verdict_finding is not None else next(
        (f.rule for f in j.findings if f.rule == "at_roof"), None)
    assert named == rule
    assert j.verdict.startswith(next(f.title for f in j.findings if f.rule == rule))


def test_findings_are_ordered_by_their_share_of_the_window():
    from lab.judge.judgement import window_share_pct

    for path in sorted(SAMPLES.glob("*.json.gz")):
        ex, j = _judged(path)
        steps = ex.attribution.steps
        window, n = float(steps["wall_us"].sum()), len(steps)
        shares = [window_share_pct(f, window_us=window, n_steps=n) for f in j.findings]
        assert shares == sorted(shares, reverse=True), path.name


def test_the_tf32_saving_predicts_the_tf32_recording():
    """The fp32 sample's TF32 what-if against the same program recorded with TF32 on (H200)."""
    ex, j = _judged(SAMPLES / "matmul_add_4096x4096x4096_float32_cuda.json.gz")
    tf32 = next(f for f in j.findings if f.rule == "tf32_gemms")
    measured = _judged(SAMPLES / "matmul_add_4096x4096x4096_tf32_cuda.json.gz")[0].attribution.step_us
    assert tf32.predicted_us == pytest.approx(measured, rel=0.25)


def test_the_pinned_saving_predicts_the_pinned_recording():
    ex, j = _judged(SAMPLES / "copy_pageable_4096x4096x1_float32_cuda.json.gz")
    f = next(f for f in j.findings if f.rule == "pageable_copies")
    measured = _judged(SAMPLES / "copy_pinned_4096x4096x1_float32_cuda.json.gz")[0].attribution.step_us
    assert f.predicted_us == pytest.approx(measured, rel=0.25)


def test_the_cuda_graph_saving_predicts_the_graphed_recording():
    ex, j = _judged(SAMPLES / "small_ops_256x256x16_bfloat16_cuda.json.gz")
    f = next(f for f in j.findings if f.rule == "launch_bound")
    graphed = _judged(SAMPLES / "small_ops_graphed_256x256x16_bfloat16_cuda.json.gz")[0]
    # The graphed program still pays its host side once per replay; the prediction is the floor
    # (GPU work alone). The measured step must lie between the floor and the eager step.
    assert f.predicted_us <= graphed.attribution.step_us < ex.attribution.step_us


# --- premises: the symptom without the premise stays silent -------------------------------------


def _tiny_fp32_gemms() -> object:
    """fp32 GEMMs, but 64³ in 2 µs each: latency-bound, a sliver of the step."""
    ev = []
    for i in range(4):
        t = 1000 + i * 100
        ev += [annotation(f"ProfilerStep#{i}", t, 100), op("aten::mm", t + 5, 30,
                                                           **{"Input Dims": [[64, 64], [64, 64]],
                                                              "Input type": ["float", "float"]}),
               launch(t + 10, 10, i + 1), kernel("ampere_sgemm_32x32_sliced1x4_nn", t + 25, 2, i + 1)]
    return build(ev, device_properties=[H200_PROPS])


def test_tf32_is_silent_for_latency_bound_fp32_gemms():
    trace = _tiny_fp32_gemms()
    ex = explain(trace, peak=peak_for(trace))
    assert ex.roofs["dtype"].tolist() == ["float32"]
    analysis = analyze(trace)
    assert set(analysis.gemm["dtype"]) == {"float32"} and set(analysis.gemm["bound"]) == {"latency-bound"}
    assert "tf32_gemms" not in [f.rule for f in judge_trace(trace, analysis, ex).findings]


def test_optimizer_rule_is_silent_for_a_foreach_optimizer():
    ex, j = _judged(SAMPLES / "train_mlp_4096x2048x8192_bfloat16_cuda.json.gz")
    assert ex.attribution.median_us()["optimizer"] > 0  # the symptom: time in the optimizer step
    assert ex.launches.optimizer_multi_tensor > 0
    assert "optimizer_loop" not in [f.rule for f in j.findings]


def test_launch_bound_is_silent_where_kernels_are_long():
    ex, j = _judged(SAMPLES / "linear_4096x4096x4096_bfloat16_cuda.json.gz")
    med = ex.attribution.median_us()
    assert 100 * (med["launch"] + med["dispatch"] + med["python"]) / ex.attribution.step_us >= MATERIAL_PCT
    assert "launch_bound" not in [f.rule for f in j.findings]


def test_sync_rule_is_silent_where_the_sync_waits_on_a_busy_gpu():
    ex, j = _judged(SAMPLES / "matmul_chain_4096x4096x4_bfloat16_cuda.json.gz")
    trace = load_trace((SAMPLES / "matmul_chain_4096x4096x4_bfloat16_cuda.json.gz").read_bytes())
    assert trace.events["name"].astype(str).str.contains("Synchronize").any()
    assert "sync_waits" not in [f.rule for f in j.findings]


def test_copy_rule_is_silent_for_pinned_copies():
    assert "pageable_copies" not in _rules(SAMPLES / "copy_pinned_4096x4096x1_float32_cuda.json.gz")


def test_compile_rule_is_silent_when_the_compiled_function_was_warmed_up():
    trace = load_trace((SAMPLES / "matmul_add_compiled_4096x4096x4096_bfloat16_cuda.json.gz").read_bytes())
    assert trace.events["name"].astype(str).str.contains("Torch-Compiled Region|CompiledFunction").any()
    assert "compilation" not in _rules(SAMPLES / "matmul_add_compiled_4096x4096x4096_bfloat16_cuda.json.gz")


def test_below_roof_is_silent_for_latency_bound_ops():
    ex, j = _judged(SAMPLES / "small_ops_256x256x16_bfloat16_cuda.json.gz")
    assert (ex.roofs["pct_of_roof"] < 60).any()  # the symptom: ops far below their roof …
    assert set(ex.roofs["bound"]) == {"latency-bound"}  # … the premise fails: they are latency-bound
    assert "below_roof" not in [f.rule for f in j.findings]


def test_input_pipeline_is_silent_when_loading_is_a_sliver():
    ev = []
    for i in range(3):
        t = 1000 + i * 1000
        ev += [annotation(f"ProfilerStep#{i}", t, 1000),
               annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, 10),
               op("aten::addmm", t + 20, 950)]
    ex = explain(build(ev))
    assert ex.attribution.median_us()["input"] == pytest.approx(10)
    assert "input_pipeline" not in [f.rule for f in judge(ex).findings]


def test_slow_step_needs_company():
    ev = [annotation("ProfilerStep#0", 0, 100), op("aten::add", 10, 80),
          annotation("ProfilerStep#1", 100, 900), op("aten::add", 110, 880)]
    assert "slow_step" not in [f.rule for f in judge(explain(build(ev))).findings]


def test_one_slow_step_is_named_with_where_its_time_went():
    ev = []
    for i in range(8):
        t = 1000 + i * 1000
        ev += [annotation(f"ProfilerStep#{i}", t, 1000 if i != 5 else 1000), op("aten::add", t + 10, 900)]
    ev[-4:] = []  # drop the last two steps' events, then add a slow step 5 (30 ms of nothing recorded)
    ev += [annotation("ProfilerStep#6", 40000, 1000), op("aten::add", 40010, 900)]
    j = judge(explain(build(ev)))
    slow = next(f for f in j.findings if f.rule == "slow_step")
    assert "ProfilerStep#5" in slow.title and slow.scope == "once"
    assert "host time no recorded event explains" in slow.evidence


def test_every_rule_has_a_premise_and_a_saving():
    for path in sorted(SAMPLES.glob("*.json.gz")):
        for f in _judged(path)[1].findings:
            assert isinstance(f, Finding) and f.premise and f.suggestion and f.saving_us >= 0
    assert len({r.__name__ for r in RULES}) == len(RULES)


# --- rates: bytes over kernel time, by hand ------------------------------------------------------


def test_memory_bound_rates_equal_bytes_over_kernel_time_by_hand():
    path = SAMPLES / "attention_naive_4096x64x16_bfloat16_cuda.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ex = explain(load_trace(path.read_bytes()), peak=peak_for(load_trace(path.read_bytes())))
    row = ex.roofs[ex.roofs["name"] == "aten::_softmax"].iloc[0]
    ops = [e for e in raw if e.get("name") == "aten::_softmax" and e.get("ph") == "X"]
    dims, types = ops[0]["args"]["Input Dims"], ops[0]["args"]["Input type"]
    size = {"c10::BFloat16": 2, "float": 4, "c10::Half": 2}[types[0]]
    nbytes = 2 * math.prod(dims[0]) * size  # read the input once, write an output of its size
    calls = {e["args"]["External id"] for e in ops}
    kernels = [e for e in raw if e.get("cat") == "kernel" and e["args"].get("External id") in calls]
    gbs = len(ops) * nbytes / sum(k["dur"] for k in kernels) / 1e3
    assert row["gbs"] == pytest.approx(gbs, rel=0.05)
    assert row["bound"] == "memory-bound"


def test_gemm_rates_agree_with_the_gemm_analysis():
    from lab.analysis import analyze

    path = SAMPLES / "matmul_add_4096x4096x4096_bfloat16_cuda.json.gz"
    trace = load_trace(path.read_bytes())
    analysis = analyze(trace)
    ex = explain(trace, peak=analysis.peak)
    mm = ex.roofs[ex.roofs["op_class"] == "gemm"].iloc[0]
    assert mm["tflops"] == pytest.approx(float(analysis.gemm["tflops"].median()), rel=0.05)


def test_at_roof_is_silent_for_gpu_bound_work_far_below_its_roof():
    """Symptom: the GPU is busy the whole step. Premise: most of that time at ≥ 70 % of its roof.
    Memory-bound ops (softmax at 22 %, LayerNorm and the row sum at 50 %) fail it."""
    ex, j = _judged(REPO / "tests" / "data" / "explain" / "memory_bound_ops.json.gz")
    med = ex.attribution.median_us()
    assert sum(med[c.key] for c in WORK_CLASSES) >= 0.8 * ex.attribution.step_us
    assert "at_roof" not in [f.rule for f in j.findings]


def test_a_slow_first_call_is_not_an_op_slow_on_the_host():
    """Symptom: aten::mm's host side took 3.9 ms (cuBLAS's first call). Premise: slow on the median
    step. The first step's finding names it; no per-step host-op finding."""
    ex, j = _judged(REPO / "tests" / "data" / "matmul_add_4096_bf16.json.gz")
    rules = [f.rule for f in j.findings]
    assert "slow_step" in rules and "slow_host_op" not in rules


def test_a_large_softmax_outside_attention_is_not_attention_written_out():
    """Symptom: a softmax over an 8192×8192 matrix. Premise: a ≥ 3-D score matrix between GEMMs."""
    ex, j = _judged(REPO / "tests" / "data" / "explain" / "memory_bound_ops.json.gz")
    assert (ex.roofs["op_class"] == "softmax").any()
    assert "attention_written_out" not in [f.rule for f in j.findings]


def _allocating_steps(*, gpu_busy: bool) -> object:
    """Each 100 µs step spends 30 µs in cudaMalloc; with ``gpu_busy`` a kernel queued before the
    step keeps the GPU working through it (the allocation costs nothing), else the GPU idles."""
    ev = []
    for i in range(4):
        t = 1000 + i * 100
        ev += [annotation(f"ProfilerStep#{i}", t, 100), op("cudaMalloc", t + 10, 30, cat="cuda_runtime"),
               op("aten::mm", t + 50, 40, **{"Input Dims": [[64, 64], [64, 64]], "Input type": ["c10::BFloat16"] * 2}),
               launch(t + 60, 10, i + 1), kernel("nvjet_sm90_tst_64x64", t + (0 if gpu_busy else 75),
                                                 95 if gpu_busy else 5, i + 1)]
    return build(ev, device_properties=[H200_PROPS])


@pytest.mark.parametrize("gpu_busy", [False, True])
def test_allocator_rule_fires_only_where_the_gpu_waits_for_the_allocation(gpu_busy):
    trace = _allocating_steps(gpu_busy=gpu_busy)
    assert (trace.events["name"].astype(str) == "cudaMalloc").sum() == 4  # the symptom, both times
    rules = [f.rule for f in judge(explain(trace, peak=peak_for(trace))).findings]
    assert ("allocator_calls" in rules) is not gpu_busy


def test_a_cpu_trace_is_judged_in_words_without_a_gpu():
    """No GPU in the trace: the input pipeline holds up the step (it starves no GPU), and Python
    between ops is a finding of its own (launch_bound's, on a GPU trace)."""
    ex, j = _judged(CPU / "module_dataloader.json.gz")
    assert not ex.attribution.has_gpu
    rules = {f.rule: f for f in j.findings}
    assert {"input_pipeline", "python_overhead"} <= set(rules)
    assert "launch_bound" not in rules
    for f in j.findings:
        if f.rule != "cpu_only":  # the one finding whose subject is that there is no GPU
            assert "GPU" not in f.title + f.premise + f.evidence, f


def test_python_overhead_is_silent_on_a_gpu_trace():
    """The symptom (Python between ops, ≥ 5 % of the step) on a GPU trace: the GPU's wait for it is
    launch_bound's finding, not a second one."""
    ex, j = _judged(SAMPLES / "small_ops_256x256x16_bfloat16_cuda.json.gz")
    assert 100 * ex.attribution.median_us()["python"] / ex.attribution.step_us >= MATERIAL_PCT
    assert "python_overhead" not in [f.rule for f in j.findings]


def _host_held_steps(*, held_by: str, gpu_busy: bool) -> object:
    """Each 3 ms step spends 2 ms with its thread held — in nothing recorded (``held_by``
    "unrecorded": longer than LONG_HOST_GAP_US, so not Python between ops) or in the profiler's own
    "Activity Buffer Request" ("profiler") — then runs one GEMM. With ``gpu_busy`` a kernel runs
    through the held stretch (the hold costs the step nothing), else the GPU idles through it."""
    ev = []
    for i in range(4):
        t = 1000 + i * 3000
        ev += [annotation(f"ProfilerStep#{i}", t, 3000),
               op("aten::mm", t + 2500, 100,
                  **{"Input Dims": [[64, 64], [64, 64]], "Input type": ["c10::BFloat16"] * 2}),
               launch(t + 2510, 10, i + 1),
               kernel("nvjet_sm90_tst_64x64", t + (5 if gpu_busy else 2530), 2900 if gpu_busy else 20, i + 1)]
        if held_by == "profiler":
            ev.append(op("Activity Buffer Request", t + 100, 2000, cat="overhead"))
    return build(ev, device_properties=[H200_PROPS])


@pytest.mark.parametrize("gpu_busy", [False, True])
@pytest.mark.parametrize(("held_by", "rule"), [("unrecorded", "host_unrecorded"), ("profiler", "profiler_cost")])
def test_host_holds_are_findings_only_where_the_gpu_waits_for_them(held_by, rule, gpu_busy):
    """The symptom both times (≥ 2 ms a step with the thread held, far over MATERIAL_PCT of the
    step); the premise — the GPU idles meanwhile — only without the long kernel."""
    trace = _host_held_steps(held_by=held_by, gpu_busy=gpu_busy)
    ev = trace.events
    if held_by == "profiler":
        assert (ev["cat"].astype(str) == "overhead").sum() == 4
    else:  # nothing recorded on the thread for 2 ms before each GEMM
        assert (ev.loc[ev["name"].astype(str) == "aten::mm", "ts_us"].diff().dropna() == 3000).all()
    rules = [f.rule for f in judge(explain(trace, peak=peak_for(trace))).findings]
    assert (rule in rules) is not gpu_busy

"""The analyses (lab/analysis: operators, gpu, steps, gemm, verdict, analyze) on the real H200
traces and on small hand-made ones.

Expected numbers come from the raw JSON (gzip + json, plain loops written here), from a
golden file written by tests/make_golden_analysis.py (also brute force), or from traces
written by hand — never from the analysis' own output.
"""

from __future__ import annotations

import gzip
import json
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tracebuild import H200_PROPS, annotation, build, kernel, launch, matmul_add_steps, op

from lab.analysis import analyze
from lab.analysis.gemm.analyze import ABOVE_PEAK_NOTE, gemm_efficiency, gemm_figures
from lab.analysis.gemm.kinds import gemm_kernel_dtype, gemm_shape, is_gemm_kernel
from lab.analysis.gpu import GPU_BOUND_BUSY_PCT, covered_us, gpu_utilization, launch_delays
from lab.analysis.operators import host_work_us, kernel_summary
from lab.analysis.steps import step_breakdown
from lab.core.config import RunConfig
from lab.core.devices import DevicePeak, lookup_peak
from lab.judge import judge_trace
from lab.trace.load import load_trace

DATA = Path(__file__).parent / "data"
TRACES = ["matmul_add_1024_fp32", "matmul_add_4096_bf16", "matmul_add_4096_bf16_compiled"]
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
ABS = 2e-3  # µs: the file's absolute timestamps carry ~1 ns of float rounding after rebasing


def _raw(name: str) -> dict:
    return json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes()))


def _xs(raw: dict) -> list[dict]:
    return [e for e in raw["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture(scope="module", params=TRACES)
def real(request):
    name = request.param
    trace = load_trace(DATA / f"{name}.json.gz")
    return name, _raw(name), trace, analyze(trace)


@pytest.fixture(scope="module")
def bf16():
    trace = load_trace(DATA / "matmul_add_4096_bf16.json.gz")
    return _raw("matmul_add_4096_bf16"), trace, analyze(trace)


def naive_union(intervals: list[tuple[float, float]]) -> tuple[float, list[tuple[float, float]]]:
    """Busy time and merged intervals by a plain loop over sorted intervals."""
    merged: list[list[float]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return sum(e - s for s, e in merged), [tuple(m) for m in merged]


# ---- links -----------------------------------------------------------------------------------


def test_matmul_and_add_kernels_are_linked_to_their_launch_and_op(real):
    name, raw, trace, analysis = real
    xs = _xs(raw)
    first = min(e["ts"] for e in xs)
    launch_by_corr = {e["args"]["correlation"]: e for e in xs
                      if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    op_by_ext = {e["args"]["External id"]: e["name"] for e in xs
                 if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    ev = trace.events
    links = analysis.links
    kernels = [e for e in xs if e.get("cat") == "kernel"]
    assert kernels
    for e in kernels:
        row = np.flatnonzero((ev["cat"] == "kernel").to_numpy()
                             & np.isclose(ev["ts_us"].to_numpy(), e["ts"] - first, atol=ABS))
        assert len(row) == 1
        row = row[0]
        expected_launch = launch_by_corr[e["args"]["correlation"]]
        got_launch = links.launch[row]
        assert ev["name"].iloc[got_launch] == expected_launch["name"]
        assert ev["ts_us"].iloc[got_launch] == pytest.approx(expected_launch["ts"] - first, abs=ABS)
        # The owner op is the cpu_op with the kernel's External id (aten::mm / aten::add / aten::addmm).
        assert ev["name"].iloc[links.owner[row]] == op_by_ext[e["args"]["External id"]]
    owners = {ev["name"].iloc[links.owner[r]] for r in np.flatnonzero((ev["cat"] == "kernel").to_numpy())}
    assert owners == ({"aten::addmm"} if "compiled" in name else {"aten::mm", "aten::add"})


def test_parent_is_the_enclosing_event(bf16):
    raw, trace, analysis = bf16
    ev = trace.events
    parent = analysis.links.parent
    names = ev["name"].astype(str).to_numpy()
    # Every aten::mm sits in an aten::matmul, every launch call in an op, every matmul in the label.
    for child, expected in (("aten::mm", "aten::matmul"), ("aten::matmul", "matmul_add"),
                            ("aten::add", "matmul_add"), ("cudaLaunchKernel", "aten::add")):
        rows = np.flatnonzero(names == child)
        assert len(rows) == 10
        assert set(names[parent[rows]]) == {expected}
    assert (parent[np.flatnonzero(names == "matmul_add")] == -1).all()


# ---- operators -------------------------------------------------------------------------------


def _overhead_in_ops(xs: list[dict]) -> list[tuple[dict, dict]]:
    """(profiler overhead event, the innermost op whose time contains it): torch moves such an
    event ("Activity Buffer Request") onto the profiler's thread, where it nests as that op's
    child — and, having no correlation of its own, takes the op's id and so its kernels again."""
    ops = [e for e in xs if e.get("cat") in ("cpu_op", "user_annotation")]
    pairs = []
    for o in (e for e in xs if e.get("cat") == "overhead"):
        around = [x for x in ops if x["ts"] <= o["ts"] and o["ts"] + o["dur"] <= x["ts"] + x["dur"]]
        if around:
            pairs.append((o, min(around, key=lambda x: x["dur"])))
    return pairs


def _kernels_of(xs: list[dict], op: dict) -> float:
    ext = op["args"].get("External id")
    return sum(e["dur"] for e in xs if e.get("cat") in GPU_CATS and e["args"].get("External id") == ext)


def test_operator_self_time_matches_golden_brute_force(bf16):
    raw, _, analysis = bf16
    golden = json.loads((DATA / "golden_analysis_4096_bf16.json").read_text())
    ops = analysis.operators.set_index("name")
    # The golden is "duration minus direct children" over the trace's own nesting; torch also
    # counts a profiler overhead event as a child of the op it sits in, and lists it as a row.
    nested = {}
    for o, owner in _overhead_in_ops(_xs(raw)):
        nested[owner["name"]] = nested.get(owner["name"], 0.0) + o["dur"]
        nested[o["name"]] = nested.get(o["name"], 0.0) - o["dur"]
    assert nested  # this trace has one: an "Activity Buffer Request" inside aten::mm
    for name, self_us in golden["self_us_by_name"].items():
        assert ops.loc[name, "self_us"] == pytest.approx(self_us - nested.get(name, 0.0), abs=0.01), name
    assert ops["self_share_pct"].sum() == pytest.approx(100.0)
    # Host work is the program's: the profiler's overhead events (nested in ops, so inside the
    # golden's self times) are left out of it.
    profiler_us = sum(o["dur"] for o, _ in _overhead_in_ops(_xs(raw)))
    assert host_work_us(analysis.operators) == pytest.approx(golden["host_work_us"] - profiler_us, abs=0.01)


def test_operator_counts_totals_and_device_time(real):
    name, raw, trace, analysis = real
    xs = _xs(raw)
    ops = analysis.operators.set_index("name")
    for op_name in {e["name"] for e in xs if e.get("cat") in ("cpu_op", "user_annotation")}:
        durs = [e["dur"] for e in xs if e["name"] == op_name and e.get("cat") in ("cpu_op", "user_annotation")]
        assert ops.loc[op_name, "count"] == len(durs)
        assert ops.loc[op_name, "total_us"] == pytest.approx(sum(durs), abs=1e-6)
        assert ops.loc[op_name, "mean_us"] == pytest.approx(sum(durs) / len(durs), abs=1e-6)
    # The step label's device time is all GPU work launched inside it: here, every activity —
    # plus, as torch counts it, the kernels of an op again for a profiler overhead event inside it.
    label = "matmul_add_compiled" if "compiled" in name else "matmul_add"
    gpu_total = sum(e["dur"] for e in xs if e.get("cat") in GPU_CATS)
    again = sum(_kernels_of(xs, op) for _, op in _overhead_in_ops(xs))
    assert ops.loc[label, "device_us"] == pytest.approx(gpu_total + again, abs=1e-6)
    assert ops.loc[label, "self_device_us"] == 0
    # aten::mm launched the GEMM kernels itself (its device time = the GEMM kernels + memsets).
    if "compiled" not in name:
        mm_ext = {e["args"]["External id"] for e in xs if e["name"] == "aten::mm"}
        mm_gpu = sum(e["dur"] for e in xs if e.get("cat") in GPU_CATS and e["args"].get("External id") in mm_ext)
        assert ops.loc["aten::mm", "self_device_us"] == pytest.approx(mm_gpu, abs=1e-6)
        mm_again = sum(_kernels_of(xs, op) for _, op in _overhead_in_ops(xs) if op["name"] == "aten::mm")
        assert ops.loc["aten::matmul", "device_us"] == pytest.approx(mm_gpu + mm_again, abs=1e-6)


def test_operator_summary_grouped_by_shape(bf16):
    _, _, analysis = bf16
    by_shape = analysis.operators_by_shape
    row = by_shape[by_shape["name"] == "aten::add"]
    assert list(row["input_dims"]) == ["[[4096, 4096], [4096], []]"]
    assert row["count"].iloc[0] == 10


# ---- kernels ---------------------------------------------------------------------------------


def test_kernel_summary_matches_brute_force(real):
    _, raw, _, analysis = real
    gpu = [e for e in _xs(raw) if e.get("cat") in GPU_CATS]
    table = analysis.kernels.set_index("name")
    assert set(table.index) == {e["name"] for e in gpu}
    total = sum(e["dur"] for e in gpu)
    for name in table.index:
        durs = [e["dur"] for e in gpu if e["name"] == name]
        assert table.loc[name, "count"] == len(durs)
        assert table.loc[name, "total_us"] == pytest.approx(sum(durs), abs=1e-6)
        assert table.loc[name, "min_us"] == min(durs)
        assert table.loc[name, "max_us"] == max(durs)
        assert table.loc[name, "share_pct"] == pytest.approx(100 * sum(durs) / total)
    assert list(analysis.kernels["total_us"]) == sorted(analysis.kernels["total_us"], reverse=True)


def test_kernel_launch_config_columns(bf16):
    raw, _, analysis = bf16
    nvjet = next(e for e in _xs(raw) if e["name"].startswith("nvjet"))
    row = analysis.kernels[analysis.kernels["name"] == nvjet["name"]].iloc[0]
    assert row["grid"] == str(nvjet["args"]["grid"])
    assert row["block"] == str(nvjet["args"]["block"])
    assert row["registers_per_thread"] == nvjet["args"]["registers per thread"]
    assert row["shared_memory_bytes"] == nvjet["args"]["shared memory"]


def test_kernel_mode_takes_the_most_common_value():
    events = []
    for i, grid in enumerate(["[1, 1, 1]", "[2, 1, 1]", "[2, 1, 1]"]):
        events += [launch(100 + 50 * i, 5, i + 1),
                   kernel("k", 110 + 50 * i, 5, i + 1)]
        events[-1]["args"]["grid"] = json.loads(grid)
    table = kernel_summary(build(events))
    assert table["grid"].iloc[0] == "[2, 1, 1]"


# ---- GPU utilization -------------------------------------------------------------------------


def test_busy_time_equals_naive_union(real):
    _, raw, _, analysis = real
    xs = _xs(raw)
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in xs if e.get("cat") in GPU_CATS]
    busy, merged = naive_union(gpu)
    util = analysis.utilization
    assert util.busy_us == pytest.approx(busy, abs=0.01)
    assert len(util.busy_intervals) == len(merged)
    span = max(e["ts"] + e["dur"] for e in xs) - min(e["ts"] for e in xs)
    assert util.trace_span_us == pytest.approx(span, abs=ABS)
    active = max(e for _, e in gpu) - min(s for s, _ in gpu)
    assert util.active_span_us == pytest.approx(active, abs=ABS)
    assert util.busy_pct == pytest.approx(100 * busy / span, abs=1e-3)
    assert util.active_busy_pct == pytest.approx(100 * busy / active, abs=1e-3)
    # Gaps are the spaces between merged intervals.
    expected_gaps = sorted(b[0] - a[1] for a, b in zip(merged, merged[1:]))
    assert sorted(util.gaps["dur_us"]) == pytest.approx(expected_gaps, abs=0.01)
    assert util.largest_gaps["dur_us"].iloc[0] == pytest.approx(max(expected_gaps), abs=0.01)


def test_overlapping_streams_count_once():
    # Two kernels overlapping by 10 µs on two streams, and one 20 µs later: busy = 40 + 5.
    events = [launch(10, 2, 1), launch(12, 2, 2), launch(14, 2, 3),
              kernel("a", 100, 20, 1), kernel("b", 110, 20, 2), kernel("c", 150, 5, 3)]
    events[4]["tid"] = 8
    events[4]["args"]["stream"] = 8
    util = gpu_utilization(build(events))
    assert util.busy_us == pytest.approx(35.0)
    assert util.activity_us == pytest.approx(45.0)
    assert list(util.gaps["dur_us"]) == pytest.approx([20.0])


def test_covered_us_clips_to_windows():
    starts, ends = np.array([0.0, 10.0, 30.0]), np.array([5.0, 20.0, 40.0])
    got = covered_us(starts, ends, [0, 3, 12, 25, 45], [50, 12, 35, 28, 60])
    assert list(got) == pytest.approx([25.0, 4.0, 13.0, 0.0, 0.0])


# ---- launches --------------------------------------------------------------------------------


def test_launch_delays_match_brute_force(real):
    _, raw, _, analysis = real
    xs = _xs(raw)
    launches = {e["args"]["correlation"]: e for e in xs
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    pairs = [(launches[e["args"]["correlation"]], e) for e in xs
             if e.get("cat") in GPU_CATS and e["args"].get("correlation") in launches]
    delays = [g["ts"] - c["ts"] for c, g in pairs]
    stats = analysis.launches
    assert stats.count == len(delays)
    assert stats.delay_median_us == pytest.approx(statistics.median(delays), abs=ABS)
    assert stats.delay_p90_us == pytest.approx(statistics.quantiles(delays, n=10, method="inclusive")[-1], abs=ABS)
    assert stats.delay_max_us == pytest.approx(max(delays), abs=ABS)
    calls = [c["dur"] for c, _ in pairs]
    assert stats.launch_total_us == pytest.approx(sum(calls), abs=1e-6)
    assert stats.launch_median_us == pytest.approx(statistics.median(calls), abs=1e-6)
    by_name = stats.by_name.set_index("gpu_name")
    for name in {g["name"] for _, g in pairs}:
        mine = [(g["ts"] - c["ts"], c["dur"]) for c, g in pairs if g["name"] == name]
        assert by_name.loc[name, "count"] == len(mine)
        assert by_name.loc[name, "delay_median_us"] == pytest.approx(statistics.median(d for d, _ in mine), abs=ABS)
        assert by_name.loc[name, "delay_max_us"] == pytest.approx(max(d for d, _ in mine), abs=ABS)
        assert by_name.loc[name, "launch_median_us"] == pytest.approx(statistics.median(c for _, c in mine))


def test_no_flows_gives_nan_delays():
    stats = launch_delays(build([op("aten::mm", 0, 10)]))
    assert stats.count == 0 and np.isnan(stats.delay_median_us)


# ---- steps -----------------------------------------------------------------------------------


def test_steps_from_the_repeated_annotation(real):
    name, raw, trace, analysis = real
    label = "matmul_add_compiled" if "compiled" in name else "matmul_add"
    xs = _xs(raw)
    labels = sorted((e for e in xs if e.get("cat") == "user_annotation" and e["name"] == label),
                    key=lambda e: e["ts"])
    steps = analysis.steps
    assert len(steps) == len(labels) == 10
    assert set(steps["source"]) == {"annotation"}
    assert list(steps["cpu_us"]) == pytest.approx([e["dur"] for e in labels], abs=1e-6)
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in xs if e.get("cat") in GPU_CATS]
    _, merged = naive_union(gpu)
    cpu_thread = [e for e in xs if e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver")]
    for row, e in zip(steps.itertuples(), labels):
        s, end = e["ts"], e["ts"] + e["dur"]
        busy = sum(max(0.0, min(b, end) - max(a, s)) for a, b in merged)
        assert row.gpu_busy_us == pytest.approx(busy, abs=0.01)
        assert row.gpu_idle_us == pytest.approx(e["dur"] - busy, abs=0.01)
        first_child = min(c["ts"] for c in cpu_thread if s <= c["ts"] <= end)
        assert row.first_child_gap_us == pytest.approx(first_child - s, abs=ABS)
    # The cold first step of the fp32 trace: 3597 µs against ~120 µs later (see the brief).
    if name == "matmul_add_1024_fp32":
        assert steps["cpu_us"].iloc[0] == pytest.approx(3597.219, abs=1e-3)


def test_profiler_steps_win_over_annotations():
    events = []
    for i in range(3):
        t = 100 + 200 * i
        events += [op(f"ProfilerStep#{i + 5}", t, 150, cat="user_annotation"),
                   annotation("inner", t + 10, 100), annotation("inner", t + 20, 10)]
    steps = step_breakdown(build(events))
    assert list(steps["name"]) == ["ProfilerStep#5", "ProfilerStep#6", "ProfilerStep#7"]
    assert set(steps["source"]) == {"ProfilerStep"}
    assert list(steps["cpu_us"]) == [150, 150, 150]
    assert list(steps["first_child_gap_us"]) == [10, 10, 10]


def test_no_repeated_annotation_means_no_steps():
    steps = step_breakdown(build([annotation("once", 0, 10), op("aten::mm", 1, 5)]))
    assert steps.empty and "gpu_busy_us" in steps.columns


def test_launched_gpu_time_per_step():
    trace = matmul_add_steps(3, gemm_us=40.0, add_us=5.0)
    steps = step_breakdown(trace)
    assert list(steps["launched_gpu_us"]) == [45.0, 45.0, 45.0]
    assert list(steps["launched_count"]) == [2, 2, 2]


# ---- GEMM efficiency -------------------------------------------------------------------------


def test_gemm_efficiency_4096_bf16_against_independent_tflops(bf16):
    raw, _, analysis = bf16
    gemm_kernels = sorted((e for e in _xs(raw) if e.get("cat") == "kernel" and e["name"].startswith("nvjet")),
                          key=lambda e: e["ts"])
    gemm = analysis.gemm
    assert len(gemm) == len(gemm_kernels) == 10
    peak = lookup_peak(H200_PROPS["name"])
    assert peak is not None and analysis.peak == peak
    for row, e in zip(gemm.itertuples(), gemm_kernels):
        tflops = 2 * 4096**3 / (e["dur"] * 1e-6) / 1e12
        assert (row.m, row.k, row.n, row.batch) == (4096, 4096, 4096, 1)
        assert row.op == "aten::mm" and row.dtype == "bfloat16" and row.shape_source == "trace"
        assert row.flops == 2 * 4096**3
        assert row.tflops == pytest.approx(tflops, rel=1e-9)
        assert row.pct_of_peak == pytest.approx(100 * tflops / peak.tflops["bfloat16"], rel=1e-9)
        # Intensity of a square GEMM: 2n³ / (3n² · 2 bytes) = n/3 FLOP/byte, far above the ridge.
        assert row.intensity_flops_per_byte == pytest.approx(4096 / 3)
        assert row.bound == "compute-bound"
    assert 60 < gemm["pct_of_peak"].median() < 95


def test_gemm_shape_from_config_when_not_recorded():
    trace = load_trace(DATA / "matmul_add_4096_bf16_compiled.json.gz")
    unknown = gemm_efficiency(trace)
    assert len(unknown) == 10
    assert set(unknown["shape_source"]) == {"unknown"} and unknown["tflops"].isna().all()
    assert set(unknown["op"]) == {"aten::addmm"} and unknown["kernel"].str.contains("bias").all()
    config = RunConfig(m=4096, k=4096, n=4096, dtype="bfloat16", compile=True)
    known = gemm_efficiency(trace, config=config)
    assert set(known["shape_source"]) == {"config"}
    assert (known["flops"] == 2 * 4096**3).all()
    assert set(known["dtype"]) == {"bfloat16"}
    # addmm also reads the bias vector: (3·4096² + 4096) elements × 2 bytes.
    assert (known["bytes_moved"] == (3 * 4096**2 + 4096) * 2).all()


def test_gemm_dtype_float_vs_tf32_kernel_name():
    fp32 = dict(input_type=("float", "float"), dims=((512, 256), (256, 128)))
    plain = gemm_efficiency(matmul_add_steps(3, gemm_name="sm80_xmma_gemm_f32f32_ffma", **fp32))
    tf32 = gemm_efficiency(matmul_add_steps(3, gemm_name="cutlass_tensorop_tf32_s1688gemm", **fp32))
    assert set(plain["dtype"]) == {"float32"} and set(tf32["dtype"]) == {"tf32"}
    assert (plain["m"] == 512).all() and (plain["k"] == 256).all() and (plain["n"] == 128).all()
    peak = lookup_peak("NVIDIA H200")
    assert plain["peak_tflops"].iloc[0] == peak.tflops["float32"]
    assert tf32["peak_tflops"].iloc[0] == peak.tflops["tf32"]


def test_gemm_memory_bound_with_a_thin_shape():
    # 4096×16 @ 16×4096 bf16: 2·4096²·16 FLOPs over (2·4096·16 + 4096²)·2 bytes ≈ 15.5 FLOP/byte.
    trace = matmul_add_steps(3, dims=((4096, 16), (16, 4096)))
    gemm = gemm_efficiency(trace)
    assert gemm["intensity_flops_per_byte"].iloc[0] == pytest.approx(
        2 * 4096 * 16 * 4096 / ((2 * 4096 * 16 + 4096 * 4096) * 2))
    assert set(gemm["bound"]) == {"memory-bound"}


def test_gemm_peak_passed_in_wins():
    fake = DevicePeak("Fake", {"bfloat16": 100.0}, 1000.0, "test")
    gemm = gemm_efficiency(matmul_add_steps(3), peak=fake)
    assert (gemm["peak_tflops"] == 100.0).all()
    assert gemm["ridge_flops_per_byte"].iloc[0] == pytest.approx(100e12 / 1e12)


# ---- GEMM figures from GEMM kernels only -----------------------------------------------------

CAST_KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda>"
BF16_GEMM_KERNEL = "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NTT"
BIG = dict(dims=((4096, 4096), (4096, 4096)))
BIG_FLOPS = 2 * 4096**3


def _autocast_linear_steps(n_steps: int = 3):
    """nn.Linear under bf16 autocast as torch records it: an outer aten::linear with the float32
    inputs, the casts (aten::to → a copy kernel) inside it, then the inner aten::linear →
    aten::addmm on bfloat16 inputs, which launches the GEMM kernel."""
    f32 = {"Input Dims": [[4096, 1024], [1024, 1024], [1024]], "Input type": ["float"] * 3}
    bf16 = {"Input Dims": [[1024], [4096, 1024], [1024, 1024]], "Input type": ["c10::BFloat16"] * 3}
    events, t = [], 1000.0
    for i in range(n_steps):
        corr = 2 * i + 1
        events += [op("aten::linear", t, 200, **f32), op("aten::to", t + 5, 30), op("aten::_to_copy", t + 6, 28),
                   op("aten::copy_", t + 8, 24), launch(t + 10, 5, corr), kernel(CAST_KERNEL, t + 20, 2.5, corr),
                   op("aten::linear", t + 50, 120, **{**bf16, "Input Dims": [[4096, 1024], [1024, 1024], [1024]]}),
                   op("aten::addmm", t + 55, 100, **bf16), launch(t + 60, 10, corr + 1),
                   kernel(BF16_GEMM_KERNEL, t + 80, 30, corr + 1)]
        t += 300
    return build(events, device_properties=[H200_PROPS])


def test_autocast_gemm_rows_name_the_gemm_kernel_not_the_cast():
    # Before: the outer linear paired its float32 shape with the 2.5 µs cast kernel, "GEMM
    # 4096×1024×1024 float32: 3436 TFLOP/s, 5128 % of peak — vectorized_elementwise_kernel".
    figures = gemm_figures(_autocast_linear_steps(), peak=lookup_peak("NVIDIA H200"))
    gemm = figures.rows
    assert len(gemm) == 3 and figures.above_peak == 0
    assert set(gemm["kernel"]) == {BF16_GEMM_KERNEL} and set(gemm["op"]) == {"aten::addmm"}
    assert set(gemm["dtype"]) == {"bfloat16"}
    assert list(gemm["tflops"]) == pytest.approx([2 * 4096 * 1024 * 1024 / 30e-6 / 1e12] * 3)
    assert (gemm["tflops"] <= gemm["peak_tflops"]).all()


def test_tf32_tensor_op_kernel_is_tf32():
    # A CUTLASS s1688gemm on float32 inputs runs TF32 tensor cores: judged by the TF32 peak (it
    # was called float32 and shown at 512 % of the FP32 peak).
    peak = lookup_peak("NVIDIA H200")
    trace = matmul_add_steps(3, gemm_name="cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", gemm_us=400,
                             input_type=("float", "float"), **BIG)
    gemm = gemm_efficiency(trace)
    assert set(gemm["dtype"]) == {"tf32"} and (gemm["peak_tflops"] == peak.tflops["tf32"]).all()
    assert gemm["pct_of_peak"].iloc[0] == pytest.approx(100 * BIG_FLOPS / 400e-6 / 1e12 / peak.tflops["tf32"])


def test_figure_above_peak_is_dropped_and_noted():
    # 4096³ bf16 in 40 µs would be 3,436 TFLOP/s on a 989 TFLOP/s GPU: not a measurement.
    trace = matmul_add_steps(3, gemm_us=40, **BIG)
    figures = gemm_figures(trace)
    assert figures.rows.empty and figures.above_peak == 3
    assert figures.above_peak_max_pct == pytest.approx(100 * BIG_FLOPS / 40e-6 / 1e12 / 989.0, rel=1e-3)
    analysis = analyze(trace)
    assert analysis.gemm.empty
    (note,) = analysis.gemm_notes
    assert note.startswith(ABOVE_PEAK_NOTE) and "3 GEMM instance(s)" in note
    # The same kernel at a possible speed stays, and leaves no note.
    ok = analyze(matmul_add_steps(3, gemm_us=400, **BIG))
    assert len(ok.gemm) == 3 and not ok.gemm_notes
    # Without a known peak nothing can be judged: the rows stay, without a % of peak.
    mystery = [{**H200_PROPS, "name": "Mystery"}]
    unknown = gemm_figures(matmul_add_steps(3, gemm_us=40, device_properties=mystery, **BIG))
    assert len(unknown.rows) == 3 and unknown.rows["pct_of_peak"].isna().all() and not unknown.notes


def test_float_inputs_run_as_tf32_when_the_run_enabled_it():
    # An nvjet kernel does not name its dtype: float32 inputs are FP32, unless the run's config
    # enabled TF32. As FP32 the figure exceeds the FP32 peak, so it is dropped rather than shown.
    trace = matmul_add_steps(3, gemm_name=BF16_GEMM_KERNEL, gemm_us=400, input_type=("float", "float"), **BIG)
    as_fp32 = gemm_figures(trace)
    assert as_fp32.rows.empty and as_fp32.above_peak == 3
    config = RunConfig(m=4096, k=4096, n=4096, dtype="tf32")
    as_tf32 = gemm_efficiency(trace, config=config)
    assert set(as_tf32["dtype"]) == {"tf32"} and (as_tf32["tflops"] < as_tf32["peak_tflops"]).all()


def test_gemm_flops_from_the_trace_when_the_shape_is_unknown():
    events = []
    for i in range(3):
        t = 1000.0 + 200 * i
        events += [op("aten::mm", t, 40, **{"Input type": ["c10::BFloat16"] * 2}), launch(t + 20, 10, i + 1),
                   kernel(BF16_GEMM_KERNEL, t + 35, 50, i + 1)]
    trace = build(events, device_properties=[H200_PROPS])
    assert gemm_efficiency(trace)["flops"].isna().all()
    # profile(with_flops=True) writes a "flops" arg on the op; a trace model that keeps it as a column
    # gives the FLOPs when Input Dims are missing.
    flops = np.where(trace.events["name"].astype(str) == "aten::mm", 2.0 * 512**3, 0.0)
    gemm = gemm_efficiency(replace(trace, events=trace.events.assign(flops=flops)))
    assert set(gemm["shape_source"]) == {"unknown"} and (gemm["flops"] == 2 * 512**3).all()
    assert list(gemm["tflops"]) == pytest.approx([2 * 512**3 / 50e-6 / 1e12] * 3)


def test_attention_kernels_are_not_gemms_even_with_a_config():
    flash = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t>>"
    events = [op("aten::_flash_attention_forward", 1000, 100), launch(1020, 10, 1), kernel(flash, 1040, 50, 1)]
    trace = build(events, device_properties=[H200_PROPS])
    assert gemm_efficiency(trace, config=RunConfig(workload="attention_flash")).empty


@pytest.mark.parametrize("name, is_gemm, dtype", [
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", True, None),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_NNT", True, None),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
     True, "tf32"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma_aligna4", True, "float32"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32", True, "bfloat16"),
    ("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", True, "tf32"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_f16_128x64_64x3_tn_align8>", True, "float16"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>", True, "float32"),
    ("volta_h884gemm_64x64_ldg8_nn", True, "float16"),
    ("ampere_sgemm_128x64_nn", True, "float32"),
    ("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true>", True, None),
    ("triton_tem_fused_addmm_0", True, None),
    ("triton_tem_fused_add_mm_relu_0", True, None),  # max-autotune's template (corpus: compiled_gemm)
    ("triton_tem_fused__scaled_mm_0", True, None),
    ("triton_tem_fused_flex_attention_0", False, None),  # flex attention's template (corpus: flex_attention)
    ("triton_poi_fused_mm_0", False, None),
    # FP8 (torch._scaled_mm on the H200) and int8 (torch._int_mm): the corpus's fp8_scaled_mm, int8_int_mm
    ("nvjet_sm90_qqtst_144x128_128x6_1x2_h_bz_coopA_algo2_TNN", True, "float8"),
    ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1", True, "float8"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_i161616gemm_s8_forwardCompat_128x128_32x2_nn_align4>"
     "(cutlass_80_wmma_tensorop_i161616gemm_s8_forwardCompat_128x128_32x2_nn_align4::Params)", True, "int8"),
    ("sm80_xmma_gemm_i8i8_i32i32_i32_tn_n_tilesize128x128x64_stage3_warpsize2x2x1_tensor16x8x32", True, "int8"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t>)",
     False, None),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, cutlass::bfloat16_t>>", False, None),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_kernel0_0", False, None),
    ("sm80_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw", False, None),
    ("void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>", False, None),
    (CAST_KERNEL, False, None),
    ("void at::native::elementwise_kernel<128, 4, at::native::CUDAFunctor_add<c10::BFloat16>>", False, None),
])
def test_gemm_kernel_recogniser(name, is_gemm, dtype):
    assert is_gemm_kernel(name) is is_gemm
    if is_gemm:
        assert gemm_kernel_dtype(name) == dtype


@pytest.mark.parametrize("op_name, dims, expected", [
    ("aten::mm", [[8, 4], [4, 2]], (1, 8, 4, 2, 0)),
    ("aten::addmm", [[2], [8, 4], [4, 2]], (1, 8, 4, 2, 2)),
    ("aten::bmm", [[3, 8, 4], [3, 4, 2]], (3, 8, 4, 2, 0)),
    ("aten::linear", [[5, 8, 4], [2, 4], [2]], (1, 40, 4, 2, 2)),
    ("aten::matmul", [[3, 8, 4], [4, 2]], (3, 8, 4, 2, 0)),
    ("aten::mm", [[8, 4]], None),
    ("aten::_scaled_mm", [[8, 4], [4, 2], [], [], [], [], [], []], (1, 8, 4, 2, 0)),
    ("aten::_scaled_mm", [[8, 4], [4, 2], [], [], [2], [], [], []], (1, 8, 4, 2, 2)),
    ("aten::_int_mm", [[32, 16], [16, 8]], (1, 32, 16, 8, 0)),
    # An Inductor template's arguments: A, B, the epilogue's bias, the output (corpus: compiled_gemm).
    ("triton_tem_fused_add_mm_relu_0", [[8, 4], [4, 2], [2], [8, 2], [], [], []], (1, 8, 4, 2, 0)),
    ("triton_tem_fused_bmm_0", [[3, 8, 4], [3, 4, 2], [3, 8, 2]], (3, 8, 4, 2, 0)),
    # An entry point the table does not list: its first two matrix operands.
    ("aten::_some_future_mm", [[], [8, 4], [4, 2]], (1, 8, 4, 2, 0)),
    ("aten::_some_future_mm", [[8, 4], [2, 4]], None),
])
def test_gemm_shapes_per_op(op_name, dims, expected):
    assert gemm_shape(op_name, dims) == expected


# ---- verdict ---------------------------------------------------------------------------------


def test_verdicts_on_real_traces(real):
    name, raw, trace, analysis = real
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in _xs(raw) if e.get("cat") in GPU_CATS]
    busy, _ = naive_union(gpu)
    busy_pct = 100 * busy / (max(e for _, e in gpu) - min(s for s, _ in gpu))
    assert analysis.utilization.active_busy_pct == pytest.approx(busy_pct, abs=1e-3)
    gpu_bound = {"matmul_add_4096_bf16": True, "matmul_add_1024_fp32": False, "matmul_add_4096_bf16_compiled": False}
    assert (busy_pct >= GPU_BOUND_BUSY_PCT) == gpu_bound[name]
    # The judged verdict: on the GPU-bound run the kernels against their roof are judged; on the
    # others no finding says the GPU work is at its roof.
    rules = [f.rule for f in judge_trace(trace, analysis).findings]
    assert ("at_roof" in rules or "below_roof" in rules) if gpu_bound[name] else "at_roof" not in rules


def test_verdict_without_gpu():
    cpu_only = build([op("aten::mm", 0, 100), op("aten::add", 120, 10)])
    # named among the findings; a material host cause on the CPU (here 20 µs unrecorded) may still lead
    assert "cpu_only" in [f.rule for f in judge_trace(cpu_only, analyze(cpu_only)).findings]
    launches_only = build([op("aten::mm", 0, 100), launch(10, 5, 1)], device_properties=[H200_PROPS])
    judged = judge_trace(launches_only, analyze(launches_only))
    assert judged.named.rule == "no_gpu_events" and "1 launch calls" in judged.verdict


def test_cpu_only_trace_analyzes_to_empty_tables():
    analysis = analyze(build([annotation("step", 0, 100), op("aten::mm", 10, 50),
                                annotation("step", 200, 100), op("aten::mm", 210, 50)]))
    assert analysis.kernels.empty and analysis.gemm.empty
    assert analysis.utilization.busy_us == 0 and analysis.utilization.gaps.empty
    assert len(analysis.steps) == 2 and (analysis.steps["gpu_busy_us"] == 0).all()
    assert analysis.operators.set_index("name").loc["step", "self_us"] == 100


# ---- golden ----------------------------------------------------------------------------------


def test_golden_aggregates_4096_bf16(bf16):
    _, trace, analysis = bf16
    golden = json.loads((DATA / "golden_analysis_4096_bf16.json").read_text())
    assert len(trace.events) == golden["complete_events"]
    util = analysis.utilization
    assert util.trace_span_us == pytest.approx(golden["trace_span_us"], abs=0.01)
    assert util.busy_us == pytest.approx(golden["gpu_busy_us"], abs=0.01)
    assert util.active_span_us == pytest.approx(golden["gpu_active_span_us"], abs=0.01)
    kernels = analysis.kernels.set_index("name")
    for name, facts in golden["gpu_activity"].items():
        assert kernels.loc[name, "count"] == facts["count"]
        assert kernels.loc[name, "total_us"] == pytest.approx(facts["total_us"], abs=1e-6)
    kernel_total = kernels.loc[kernels["cat"] == "kernel", "total_us"].sum()
    assert kernel_total == pytest.approx(golden["kernel_time_us"], abs=1e-6)
    assert analysis.launches.count == golden["launch_delay_count"]
    assert analysis.launches.delay_median_us == pytest.approx(golden["launch_delay_median_us"], abs=0.01)
    assert list(analysis.steps["cpu_us"]) == pytest.approx(golden["steps"]["cpu_us"], abs=1e-6)
    assert list(analysis.gemm["tflops"]) == pytest.approx(golden["gemm"]["tflops"], rel=1e-9)


def test_innermost_open_matches_brute_force():
    from lab.analysis.intervals import innermost_open

    rng = np.random.default_rng(7)
    for _ in range(50):
        starts = np.sort(rng.integers(0, 10_000, 2_000))
        ends = starts + rng.integers(0, 400, len(starts))
        for t in rng.integers(-10, 10_500, 20):
            want = max((i for i in range(len(starts)) if starts[i] <= t <= ends[i]), default=-1)
            assert innermost_open(starts, ends, int(t), chunk=64) == want

"""The roofline: run points from real traces (H200 recordings, a CPU run) against the raw JSON, the
device's roof (datasheet or measured at warm-up), the regions, the sweep's shapes and the chart."""

from __future__ import annotations

import gzip
import json
import math
import statistics

import numpy as np
import pytest

from lab.analysis import analyze
from lab.analysis.gemm.kinds import is_gemm_kernel
from lab.core.config import RunConfig
from lab.core.devices import PEAKS, DeviceInfo, DeviceRates
from lab.core.workloads import WORKLOADS
from lab.run.runner import run_profile
from lab.samples import list_samples
from lab.teach.roofline import (
    ALONE_SWEEP,
    OVERHEAD_FRACTION,
    SWEEP_SHAPES,
    Roofline,
    RunSummary,
    classify,
    device_roofline,
    peak_roofline,
    roof_caption,
    roof_over,
    roofline_data,
    run_summary,
    seat_shape,
    sweep_config,
)
from lab.trace.load import load_trace
from lab.units import fmt_tflops
from lab.views import summarize
from lab.views.roofline import log_ticks, rate_unit, roofline_chart


def _sample(name: str):
    return next(s for s in list_samples() if s.file == name)


@pytest.mark.parametrize("file, m", [("matmul_add_4096x4096x4096_bfloat16_cuda.json.gz", 4096),
                                     ("matmul_add_64x64x64_bfloat16_cuda.json.gz", 64)])
def test_a_gpu_run_point_is_its_gemm_kernel_rate(file, m):
    sample = _sample(file)
    data = sample.read_bytes()
    config = RunConfig(m=m, k=m, n=m, dtype="bfloat16", device="cpu")
    point = run_summary(config, analyze(load_trace(data)), "NVIDIA H200")
    raw = [e for e in json.loads(gzip.decompress(data))["traceEvents"]
           if e.get("ph") == "X" and e.get("cat") == "kernel" and is_gemm_kernel(e["name"])]
    want_tflops = statistics.median(2 * m ** 3 / e["dur"] / 1e6 for e in raw)
    assert point.tflops == pytest.approx(want_tflops, rel=1e-6)
    assert point.intensity_flops_per_byte == pytest.approx(2 * m ** 3 / (2 * 3 * m * m), rel=1e-6)  # aten::mm: no bias
    roof = peak_roofline(PEAKS["H200 SXM"], "bfloat16")
    want = ("latency-bound" if point.tflops < OVERHEAD_FRACTION * min(989.5, point.intensity_flops_per_byte * 4.8)
            else "compute-bound")
    assert classify(point, roof) == want
    assert want == ("latency-bound" if m == 64 else "compute-bound")  # what the lesson teaches


def test_a_cpu_run_point_is_the_summary_step_throughput(warm_cpu, host_settings):
    """A CPU run's point is its cost over the step's time without the profiler: the number the
    Summary's "Step throughput" card shows (not the profiled steps, another
    number for the same run); untimed, the median profiled ProfilerStep from the raw JSON."""
    config = sweep_config((128, 128, 128), "cpu")
    result = run_profile(config, settings=host_settings)
    analysis = analyze(load_trace(result.trace_gz), config=config)
    point = run_summary(config, analysis, "cpu", step_tflops=result.step_tflops)
    want = 2 * 128 ** 3 / statistics.median(result.timing.unprofiled_us) / 1e6
    assert point.tflops == pytest.approx(want, rel=1e-9)
    card = next(m for m in summarize(load_trace(result.trace_gz), analysis, run=result).metrics
                if m.label == "Step throughput")
    assert card.value == fmt_tflops(point.tflops)
    steps = [e["dur"] for e in json.loads(gzip.decompress(result.trace_gz))["traceEvents"]
             if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert len(steps) == config.active
    untimed = run_summary(config, analysis, "cpu")
    assert untimed.tflops == pytest.approx(2 * 128 ** 3 / statistics.median(steps) / 1e6, rel=1e-6)
    elements = 128 * 128 * 2 + 128 + 2 * 128 * 128
    assert point.intensity_flops_per_byte == pytest.approx(2 * 128 ** 3 / (4 * elements))


def test_the_roof_is_the_datasheet_on_a_listed_gpu_else_measured_at_warm_up():
    gpu = DeviceInfo(kind="cuda", name="NVIDIA H200", peak=PEAKS["H200 SXM"])
    roof = device_roofline(gpu, "bfloat16")
    assert (roof.peak_tflops, roof.bandwidth_gbs) == (989.5, 4800.0) and roof.source.startswith("datasheet")
    assert roof.ridge_flops_per_byte == pytest.approx(989.5e12 / 4800e9)
    rates = DeviceRates(kind="cpu", matmul_gflops=(("float32", 80.0),), copy_gbs=12.0, fill_gbs=2.0,
                        run_overhead_s=0.5)
    cpu = DeviceInfo(kind="cpu", name="CPU", rates=(rates,))
    roof = device_roofline(cpu, "float32")
    assert (roof.peak_tflops, roof.bandwidth_gbs) == (0.08, 12.0) and roof.source.startswith("measured")
    assert device_roofline(cpu, "bfloat16") is None  # not measured: no roof rather than a guess
    assert device_roofline(DeviceInfo(kind="cpu", name="CPU"), "float32") is None
    assert float(roof.roof_tflops(1.0)) == pytest.approx(0.012) and float(roof.roof_tflops(1e4)) == 0.08


def test_seats_get_different_shapes_and_the_sweep_spans_the_ridge():
    for kind in ("cuda", "cpu"):
        shapes = SWEEP_SHAPES[kind]
        assert [seat_shape(s, kind) for s in range(1, len(shapes) + 1)] == list(shapes)
        assert len(set(shapes)) == len(shapes)
        assert seat_shape(len(shapes) + 1, kind) == shapes[0]
        assert set(ALONE_SWEEP[kind]) <= set(shapes)
    roof = peak_roofline(PEAKS["H200 SXM"], "bfloat16")
    intensities = [2 * m * k * n / (2 * (m * k + k * n + m * n)) for m, k, n in SWEEP_SHAPES["cuda"]]
    assert min(intensities) < roof.ridge_flops_per_byte < max(intensities)


def test_chart_data_and_chart():
    roof = peak_roofline(PEAKS["H200 SXM"], "bfloat16")
    points = [RunSummary(workload="matmul_add", m=m, k=m, n=m, dtype="bfloat16", device="H200", tflops=t,
                         intensity_flops_per_byte=i, display_name=f"seat {j}")
              for j, (m, t, i) in enumerate(((64, 0.01, 21.0), (8192, 900.0, 2730.0)))]
    data = roofline_data(roof, points)
    line = data["roof"]
    assert np.allclose(line["roof_tflops"], np.minimum(989.5, line["intensity_flops_per_byte"] * 4.8))
    assert roof.ridge_flops_per_byte in set(line["intensity_flops_per_byte"])
    assert list(data["points"]["region"]) == ["latency-bound", "compute-bound"]
    lo, hi = data["domain"]["x"]
    assert lo <= 21.0 and hi >= 2730.0
    spec = roofline_chart(data, "room").to_dict()
    assert spec["layer"][0]["encoding"]["x"]["scale"]["type"] == "log"
    # The same shape run by many seats: one label, over its fastest point.
    crowd = roofline_data(roof, [RunSummary(workload="matmul_add", m=64, k=64, n=64, dtype="bfloat16", device="H200",
                                            tflops=0.01 * (j + 1), intensity_flops_per_byte=21.0,
                                            display_name=f"seat {j}") for j in range(5)])
    spec = roofline_chart(crowd, "room").to_dict()
    texts = [layer for layer in spec["layer"] if layer["mark"] in ("text", {"type": "text"}) or
             (isinstance(layer["mark"], dict) and layer["mark"].get("type") == "text")]
    shape_labels = [layer for layer in texts if layer["encoding"]["text"]["field"] == "shape"]
    (label_layer,) = shape_labels
    rows = spec["datasets"][label_layer["data"]["name"]]
    assert len(rows) == 1 and rows[0]["tflops"] == max(0.01 * (j + 1) for j in range(5))


def _cpu_points(rates_tflops, shapes=((32, 32, 32), (128, 128, 128), (512, 512, 512), (2048, 2048, 16))):
    """Sweep points with the CPU sweep's own intensities (the workload's FLOPs over its bytes)."""
    out = []
    for (m, k, n), t in zip(shapes, rates_tflops):
        config = sweep_config((m, k, n), "cpu")
        work = WORKLOADS[config.workload]
        out.append(RunSummary(workload=config.workload, m=m, k=k, n=n, dtype="float32", device="CPU", tflops=t,
                              intensity_flops_per_byte=work.flops(config) / work.estimate_bytes(config)))
    return out


def _roof_at(line, intensity: float) -> float:
    """The drawn polyline's value at ``intensity`` (log–log interpolation, as the chart draws it)."""
    x = np.log10(line["intensity_flops_per_byte"].to_numpy())
    return float(10 ** np.interp(np.log10(intensity), x, np.log10(line["roof_tflops"].to_numpy())))


def test_a_roof_measured_below_the_runs_is_raised_to_the_best_run_and_says_so():
    """On a busy host the roof measured at warm-up can sit below the runs' own rates (points
    above the roof). The roof drawn is never below a run it is drawn with: its peak is the best
    run's rate, its bandwidth the fastest rate per byte, and each raise is said with its figure."""
    rates = DeviceRates(kind="cpu", matmul_gflops=(("float32", 40.0),), copy_gbs=12.0, fill_gbs=2.0,
                        run_overhead_s=0.5)
    measured = device_roofline(DeviceInfo(kind="cpu", name="CPU", rates=(rates,)), "float32")
    points = _cpu_points([0.003, 0.02, 0.083, 0.03])  # 512³ at 83 GFLOP/s over a 40 GFLOP/s roof
    shown = roof_over(measured, points)
    best = max(points, key=lambda p: p.tflops)
    assert shown.peak_tflops == best.tflops == 0.083
    need_gbs = max(p.tflops * 1e3 / p.intensity_flops_per_byte for p in points)
    assert shown.bandwidth_gbs == max(12.0, need_gbs)
    assert shown.raised[0] == "peak raised to the best run measured: 512×512×512, 83.0 GFLOP/s"
    assert len(shown.raised) == (2 if need_gbs > 12.0 else 1)
    assert roof_over(shown, points) == shown  # raised once: the chart and the caption say one figure
    data = roofline_data(measured, points)  # the data draws the raised roof, whatever it is given
    for p in points:
        assert _roof_at(data["roof"], p.intensity_flops_per_byte) >= p.tflops * (1 - 1e-9), p
    assert float(data["roof"]["roof_tflops"].max()) == pytest.approx(0.083)
    # A bandwidth measured below a memory-side run: raised to that run's rate per byte.
    slow_copy = Roofline(device="CPU", dtype="float32", peak_tflops=1.0, bandwidth_gbs=0.1, source="measured")
    raised = roof_over(slow_copy, points)
    steepest = max(points, key=lambda p: p.tflops / p.intensity_flops_per_byte)
    assert raised.peak_tflops == 1.0 and raised.bandwidth_gbs == pytest.approx(
        steepest.tflops * 1e3 / steepest.intensity_flops_per_byte)
    assert raised.raised == (f"bandwidth raised to the fastest per byte: {steepest.shape_text}, "
                             f"{raised.bandwidth_gbs:,.1f} GB/s",)
    # A roof above every run (the datasheet's, a quiet host's) is drawn as it is, saying nothing.
    h200 = peak_roofline(PEAKS["H200 SXM"], "bfloat16")
    assert roof_over(h200, points) == h200 and roof_over(measured, []) == measured
    # The caption names the roof drawn and, only when raised, what the warm-up measured.
    assert roof_caption(h200, h200).startswith("Roof: ") and "It measured" not in roof_caption(h200, h200)
    said = roof_caption(measured, shown)
    assert said.startswith("Roof: 83.0 GFLOP/s float32") and "It measured 40.0 GFLOP/s and 12.0 GB/s there" in said
    assert all(line in said for line in shown.raised)


def test_the_roofline_axis_reads_in_gflops_on_a_cpu_with_ticks_at_powers_of_ten():
    """A CPU roofline in TFLOP/s would label its log axis "0.000001", "0.0003", …: the rates
    are now in the unit the roof reaches 1 in, ticked at powers of ten (1-2-5 over a short span)."""
    cpu = Roofline(device="CPU", dtype="float32", peak_tflops=0.09, bandwidth_gbs=41.0, source="measured")
    points = _cpu_points([0.003, 0.02, 0.06, 0.03])
    data = roofline_data(cpu, points)
    spec = roofline_chart(data, "your runs", notes=("peak raised to …",)).to_dict()
    (layer,) = [ly for ly in spec["layer"] if ly["mark"] in ("circle", {"type": "circle"})
                or (isinstance(ly["mark"], dict) and ly["mark"].get("type") == "circle")]
    y = layer["encoding"]["y"]
    assert y["title"] == "achieved GFLOP/s" and y["field"] == "rate"
    rows = spec["datasets"][layer["data"]["name"]]
    assert [r["rate"] for r in rows] == pytest.approx([p.tflops * 1e3 for p in points])
    lo, hi = y["scale"]["domain"]
    assert (lo, hi) == pytest.approx((float(data["domain"]["y"].min()) * 1e3, float(data["domain"]["y"].max()) * 1e3))
    ticks = y["axis"]["values"]
    assert ticks and all(lo <= t <= hi for t in ticks)
    assert all(math.log10(t) == pytest.approx(round(math.log10(t))) for t in ticks), ticks  # 0.1, 1, 10, 100
    assert y["axis"]["format"] == ",~g" and min(ticks) >= 0.01  # "0.1", never "0.000001"
    assert spec["title"]["subtitle"] == ["peak raised to …"]
    # A GPU's roof in TFLOP/s; a short span is ticked at 1-2-5.
    assert rate_unit(989.5) == (1.0, "TFLOP/s") and rate_unit(0.09) == (1e3, "GFLOP/s")
    assert rate_unit(5e-5) == (1e6, "MFLOP/s")
    assert log_ticks(0.3, 40.0) == [0.5, 1.0, 2.0, 5.0, 10.0, 20.0]
    assert log_ticks(0.01, 1000.0) == [0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]

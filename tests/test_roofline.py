"""The roofline: run points from real traces (H200 recordings, a CPU run) against the raw JSON, the
device's roof (datasheet or measured at warm-up), the regions, the sweep's shapes and the chart."""

from __future__ import annotations

import gzip
import json
import statistics

import numpy as np
import pytest

from lab.analysis import analyze
from lab.analysis.gemm.kinds import is_gemm_kernel
from lab.core.config import RunConfig
from lab.core.devices import PEAKS, DeviceInfo, DeviceRates
from lab.run.runner import run_profile
from lab.samples import list_samples
from lab.teach.roofline import (
    ALONE_SWEEP,
    OVERHEAD_FRACTION,
    SWEEP_SHAPES,
    RunSummary,
    classify,
    device_roofline,
    peak_roofline,
    roofline_data,
    run_summary,
    seat_shape,
    sweep_config,
)
from lab.trace.load import load_trace
from lab.views.roofline import roofline_chart


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


def test_a_cpu_run_point_is_the_workload_cost_over_the_median_step(warm_cpu, host_settings):
    config = sweep_config((128, 128, 128), "cpu")
    result = run_profile(config, settings=host_settings)
    point = run_summary(config, analyze(load_trace(result.trace_gz), config=config), "cpu")
    steps = [e["dur"] for e in json.loads(gzip.decompress(result.trace_gz))["traceEvents"]
             if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert len(steps) == config.active
    assert point.tflops == pytest.approx(2 * 128 ** 3 / statistics.median(steps) / 1e6, rel=1e-6)
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

"""The roofline a room builds: each run's arithmetic intensity and achieved TFLOP/s, over the device's roof.

A run's point: on a GPU trace, the GEMM kernel's figures (``lab.analysis.gemm.analyze``: 2·M·K·N FLOPs
over the kernel's time, inputs read once and the output written once); on a CPU trace (no
kernels), the workload's own cost (``lab.core.workloads``: its FLOPs and bytes per step) over the
step's median time without the profiler (the Summary's "Step throughput"). The roof: peak compute
for the dtype and memory bandwidth — the datasheet table of ``lab.core.devices`` for a listed GPU,
else what the worker measured at warm-up (its best matmul rate for the dtype and a large tensor's
copy rate: a CPU has no datasheet entry).
The "size sweep": a list of shapes from latency-bound to compute-bound, one suggested per seat.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from lab.analysis.bundle import AnalysisTables
from lab.analysis.gemm.bound import BOUNDS, LATENCY_FRACTION, bound_of, roof_tflops
from lab.core.config import RunConfig
from lab.core.devices import DeviceInfo, DevicePeak
from lab.core.workloads import WORKLOADS
from lab.units import fmt_tflops

__all__ = [
    "ALONE_SWEEP", "OVERHEAD_FRACTION", "REGIONS", "SWEEP_SHAPES", "Roofline", "RunSummary", "classify",
    "device_roofline", "peak_roofline", "roof_over", "roofline_data", "run_summary", "seat_shape", "sweep_config",
]  # fmt: skip

# The regions and the latency threshold are the one classifier's (lab.analysis.gemm.bound): a run
# under a tenth of the roof at its own intensity is held back by fixed costs (launch, dispatch,
# Python), not by memory or compute.
OVERHEAD_FRACTION = LATENCY_FRACTION
REGIONS = BOUNDS

# The sweep, smallest work first: squares from launch-bound to compute-bound, and skinny GEMMs
# (N small) whose low FLOPs per byte land left of the ridge. GPU in bfloat16, CPU in float32
# and smaller (each CPU shape runs in well under a second on 2 cores).
SWEEP_SHAPES: dict[str, tuple[tuple[int, int, int], ...]] = {
    "cuda": ((64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
             (8192, 8192, 8192), (8192, 8192, 16), (8192, 8192, 64), (8192, 8192, 256), (16384, 16384, 32),
             (512, 512, 512), (128, 128, 128)),
    "cpu": ((32, 32, 32), (64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
            (2048, 2048, 16), (1024, 1024, 64), (96, 96, 96), (384, 384, 384)),
}
SWEEP_DTYPE = {"cuda": "bfloat16", "cpu": "float32"}
# "Alone, one click": a few of the sweep's shapes, spread over its range (CPU: ~2 s in all here).
ALONE_SWEEP: dict[str, tuple[tuple[int, int, int], ...]] = {
    "cuda": ((64, 64, 64), (1024, 1024, 1024), (8192, 8192, 16), (4096, 4096, 4096)),
    "cpu": ((32, 32, 32), (128, 128, 128), (512, 512, 512), (2048, 2048, 16)),
}
SWEEP_LABEL = "size_sweep"


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """What a room keeps of one run: no trace, only its shape and its roofline coordinates."""

    workload: str
    m: int
    k: int
    n: int
    dtype: str
    device: str
    tflops: float
    intensity_flops_per_byte: float
    display_name: str = ""  # who ran it (filled in when a room reads it back)

    @property
    def shape_text(self) -> str:
        return f"{self.m}×{self.k}×{self.n}"


@dataclass(frozen=True, kw_only=True)
class Roofline:
    device: str
    dtype: str
    peak_tflops: float
    bandwidth_gbs: float
    source: str  # where both numbers come from, in words
    raised: tuple[str, ...] = ()  # what roof_over raised above ``source``'s figures, a line each

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.peak_tflops * 1e12 / (self.bandwidth_gbs * 1e9)

    def roof_tflops(self, intensity: np.ndarray | float) -> np.ndarray:
        return roof_tflops(intensity, self.peak_tflops, self.bandwidth_gbs)


def peak_roofline(peak: DevicePeak, dtype: str, device: str = "") -> Roofline | None:
    tflops = peak.peak_tflops(dtype)
    if tflops is None:
        return None
    return Roofline(device=device or peak.model, dtype=dtype, peak_tflops=tflops,
                    bandwidth_gbs=peak.memory_bandwidth_gbs, source=f"datasheet ({peak.model}: {peak.source})")


def device_roofline(device: DeviceInfo, dtype: str) -> Roofline | None:
    """The datasheet roof of a listed GPU, else the rates its worker measured at warm-up (None: neither)."""
    if device.peak is not None and (roof := peak_roofline(device.peak, dtype, device.name)) is not None:
        return roof
    rates = device.rates_for(device.kind)
    gflops = rates.gflops(dtype) if rates else None
    if rates is None or not gflops or rates.copy_gbs <= 0:
        return None
    return Roofline(device=device.name, dtype=dtype, peak_tflops=gflops / 1e3, bandwidth_gbs=rates.copy_gbs,
                    source="measured at the worker's warm-up (best matmul rate for the dtype; a large tensor's copy)")


def roof_over(roof: Roofline, points: Sequence[RunSummary]) -> Roofline:
    """The roof to draw with ``points``: never below a rate they reached. A roof measured at the
    worker's warm-up on a busy host can sit under the runs' own rates (seen: on a shared 2-core
    box the sweep's points were drawn above their roof), and a point above the roof reads as a run
    faster than the machine. The peak is raised to the best run,
    the bandwidth to the fastest rate per byte among them; ``raised`` says so with the figures
    (the roof's own figures are those of ``roof``)."""
    if not points:
        return roof
    best = max(points, key=lambda p: p.tflops)
    peak_tflops = max(roof.peak_tflops, best.tflops)
    # roof(I) = min(peak, I × bandwidth) ≥ tflops at each point's I needs bandwidth ≥ tflops / I.
    steepest = max(points, key=lambda p: p.tflops / p.intensity_flops_per_byte)
    bandwidth_gbs = max(roof.bandwidth_gbs, steepest.tflops * 1e3 / steepest.intensity_flops_per_byte)
    # Short lines: the chart says them under its title (an 800 px window's chart is ~440 px wide).
    lines = []
    if peak_tflops > roof.peak_tflops:
        lines.append(f"peak raised to the best run measured: {best.shape_text}, {fmt_tflops(peak_tflops)}")
    if bandwidth_gbs > roof.bandwidth_gbs:
        lines.append(f"bandwidth raised to the fastest per byte: {steepest.shape_text}, {bandwidth_gbs:,.1f} GB/s")
    if not lines:
        return roof
    return replace(roof, peak_tflops=peak_tflops, bandwidth_gbs=bandwidth_gbs, raised=(*roof.raised, *lines))


def roof_caption(roof: Roofline, shown: Roofline) -> str:
    """The line under a roofline: the roof drawn (``shown``, from ``roof_over``) and, when it was
    raised above the measured ``roof``, what was measured and why it was raised."""
    own = ("" if shown == roof else
           f" It measured {fmt_tflops(roof.peak_tflops)} and {roof.bandwidth_gbs:,.1f} GB/s there, below these runs "
           "(a busy host at warm-up): " + "; ".join(shown.raised) + ".")
    return (f"Roof: {fmt_tflops(shown.peak_tflops)} {shown.dtype}, {shown.bandwidth_gbs:,.1f} GB/s, ridge at "
            f"{shown.ridge_flops_per_byte:,.1f} FLOP/byte — {roof.source}.{own}")


def run_summary(config: RunConfig, analysis: AnalysisTables, device: str, *,
                step_tflops: float | None = None) -> RunSummary | None:
    """The run's roofline point (None when it has neither a GEMM figure nor a step to time): a GPU
    trace's typical GEMM instance (``Analysis.gemm_typical``, the Summary's GEMM card), else the
    workload's cost at ``step_tflops`` (``RunResult.step_tflops``, the Summary's "Step throughput"
    card) or, untimed, over the median profiled step."""
    typical = analysis.gemm_typical
    work = WORKLOADS[config.workload]
    if typical is not None:  # a GPU trace: the GEMM kernel's own figures
        tflops, intensity = float(typical["tflops"]), float(typical["intensity_flops_per_byte"])
    else:  # a CPU trace: the workload's cost over the step's time
        steps = analysis.steps["cpu_us"].to_numpy(dtype=float) if len(analysis.steps) else np.array([])
        if step_tflops is None and (not len(steps) or float(np.median(steps)) <= 0):
            return None
        flops, moved = work.flops(config), work.estimate_bytes(config)
        tflops = step_tflops if step_tflops is not None else flops / float(np.median(steps)) / 1e6
        intensity = flops / moved
    if not (math.isfinite(tflops) and math.isfinite(intensity) and tflops > 0 and intensity > 0):
        return None
    return RunSummary(workload=config.workload, m=config.m, k=config.k, n=config.n, dtype=config.dtype,
                      device=device, tflops=tflops, intensity_flops_per_byte=intensity)


def classify(point: RunSummary, roof: Roofline) -> str:
    """latency-bound (far under the roof at its intensity), memory-bound (left of the ridge), or
    compute-bound: ``lab.analysis.gemm.bound.bound_of``, the classifier the GEMM table uses too."""
    return str(bound_of(point.tflops, point.intensity_flops_per_byte, roof.peak_tflops, roof.bandwidth_gbs)[0])


def seat_shape(seat: int, device_kind: str) -> tuple[int, int, int]:
    """The sweep shape suggested to seat ``seat`` (1, 2, …): each seat a different one, round the list."""
    shapes = SWEEP_SHAPES["cuda" if device_kind == "cuda" else "cpu"]
    return shapes[(max(seat, 1) - 1) % len(shapes)]


def sweep_config(shape: tuple[int, int, int], device_kind: str) -> RunConfig:
    """A sweep run: warm (the roofline wants steady-state rates), three recorded steps."""
    kind = "cuda" if device_kind == "cuda" else "cpu"
    m, k, n = shape
    return RunConfig(workload="matmul_add", m=m, k=k, n=n, dtype=SWEEP_DTYPE[kind],
                     device="auto" if kind == "cuda" else "cpu", step_label=SWEEP_LABEL, wait=0, warmup=1,
                     active=3, warmup_iters=2)


def roofline_data(roof: Roofline, points: Sequence[RunSummary]) -> dict[str, pd.DataFrame]:
    """The chart's data: the roof (a polyline), the three regions, and the points with their region.
    The roof drawn is ``roof_over(roof, points)``: pass that roof (its ``raised`` words) to the chart.
    Each point's region is classified against ``roof`` itself, the device's: a roof raised to the
    room's best run would put that run on its roof and call it compute-bound whatever it is (a 64³
    run alone in a room), and make a run's colour depend on who else ran."""
    points_region = [classify(p, roof) for p in points]
    roof = roof_over(roof, points)
    xs = [p.intensity_flops_per_byte for p in points] + [roof.ridge_flops_per_byte]
    x_lo = 10 ** math.floor(math.log10(max(min(xs) / 4, 1e-3)))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 4))
    x = np.unique(np.r_[np.geomspace(x_lo, x_hi, 64), roof.ridge_flops_per_byte])
    line = pd.DataFrame({"intensity_flops_per_byte": x, "roof_tflops": roof.roof_tflops(x),
                         "overhead_tflops": OVERHEAD_FRACTION * roof.roof_tflops(x)})
    ys = [p.tflops for p in points] + [float(line["overhead_tflops"].min())]
    y_lo = 10 ** math.floor(math.log10(max(min(ys) / 4, 1e-9)))
    # Room above the roof for the labels of the points on it.
    y_hi = max(roof.peak_tflops, *ys) * 2
    ridge = roof.ridge_flops_per_byte
    regions = pd.DataFrame({"region": ["memory-bound", "compute-bound"], "x": [x_lo, ridge], "x2": [ridge, x_hi],
                            "y": [y_lo, y_lo], "y2": [y_hi] * 2})
    pts = pd.DataFrame({
        "who": [p.display_name for p in points], "shape": [p.shape_text for p in points],
        "dtype": [p.dtype for p in points], "device": [p.device for p in points],
        "intensity_flops_per_byte": [p.intensity_flops_per_byte for p in points],
        "tflops": [p.tflops for p in points], "region": points_region,
    })
    return {"roof": line, "regions": regions, "points": pts,
            "domain": pd.DataFrame({"x": [x_lo, x_hi], "y": [y_lo, y_hi]})}

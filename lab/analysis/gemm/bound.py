"""A GEMM's bound from the roofline: compute-, memory- or latency-bound — the one classifier.

The roof at arithmetic intensity I (FLOP per byte moved) is min(peak, I × bandwidth). A kernel
reaching under ``LATENCY_FRACTION`` of the roof *at its own intensity* is held back by neither
compute nor memory but by fixed costs: launch latency, a grid too small to fill the GPU, the
tail (the 64³ bf16 GEMM on the H200: 1.9 µs for 24 KB, ~0.3 TFLOP/s under a ~110 TFLOP/s roof at
its 21 FLOP/B). Above that, a kernel left of the ridge (I < peak / bandwidth) is memory-bound,
right of it compute-bound. "Below peak" is judged against the roof at the kernel's intensity
(``pct_of_roof``), never against the flat compute peak: an attention QKᵀ GEMM of 4096×64×4096
(62 FLOP/B) cannot reach 989 TFLOP/s on an H200, whose ridge is at 206 FLOP/B.

Used by the GEMM analysis (``lab.analysis.gemm``: its ``bound`` and ``pct_of_roof`` columns), the
findings (``lab.judge.gemm_rules.gemm_below_roof``), the room's roofline
(``lab.teach.roofline.classify``) and the views.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BOUNDS", "COMPUTE_BOUND", "LATENCY_BOUND", "LATENCY_FRACTION", "LATENCY_IDEAL_US", "MEMORY_BOUND",
           "bound_of", "pct_of_roof", "roof_tflops"]

LATENCY_BOUND, MEMORY_BOUND, COMPUTE_BOUND = "latency-bound", "memory-bound", "compute-bound"
BOUNDS = (LATENCY_BOUND, MEMORY_BOUND, COMPUTE_BOUND)
# Under a tenth of the roof at its own intensity: on the H200 samples the 64³ GEMM reaches 0.3 %
# of it, the 1024³ ones ≥ 25 %, every 4096³ one ≥ 55 %: a tenth separates them with room.
LATENCY_FRACTION = 0.1
# … and only a kernel that would take under this long at the roof: fixed costs (a launch, a wave
# that fills the GPU, the tail) are a few µs on an H200, so they can hold back the 64³ GEMM (an
# ideal 0.005 µs) but not the int8 8192³ GEMM (an ideal 556 µs at 1,979 TOPS) that runs at 6.5 %
# of its roof in 8.5 ms: that one is a slow kernel (CUTLASS's sm80 wmma on Hopper), not latency.
LATENCY_IDEAL_US = 20.0


def roof_tflops(intensity, peak_tflops, bandwidth_gbs) -> np.ndarray:
    """The roof at ``intensity`` FLOP/B: min(peak, intensity × bandwidth), in TFLOP/s."""
    return np.minimum(np.asarray(peak_tflops, dtype=float),
                      np.asarray(intensity, dtype=float) * np.asarray(bandwidth_gbs, dtype=float) / 1e3)


def pct_of_roof(tflops, intensity, peak_tflops, bandwidth_gbs) -> np.ndarray:
    """The achieved rate as % of the roof at its own intensity (NaN where unknown)."""
    roof = roof_tflops(intensity, peak_tflops, bandwidth_gbs)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 100.0 * np.asarray(tflops, dtype=float) / roof


def bound_of(tflops, intensity, peak_tflops, bandwidth_gbs, flops=None) -> np.ndarray:
    """Per kernel: "latency-bound", "memory-bound", "compute-bound", or "" where a number is unknown.
    With ``flops`` (per kernel), latency-bound also needs an ideal time at the roof under
    ``LATENCY_IDEAL_US``; without it, under a tenth of the roof is enough."""
    tflops = np.atleast_1d(np.asarray(tflops, dtype=float))
    intensity = np.atleast_1d(np.asarray(intensity, dtype=float))
    peak = np.broadcast_to(np.asarray(peak_tflops, dtype=float), tflops.shape)
    bw = np.broadcast_to(np.asarray(bandwidth_gbs, dtype=float), tflops.shape)
    roof = roof_tflops(intensity, peak, bw)
    with np.errstate(divide="ignore", invalid="ignore"):
        ridge = peak * 1e3 / bw
    known = np.isfinite(tflops) & np.isfinite(intensity) & np.isfinite(roof) & np.isfinite(ridge)
    shape = np.where(intensity < ridge, MEMORY_BOUND, COMPUTE_BOUND)
    slow = tflops < LATENCY_FRACTION * roof
    if flops is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            ideal_us = np.broadcast_to(np.asarray(flops, dtype=float), tflops.shape) / (roof * 1e6)
        slow &= ~(ideal_us >= LATENCY_IDEAL_US)  # unknown FLOPs: the fraction alone decides
    label = np.where(slow, LATENCY_BOUND, shape)
    return np.where(known, label, "").astype(object)

"""The GEMM rules: FP32 matmuls without TF32, and GEMMs far under the roof at their intensity.

Split from ``lab.analysis.insights.rules`` (which lists them in ``RULES``); thresholds beside them
with their reason. "Below peak" is judged against the roofline at the kernel's own arithmetic
intensity (``lab.analysis.gemm.bound``), never against the flat compute peak.
"""

from __future__ import annotations

import numpy as np

from lab.analysis.bundle import Analysis
from lab.analysis.columns import mask_in
from lab.analysis.gemm.analyze import compute_capability
from lab.analysis.insights.record import Insight
from lab.trace.load import Trace
from lab.vocab import GEMM_OPS

__all__ = ["GEMM_LOW_PCT_OF_PEAK", "GEMM_MIN_KERNEL_US", "TF32_MIN_COMPUTE_MAJOR", "TF32_SWITCH",
           "fp32_without_tf32", "gemm_below_peak"]

# A GEMM kernel this long is big enough to approach peak; below it, launch and tail effects
# dominate and a low % of peak says little.
GEMM_MIN_KERNEL_US = 100.0
# Tuned cuBLAS GEMMs reach ~70–90 % of the roof at their own intensity (lab.analysis.gemm.bound): the
# 4096³ bf16 trace in tests/data ~80 % of an H200's 989 TFLOP/s; the attention QKᵀ GEMM
# (4096×64×4096, 62 FLOP/B, memory-bound) 71 % of the bandwidth roof. Under half is a real loss.
GEMM_LOW_PCT_OF_PEAK = 50.0  # % of the roof at the kernel's intensity (the peak, right of the ridge)
TF32_MIN_COMPUTE_MAJOR = 8  # tensor cores run TF32 from Ampere (compute capability 8.0) on

TF32_NOTES = "https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"
CUDA_BEST_PRACTICES = "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/"


def fp32_without_tf32(trace: Trace, analysis: Analysis) -> Insight | None:
    """FP32 GEMMs on a tensor-core GPU that run without TF32."""
    cc = compute_capability(trace)
    gemm = analysis.gemm
    if cc is None or cc[0] < TF32_MIN_COMPUTE_MAJOR or gemm.empty:
        return None
    fp32 = gemm[gemm["dtype"] == "float32"]
    if fp32.empty:
        return None
    achieved = float(np.nanmedian(fp32["tflops"])) if fp32["tflops"].notna().any() else float("nan")
    peak = analysis.peak
    rate_text = ""
    if peak and "tf32" in peak.tflops and achieved == achieved:
        rate_text = (f"; they reach {achieved:.1f} TFLOP/s, against {peak.tflops.get('float32', float('nan')):.0f} "
                     f"TFLOP/s FP32 and {peak.tflops['tf32']:.0f} TFLOP/s TF32 peak on {peak.model}")
    upcast = _half_precision_caller(trace)
    where = (f" The inputs were already half precision: {upcast} upcast them to float32 before these GEMMs."
             if upcast else "")
    dtype_text = ("; or keep the half-precision path: pick an SDPA backend that runs in bf16/fp16 "
                  "(torch.nn.attention.sdpa_kernel) instead of the math backend" if upcast
                  else ", or use bfloat16")
    return Insight(
        severity="warning",
        title="FP32 matmul without TF32 on a tensor-core GPU",
        evidence=(f"{len(fp32)} float32 GEMM kernel(s) (e.g. {fp32['kernel'].iloc[0][:60]}) ran on compute "
                  f"capability {cc[0]}.{cc[1]} without 'tf32' in the kernel name{rate_text}.{where}"),
        suggestion=(f"If ~1e-3 relative precision is acceptable, run FP32 matmuls on tensor cores: {TF32_SWITCH}"
                    f"{dtype_text}."),
        learn_more=TF32_NOTES,
    )


# The TF32 switch, both styles: torch 2.9 added fp32_precision and refuses a mix of the two.
TF32_SWITCH = ("torch.backends.cuda.matmul.fp32_precision = 'tf32' on torch ≥ 2.9; before 2.9 "
               "torch.backends.cuda.matmul.allow_tf32 = True or torch.set_float32_matmul_precision('high') "
               "(use one style in a program: torch 2.9+ raises an error on a mix)")
HALF_INPUT_TYPES = ("c10::BFloat16", "c10::Half")


def _half_precision_caller(trace: Trace) -> str:
    """The innermost op with bf16/fp16 inputs that encloses a float32 GEMM op (SDPA's math backend
    upcasting half inputs: aten::_scaled_dot_product_attention_math), "" if none; where there is
    one, "use bfloat16" would be no advice."""
    ev = trace.events
    cpu = mask_in(ev["lane_kind"], ("cpu",)) & mask_in(ev["cat"], ("cpu_op",))
    types = ev["input_type"].astype(str).to_numpy()
    half = np.flatnonzero(cpu & np.array([any(h in t for h in HALF_INPUT_TYPES) for t in types], dtype=bool))
    gemm = np.flatnonzero(cpu & mask_in(ev["name"], GEMM_OPS) & (np.char.find(types.astype(str), "'float'") >= 0))
    if not len(half) or not len(gemm):
        return ""
    ts, end = ev["ts_us"].to_numpy(dtype=float), (ev["ts_us"] + ev["dur_us"]).to_numpy(dtype=float)
    lane = ev["lane"].astype(str).to_numpy()
    depth = ev["depth"].to_numpy()
    inside = [h for h in half if ((lane[gemm] == lane[h]) & (ts[gemm] >= ts[h]) & (end[gemm] <= end[h])).any()]
    return str(ev["name"].iloc[max(inside, key=lambda h: depth[h])]) if inside else ""


def gemm_below_peak(trace: Trace, analysis: Analysis) -> Insight | None:
    """Long GEMM kernels far under the roof at their own arithmetic intensity: the compute peak
    right of the ridge, intensity × bandwidth left of it (``lab.analysis.gemm.bound``). A memory-bound
    GEMM running near the bandwidth roof is no loss, however far from the compute peak."""
    gemm = analysis.gemm
    if gemm.empty:
        return None
    big = gemm[(gemm["kernel_us"] >= GEMM_MIN_KERNEL_US) & gemm["pct_of_roof"].notna()]
    low = big[big["pct_of_roof"] < GEMM_LOW_PCT_OF_PEAK]
    if low.empty:
        return None
    worst = low.loc[low["pct_of_roof"].idxmin()]
    roof = "its compute peak" if worst["bound"] == "compute-bound" else "the bandwidth roof at its intensity"
    return Insight(
        severity="warning",
        title="GEMM far below the roof at its intensity",
        evidence=(f"{len(low)} of {len(big)} GEMM kernels of ≥ {GEMM_MIN_KERNEL_US:.0f} µs reach under "
                  f"{GEMM_LOW_PCT_OF_PEAK:.0f} % of the roofline at their own arithmetic intensity; worst: "
                  f"{worst['kernel'][:60]} {int(worst['m'])}×{int(worst['k'])}×{int(worst['n'])} {worst['dtype']} "
                  f"({worst['intensity_flops_per_byte']:.0f} FLOP/B, {worst['bound']}) at {worst['tflops']:.1f} "
                  f"TFLOP/s = {worst['pct_of_roof']:.0f} % of {roof} ({worst['roof_tflops']:.0f} TFLOP/s)."),
        suggestion=("Check the shape and layout: dimensions that are multiples of 64–128, contiguous inputs, a "
                    "tensor-core dtype (bf16/fp16/tf32). A memory-bound shape (small K or N) is judged against "
                    "the bandwidth roof: to go faster it needs more FLOPs per byte (batch the small dimension, "
                    "fuse its neighbours), not a faster GEMM."),
        learn_more=CUDA_BEST_PRACTICES,
    )



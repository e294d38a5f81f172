"""The GEMM rules beside ``lab.analysis.insights`` (which lists them in ``RULES``): FP32 matmuls
without TF32, GEMMs far under the roof at their own intensity, GEMM kernels that carry the time but
have no rate (what to record), and the words for a kernel built for an older GPU than the one it
ran on. "Below peak" is judged against the roofline at the kernel's own arithmetic intensity
(``lab.analysis.gemm.bound``), never against the flat compute peak."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from lab.analysis.bundle import Analysis
from lab.analysis.columns import mask_in
from lab.analysis.gemm.analyze import GEMM_MIN_KERNEL_US, GRAPH_REPLAY_SOURCE, compute_capability
from lab.analysis.gemm.bound import LATENCY_BOUND
from lab.analysis.gemm.kinds import GEMM_OPS
from lab.analysis.insights.record import Insight
from lab.trace.load import Trace
from lab.units import fmt_tflops

__all__ = [
    "GEMM_COLD_BELOW_MEDIAN", "GEMM_FEW_INSTANCES", "GEMM_LOW_PCT_OF_PEAK", "GEMM_MIN_KERNEL_US", "GEMM_RULES",
    "GEMM_UNRATED_MIN_SHARE_PCT", "TF32_MIN_COMPUTE_MAJOR", "TF32_SWITCH", "fp32_without_tf32", "gemm_below_peak",
    "gemm_without_rate", "older_arch_text",
]  # fmt: skip

# GEMM kernels without a rate matter once they carry this share of the kernels' time: below it
# the program's time is elsewhere and a missing GEMM rate changes no conclusion.
GEMM_UNRATED_MIN_SHARE_PCT = 10.0
PROFILER_API = "https://pytorch.org/docs/stable/profiler.html#torch.profiler.profile"
# The SM architecture a kernel's name says it was built for: cutlass_80_…, sm80_xmma_…, sm90_…
_KERNEL_ARCH = re.compile(r"(?:cutlass_|sm_?)(\d)(\d)(?:_|a_)")
# Tuned cuBLAS GEMMs reach ~70–90 % of the roof at their own intensity (lab.analysis.gemm.bound): the
# 4096³ bf16 trace in tests/data ~80 % of an H200's 989 TFLOP/s; the attention QKᵀ GEMM
# (4096×64×4096, 62 FLOP/B, memory-bound) 71 % of the bandwidth roof. Under half is a real loss.
GEMM_LOW_PCT_OF_PEAK = 50.0  # % of the roof at the kernel's intensity (the peak, right of the ridge)
TF32_MIN_COMPUTE_MAJOR = 8  # tensor cores run TF32 from Ampere (compute capability 8.0) on

TF32_NOTES = "https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"
CUDA_BEST_PRACTICES = "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/"
# Fewer long GEMM instances than this: one kernel's rate is too few to call a law.
GEMM_FEW_INSTANCES = 3
GEMM_COLD_BELOW_MEDIAN = 0.9  # a first instance this far under the median one reads as cold


def older_arch_text(kernel: str, capability: tuple[int, int] | None) -> str:
    """" The kernel is built for sm80 (…) on a compute capability 9.0 GPU." when the name says so."""
    match = _KERNEL_ARCH.search(kernel)
    if match is None or capability is None:
        return ""
    built = (int(match.group(1)), int(match.group(2)))
    if built >= capability:
        return ""
    return (f" The kernel is built for sm{built[0]}{built[1]} and ran on a compute capability "
            f"{capability[0]}.{capability[1]} GPU: the library had no newer kernel for this case "
            f"(torch._int_mm's int8 GEMM is CUTLASS's Ampere wmma kernel on Hopper).")


def gemm_without_rate(trace: Trace, analysis: Analysis) -> Insight | None:
    """GEMM kernels that take a real share of the kernels' time but have no rate: the profile
    recorded no shapes (record_shapes=False), so no FLOP count can be had."""
    gemm = analysis.gemm
    if gemm.empty or trace.meta.record_shapes:
        return None
    # A CUDA graph's replayed GEMMs have no shapes to record: record_shapes would not help them.
    unrated = gemm[gemm["flops"].isna() & (gemm["op"].astype(str) != "")
                   & (gemm["shape_source"] != GRAPH_REPLAY_SOURCE)]
    ev = trace.events
    kernel_us = float(ev["dur_us"].to_numpy()[mask_in(ev["cat"], ("kernel",))].sum())
    share = 100.0 * float(unrated["kernel_us"].sum()) / kernel_us if kernel_us > 0 else 0.0
    if unrated.empty or share < GEMM_UNRATED_MIN_SHARE_PCT:
        return None
    ops = ", ".join(sorted(set(unrated["op"].astype(str)))[:3])
    kernels = int(np.unique(unrated["kernel"].astype(str)).size)
    return Insight(
        severity="info",
        title="GEMMs without a rate: shapes not recorded",
        evidence=(f"{len(unrated)} GEMM kernel run(s) ({kernels} distinct kernel(s), launched by {ops}) take "
                  f"{share:.0f} % of the kernels' time, but the profile recorded no input shapes, so their "
                  "FLOPs — and their rate against the peak — are unknown."),
        suggestion="Profile with torch.profiler.profile(record_shapes=True) to get each GEMM's shape and rate.",
        learn_more=PROFILER_API,
    )


def fp32_without_tf32(trace: Trace, analysis: Analysis) -> Insight | None:
    """FP32 GEMMs on a tensor-core GPU that run without TF32."""
    cc = compute_capability(trace)
    gemm = analysis.gemm
    if cc is None or cc[0] < TF32_MIN_COMPUTE_MAJOR or gemm.empty:
        return None
    fp32 = gemm[gemm["dtype"] == "float32"]
    # The premise: TF32 speeds up GEMMs the tensor cores would compute faster, not ones held back by
    # launch latency (the input-bound ResNet's fp32 GEMMs at 0.03-0.07 TFLOP/s, under 0.1 % of its
    # step): a trace whose fp32 GEMMs are all latency-bound gets no TF32 advice.
    if "bound" in fp32.columns:
        fp32 = fp32[fp32["bound"] != LATENCY_BOUND]
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
    unit = str(worst.get("rate_unit") or "TFLOP/s")
    return Insight(
        severity="warning",
        title="GEMM far below the roof at its intensity",
        evidence=(f"{len(low)} of {len(big)} GEMM kernels of ≥ {GEMM_MIN_KERNEL_US:.0f} µs reach under "
                  f"{GEMM_LOW_PCT_OF_PEAK:.0f} % of the roofline at their own arithmetic intensity; worst: "
                  f"{worst['kernel'][:60]} {int(worst['m'])}×{int(worst['k'])}×{int(worst['n'])} {worst['dtype']} "
                  f"({worst['intensity_flops_per_byte']:.0f} FLOP/B, {worst['bound']}) at {worst['tflops']:.1f} "
                  f"{unit} = {worst['pct_of_roof']:.0f} % of {roof} ({worst['roof_tflops']:,.0f} {unit})."
                  + older_arch_text(str(worst["kernel"]), compute_capability(trace))),
        suggestion=("Check the shape and layout: dimensions that are multiples of 64–128, contiguous inputs, a "
                    "tensor-core dtype (bf16/fp16/tf32/fp8). A memory-bound shape (small K or N) is judged against "
                    "the bandwidth roof: to go faster it needs more FLOPs per byte (batch the small dimension, "
                    "fuse its neighbours), not a faster GEMM."),
        learn_more=CUDA_BEST_PRACTICES,
        caveat=_gemm_warmup_caveat(big, worst, analysis.gemm_typical),
    )


def _gemm_warmup_caveat(big: pd.DataFrame, worst: pd.Series, typical: pd.Series | None) -> str:
    """The worst instance may be a cold one (clocks ramping, first-call heuristics): said with the
    typical (median) instance's rate — the Summary card's and the roofline's figure, one number
    (``Analysis.gemm_typical``) — where the worst is the first of its shape or there are few instances."""
    same = big[(big["m"] == worst["m"]) & (big["k"] == worst["k"]) & (big["n"] == worst["n"])]
    median = float(typical["tflops"]) if typical is not None else float(big["tflops"].median())
    first = (len(same) > 1 and float(worst["ts_us"]) <= float(same["ts_us"].min())
             and float(worst["tflops"]) < GEMM_COLD_BELOW_MEDIAN * median)
    if not first and len(big) >= GEMM_FEW_INSTANCES:
        return ""
    why = ("the worst is the first instance of its shape, which can run before the clocks and cuBLAS's "
           "choices have warmed up" if first else f"only {len(big)} long GEMM instance(s) were recorded")
    unit = str(typical["rate_unit"]) if typical is not None else "TFLOP/s"
    return (f"One instance's rate: {why}; the median instance runs at {fmt_tflops(median, unit)}. Judge a "
            "warmed-up step, and several of them.")


GEMM_RULES = (fp32_without_tf32, gemm_below_peak, gemm_without_rate)

"""GEMM findings that need the analysis's GEMM table beside the explanation: FP32 GEMMs without
TF32, GEMMs far under the roof at their own arithmetic intensity, and GEMM kernels that carry the
time but have no rate. The table knows what the per-op roofs cannot: the dtype a kernel's name
states (TF32, autocast), shapes from the run's config where a compiled region recorded none, and
each kernel run's own rate.

"Below the roof" is judged per kernel run against the roofline at its own intensity
(``lab.analysis.gemm.bound``: the compute peak right of the ridge, intensity × bandwidth left of
it), never against the flat compute peak; the saving is the GEMM ops' time now against their time
at a reachable share of their roof (``lab.explain.roofs``, the same per-op roofs ``below_roof``
reads for the other classes).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from lab.analysis.gemm.analyze import GEMM_MIN_KERNEL_US, GRAPH_REPLAY_SOURCE
from lab.explain.explanation import Explanation
from lab.judge.context import TraceContext
from lab.judge.finding import MATERIAL_PCT, Finding
from lab.judge.gemm_facts import GemmFacts
from lab.judge.rules import GEMM_REACHABLE_PCT, MEMORY_REACHABLE_PCT
from lab.units import fmt_tflops, fmt_us
from lab.vocab import DTYPE_BYTES, TRACE_DTYPES

__all__ = ["GEMM_COLD_BELOW_MEDIAN", "GEMM_FEW_INSTANCES", "GEMM_LOW_PCT_OF_PEAK", "GEMM_RULES",
           "GEMM_UNRATED_MIN_SHARE_PCT", "TF32_MIN_COMPUTE_MAJOR", "TF32_SWITCH", "gemm_below_roof",
           "gemm_without_rate", "older_arch_text", "tf32_gemms"]

# Tuned cuBLAS GEMMs reach ~70–90 % of the roof at their own intensity (lab.analysis.gemm.bound): the
# 4096³ bf16 trace in tests/data ~80 % of an H200's 989 TFLOP/s; the attention QKᵀ GEMM
# (4096×64×4096, 62 FLOP/B, memory-bound) 71 % of the bandwidth roof. Under half is a real loss.
GEMM_LOW_PCT_OF_PEAK = 50.0
# GEMM kernels without a rate matter once they carry this share of the kernels' time: below it
# the program's time is elsewhere and a missing GEMM rate changes no conclusion.
GEMM_UNRATED_MIN_SHARE_PCT = 10.0
# Fewer long GEMM instances than this: one kernel's rate is too few to call a law.
GEMM_FEW_INSTANCES = 3
GEMM_COLD_BELOW_MEDIAN = 0.9  # a first instance this far under the median one reads as cold
# The SM architecture a kernel's name says it was built for: cutlass_80_…, sm80_xmma_…, sm90_…
_KERNEL_ARCH = re.compile(r"(?:cutlass_|sm_?)(\d)(\d)(?:_|a_)")
TF32_MIN_COMPUTE_MAJOR = 8  # tensor cores run TF32 from Ampere (compute capability 8.0) on
# TF32 keeps the fp32 GEMM's share of its roof: the 4096³ fp32 GEMM ran at 76 % of 67 TFLOP/s,
# the same program with TF32 at 334 µs ≈ 83 % of 494 (lab/samples). Bounded to stay sane.
_TF32_EFFICIENCY = (0.3, 0.9)
# The TF32 switch, both styles: torch 2.9 added fp32_precision and refuses a mix of the two.
TF32_SWITCH = ("torch.backends.cuda.matmul.fp32_precision = 'tf32' on torch ≥ 2.9; before 2.9 "
               "torch.backends.cuda.matmul.allow_tf32 = True or torch.set_float32_matmul_precision('high') "
               "(use one style in a program: torch 2.9+ raises an error on a mix)")
TF32_NOTES = "https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"
PROFILER_API = "https://pytorch.org/docs/stable/profiler.html#torch.profiler.profile"
CUDA_BEST_PRACTICES = "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/"


def older_arch_text(kernel: str, capability: tuple[int, int] | None) -> str:
    """". The kernel is built for sm80 (…) on a compute capability 9.0 GPU: …" when the name says so,
    to follow a sentence of the evidence."""
    match = _KERNEL_ARCH.search(kernel)
    if match is None or capability is None:
        return ""
    built = (int(match.group(1)), int(match.group(2)))
    if built >= capability:
        return ""
    return (f". The kernel is built for sm{built[0]}{built[1]} and ran on a compute capability "
            f"{capability[0]}.{capability[1]} GPU: the library had no newer kernel for this case "
            f"(as for torch._int_mm's int8 GEMM, which runs CUTLASS's Ampere wmma kernel on Hopper)")


# cuBLAS's fastest (tensor-core, TMA) kernels read the operands' rows 16 bytes at a time: a GEMM whose
# K or N, the row lengths of row-major A (M×K) and B (K×N), is not a multiple of 16 bytes' worth of
# elements runs a slower kernel (NVIDIA's "Matrix Multiplication Background" guide, tensor core
# requirements; tests/data/heldout gemm_unaligned: 4095×4093×4097 bf16 ran an sm75 kernel at 16 % of
# the H100's peak, where 4096³ runs at its roof).
ROW_ALIGN_BYTES = 16


def misaligned_text(k: int, n: int, dtype: str) -> str:
    """". K = 4093 and N = 4097 are not multiples of 8 …" for a GEMM whose rows are not aligned."""
    size = DTYPE_BYTES.get(dtype) or TRACE_DTYPES.get(dtype, ("", 0))[1]
    if not size or ROW_ALIGN_BYTES % size:
        return ""
    per = ROW_ALIGN_BYTES // size
    bad = [f"{name} = {v}" for name, v in (("K", k), ("N", n)) if v % per]
    if not bad:
        return ""
    return (f". {' and '.join(bad)} {'is not a multiple' if len(bad) == 1 else 'are not multiples'} of {per} "
            f"({ROW_ALIGN_BYTES} bytes of {dtype}), the row alignment cuBLAS's fastest kernels need")


def _gemm(ctx: TraceContext) -> GemmFacts | None:
    g = ctx.gemm
    return g if g is not None and not g.table.empty else None


def _roof_gain_us(ex: Explanation) -> float:
    """The GEMM ops' time per step above their time at a reachable share of their roof
    (compute-bound GEMM_REACHABLE_PCT, memory-bound MEMORY_REACHABLE_PCT): ``lab.explain.roofs``."""
    r = ex.roofs
    if not len(r) or ex.peak is None:
        return 0.0
    rows = r[(r["op_class"] == "gemm") & np.isfinite(r["pct_of_roof"].to_numpy(float))
             & r["bound"].isin(["compute-bound", "memory-bound"])]
    reach = np.where(rows["bound"] == "compute-bound", GEMM_REACHABLE_PCT, MEMORY_REACHABLE_PCT)
    gain = rows["gpu_us"].to_numpy(float) * (1 - rows["pct_of_roof"].to_numpy(float) / reach)
    return float(np.clip(gain, 0, None).sum()) / max(len(ex.attribution.steps), 1)


def gemm_below_roof(ex: Explanation, ctx: TraceContext) -> Finding | None:
    """Long GEMM kernels far under the roof at their own arithmetic intensity. A memory-bound GEMM
    running near the bandwidth roof is no loss, however far from the compute peak."""
    g = _gemm(ctx)
    if g is None:
        return None
    big = g.table[(g.table["kernel_us"] >= GEMM_MIN_KERNEL_US) & g.table["pct_of_roof"].notna()]
    low = big[big["pct_of_roof"] < GEMM_LOW_PCT_OF_PEAK]
    step, saving = ex.attribution.step_us, _roof_gain_us(ex)
    if low.empty or step <= 0 or 100.0 * saving / step < MATERIAL_PCT:
        return None
    worst = low.loc[low["pct_of_roof"].idxmin()]
    roof = "its compute peak" if worst["bound"] == "compute-bound" else "the bandwidth roof at its intensity"
    unit = str(worst.get("rate_unit") or "TFLOP/s")
    return Finding(
        "gemm_below_roof", "gemm", "GEMM far below the roof at its intensity",
        premise=f"GEMM kernels of ≥ {GEMM_MIN_KERNEL_US:.0f} µs reach under {GEMM_LOW_PCT_OF_PEAK:.0f} % of the "
                "roofline at their own arithmetic intensity (compute- or memory-bound, not latency), and their "
                f"time above a reachable share of the roof is ≥ {MATERIAL_PCT:.0f} % of the step",
        evidence=(f"{len(low)} of {len(big)} GEMM kernels of ≥ {GEMM_MIN_KERNEL_US:.0f} µs reach under "
                  f"{GEMM_LOW_PCT_OF_PEAK:.0f} % of the roofline at their own arithmetic intensity; worst: "
                  f"{str(worst['kernel'])[:60]} {int(worst['m'])}×{int(worst['k'])}×{int(worst['n'])} "
                  f"{worst['dtype']} ({worst['intensity_flops_per_byte']:.0f} FLOP/B, {worst['bound']}) at "
                  f"{worst['tflops']:.1f} {unit} = {worst['pct_of_roof']:.0f} % of {roof} "
                  f"({worst['roof_tflops']:,.0f} {unit}); the GEMMs at {GEMM_REACHABLE_PCT:.0f} % of a compute "
                  f"roof (or {MEMORY_REACHABLE_PCT:.0f} % of the bandwidth roof) would take {fmt_us(saving)} less "
                  f"per {fmt_us(step)} step" + misaligned_text(int(worst["k"]), int(worst["n"]), str(worst["dtype"]))
                  + older_arch_text(str(worst["kernel"]), g.capability)),
        suggestion=("Check the shape and layout: dimensions that are multiples of 64–128, contiguous inputs, a "
                    "tensor-core dtype (bf16/fp16/tf32/fp8). A memory-bound shape (small K or N) is judged against "
                    "the bandwidth roof: to go faster it needs more FLOPs per byte (batch the small dimension, "
                    "fuse its neighbours), not a faster GEMM."),
        saving_us=saving, base_us=step, learn_more=CUDA_BEST_PRACTICES,
        caveat=_warmup_caveat(big, worst, g.typical))


def _warmup_caveat(big: pd.DataFrame, worst: pd.Series, typical: pd.Series | None) -> str:
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


def gemm_without_rate(ex: Explanation, ctx: TraceContext) -> Finding | None:
    """A note: GEMM kernels that take a real share of the kernels' time but have no rate, because
    the profile recorded no shapes (record_shapes=False)."""
    g = _gemm(ctx)
    if g is None or g.record_shapes:
        return None
    t = g.table
    # A CUDA graph's replayed GEMMs have no shapes to record: record_shapes would not help them.
    unrated = t[t["flops"].isna() & (t["op"].astype(str) != "") & (t["shape_source"] != GRAPH_REPLAY_SOURCE)]
    share = 100.0 * float(unrated["kernel_us"].sum()) / g.kernel_us if g.kernel_us > 0 else 0.0
    if unrated.empty or share < GEMM_UNRATED_MIN_SHARE_PCT:
        return None
    ops = ", ".join(sorted(set(unrated["op"].astype(str)))[:3])
    kernels = int(np.unique(unrated["kernel"].astype(str)).size)
    return Finding(
        "gemm_without_rate", "gemm", "GEMMs without a rate: shapes not recorded",
        premise=f"GEMM kernels launched by ops hold ≥ {GEMM_UNRATED_MIN_SHARE_PCT:.0f} % of the kernels' time and "
                "the profile recorded no input shapes",
        evidence=(f"{len(unrated)} GEMM kernel run(s) ({kernels} distinct kernel(s), launched by {ops}) take "
                  f"{share:.0f} % of the kernels' time, but the profile recorded no input shapes, so their "
                  "FLOPs — and their rate against the peak — are unknown"),
        suggestion="Profile with torch.profiler.profile(record_shapes=True) to get each GEMM's shape and rate.",
        saving_us=0.0, base_us=ex.attribution.step_us, scope="note", learn_more=PROFILER_API)


def tf32_gemms(ex: Explanation, ctx: TraceContext) -> Finding | None:
    """FP32 GEMMs on a tensor-core GPU that run without TF32, judged by kernel run (the GEMM table:
    the dtype the kernel's name states, shapes from the op or the run's config where the op
    recorded none). The saving keeps each GEMM's share of its roof at the TF32 peak."""
    g, peak = _gemm(ctx), ex.peak
    tf32 = peak.peak_tflops("tf32") if peak is not None else None
    if g is None or peak is None or not tf32 or (g.capability is not None and g.capability[0] < TF32_MIN_COMPUTE_MAJOR):
        return None
    # The premise: TF32 speeds up GEMMs the tensor cores would compute faster, not ones held back by
    # launch latency or memory (the input-bound ResNet's fp32 GEMMs at 0.03-0.07 TFLOP/s).
    rows = g.table[(g.table["dtype"] == "float32") & (g.table["bound"] == "compute-bound") & g.table["flops"].notna()]
    step, n_steps = ex.attribution.step_us, max(len(ex.attribution.steps), 1)
    us = float(rows["kernel_us"].sum()) / n_steps
    if rows.empty or step <= 0 or 100.0 * us / step < MATERIAL_PCT:
        return None
    eff = np.clip(rows["pct_of_roof"].to_numpy(float) / 100.0, *_TF32_EFFICIENCY)
    after = float((rows["flops"].to_numpy(float) / (eff * tf32 * 1e6)).sum()) / n_steps
    cc = f" on compute capability {g.capability[0]}.{g.capability[1]}" if g.capability else ""
    upcast = (f". The inputs were already half precision: {g.upcast_caller} upcast them to float32 before these "
              "GEMMs" if g.upcast_caller else "")
    dtype_text = ("; or keep the half-precision path: pick an SDPA backend that runs in bf16/fp16 "
                  "(torch.nn.attention.sdpa_kernel) instead of the math backend" if g.upcast_caller
                  else "; or use bfloat16")
    return Finding(
        "tf32_gemms", "gemm", "FP32 GEMMs without TF32",
        premise=f"fp32 GEMM kernels (no 'tf32' in their name) on a tensor-core GPU are compute-bound (right of the "
                f"ridge) and take ≥ {MATERIAL_PCT:.0f} % of the step",
        evidence=f"{fmt_us(us)} of the {fmt_us(step)} step in {len(rows)} compute-bound fp32 GEMM kernel run(s) "
                 f"(e.g. {str(rows['kernel'].iloc[0])[:60]}){cc} at {float(rows['tflops'].median()):,.1f} TFLOP/s "
                 f"(peak fp32 {peak.peak_tflops('float32') or float('nan'):g}, tf32 {tf32:g}){upcast}",
        suggestion=f"If ~1e-3 relative precision is acceptable, run FP32 matmuls on tensor cores: {TF32_SWITCH}"
                   f"{dtype_text}.",
        saving_us=max(us - after, 0.0), base_us=step, learn_more=TF32_NOTES)


GEMM_RULES: tuple[Callable[[Explanation, TraceContext], Finding | None], ...] = (
    tf32_gemms, gemm_below_roof, gemm_without_rate,
)

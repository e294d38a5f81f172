"""GEMM rules beside ``lab.analysis.insights``: GEMM kernels that carry the time but have no rate
(what to record), and the words for a kernel built for an older GPU than the one it ran on."""

from __future__ import annotations

import re

import numpy as np

from lab.analysis.bundle import Analysis
from lab.analysis.columns import mask_in
from lab.analysis.gemm.analyze import GRAPH_REPLAY_SOURCE
from lab.analysis.insights.record import Insight
from lab.trace.load import Trace

__all__ = ["GEMM_RULES", "GEMM_UNRATED_MIN_SHARE_PCT", "gemm_without_rate", "older_arch_text"]

# GEMM kernels without a rate matter once they carry this share of the kernels' time: below it
# the program's time is elsewhere and a missing GEMM rate changes no conclusion.
GEMM_UNRATED_MIN_SHARE_PCT = 10.0
PROFILER_API = "https://pytorch.org/docs/stable/profiler.html#torch.profiler.profile"
# The SM architecture a kernel's name says it was built for: cutlass_80_…, sm80_xmma_…, sm90_…
_KERNEL_ARCH = re.compile(r"(?:cutlass_|sm_?)(\d)(\d)(?:_|a_)")


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


GEMM_RULES = (gemm_without_rate,)

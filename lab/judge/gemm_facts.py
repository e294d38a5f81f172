"""What the GEMM findings read beside the explanation: the analysis's GEMM table (one row a GEMM
kernel run, its rate against the roof at its own intensity), its typical instance, the device's
compute capability, and the op that upcast half-precision inputs before fp32 GEMMs. Built once
per judged trace (``lab.judge.context.context_of``); the figures are the analysis's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lab.analysis.columns import mask_in
from lab.analysis.gemm.analyze import compute_capability
from lab.analysis.gemm.kinds import GEMM_OPS
from lab.trace import Trace

__all__ = ["HALF_INPUT_TYPES", "GemmFacts", "gemm_facts", "half_precision_caller"]

HALF_INPUT_TYPES = ("c10::BFloat16", "c10::Half")


@dataclass(frozen=True)
class GemmFacts:
    table: pd.DataFrame  # lab.analysis.gemm.analyze.GEMM_COLUMNS: one row a GEMM kernel run
    typical: Any  # Analysis.gemm_typical: the median instance (pd.Series) or None
    capability: tuple[int, int] | None
    record_shapes: bool
    kernel_us: float  # every kernel's time, the share's base
    upcast_caller: str  # the op with bf16/fp16 inputs around fp32 GEMMs ("" if none)


def gemm_facts(trace: Trace, analysis: Any) -> GemmFacts:
    """The GEMM facts of one analysed trace (``lab.analysis.Analysis``)."""
    gemm = analysis.gemm
    ev = trace.events
    kernel_us = float(ev["dur_us"].to_numpy()[mask_in(ev["cat"], ("kernel",))].sum())
    has_fp32 = not gemm.empty and bool((gemm["dtype"] == "float32").any())
    return GemmFacts(table=gemm, typical=analysis.gemm_typical, capability=compute_capability(trace),
                     record_shapes=bool(trace.meta.record_shapes), kernel_us=kernel_us,
                     upcast_caller=half_precision_caller(trace) if has_fp32 else "")


def half_precision_caller(trace: Trace) -> str:
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

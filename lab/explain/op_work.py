"""FLOPs and bytes of one op call, from its recorded shapes, dtypes and scalar arguments: the one
model that both a trace's ops against their roofs (``lab.explain.roofs``) and a replayed op
(``lab.replay.rates``) divide by.

By class (the keys of ``lab.explain.classes.CAUSES``' work classes):

- **GEMM**: 2·b·M·K·N; bytes b·(M·K + K·N + M·N) + the added input, at the inputs' dtype.
- **attention** (SDPA): QKᵀ and PV, 2·B·H·L·S·(D + Dv), half of it when ``is_causal`` is recorded
  true; bytes Q + K + V + the output (B·H·L·Dv).
- **convolution**: torch's computeFlops count where the trace recorded the scalar arguments
  (``Concrete Inputs``: stride, padding, dilation, groups); bytes unknown (the output's shape
  depends on them), so no bandwidth and no % of roof.
- **normalization, softmax, elementwise**: bytes are every tensor input read once and an output
  of the largest input's size written once (an in-place op, ``…_``, writes its first input);
  FLOPs one per output element (the intensity is then far left of every ridge).
- **reduction**: the inputs read once (the output is a lower bound's rounding error).
- **copy**: the input read and written (``op_roofs`` uses the bytes the trace records for its
  memcpys where it has them).

Communication and unknown ops get NaN and a ``note`` that says why: a figure the model cannot know
is not shown.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

from lab.analysis.gemm.kinds import gemm_kernel_dtype, gemm_shape
from lab.analysis.table.flops import TORCH_FLOP_OPS, op_flops_from_texts
from lab.vocab import ELEMENT_BYTES, INPUT_TYPE_DTYPES

__all__ = ["CAUSAL_ARGUMENT", "OpWork", "op_work"]

_BOOL = "bool"
# Ops whose output is bool (one byte an element, whatever their inputs).
_PREDICATES = re.compile(r"^(?:eq|ne|lt|le|gt|ge|isnan|isinf|isneginf|isposinf|isfinite|logical_\w+)$")
_NO_RATE = {"communication": "communication: its rate is the Ranks view's bus bandwidth",
            "other_work": "op the roofline model does not know"}
# Where is_causal sits among each attention op's inputs (its ATen schema).
CAUSAL_ARGUMENT = {"aten::scaled_dot_product_attention": 5, "aten::_scaled_dot_product_flash_attention": 4,
                   "aten::_scaled_dot_product_efficient_attention": 6,
                   "aten::_scaled_dot_product_cudnn_attention": 6,
                   "aten::_scaled_dot_product_flash_attention_for_cpu": 4}


@dataclass(frozen=True)
class OpWork:
    """One call's work: NaN where the model cannot know it, and ``note`` says why."""

    flops: float
    bytes: float
    dtype: str  # the inputs' (tf32 for float32 storage on TF32 tensor cores)
    note: str = ""


def op_work(name: str, dims_text: str, types_text: str, cls: str, *, kernel: str = "",
            concrete_text: str = "") -> OpWork:
    """The FLOPs and bytes of one call of ``name`` with these recorded ``Input Dims``, ``Input
    type`` and ``Concrete Inputs`` texts, as class ``cls``; ``kernel`` (its main kernel's name)
    tells float32 storage computed on TF32 tensor cores apart."""
    nan = float("nan")
    dims, types = _literal(dims_text), _literal(types_text)
    if not isinstance(dims, list) or not isinstance(types, list) or not dims:
        return OpWork(nan, nan, "", "no recorded shapes (profile with record_shapes=True)")
    tensors = [(d, _BOOL if t == "bool" else INPUT_TYPE_DTYPES.get(t, "")) for d, t in zip(dims, types)
               if isinstance(d, list) and d and all(isinstance(x, int) for x in d)]
    dtype = next((dt for _, dt in tensors if dt and dt != _BOOL), "")
    size = ELEMENT_BYTES.get(dtype, 0)
    if cls in _NO_RATE:
        return OpWork(nan, nan, dtype, _NO_RATE[cls])
    if cls == "convolution":
        return _convolution(name, dims_text, types_text, concrete_text, dtype)
    if "TensorList" in types:
        return OpWork(nan, nan, dtype, "TensorList inputs (a foreach op): their dtypes are not recorded")
    if not tensors or not (size or any(dt == _BOOL for _, dt in tensors)):
        return OpWork(nan, nan, dtype, "no tensor inputs with a known dtype")
    numel = [math.prod(d) for d, _ in tensors]
    byte = [n * (1 if dt == _BOOL else ELEMENT_BYTES.get(dt, size)) for n, (_, dt) in zip(numel, tensors)]
    if cls == "gemm":
        shape = gemm_shape(name, dims)
        if shape is None:
            return OpWork(nan, nan, dtype, "GEMM operands not recognised in the recorded shapes")
        b, m, kk, n, extra = shape
        if dtype == "float32" and gemm_kernel_dtype(kernel) == "tf32":  # float32 storage, TF32 tensor cores
            dtype = "tf32"
        return OpWork(2.0 * b * m * kk * n, float(size * (b * (m * kk + kk * n + m * n) + extra)), dtype)
    if cls == "attention":
        return _attention(name, tensors, byte, concrete_text, dtype, size)
    if cls == "reduction":
        return OpWork(float(numel[0]), float(byte[0]), dtype)
    if cls == "copy":  # copy_(dst, src) writes dst and reads src; to/_to_copy/clone read and write one
        return OpWork(0.0, float(sum(byte[:2]) if len(byte) >= 2 else 2 * byte[0]), dtype)
    short = name.rsplit("::", 1)[-1]
    out_size = 1 if _PREDICATES.match(short) else size
    out_bytes = byte[0] if short.endswith("_") else max(numel) * out_size
    return OpWork(float(max(numel)), float(sum(byte) + out_bytes), dtype)


def _attention(name: str, tensors: list, byte: list, concrete_text: str, dtype: str, size: int) -> OpWork:
    nan = float("nan")
    if len(tensors) < 3 or min(len(t[0]) for t in tensors[:3]) < 2:
        return OpWork(nan, nan, dtype, "attention inputs not recognised")
    q, key, v = (t[0] for t in tensors[:3])
    flops = 2.0 * math.prod(q[:-2]) * q[-2] * key[-2] * (q[-1] + v[-1])
    concrete = _literal(concrete_text)
    at = CAUSAL_ARGUMENT.get(name, -1)
    if isinstance(concrete, list) and 0 <= at < len(concrete) and str(concrete[at]).strip() == "True":
        flops /= 2
    return OpWork(flops, float(sum(byte[:3]) + math.prod(q[:-1]) * v[-1] * size), dtype)


def _convolution(name: str, dims_text: str, types_text: str, concrete_text: str, dtype: str) -> OpWork:
    nan = float("nan")
    flops = op_flops_from_texts(name, dims_text, types_text, concrete_text) if name in TORCH_FLOP_OPS else 0
    if not flops:
        return OpWork(nan, nan, dtype, "convolution: stride, padding and groups are not in the recorded shapes")
    return OpWork(float(flops), nan, dtype, "convolution: its bytes depend on the output's shape, not recorded")


def _literal(text: str):
    if not text:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return None

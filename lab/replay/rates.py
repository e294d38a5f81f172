"""FLOPs and bytes of one replayed op, from its spec's shapes and dtypes: what the achieved
TFLOP/s and GB/s of a replay (and of the trace's row) divide by.

The one place the replay counts work. GEMM FLOPs are torch's computeFlops count
(``lab.analysis.table.flops``) where it counts the op, else 2·batch·M·K·N from the GEMM table's
shape (``lab.analysis.gemm.kinds.gemm_shape``). Bytes are a first model of the op's own: every
tensor input read once, the output written once; a shared op model may replace this function.
"""

from __future__ import annotations

import math

from lab.analysis.gemm.kinds import gemm_shape
from lab.analysis.table.flops import TORCH_FLOP_OPS, op_flops_from_texts
from lab.replay.spec import ReplayInput, ReplaySpec
from lab.vocab import ELEMENT_BYTES

__all__ = ["op_bytes", "op_flops"]

_INTEGER_BYTES = {"int64": 8, "int32": 4, "int16": 2, "bool": 1}
# Where is_causal sits among each attention op's inputs (its ATen schema).
_CAUSAL_INDEX = {"aten::scaled_dot_product_attention": 5, "aten::_scaled_dot_product_flash_attention": 4,
                 "aten::_scaled_dot_product_efficient_attention": 6, "aten::_scaled_dot_product_cudnn_attention": 6,
                 "aten::_scaled_dot_product_flash_attention_for_cpu": 4}


def element_bytes(dtype: str) -> int:
    return ELEMENT_BYTES.get(dtype) or _INTEGER_BYTES.get(dtype, 4)


def op_flops(spec: ReplaySpec) -> int:
    """Floating-point operations of one call: GEMMs, attention (its two GEMMs) and conv2d; 0 for
    the memory-bound classes, whose rate is GB/s."""
    dims = [list(i.shape) for i in spec.inputs]
    if spec.op in TORCH_FLOP_OPS and spec.op_class in ("gemm", "convolution"):
        return op_flops_from_texts(spec.op, str(dims), str([i.type_text for i in spec.inputs]),
                                   str([_concrete_text(i) for i in spec.inputs]))
    if spec.op_class == "gemm":
        shape = gemm_shape(spec.op, dims)
        return 0 if shape is None else 2 * shape[0] * shape[1] * shape[2] * shape[3]
    if spec.op_class == "sdpa":
        return _attention_flops(spec)
    return 0


def _concrete_text(item: ReplayInput) -> str:
    if item.kind != "scalar" or item.value is None:
        return ""
    return str(list(item.value)) if isinstance(item.value, tuple) else str(item.value)


def _attention_flops(spec: ReplaySpec) -> int:
    """QKᵀ and PV: 2·B·H·L·S·(D + Dv), half of it when causal."""
    q, k, v = (spec.inputs[i].shape for i in range(3))
    if len(q) < 2 or len(k) < 2 or len(v) < 2:
        return 0
    batch_heads = math.prod(q[:-2])
    flops = 2 * batch_heads * q[-2] * k[-2] * (q[-1] + v[-1])
    at = _CAUSAL_INDEX.get(spec.op, -1)
    causal = 0 <= at < len(spec.inputs) and spec.inputs[at].value is True
    return flops // 2 if causal else flops


def op_bytes(spec: ReplaySpec) -> int:
    """Bytes one call moves at least: its tensor inputs read once, its output written once."""
    tensors = spec.tensors
    read = sum(t.numel * element_bytes(t.dtype) for t in tensors)
    return read + _output_elements(spec) * element_bytes(tensors[0].dtype)


def _output_elements(spec: ReplaySpec) -> int:
    tensors = spec.tensors
    dims = [list(i.shape) for i in spec.inputs]
    if spec.op_class == "gemm":
        shape = gemm_shape(spec.op, dims)
        return 0 if shape is None else shape[0] * shape[1] * shape[3]
    if spec.op_class == "sdpa":
        q, v = tensors[0].shape, tensors[2].shape
        return math.prod(q[:-1]) * v[-1] if q and v else 0
    if spec.op_class == "reduction":
        return 0  # the reduced output is small beside the input it reads
    if spec.op_class == "elementwise":
        return _broadcast_elements([t.shape for t in tensors])
    return tensors[0].numel  # norm, softmax, convolution (the input's size: stride 1, same padding)


def _broadcast_elements(shapes: list[tuple[int, ...]]) -> int:
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    return math.prod(max(col) if 0 not in col else 0 for col in zip(*padded))

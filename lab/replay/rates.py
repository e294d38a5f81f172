"""FLOPs and bytes of one replayed op, from its spec's shapes, dtypes and scalars: what the
achieved TFLOP/s and GB/s of a replay (and of the trace's row) divide by. Both come from the one
op model, ``lab.explain.op_work``, the one the trace's ops against their roofs use; what the
replay must allocate (``footprint_bytes``) is its own question, answered here.
"""

from __future__ import annotations

import math

from lab.analysis.gemm.kinds import gemm_shape
from lab.explain.op_work import OpWork, op_work
from lab.replay.spec import ReplayInput, ReplaySpec
from lab.vocab import ELEMENT_BYTES

__all__ = ["footprint_bytes", "op_bytes", "op_flops", "op_work_of"]

_INTEGER_BYTES = {"int64": 8, "int32": 4, "int16": 2, "bool": 1}


def element_bytes(dtype: str) -> int:
    return ELEMENT_BYTES.get(dtype) or _INTEGER_BYTES.get(dtype, 4)


# The replay's class names → the op model's (lab.explain.classes' work classes).
_MODEL_CLASS = {"sdpa": "attention", "norm": "normalization"}


def op_work_of(spec: ReplaySpec) -> OpWork:
    """One call's FLOPs and bytes by the one op model (``lab.explain.op_work``), from the spec's
    shapes, dtypes and scalars as the trace spelled them."""
    dims = str([list(i.shape) for i in spec.inputs])
    types = str([i.type_text for i in spec.inputs])
    concrete = str([_concrete_text(i) for i in spec.inputs])
    return op_work(spec.op, dims, types, _MODEL_CLASS.get(spec.op_class, spec.op_class), concrete_text=concrete)


def op_flops(spec: ReplaySpec) -> int:
    """Floating-point operations of one call (0 where the model cannot know them)."""
    flops = op_work_of(spec).flops
    return int(flops) if math.isfinite(flops) else 0


def op_bytes(spec: ReplaySpec) -> int:
    """Bytes one call moves (0 where the model cannot know them: a convolution's output)."""
    moved = op_work_of(spec).bytes
    return int(moved) if math.isfinite(moved) else 0


def _concrete_text(item: ReplayInput) -> str:
    if item.kind != "scalar" or item.value is None:
        return ""
    return str(list(item.value)) if isinstance(item.value, tuple) else str(item.value)


def footprint_bytes(spec: ReplaySpec) -> int:
    """Bytes the replay allocates: its tensor inputs and its output (what must fit on the device,
    not what a call moves)."""
    tensors = spec.tensors
    held = sum(t.numel * element_bytes(t.dtype) for t in tensors)
    return held + _output_elements(spec) * element_bytes(tensors[0].dtype)


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

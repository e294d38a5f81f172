"""FLOPs as torch's profiler counts them (``torch/csrc/profiler/util.cpp::computeFlops``), from
a trace's recorded shapes: the JSON torch exports carries no FLOP counts, even with_flops.
Part of ``lab.analysis.table.key_averages``."""

from __future__ import annotations

import ast
import math

import numpy as np

from lab.analysis.columns import codes
from lab.analysis.gemm.kinds import GEMM_OP_KINDS, TORCH_FLOP_GEMMS
from lab.trace import Trace

__all__ = ["TORCH_FLOP_OPS", "op_flops_from_texts", "op_flops_of"]


# torch/csrc/profiler/util.cpp computeFlops: the ops it counts and where their tensors sit (the
# GEMMs' operand indices from the one GEMM table, ``lab.analysis.gemm.kinds``).
_FLOP_OPS = {**TORCH_FLOP_GEMMS, "aten::mul": (0,), "aten::add": (0,), "aten::conv2d": (0, 1)}
TORCH_FLOP_OPS = tuple(_FLOP_OPS)
_BATCHED = tuple(name for name, kind in GEMM_OP_KINDS.items() if kind.torch_flops and kind.layout == "bmm")
# A recorded dimension beyond 2**40 is a damaged trace, not a tensor; a count beyond int64 is clipped.
_MAX_DIM, _MAX_FLOPS = 1 << 40, 2**63 - 1


def op_flops_of(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Each event's FLOPs: the trace's "flops" arg, else computeFlops over the recorded inputs."""
    e = trace.events
    given = e["flops"].to_numpy()[rows] if "flops" in e.columns else np.full(len(rows), -1)
    out = np.maximum(given, 0).astype(np.int64)
    if not trace.meta.with_flops:
        return out
    name_codes, names = codes(e["name"])  # names[-1] is "" (code -1)
    counted = np.isin(names, list(_FLOP_OPS))[name_codes[rows]]
    todo = np.flatnonzero(counted & (given < 0))
    if not len(todo):
        return out
    parts = [codes(e[c]) for c in ("name", "input_dims", "input_type", "concrete_inputs")]
    combo = np.stack([c[rows[todo]] for c, _ in parts], axis=1)
    uniq, inv = np.unique(combo, axis=0, return_inverse=True)
    values = [min(_op_flops(*(str(t[int(c)]) for (_, t), c in zip(parts, u, strict=True))), _MAX_FLOPS) for u in uniq]
    out[todo] = np.array(values, dtype=np.int64)[inv.reshape(-1)]
    return out


def op_flops_from_texts(name: str, dims: str, types: str, concrete: str) -> int:
    """One op's FLOPs as computeFlops counts them, from its "Input Dims", "Input type" and
    "Concrete Inputs" texts; 0 for an op it does not count (``TORCH_FLOP_OPS``) or a damaged row."""
    return min(_op_flops(name, dims, types, concrete), _MAX_FLOPS) if name in _FLOP_OPS else 0


def _op_flops(name: str, dims: str, types: str, concrete: str) -> int:
    try:
        shapes, kinds = ast.literal_eval(dims), ast.literal_eval(types)
        args = ast.literal_eval(concrete) if concrete else []
    except (ValueError, SyntaxError, RecursionError):
        return 0
    if not _is_shape_list(shapes) or not isinstance(kinds, list):
        return 0  # a damaged "Input Dims" / "Input type" (not lists of int lists) counts nothing
    need = _FLOP_OPS[name]
    is_tensor = [isinstance(k, str) and k not in ("", "Scalar", "ScalarList", "TensorList", "GenericList")
                 for k in kinds]
    if len(shapes) <= max(need) or not all(i < len(is_tensor) and is_tensor[i] for i in need):
        return 0
    if name in ("aten::mul", "aten::add"):
        return math.prod(shapes[0])
    if name == "aten::conv2d":
        return _conv2d_flops(shapes, args)
    a, b = shapes[need[0]], shapes[need[1]]
    if not a or a[-1] == 0 or (name in _BATCHED and a[0] == 0):
        return 0
    flops = math.prod(a) // a[-1] * math.prod(b) * 2
    return flops // a[0] if name in _BATCHED else flops


def _is_shape_list(shapes) -> bool:
    return isinstance(shapes, list) and all(
        isinstance(s, list) and all(type(d) is int and 0 <= d < _MAX_DIM for d in s) for s in shapes)


def _conv2d_flops(shapes: list, args: list) -> int:
    try:
        stride, padding, dilation = (ast.literal_eval(args[i]) for i in (3, 4, 5))
        groups = int(args[6])
    except (IndexError, ValueError, SyntaxError, TypeError):
        return 0
    if len(shapes[0]) != 4 or len(shapes[1]) != 4 or groups == 0 or len(padding) != 2 \
            or len(dilation) != 2 or len(stride) != 2 or stride[0] * stride[1] == 0:
        return 0
    (n, c, h, w), (o, _, kh, kw) = shapes[0], shapes[1]
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    return 2 * n * oh * ow * kh * kw * c * o // groups

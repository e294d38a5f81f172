"""One op row of a trace → a ``ReplaySpec``: the op, its inputs (shapes, dtypes, strides) and
scalar arguments as ``record_shapes=True`` wrote them, and the op's class; or a
``ReplayRefusal`` that says why the lab cannot rebuild it and what it would need.

torch-free: the spec is plain data (``to_dict`` is what ``lab.replay.standalone`` reads), so a
trace's rows can be turned into specs, checked and exported on a machine without torch.

Where the trace writes them (one event's ``args``, one entry per input of the op's schema):

- ``Input Dims``: a tensor's shape (``[]`` for a 0-d tensor and for non-tensors);
- ``Input type``: a tensor's dtype ("float", "c10::BFloat16", …), "Scalar" / "ScalarList" for
  numbers, "" for an absent optional (None), "TensorList" / "GenericList" for lists;
- ``Input Strides``: a tensor's strides (torch ≥ 2.1; absent before: contiguous is assumed);
- ``Concrete Inputs``: a scalar's value as text ("0.", "False", "-1", "[1, 1]"), "" otherwise.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

from lab.vocab import INPUT_TYPE_DTYPES

__all__ = [
    "OP_CLASSES", "ReplayInput", "ReplayRefusal", "ReplaySpec", "build_spec", "device_refusal", "op_class_of",
]  # fmt: skip


class ReplayRefusal(ValueError):
    """An op row the lab cannot replay; the message says why and what it would need."""


# The op classes the replay rebuilds, by aten name. Any other op is refused (``op_class_of``).
OP_CLASSES: dict[str, tuple[str, ...]] = {
    "gemm": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul",
             "aten::_scaled_mm", "aten::_int_mm", "aten::_addmm_activation"),
    "sdpa": ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
             "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
             "aten::_scaled_dot_product_flash_attention_for_cpu"),
    "convolution": ("aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution"),
    "norm": ("aten::layer_norm", "aten::native_layer_norm", "aten::rms_norm", "aten::_fused_rms_norm"),
    "softmax": ("aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax"),
    "elementwise": ("aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul", "aten::mul_", "aten::div",
                    "aten::div_", "aten::gelu", "aten::relu", "aten::relu_", "aten::silu", "aten::sigmoid",
                    "aten::tanh", "aten::exp", "aten::pow", "aten::rsqrt", "aten::sqrt", "aten::neg",
                    "aten::clamp_min", "aten::copy_", "aten::fill_", "aten::where", "aten::sin", "aten::cos",
                    "aten::gelu_backward", "aten::silu_backward", "aten::threshold_backward", "aten::square"),
    "reduction": ("aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::argmax", "aten::prod",
                  "aten::var", "aten::std", "aten::linalg_vector_norm", "aten::norm", "aten::all", "aten::any"),
}  # fmt: skip
_CLASS_OF = {op: cls for cls, ops in OP_CLASSES.items() for op in ops}
# Integer and bool tensors (index, mask and count inputs) the lab's dtype vocabulary does not
# carry, as "Input type" spells them (c10's ScalarType names through typeMetaToScalarType).
_INTEGER_SPELLINGS = {"long int": "int64", "int": "int32", "short int": "int16", "bool": "bool"}
DTYPE_OF_SPELLING = {**INPUT_TYPE_DTYPES, **_INTEGER_SPELLINGS}
_NOT_TENSOR_TYPES = ("", "Scalar", "ScalarList")
# A recorded dimension beyond 2**40 is a damaged trace, not a tensor.
_MAX_DIM = 1 << 40
# FP8 GEMMs (torch._scaled_mm) run on NVIDIA GPUs of compute capability 8.9 (Ada) or newer.
FP8_MIN_CAPABILITY = (8, 9)


@dataclass(frozen=True)
class ReplayInput:
    """One input of the op: a tensor, a scalar (or list of scalars), or None."""

    kind: str  # "tensor" | "scalar" | "none"
    shape: tuple[int, ...] = ()
    strides: tuple[int, ...] | None = None  # None: the trace recorded none (contiguous assumed)
    dtype: str = ""  # torch's name of a tensor's dtype: "bfloat16", "float8_e4m3fn", "int64"
    value: Any = None  # a scalar's value: bool, int, float, a tuple of them, or text
    type_text: str = ""  # "Input type" as the trace spells it

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def layout(self) -> str:
        """"contiguous", "channels_last", "strided" (transposed, expanded, sliced) or "unknown"."""
        if self.strides is None:
            return "unknown"
        if self.strides == contiguous_strides(self.shape):
            return "contiguous"
        if len(self.shape) == 4 and self.strides == channels_last_strides(self.shape):
            return "channels_last"
        return "strided"

    def to_dict(self) -> dict:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"kind": self.kind, "shape": list(self.shape), "strides": None if self.strides is None
                else list(self.strides), "dtype": self.dtype, "value": value, "type": self.type_text}


@dataclass(frozen=True)
class ReplaySpec:
    """What a replay rebuilds: the op, its class, its inputs in schema order."""

    op: str
    op_class: str
    inputs: tuple[ReplayInput, ...]
    strides_recorded: bool = True  # False: the trace has no "Input Strides" (contiguous assumed)

    @property
    def tensors(self) -> tuple[ReplayInput, ...]:
        return tuple(i for i in self.inputs if i.kind == "tensor")

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.dtype for t in self.tensors))

    @property
    def shapes_text(self) -> str:
        """The shapes as the trace's "Input Dims" writes them."""
        return str([list(i.shape) for i in self.inputs])

    def to_dict(self) -> dict:
        return {"op": self.op, "op_class": self.op_class, "inputs": [i.to_dict() for i in self.inputs],
                "strides_recorded": self.strides_recorded}

    @classmethod
    def from_dict(cls, data: dict) -> ReplaySpec:
        """``to_dict``'s inverse (a replay run's spec travels in its config as JSON)."""
        def item(d: dict) -> ReplayInput:
            value = tuple(d["value"]) if isinstance(d.get("value"), list) else d.get("value")
            strides = None if d.get("strides") is None else tuple(d["strides"])
            return ReplayInput(kind=d["kind"], shape=tuple(d.get("shape", ())), strides=strides,
                               dtype=d.get("dtype", ""), value=value, type_text=d.get("type", ""))
        return cls(op=data["op"], op_class=data["op_class"], inputs=tuple(item(d) for d in data["inputs"]),
                   strides_recorded=bool(data.get("strides_recorded", True)))


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def channels_last_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def op_class_of(op: str) -> str:
    """The op's class, or a refusal naming the classes the replay knows."""
    cls = _CLASS_OF.get(op)
    if cls is None:
        known = ", ".join(OP_CLASSES)
        raise ReplayRefusal(
            f"{op} is not an op the replay rebuilds (classes: {known}); replaying it would need an entry in "
            f"lab/replay/spec.py OP_CLASSES and inputs the trace records fully (shapes, dtypes, scalar values)")
    return cls


def build_spec(op: str, dims: str, types: str, strides: str = "", concrete: str = "",
               *, record_shapes: bool | None = None) -> ReplaySpec:
    """A spec from one op row's texts (the trace columns ``input_dims``, ``input_type``,
    ``input_strides``, ``concrete_inputs``); ``ReplayRefusal`` when it cannot be rebuilt."""
    cls = op_class_of(op)
    if not dims or not types:
        hint = "" if record_shapes else " (this trace was recorded without it)"
        raise ReplayRefusal(f"{op} has no recorded input shapes{hint}: record the trace with "
                            f"torch.profiler.profile(record_shapes=True, …) to replay its ops")
    shapes, kinds = _literal(dims, "Input Dims"), _literal(types, "Input type")
    stride_list = _literal(strides, "Input Strides") if strides else None
    values = _literal(concrete, "Concrete Inputs") if concrete else [""] * len(kinds)
    if not isinstance(shapes, list) or not isinstance(kinds, list) or len(shapes) != len(kinds):
        raise ReplayRefusal(f"{op}: Input Dims and Input type do not list the same inputs; the row is damaged")
    if stride_list is not None and (not isinstance(stride_list, list) or len(stride_list) != len(kinds)):
        stride_list = None
    if not isinstance(values, list) or len(values) != len(kinds):
        values = [""] * len(kinds)
    inputs = tuple(_input(op, i, shapes[i], kinds[i], None if stride_list is None else stride_list[i], values[i])
                   for i in range(len(kinds)))
    if not any(i.kind == "tensor" for i in inputs):
        raise ReplayRefusal(f"{op}: the row records no tensor input; nothing to replay")
    return ReplaySpec(op=op, op_class=cls, inputs=inputs, strides_recorded=stride_list is not None)


def _literal(text: str, what: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        raise ReplayRefusal(f"the row's {what} ({text[:60]!r}) is not readable; the trace is damaged") from None


def _input(op: str, index: int, shape, kind, strides, value) -> ReplayInput:
    if not isinstance(kind, str):
        raise ReplayRefusal(f"{op}: input {index}'s type {kind!r} is not text; the row is damaged")
    if kind in ("TensorList", "GenericList"):
        raise ReplayRefusal(f"{op}: input {index} is a {kind}; record_shapes writes a list's shapes but not its "
                            f"dtypes or values, so the replay cannot rebuild it")
    if kind in _NOT_TENSOR_TYPES:
        return _scalar(kind, value)
    dtype = DTYPE_OF_SPELLING.get(kind)
    if dtype is None:
        raise ReplayRefusal(f"{op}: input {index} has dtype {kind!r}, which the replay does not know; it would need "
                            f"an entry mapping it to a torch dtype in lab/replay/spec.py")
    if not _is_dims(shape):
        raise ReplayRefusal(f"{op}: input {index}'s dims {shape!r} are not a shape; the row is damaged")
    if isinstance(strides, list) and shape and not strides:
        raise ReplayRefusal(f"{op}: input {index} ({shape}) has no strides: a sparse tensor (CSR, COO), which the "
                            f"replay does not rebuild (it builds dense, strided tensors)")
    stride = tuple(strides) if _is_dims(strides) and len(strides) == len(shape) else None
    return ReplayInput(kind="tensor", shape=tuple(shape), strides=stride, dtype=dtype, type_text=kind)


def _scalar(kind: str, text) -> ReplayInput:
    if not isinstance(text, str) or text == "":
        return ReplayInput(kind="none" if kind == "" else "scalar", value=None, type_text=kind)
    return ReplayInput(kind="scalar", value=_scalar_value(text), type_text=kind)


def _scalar_value(text: str):
    """"0." → 0.0, "False" → False, "-1" → -1, "[1, 1]" → (1, 1), "inf" → inf; else the text."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        try:
            return float(text)
        except ValueError:
            return text
    if isinstance(value, list):
        return tuple(value)
    return value if isinstance(value, (bool, int, float)) else text


def _is_dims(dims) -> bool:
    return isinstance(dims, list) and all(type(d) is int and 0 <= d < _MAX_DIM for d in dims)


def device_refusal(spec: ReplaySpec, *, kind: str, compute_capability: tuple[int, int] | None) -> str | None:
    """Why ``spec``'s dtypes cannot run on this device (``kind`` "cpu" or "cuda"), or None: said
    before anything is allocated."""
    dtypes = set(spec.dtypes)
    fp8 = sorted(d for d in dtypes if d.startswith("float8"))
    cc = compute_capability or (0, 0)
    if fp8 and kind == "cuda" and cc < FP8_MIN_CAPABILITY:
        return (f"{', '.join(fp8)} needs an NVIDIA GPU of compute capability 8.9 or newer (this one is "
                f"{cc[0]}.{cc[1]}); replay on an H100/H200/L4/RTX 40xx, or change the dtype")
    if kind == "cuda" and "bfloat16" in dtypes and cc < (8, 0):
        return f"bfloat16 needs compute capability 8.0 or newer (this GPU is {cc[0]}.{cc[1]}); choose float16"
    if kind == "cpu" and spec.op_class == "sdpa" and "flash" in spec.op and "for_cpu" not in spec.op:
        return f"{spec.op} is a CUDA kernel; replay it with --device cuda, or aten::scaled_dot_product_attention on CPU"
    if kind == "cpu" and any(x in spec.op for x in ("cudnn", "efficient_attention")):
        return f"{spec.op} is a CUDA kernel; replay it with --device cuda"
    return None

"""The causes a step's time is attributed to, and what class of work an op or kernel is.

Defined once: the attribution (``attribution.py``), the op roofs (``roofs.py``), the findings
(``lab.judge``), the Summary's stacked bar and the CLI all read these names.

Two kinds of cause:

- **Work**, by op class (the GPU is busy, so this is what a step spends its time on; on a
  trace without GPU activity, the host's own op time):
  GEMM, attention, convolution, normalization, softmax, elementwise, reduction, copy,
  communication, other.
- **What held up the next launch** while the GPU sat idle (or, on a trace without GPU work,
  what the host thread was doing): the input pipeline, torch.compile's compilation,
  synchronisation, the optimizer step, launch calls, op dispatch, Python between ops, the
  profiler's own work, and host time no recorded event explains (a sleep, I/O).

On a trace without GPU activity the host's op time is the work itself: a CPU op is counted
under its class (an ``aten::mm`` on the CPU is GEMM time), not as dispatch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lab.vocab import (  # the names torch writes, defined once
    COLLECTIVE_RANGE_PATTERN,
    COMPILE_PATTERN,
    GPU_COPY_CATS,
    INPUT_PIPELINE_PATTERN,
    OPTIMIZER_PATTERN,
)

__all__ = [
    "CAUSES", "CAUSE_INDEX", "COLLECTIVE_RANGE_PATTERN", "COMPILE_PATTERN", "WORK_CLASSES", "HOST_CAUSES",
    "INPUT_PIPELINE_PATTERN", "OPTIMIZER_PATTERN",
    "Cause", "cause", "kernel_class", "op_class",
]  # fmt: skip


@dataclass(frozen=True)
class Cause:
    key: str  # the column stem: "<key>_us" in the attribution's frame
    label: str  # how the page and the CLI name it
    side: str  # "work" (the GPU, or a CPU-only trace's ops, ran this) or "host" (the GPU waited)
    color: str  # the Summary bar's colour


WORK_CLASSES = (
    Cause("gemm", "GEMM", "work", "#1f77b4"),
    Cause("attention", "attention", "work", "#17becf"),
    Cause("convolution", "convolution", "work", "#aec7e8"),
    Cause("normalization", "normalization", "work", "#9467bd"),
    Cause("softmax", "softmax", "work", "#c5b0d5"),
    Cause("elementwise", "elementwise", "work", "#2ca02c"),
    Cause("reduction", "reduction", "work", "#98df8a"),
    Cause("copy", "copy", "work", "#8c564b"),
    Cause("communication", "communication", "work", "#e377c2"),
    Cause("other_work", "other ops", "work", "#7f7f7f"),
)
# Host causes, highest priority first: an instant inside several (a launch inside the optimizer
# step inside a compiled region's compile) is counted under the first. The profiler's own work
# is never the program's; a synchronisation is a wait whatever encloses it; compilation, the
# input pipeline and the optimizer step are the cause of everything they run; an allocator call
# is a runtime call, but not a launch.
HOST_CAUSES = (
    Cause("profiler", "the profiler's own work", "host", "#bcbd22"),
    Cause("sync", "synchronisation", "host", "#d62728"),
    Cause("compile", "torch.compile compiling", "host", "#ff7f0e"),
    Cause("input", "input pipeline", "host", "#ffbb78"),
    Cause("optimizer", "optimizer step", "host", "#f7b6d2"),
    Cause("allocator", "device memory allocation (cudaMalloc / cudaFree)", "host", "#637939"),
    Cause("launch", "launch calls", "host", "#ff9896"),
    Cause("dispatch", "op dispatch (host side of ops)", "host", "#dbdb8d"),
    Cause("python", "Python between ops", "host", "#c49c94"),
    Cause("unrecorded", "host time no recorded event explains", "host", "#e7e7e7"),
)
CAUSES = WORK_CLASSES + HOST_CAUSES
# A cause's position in CAUSES: the attribution's per-segment label.
CAUSE_INDEX = {c.key: i for i, c in enumerate(CAUSES)}
_BY_KEY = {c.key: c for c in CAUSES}


def cause(key: str) -> Cause:
    return _BY_KEY[key]


# Op name → class. Matched on the name without its namespace ("aten::native_layer_norm" →
# "native_layer_norm"); the GEMM family is lab.analysis.gemm.kinds' (passed in by op_class).
_OP_CLASS_PATTERNS = (
    ("attention", re.compile(r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention"
                             r"|flex_attention|_fused_sdp")),
    ("convolution", re.compile(r"conv(?:olution)?(?:[123]d|_transpose|_backward|_depthwise|$)|cudnn_convolution"
                               r"|mkldnn_convolution|convolution")),
    ("normalization", re.compile(r"(?:layer|rms|batch|group|instance)_norm")),
    ("softmax", re.compile(r"softmax")),
    ("communication", re.compile(r"^(?:all_reduce|allreduce|all_gather|allgather|reduce_scatter|broadcast"
                                 r"|all_to_all|alltoall|barrier|send|recv|record_param_comms)")),
    ("reduction", re.compile(r"^(?:sum|mean|amax|amin|max|min|argmax|argmin|norm|linalg_vector_norm|var|std"
                             r"|var_mean|std_mean|prod|cumsum|cumprod|logsumexp|all|any|count_nonzero)(?:_|$)")),
    ("copy", re.compile(r"^(?:copy_|_to_copy|to|clone|contiguous|cat|stack|index_select|gather|scatter\w*"
                        r"|index|index_put_?|_local_scalar_dense|item|embedding\w*|narrow_copy|pad|constant_pad_nd)$")),
    ("elementwise", re.compile(
        r"^(?:add|sub|mul|div|rsub|neg|abs|exp|exp2|log|log1p|sqrt|rsqrt|pow|reciprocal|sigmoid|tanh|relu|gelu"
        r"|silu|mish|elu|leaky_relu|hardswish|hardsigmoid|softplus|threshold|clamp\w*|where|fill|zero|zeros_like"
        r"|ones_like|masked_fill|lerp|addcmul|addcdiv|maximum|minimum|eq|ne|lt|le|gt|ge|logical_\w+|bitwise_\w+"
        r"|sin|cos|erf|dropout|native_dropout|floor|ceil|round|trunc|sign|square|_foreach_\w+|_fused_\w+"
        r"|\w+_backward)_?$")),
)
# Kernel name → class when the op that launched it says nothing (Inductor's fused kernels,
# kernels of an op the table does not list). Inductor prefixes: triton_poi (pointwise),
# triton_red / triton_per (reductions), triton_tem (templates: GEMMs, caught as GEMM kernels).
_KERNEL_CLASS_PATTERNS = (
    ("communication", re.compile(r"nccl|rccl|gloo", re.IGNORECASE)),
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa", re.IGNORECASE)),
    ("convolution", re.compile(r"implicit_gemm|fprop|dgrad|wgrad|conv", re.IGNORECASE)),
    ("normalization", re.compile(r"layer_?norm|rms_?norm|batch_?norm|group_?norm|welford", re.IGNORECASE)),
    ("softmax", re.compile(r"softmax", re.IGNORECASE)),
    ("reduction", re.compile(r"^triton_(?:red|per)_|reduce|reduction", re.IGNORECASE)),
    ("elementwise", re.compile(r"^triton_poi_|elementwise|vectorized|unrolled|foreach|multi_tensor_apply"
                               r"|fill|distribution", re.IGNORECASE)),
    ("copy", re.compile(r"copy|cat_|CatArray|index|gather|scatter|embedding", re.IGNORECASE)),
)


def op_class(name: str, *, is_gemm: bool) -> str:
    """The class of a CPU op by its name ("other_work" when no pattern knows it)."""
    if is_gemm:
        return "gemm"
    short = name.rsplit("::", 1)[-1]
    for key, pattern in _OP_CLASS_PATTERNS:
        if pattern.search(short):
            return key
    return "other_work"


def kernel_class(name: str, *, cat: str, is_gemm: bool, owner_class: str) -> str:
    """The class of one GPU activity: copies and memsets by their category, GEMMs by their
    kernel's name, then the class of the op that launched it, then the kernel's own name."""
    if cat in GPU_COPY_CATS:
        return "copy"
    if is_gemm:
        return "gemm"
    head = _KERNEL_CLASS_PATTERNS[:3]  # communication, attention, convolution: the name is surer than the op
    for key, pattern in head:
        if pattern.search(name):
            return key
    if owner_class != "other_work":
        return owner_class
    for key, pattern in _KERNEL_CLASS_PATTERNS[3:]:
        if pattern.search(name):
            return key
    return "other_work"

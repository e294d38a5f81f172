"""What the lab knows of a GEMM, in one table: the ops that run one (where their operands sit),
the kernels that are one (by library naming scheme), the dtype a kernel's name states, and the
kernels that share those words but are not GEMMs (attention, convolutions, helpers).

A GPU kernel is a GEMM by what it is, whichever op launched it: ``is_gemm_kernel``. Its shape
comes from the launching op's recorded Input Dims through ``GEMM_OP_KINDS`` (or, for an op the
table does not list, the first two matrix operands, ``gemm_shape``). ``lab.analysis.gemm``
computes rates from these; ``lab.analysis.table.flops`` reads torch's computeFlops operand indices
from the same entries.

A new GEMM entry point is one ``GemmOp``; a new kernel library one ``GemmKernelFamily``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = [
    "GEMM_KERNEL_DTYPES", "GEMM_KERNEL_FAMILIES", "GEMM_LEAF_OPS", "GEMM_OPS", "GEMM_OP_KINDS", "GEMM_TEMPLATE_OP",
    "GemmKernelFamily", "GemmOp", "NOT_GEMM_KERNEL_PATTERN", "NOT_GEMM_OP_PATTERN", "TORCH_FLOP_GEMMS",
    "gemm_kernel_dtype", "gemm_kernel_library", "gemm_op_kind", "gemm_shape", "is_gemm_kernel", "is_gemm_op",
    "is_not_gemm_op",
]  # fmt: skip


@dataclass(frozen=True)
class GemmOp:
    """One op that runs a matrix multiply, and where its operands sit in "Input Dims"."""

    name: str
    a: int  # operand index of A: M×K ("mm"), batch×M×K ("bmm"), …×K ("linear", "matmul")
    b: int  # operand index of B: K×N ("mm"), batch×K×N ("bmm"), the N×K weight ("linear")
    bias: int | None = None  # an input added once (bias / C): read, counted in bytes moved
    layout: str = "mm"  # "mm" | "bmm" | "linear" | "matmul" (broadcasting) | "grouped" | "operands" (see gemm_shape)
    # Runs the multiply itself; a wrapper (aten::linear → aten::addmm) nests a leaf, so sums over
    # ops take the leaves alone, and per-kernel analyses the nearest GEMM op above a kernel.
    leaf: bool = True
    torch_flops: bool = False  # torch/csrc/profiler/util.cpp computeFlops counts it (with_flops)


GEMM_OP_KINDS: dict[str, GemmOp] = {
    g.name: g
    for g in (
        GemmOp("aten::mm", 0, 1, torch_flops=True),
        GemmOp("aten::addmm", 1, 2, bias=0, torch_flops=True),
        GemmOp("aten::bmm", 0, 1, layout="bmm", torch_flops=True),
        GemmOp("aten::baddbmm", 1, 2, bias=0, layout="bmm", torch_flops=True),
        # _scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum):
        # FP8 (float8_e4m3fn / e5m2) through cuBLASLt (nvjet_sm90_qqtst_… on the H200).
        GemmOp("aten::_scaled_mm", 0, 1, bias=4),
        # _int_mm(self, mat2): int8 × int8 → int32 (cutlass_80_wmma_tensorop_i161616gemm_s8_…).
        GemmOp("aten::_int_mm", 0, 1),
        # _grouped_mm(self, mat2, offs, bias, out_dtype): the MoE grouped GEMM, one problem per
        # expert (CUTLASS's GroupProblemShape kernel on the H200); dims [[T, K], [G, K, N], [G], …].
        GemmOp("aten::_grouped_mm", 0, 1, bias=3, layout="grouped"),
        # _scaled_grouped_mm(self, mat2, scale_a, scale_b, offs, bias, …): the FP8 one.
        GemmOp("aten::_scaled_grouped_mm", 0, 1, bias=5, layout="grouped"),
        # A leaf (CUDA and CPU: it calls no aten::addmm); on CUDA one cuBLASLt kernel with the
        # bias+GELU epilogue (nvjet_…_gelubias_TNT).
        GemmOp("aten::_addmm_activation", 1, 2, bias=0),
        GemmOp("aten::linear", 0, 1, bias=2, layout="linear", leaf=False),
        GemmOp("aten::matmul", 0, 1, layout="matmul", leaf=False),
    )
}
GEMM_LEAF_OPS = tuple(name for name, g in GEMM_OP_KINDS.items() if g.leaf)
GEMM_OPS = tuple(GEMM_OP_KINDS)
# The ops whose FLOPs torch's profiler counts (with_flops), with A's and B's operand index.
TORCH_FLOP_GEMMS = {name: (g.a, g.b) for name, g in GEMM_OP_KINDS.items() if g.torch_flops}
# Inductor's GEMM templates (torch.compile max-autotune): the launch is recorded as an op of
# the kernel's own name (triton_tem_fused_add_mm_relu_0, triton_tem_fused_addmm_1,
# triton_tem_fused_bmm_2), its Input Dims the template's arguments in order (A, B, the
# epilogue's inputs, the output). Flex attention's template (triton_tem_fused_flex_attention_0)
# names no mm.
GEMM_TEMPLATE_OP = GemmOp("triton GEMM template", 0, 1, layout="operands")
_TEMPLATE_NAME = re.compile(r"^triton_tem_(?:\w*?_)?(?:add)?b?mm(?:_|$)")


# Ops whose kernels are never GEMM rows, whatever their names: convolutions. cuDNN runs one as
# an implicit GEMM (sm90_xmma_fprop_implicit_gemm_…, …wgrad…, …dgrad…), and a 1x1 convolution or
# a weight gradient as a plain GEMM kernel (nvjet_sm90_tst_…_TNN under aten::cudnn_convolution,
# nvjet_…_splitK_NTT under aten::convolution_backward: conv_channels_last, conv_backward on the
# H200). Which one runs is cuDNN's choice per shape, and the op records N·C·H·W dims, not matrix
# operands: counting only the convolutions that happened to run as nvjet would make the GEMM
# figures depend on cuDNN's heuristics. A convolution's FLOPs are torch's (with_flops) instead.
NOT_GEMM_OP_PATTERN = re.compile(r"^aten::\w*conv")


def is_not_gemm_op(name: str) -> bool:
    """An op whose kernels are not GEMMs even when named like one (``NOT_GEMM_OP_PATTERN``)."""
    return bool(NOT_GEMM_OP_PATTERN.search(name))


def gemm_op_kind(name: str) -> GemmOp | None:
    """The table's entry for an op name (an Inductor GEMM template too), None for other ops."""
    return GEMM_OP_KINDS.get(name) or (GEMM_TEMPLATE_OP if _TEMPLATE_NAME.search(name) else None)


def is_gemm_op(name: str) -> bool:
    return gemm_op_kind(name) is not None


# --------------------------------------------------------------------------- kernels


@dataclass(frozen=True)
class GemmKernelFamily:
    """GEMM kernels of one library, recognised by how it names them."""

    library: str
    pattern: re.Pattern
    examples: tuple[str, ...]  # from the H200 traces in lab/samples and tests/data


# First match names the library: the generic "gemm" words last (CUTLASS names contain them too).
GEMM_KERNEL_FAMILIES = (
    GemmKernelFamily("cuBLAS / cuBLASLt (nvjet)", re.compile(r"nvjet", re.IGNORECASE), (
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",  # bf16: Hopper's JIT GEMMs
        "nvjet_sm90_qqtst_144x128_128x6_1x2_h_bz_coopA_algo2_TNN",  # FP8 (torch._scaled_mm)
    )),
    GemmKernelFamily("CUTLASS", re.compile(r"cutlass", re.IGNORECASE), (
        "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4",
        # torch._grouped_mm (bf16) and torch._scaled_grouped_mm (FP8): mangled CUTLASS 3 names
        "_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel_for_sm9xINS_4gemm6kernel13GemmUniversalINS5_"
        "17GroupProblemShapeIN4cute5tupleIJiiiEEEEE…",
        "cutlass::Kernel2<cutlass_80_wmma_tensorop_i161616gemm_s8_forwardCompat_128x128_32x2_nn_align4>",  # int8
        "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x2x1_0_tnn_align8_warpspecialized",
    )),
    GemmKernelFamily("cuDNN (runtime-fusion matmul)", re.compile(r"matmul", re.IGNORECASE), (
        "cudnn_generated_fort_native_matmul_sm90_…",
    )),
    GemmKernelFamily("Triton GEMM template (torch.compile max-autotune)", _TEMPLATE_NAME, (
        "triton_tem_fused_add_mm_relu_0", "triton_tem_fused_addmm_0", "triton_tem_fused_mm_1",
    )),
    GemmKernelFamily("cuBLAS (xmma, sgemm, gemv)", re.compile(r"xmma|gemm|gemv", re.IGNORECASE), (
        "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "ampere_sgemm_128x64_nn", "volta_h884gemm_64x64_ldg8_nn", "gemv2T_kernel_val<int, int, float, float>",
    )),
)
# Kernels whose names share those words but are not matrix multiplies: attention built from
# CUTLASS/wgmma tiles (pytorch_flash::flash_fwd_kernel<…cutlass::bfloat16_t…>, fmha_cutlassF_…,
# efficient attention, cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_…, Inductor's
# triton_tem_fused_flex_attention_0), convolutions run as implicit GEMMs
# (sm90_xmma_fprop_implicit_gemm_…, …dgrad…, …wgrad…), split-K reductions and other helpers
# (splitKreduce_kernel, cutlass::reduction::…ReduceSplitK), and Inductor's pointwise/reduction
# kernels, whose names list the ops they fused (triton_poi_fused_mm_…).
NOT_GEMM_KERNEL_PATTERN = re.compile(
    r"flash|fmha|attention|attn|sdpa|softmax|implicit_gemm|fprop|dgrad|wgrad|conv|reduc|computeOffsets"
    r"|^triton_(?:poi|red|per)_",
    re.IGNORECASE,
)
# The dtype a GEMM kernel's name states, first match wins (None: the name does not say, so the
# op's "Input type" decides). "float8" is the family: the op's input types say e4m3 or e5m2.
# FP8 first (nvjet's "qq" inputs, CUTLASS/xmma's e4m3/e5m2), then int8 (s8 / i8 operands, the
# i161616 / imma integer tensor-op shapes), then TF32: sm90_xmma_gemm_f32f32_tf32f32 stores
# float32 but runs TF32 tensor cores. bf16 before f16 ("bf16" contains "f16"). s1688gemm /
# s1684gemm are the fp32-accumulating m16n8k8 / m16n8k4 tensor-op shapes; with no 16-bit type
# named beside them (caught by the earlier entries) their inputs are float32, so they run TF32.
# h884 / h1688 / h16816 gemm are the half-precision tensor-op shapes; sgemm and ffma plain FP32.
GEMM_KERNEL_DTYPES = (
    ("float8", re.compile(r"e4m3|e5m2|fp8|float8|f8f8|nvjet_sm\d+a?_qq", re.IGNORECASE)),
    ("int8", re.compile(r"_[su]8_|i8i8|s8s8|imma|i161616|int8", re.IGNORECASE)),
    ("tf32", re.compile(r"tf32", re.IGNORECASE)),
    ("bfloat16", re.compile(r"bf16|bfloat16", re.IGNORECASE)),
    ("float16", re.compile(r"(?<!b)f16|fp16|half|h(?:884|1688|16816)gemm", re.IGNORECASE)),
    ("tf32", re.compile(r"s168[48]gemm", re.IGNORECASE)),
    ("float32", re.compile(r"sgemm|ffma|f32f32_f32f32", re.IGNORECASE)),
)


def gemm_kernel_library(name: str) -> str | None:
    """The library whose naming scheme a GEMM kernel's name follows, None for a non-GEMM."""
    if NOT_GEMM_KERNEL_PATTERN.search(name):
        return None
    return next((f.library for f in GEMM_KERNEL_FAMILIES if f.pattern.search(name)), None)


def is_gemm_kernel(name: str) -> bool:
    """Whether a GPU kernel is a GEMM by its name (``GEMM_KERNEL_FAMILIES``), whoever launched it."""
    return gemm_kernel_library(name) is not None


def gemm_kernel_dtype(name: str) -> str | None:
    """The dtype a GEMM kernel's name states ("float8", "int8", "tf32", "bfloat16", …), None when
    it says none."""
    return next((dtype for dtype, pattern in GEMM_KERNEL_DTYPES if pattern.search(name)), None)


# --------------------------------------------------------------------------- shapes


Shape = tuple[int, int, int, int, int]  # (batch, M, K, N, elements of the added input)


def gemm_shape(op: str, dims) -> Shape | None:
    """(batch, M, K, N, extra input elements e.g. bias) of one GEMM op from its recorded dims.

    For an op the table does not list (a GEMM entry point torch adds later) the first two
    matrix operands decide, as for an Inductor template (layout "operands").
    """
    kind = gemm_op_kind(op) or GEMM_TEMPLATE_OP
    try:
        shape = _LAYOUTS[kind.layout](kind, dims)
    except (TypeError, ValueError, IndexError):
        return None
    if shape is None:
        return None
    bias = dims[kind.bias] if kind.bias is not None and kind.bias < len(dims) else None
    return (*shape, math.prod(bias) if bias else 0)


def _mm(kind: GemmOp, dims) -> tuple[int, int, int, int]:
    (m, k), (_, n) = dims[kind.a], dims[kind.b]
    return 1, m, k, n


def _bmm(kind: GemmOp, dims) -> tuple[int, int, int, int]:
    (b, m, k), (_, _, n) = dims[kind.a], dims[kind.b]
    return b, m, k, n


def _linear(kind: GemmOp, dims) -> tuple[int, int, int, int]:
    a, w = dims[kind.a], dims[kind.b]
    return 1, math.prod(a[:-1]) if len(a) > 1 else 1, a[-1], w[0]


def _matmul(kind: GemmOp, dims) -> tuple[int, int, int, int] | None:
    a, b = dims[kind.a], dims[kind.b]
    if len(a) < 2 or not b:
        return None
    n = b[-1] if len(b) >= 2 else 1
    batch = math.prod(a[:-2]) if len(a) > 2 else (math.prod(b[:-2]) if len(b) > 2 else 1)
    return batch, a[-2], a[-1], n


def _operands(kind: GemmOp, dims) -> tuple[int, int, int, int] | None:
    """The first two consecutive 2-D (or equal-batch 3-D) operands A, B with A's last dim B's
    second-to-last: A·B. An addmm template's (bias M×N, A M×K, B K×N) pairs the bias with A only
    when N = M, and then 2·M·N·K is the same product."""
    mats = [d for d in dims if isinstance(d, list) and len(d) in (2, 3)]
    for a, b in zip(mats, mats[1:], strict=False):
        if len(a) == len(b) and a[-1] == b[-2] and (len(a) == 2 or a[0] == b[0]):
            return (a[0] if len(a) == 3 else 1), a[-2], a[-1], b[-1]
    return None


def _grouped(kind: GemmOp, dims) -> tuple[int, int, int, int] | None:
    """A grouped GEMM's total: 2-D × 3-D (T×K tokens, G×K×N experts, rows split by offs) is
    T×K·K×N; 3-D × 3-D a bmm; 3-D × 2-D (G×M×K, K×N_total, columns split) M×K·K×N_total; 2-D × 2-D
    (M×K_total, K_total×N, K split) M×K_total·K_total×N. 2·M·K·N is then the FLOPs of all groups."""
    a, b = dims[kind.a], dims[kind.b]
    if len(a) == 3 and len(b) == 3:
        return _bmm(kind, dims)
    if len(a) not in (2, 3) or len(b) not in (2, 3):
        return None
    return 1, a[-2], a[-1], b[-1]


_LAYOUTS = {"mm": _mm, "bmm": _bmm, "linear": _linear, "matmul": _matmul, "operands": _operands,
            "grouped": _grouped}

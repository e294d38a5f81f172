"""Does a kernel use Tensor Cores? The TensorBoard plugin's rule, and the lab's rule for kernels
the plugin's list predates (Hopper's nvjet/wgmma, FP8, int8 WMMA, attention, Triton templates).

The plugin decides from the kernel's name alone (kineto ``tb_plugin/torch_tb_profiler/profiler/
tensor_core.py`` at 041e7ce9): a kernel uses Tensor Cores when its name contains one of
``TC_Allowlist.allowlist`` (L14-18, taken from NVIDIA PyProf's ``tc.py``), and an op is "Tensor
Cores eligible" when its name is one of ``TC_OP_Allowlist.allowlist`` (L31-49, autocast's
lower-precision ops) or it launched a Tensor-Core kernel (``node.py`` L125-127).

That list was written for Volta/Ampere names and is wrong both ways on an H200: cuBLAS's
``sm80_xmma_gemm_f32f32_f32f32_…_ffma`` (plain FP32 FMA, 51 TFLOP/s in the corpus's
``gemm_fp32``) matches ``xmma_gemm`` and is called a Tensor-Core kernel, while every
``nvjet_sm90_*`` GEMM (bf16 796 TFLOP/s, FP8 1.48 PFLOP/s), CUTLASS's int8
``wmma_tensorop_i161616gemm`` and cuDNN's ``sm90_xmma_fprop_implicit_gemm`` convolutions match
nothing. The lab's rule keeps the plugin's patterns, refuses names that say SIMT (``ffma``,
``simt``, ``sgemm`` without ``tensorop``) first, and adds the newer families; the page shows
both columns so a reader of an old TensorBoard screenshot sees why they differ.
"""

from __future__ import annotations

import re

from lab.analysis.gemm.kinds import GEMM_OPS

__all__ = [
    "LAB_TC_KERNEL_PATTERN", "PLUGIN_TC_KERNEL_PATTERNS", "PLUGIN_TC_OPS", "SIMT_KERNEL_PATTERN",
    "op_tensor_core_eligible", "plugin_uses_tensor_cores", "uses_tensor_cores",
]  # fmt: skip

# tensor_core.py L14-18 (TC_Allowlist.allowlist), verbatim: a substring match.
PLUGIN_TC_KERNEL_PATTERNS = (
    "h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816",
    "dgrad_1x1_stride_2x2", "first_layer_wgrad_kernel", "conv1x1",
    "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
    "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm",
    "xmma_gemm", "xmma_sparse_gemm", "c1688",
)  # fmt: skip
# tensor_core.py L31-49 (TC_OP_Allowlist.allowlist), verbatim: an exact name match.
PLUGIN_TC_OPS = (
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_tbc",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::convolution", "aten::cudnn_convolution", "aten::cudnn_convolution_transpose",
    "aten::prelu", "aten::addmm", "aten::addmv", "aten::addr",
    "aten::matmul", "aten::mm", "aten::mv",
    "aten::linear", "aten::addbmm", "aten::baddbmm", "aten::bmm",
    "aten::chain_matmul", "aten::linalg_multi_dot",
    "aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_gru_cell", "aten::lstm_cell",
    "aten::gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell",
    "CudnnConvolutionBackward", "BmmBackward0",
    "aten::cudnn_convolution_transpose_backward", "CudnnConvolutionTransposeBackward",
    "MmBackward", "aten::cudnn_convolution_backward_weight", "aten::addmm_",
    "AddmvBackward", "MvBackward",
    "aten::cudnn_convolution_transpose_backward_weight",
    "aten::cudnn_convolution_transpose_backward_input",
    "AddmmBackward", "aten::cudnn_convolution_backward_input",
    "AddbmmBackward", "aten::cudnn_convolution_backward",
)  # fmt: skip

# Names that say the math runs on the CUDA cores: checked before any Tensor-Core pattern.
# ffma: cuBLAS's FP32 FMA tiles (sm80_xmma_gemm_f32f32_f32f32_…_ffma_…); simt: CUTLASS's
# cutlass_80_simt_sgemm_…; sgemm (unless "tensorop"): cuDNN's implicit_convolve_sgemm.
SIMT_KERNEL_PATTERN = re.compile(r"ffma|simt|(?<!tensorop_)sgemm", re.IGNORECASE)
# What the plugin's list lacks, each seen on the corpus's H200 traces: nvjet (cuBLASLt's Hopper
# GEMMs: bf16, fp16, FP8 "qq"), wgmma / gmma (Hopper warp-group MMA), wmma and tensorop (CUTLASS,
# incl. int8 i161616), tf32 (cuBLAS's sm90 TF32 GEMM), implicit_gemm (cuDNN's sm80/sm90
# fprop/dgrad/wgrad convolutions), flash attention and CUTLASS's memory-efficient attention.
LAB_TC_KERNEL_PATTERN = re.compile(
    "|".join(map(re.escape, PLUGIN_TC_KERNEL_PATTERNS))
    + r"|nvjet|wgmma|gmma|wmma|tensorop|tf32|implicit_gemm|flash_fwd|flash_bwd|fmha_cutlass",
    re.IGNORECASE)
# Triton templates name no instruction: their GEMM uses tl.dot, which runs on Tensor Cores for
# 16- and 8-bit inputs (and TF32), so the lab decides from the launching op's input types.
TRITON_TEMPLATE_PATTERN = re.compile(r"^triton_tem_", re.IGNORECASE)
LOW_PRECISION_INPUT = re.compile(r"BFloat16|Half|Float8|signed char|unsigned char", re.IGNORECASE)


def plugin_uses_tensor_cores(kernel: str) -> bool:
    """The plugin's ``name in TC_Allowlist`` (tensor_core.py L21-26)."""
    return any(pattern in kernel for pattern in PLUGIN_TC_KERNEL_PATTERNS)


def uses_tensor_cores(kernel: str, op_input_type: str = "") -> bool:
    """The lab's rule: SIMT names first (no), then the plugin's and the newer patterns (yes); a
    Triton template by its op's input types."""
    if SIMT_KERNEL_PATTERN.search(kernel):
        return False
    if LAB_TC_KERNEL_PATTERN.search(kernel):
        return True
    return bool(TRITON_TEMPLATE_PATTERN.search(kernel) and LOW_PRECISION_INPUT.search(op_input_type))


def op_tensor_core_eligible(op: str, *, launched_tensor_core_kernel: bool = False) -> bool:
    """The plugin's "Op is Tensor Cores eligible": in ``TC_OP_Allowlist``, or it launched a
    Tensor-Core kernel (node.py L125-127); the lab adds its GEMM entry points
    (``lab.analysis.gemm.kinds``: aten::_scaled_mm, aten::_int_mm, …)."""
    return op in PLUGIN_TC_OPS or op in GEMM_OPS or launched_tensor_core_kernel

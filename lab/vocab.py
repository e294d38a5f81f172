"""The lab's vocabulary, defined once: dtypes, trace categories, names torch writes, GEMM names,
sort keys and run stages. Every other module imports these; none spells them again.

A new dtype is one ``Dtype`` entry here (and its peak rates in ``lab/core/devices.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ADD_KERNEL_NAMES", "ANNOTATION_CATS", "DTYPES", "DTYPE_BYTES", "DTYPE_INFO", "Dtype", "ELEMENT_BYTES", "FLOW_CAT",
    "GEMM_KERNEL_DTYPES", "GEMM_KERNEL_PATTERN", "GEMM_LEAF_OPS", "GEMM_OPS", "GPU_ACTIVITY_CATS", "GPU_LANE_CATS",
    "MEMORY_DEVICE_KINDS", "MEMORY_DEVICE_TYPES", "MEMORY_EVENT_NAME", "MEMORY_HOST_TYPES", "OOM_EVENT_NAME",
    "GPU_ONLY_SORT_KEYS", "INPUT_TYPE_DTYPES", "LAUNCH_CATS", "LEGACY_SORT_KEYS", "NOT_GEMM_KERNEL_PATTERN",
    "OPERATOR_CATS", "PROFILER_STEP_PREFIX", "PROFILER_STEP_NAME", "STAGES", "STAGE_TEXT", "SORT_KEYS",
    "SYNC_NAMES", "TABLE_SORT_KEYS", "TORCH_SORT_KEYS", "gemm_kernel_dtype", "is_device_sort", "is_gemm_kernel",
    "torch_dtype_name",
]  # fmt: skip


# --- dtypes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dtype:
    """One dtype a run can use: its storage, torch's name for it, and how traces spell it."""

    name: str  # the lab's name (RunConfig.dtype, peak tables)
    element_bytes: int
    torch_name: str  # attribute of the torch module that stores it
    trace_spelling: str  # how "Input type" in a trace spells the storage dtype
    tf32: bool = False  # float32 storage with TF32 tensor-core matmuls


DTYPE_INFO: dict[str, Dtype] = {
    d.name: d
    for d in (
        Dtype("float32", 4, "float32", "float"),
        # tf32 is float32 storage: torch.backends.cuda.matmul.allow_tf32 decides the math.
        Dtype("tf32", 4, "float32", "float", tf32=True),
        Dtype("bfloat16", 2, "bfloat16", "c10::BFloat16"),
        Dtype("float16", 2, "float16", "c10::Half"),
    )
}
DTYPES = tuple(DTYPE_INFO)
DTYPE_BYTES = {name: d.element_bytes for name, d in DTYPE_INFO.items()}
# Traces also carry dtypes no run allocates (float64 inputs of an uploaded trace).
INPUT_TYPE_DTYPES = {d.trace_spelling: d.name for d in DTYPE_INFO.values() if not d.tf32}
INPUT_TYPE_DTYPES["double"] = "float64"
ELEMENT_BYTES = {**DTYPE_BYTES, "float64": 8}


def torch_dtype_name(dtype: str) -> str:
    """The torch attribute for a lab dtype ("tf32" → "float32")."""
    return DTYPE_INFO[dtype].torch_name


# --- trace categories and names torch writes ----------------------------------------------

# GPU activity that occupies a stream; gpu_user_annotation sits on GPU lanes but is a label.
GPU_ACTIVITY_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
# Categories Kineto only ever writes on GPU (device/stream) lanes.
GPU_LANE_CATS = GPU_ACTIVITY_CATS + ("gpu_user_annotation",)
ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation")
# CPU-side categories that are operators (rows of a key_averages-like table).
OPERATOR_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
# Kineto's flow category linking a CPU launch ("s") to its GPU activity ("f"); id = correlation.
FLOW_CAT = "ac2g"
# profile_memory's allocator records: instant events ("ph": "i", cat "cpu_instant_event") of this
# name, one per allocation (args "Bytes" > 0) or free (< 0); torch's key_averages filters the
# name and, for records inside no op, prints a row of it.
MEMORY_EVENT_NAME = "[memory]"
# An allocation the caching allocator could not satisfy (c10's reportOutOfMemory, written by
# Kineto under profile_memory): an instant with the same args, "Bytes" = the size asked for.
OOM_EVENT_NAME = "[OutOfMemory]"
# c10::DeviceType codes of "Device Type" in those records, as torch.autograd.profiler reads them
# (_cpu_memory_usage: CPU, MKLDNN, IDEEP; _device_memory_usage: CUDA, HIP, XPU, PrivateUse1).
MEMORY_DEVICE_TYPES = {0: "cpu", 1: "cuda", 2: "mkldnn", 5: "ideep", 6: "hip", 12: "xpu", 20: "privateuse1"}
MEMORY_HOST_TYPES = ("cpu", "mkldnn", "ideep")  # counted in key_averages' CPU memory columns
MEMORY_DEVICE_KINDS = ("cuda", "hip", "xpu", "privateuse1")  # counted in its device memory columns
# torch.profiler's schedule names each step "ProfilerStep#N"; key_averages renames it.
PROFILER_STEP_PREFIX = "ProfilerStep#"
PROFILER_STEP_NAME = "ProfilerStep*"
# Host calls that block until the device has finished: time in them is waiting, not host work.
SYNC_NAMES = (
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaStreamWaitEvent",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
)  # fmt: skip

# --- GEMMs --------------------------------------------------------------------------------

# aten ops that run one matrix multiply themselves (never nest another GEMM op) …
GEMM_LEAF_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
# … and with the wrappers that dispatch to one of them (aten::linear → aten::addmm). Per-kernel
# analyses take the nearest of these above a kernel; sums over ops use the leaves alone, since
# a wrapper's time already contains its leaf's.
GEMM_OPS = GEMM_LEAF_OPS + ("aten::matmul", "aten::linear", "aten::_addmm_activation")

# GEMM kernels, recognised by name as the libraries spell them (examples from the H200 traces in
# lab/samples and tests/data, and the libraries' naming schemes):
#   cuBLAS / cuBLASLt  nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT (Hopper's JIT GEMMs),
#                      sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_…_cublas,
#                      ampere_sgemm_128x64_nn, volta_h884gemm_…, gemv2T_kernel_val<…> (N = 1)
#   CUTLASS            cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4,
#                      cutlass3x_sm90_tensorop_gemm_bf16_…, cutlass::Kernel2<…gemm::kernel::GemmUniversal…>
#   cuDNN              cudnn_generated_fort_native_matmul_… (runtime-fusion matmuls)
#   Triton templates   triton_tem_fused_addmm_0, triton_tem_fused_mm_1 (torch.compile max-autotune)
# An elementwise add kernel of ATen (the seed's bias add): CUDAFunctor_add, AddFunctor, add_kernel.
ADD_KERNEL_NAMES = r"CUDAFunctor_add|add_kernel|AddFunctor"
GEMM_KERNEL_PATTERN = re.compile(r"gemm|gemv|matmul|nvjet|xmma|cutlass|triton_tem_\w*mm", re.IGNORECASE)
# Kernels whose names share those words but are not matrix multiplies: attention built from
# CUTLASS/wgmma tiles (pytorch_flash::flash_fwd_kernel<…cutlass::bfloat16_t…>, fmha_cutlassF_…,
# cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_…), convolutions run as implicit
# GEMMs (sm80_xmma_fprop_implicit_gemm_…, …dgrad…, …wgrad…), split-K reductions and other helpers
# (splitKreduce_kernel, cutlass::reduction::…ReduceSplitK), and Inductor's pointwise/reduction
# kernels, whose names list the ops they fused (triton_poi_fused_mm_…).
NOT_GEMM_KERNEL_PATTERN = re.compile(
    r"flash|fmha|attention|attn|sdpa|softmax|implicit_gemm|fprop|dgrad|wgrad|conv|reduc|computeOffsets"
    r"|^triton_(?:poi|red|per)_",
    re.IGNORECASE,
)
# The dtype a GEMM kernel's name states, first match wins (None: the name does not say, so the
# op's "Input type" decides). TF32 first: sm90_xmma_gemm_f32f32_tf32f32 stores float32 but runs
# TF32 tensor cores. bf16 before f16 ("bf16" contains "f16"). s1688gemm / s1684gemm are the
# fp32-accumulating m16n8k8 / m16n8k4 tensor-op shapes; with no 16-bit type named beside them
# (caught by the earlier entries) their inputs are float32, so they run TF32. h884 / h1688 /
# h16816 gemm are the half-precision tensor-op shapes; sgemm and ffma name plain FP32 math.
GEMM_KERNEL_DTYPES = (
    ("tf32", re.compile(r"tf32", re.IGNORECASE)),
    ("bfloat16", re.compile(r"bf16|bfloat16", re.IGNORECASE)),
    ("float16", re.compile(r"(?<!b)f16|fp16|half|h(?:884|1688|16816)gemm", re.IGNORECASE)),
    ("tf32", re.compile(r"s168[48]gemm", re.IGNORECASE)),
    ("float32", re.compile(r"sgemm|ffma|f32f32_f32f32", re.IGNORECASE)),
)


def is_gemm_kernel(name: str) -> bool:
    """Whether a GPU kernel's name is a GEMM library's (see ``GEMM_KERNEL_PATTERN``)."""
    return bool(GEMM_KERNEL_PATTERN.search(name)) and not NOT_GEMM_KERNEL_PATTERN.search(name)


def gemm_kernel_dtype(name: str) -> str | None:
    """The lab dtype a GEMM kernel's name states ("tf32", "bfloat16", …), None when it says none."""
    return next((dtype for dtype, pattern in GEMM_KERNEL_DTYPES if pattern.search(name)), None)

# --- table sort keys ----------------------------------------------------------------------

# The table's sort choices: label → column of the lab's key_averages frame …
SORT_KEYS = {
    "Device total": "device_total_us",
    "Self device": "self_device_us",
    "CPU total": "cpu_total_us",
    "Self CPU": "self_cpu_us",
    "Count": "count",
    "CPU memory": "cpu_memory_bytes",
    "Self CPU memory": "self_cpu_memory_bytes",
    "Device memory": "device_memory_bytes",
    "Self device memory": "self_device_memory_bytes",
    "FLOPs": "flops",
}
# … and the same sorts as torch's ``key_averages().table(sort_by=...)`` spells them (the keys
# of ``RunResult.tables``), so the classic text view can follow the table's sort.
TORCH_SORT_KEYS = {
    "Device total": "device_time_total",
    "Self device": "self_device_time_total",
    "CPU total": "cpu_time_total",
    "Self CPU": "self_cpu_time_total",
    "Count": "count",
    "CPU memory": "cpu_memory_usage",
    "Self CPU memory": "self_cpu_memory_usage",
    "Device memory": "device_memory_usage",
    "Self device memory": "self_device_memory_usage",
    "FLOPs": "flops",
}
# Keys of ``RunResult.tables``: each is a ``key_averages().table(sort_by=key)`` text. (No
# "self_device_memory_usage": torch < 2.4 has no such sort; the view falls back to the nearest.)
TABLE_SORT_KEYS = (
    "cpu_time_total", "self_cpu_time_total",
    "device_time_total", "self_device_time_total",
    "count",
    "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage",
    "flops",
)  # fmt: skip
# Sorting by these is only meaningful when the run had a GPU.
GPU_ONLY_SORT_KEYS = frozenset({"device_time_total", "self_device_time_total", "device_memory_usage"})
# Older torch spells the device keys cuda_*; the dict key stays device_* either way.
LEGACY_SORT_KEYS = {
    "device_time_total": "cuda_time_total",
    "self_device_time_total": "self_cuda_time_total",
    "device_memory_usage": "cuda_memory_usage",
}


def is_device_sort(label: str) -> bool:
    """Whether a ``SORT_KEYS`` label sorts by a device column (meaningless without a GPU)."""
    return "device" in SORT_KEYS[label]


# --- run stages ---------------------------------------------------------------------------

# A run's stages in order, each with the words its status line uses.
STAGE_TEXT = {
    "checking": "checking the config against the device",
    "allocating": "allocating random inputs",
    "compiling": "compiling with torch.compile (timed apart, not profiled)",
    "warming up": "warming up",
    "profiling": "profiling",
    "exporting": "exporting the Chrome trace",
    "timing": "timing the same step without the profiler",
    "summarizing": "building key_averages tables",
}
STAGES = tuple(STAGE_TEXT)

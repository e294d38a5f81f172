"""The lab's vocabulary, defined once: dtypes, trace categories, names torch writes, sort keys
and run stages. Every other module imports these; none spells them again.

A new dtype is one ``Dtype`` entry here (and its peak rates in ``lab/core/devices.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ADD_KERNEL_NAMES", "ALLOCATOR_CALLS", "ANNOTATION_CATS", "COLLECTIVE_RANGE_PATTERN", "COMPILE_PATTERN",
    "INPUT_PIPELINE_PATTERN",
    "OPTIMIZER_PATTERN", "DTYPES", "DTYPE_BYTES", "DTYPE_INFO", "Dtype", "ELEMENT_BYTES", "FLOW_CAT",
    "GPU_ACTIVITY_CATS", "GPU_LANE_CATS", "INTEGER_DTYPES", "TRACE_DTYPES",
    "MEMORY_DEVICE_KINDS", "MEMORY_DEVICE_TYPES", "MEMORY_EVENT_NAME", "MEMORY_HOST_TYPES", "OOM_EVENT_NAME",
    "GPU_ONLY_SORT_KEYS", "INPUT_TYPE_DTYPES", "LAUNCH_CALL_PATTERN", "LAUNCH_CATS", "LEGACY_SORT_KEYS",
    "OPERATOR_CATS", "PROFILER_STEP_PREFIX", "PROFILER_STEP_NAME", "STAGES", "STAGE_TEXT", "SORT_KEYS",
    "SYNC_NAMES", "TABLE_SORT_KEYS", "TORCH_SORT_KEYS", "is_device_sort", "is_launch_call", "peak_dtype", "rate_unit",
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
# Traces also carry dtypes no run allocates: float64 inputs of an uploaded trace, FP8 and int8
# operands (lab dtype → (how "Input type" spells it, element bytes)). "float8" alone is the
# family without its format (when a kernel's name says only that); an op's input types say which.
TRACE_DTYPES = {
    "float64": ("double", 8),
    "float8_e4m3fn": ("c10::Float8_e4m3fn", 1), "float8_e5m2": ("c10::Float8_e5m2", 1),
    "float8_e4m3fnuz": ("c10::Float8_e4m3fnuz", 1), "float8_e5m2fnuz": ("c10::Float8_e5m2fnuz", 1),
    "int8": ("signed char", 1), "uint8": ("unsigned char", 1),
}  # fmt: skip
INPUT_TYPE_DTYPES = {d.trace_spelling: d.name for d in DTYPE_INFO.values() if not d.tf32}
INPUT_TYPE_DTYPES.update({spelling: name for name, (spelling, _) in TRACE_DTYPES.items()})
ELEMENT_BYTES = {**DTYPE_BYTES, **{name: size for name, (_, size) in TRACE_DTYPES.items()}, "float8": 1}
# Integer math is counted in operations, not floating-point ones: its rate is TOPS.
INTEGER_DTYPES = ("int8", "uint8")


def peak_dtype(dtype: str) -> str:
    """The dtype a datasheet's peak is given for: one FP8 rate for every float8 format."""
    return "float8" if dtype.startswith("float8") else dtype


def rate_unit(dtype: str) -> str:
    """"TOPS" for integer math (operations, not floating-point ones), else "TFLOP/s"."""
    return "TOPS" if dtype in INTEGER_DTYPES else "TFLOP/s"


def torch_dtype_name(dtype: str) -> str:
    """The torch attribute for a lab dtype ("tf32" → "float32")."""
    return DTYPE_INFO[dtype].torch_name


# --- trace categories and names torch writes ----------------------------------------------

# GPU activity that occupies a stream; gpu_user_annotation sits on GPU lanes but is a label.
GPU_ACTIVITY_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
# Of those calls, the ones that put work on a GPU stream: kernel launches (cudaLaunchKernel,
# cudaLaunchKernelExC, cuLaunchKernel(Ex), cooperative launches), copies and memsets (cudaMemcpy*,
# cuMemcpy*_v2, cudaMemset*, cuMemsetD*), graph replays (cudaGraphLaunch, cuGraphLaunch), and
# HIP's spellings. cudaLaunchHostFunc runs a host callback: no GPU activity follows it. Every
# other call (cudaMalloc, cudaStreamIsCapturing, cudaDeviceSynchronize, cudaEventRecord, ...)
# launches nothing, so a trace of only those is no sign of lost GPU activity.
LAUNCH_CALL_PATTERN = re.compile(r"^(?:cuda|cu|hip)(?:Launch(?!HostFunc)|Memcpy|Memset|GraphLaunch)")
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

# The device allocator's calls, which PyTorch's caching allocator makes only when its cache
# misses (a new size, the first step) or is emptied (torch.cuda.empty_cache()); cudaFree also waits
# for the device. Stream-ordered and host-pinned allocations count as well.
ALLOCATOR_CALLS = (
    "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cudaMallocHost", "cudaFreeHost",
    "cudaHostAlloc", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease",
    "hipMalloc", "hipFree",
)  # fmt: skip

# torch.compile's compilation as torch writes it: dynamo_timed's record_functions
# ("_compile.compile_inner (dynamo_timed)", "inductor_compile", "backend_compile",
# "entire_frame_compile", "compile_attempt_0", "dynamo" — torch 2.11 on the H200 and 2.13 on the
# CPU), autotuning, and the wait for async compile workers. Not "Torch-Compiled Region", which
# wraps the compiled code's own run, nor "TorchDynamo Cache Lookup" (a guard check, dispatch).
COMPILE_PATTERN = re.compile(
    r"\(dynamo_timed\)$|^(?:dynamo|entire_frame_compile|backend_compile|inductor_compile|compile_attempt_\d+"
    r"|async_compile\.wait|autotune\w*|benchmark_\w*fusion\w*|precompile\w*)$"
)
# torch.utils.data's DataLoader and DataPipes as the profiler names their __next__:
# "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "enumerate(DataPipe)#…".
INPUT_PIPELINE_PATTERN = re.compile(r"^enumerate\((?:DataLoader|DataPipe)\)#")
# A collective in flight on another thread: gloo's and NCCL's ranges ("gloo:all_reduce" on gloo's
# own thread while the step's thread waits for it, in no op) and c10d's ops.
COLLECTIVE_RANGE_PATTERN = re.compile(r"^(?:gloo|nccl|c10d):")
# torch.optim's record_function around step / zero_grad: "Optimizer.step#Adam.step".
OPTIMIZER_PATTERN = re.compile(r"^Optimizer\.(?:step|zero_grad)#")

# An elementwise add kernel of ATen (the seed's bias add): CUDAFunctor_add, AddFunctor, add_kernel.
ADD_KERNEL_NAMES = r"CUDAFunctor_add|add_kernel|AddFunctor"

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


def is_launch_call(name: str) -> bool:
    """True for a CUDA/HIP runtime or driver call that puts work on a GPU stream (LAUNCH_CALL_PATTERN)."""
    return LAUNCH_CALL_PATTERN.match(name) is not None

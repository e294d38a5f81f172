"""Which device a run used, and what it can do at best (peak rates from datasheets).

``DeviceInfo`` is plain data that travels from the worker to the page. ``detect_device``
imports torch lazily; the peak table needs no torch at all.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass

from lab.vocab import peak_dtype

__all__ = ["PEAKS", "DeviceInfo", "DeviceKind", "DevicePeak", "DeviceRates", "describe_kinds", "detect_device",
           "device_kinds", "lookup_peak"]


@dataclass(frozen=True)
class DevicePeak:
    """Dense (no sparsity) peak rates of one GPU model, from its vendor datasheet."""

    model: str
    # TFLOP/s per lab dtype ("float32", "tf32", "bfloat16", "float16"), dense; "float8" (every
    # FP8 format: one tensor-core rate) and "int8" (TOPS) where the chip has them.
    tflops: dict[str, float]
    memory_bandwidth_gbs: float
    source: str

    def peak_tflops(self, dtype: str) -> float | None:
        """The dense peak for a dtype (a float8 format reads the chip's FP8 rate), None if unlisted."""
        return self.tflops.get(peak_dtype(dtype))

    def ridge_flops_per_byte(self, dtype: str) -> float | None:
        """Arithmetic intensity above which a kernel is compute-bound (roofline ridge point)."""
        peak = self.peak_tflops(dtype)
        return None if peak is None else peak * 1e12 / (self.memory_bandwidth_gbs * 1e9)


@dataclass(frozen=True)
class DeviceRates:
    """What one device did at the worker's warm-up (``lab.run.estimate.measure_rates``).

    Measured, not looked up: a shared 2-core box and a 64-core server differ by 30× and no
    datasheet says which one the lab landed on. The run-time estimate reads these.
    """

    kind: str  # "cpu" or "cuda"
    # Best-of-a-few matmul rate per lab dtype this device runs, GFLOP/s.
    matmul_gflops: tuple[tuple[str, float], ...]
    copy_gbs: float  # a large tensor's clone: bytes read + written per second
    fill_gbs: float  # torch.randn into a new tensor: how fast a run's inputs are made
    run_overhead_s: float  # wall time of a whole tiny profile run (profiler start, export, tables)

    def gflops(self, dtype: str) -> float | None:
        return dict(self.matmul_gflops).get(dtype)


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cpu" or "cuda"
    name: str
    index: int = 0
    total_memory_bytes: int = 0
    free_memory_bytes: int = 0
    sm_count: int | None = None
    compute_capability: tuple[int, int] | None = None
    torch_version: str = ""
    cuda_version: str | None = None
    cupti_available: bool | None = None
    cpu_count: int | None = None
    peak: DevicePeak | None = None
    # Rates measured at the worker's warm-up: this device's, and on a GPU worker the host CPU's
    # too (a "cpu" run may go to it). Empty outside a worker's warm-up.
    rates: tuple[DeviceRates, ...] = ()
    # The host that ran it when that is not this server (the Ray backend: "gpu-box-2 (node 3f2a9c1b)");
    # "" for the local backend's workers, which run here.
    node: str = ""

    def rates_for(self, kind: str) -> DeviceRates | None:
        return next((r for r in self.rates if r.kind == kind), None)

    @property
    def label(self) -> str:
        """How the page names the device, e.g. "NVIDIA H200 (cuda:0, 132 SMs)"."""
        where = f" on {self.node}" if self.node else ""
        if self.kind == "cpu":
            return f"{self.name} (CPU, {self.cpu_count or '?'} cores){where}"
        return f"{self.name} (cuda:{self.index}, {self.sm_count} SMs){where}"


# --- Peak rates -----------------------------------------------------------------------------
# Dense numbers only. NVIDIA datasheets print tensor-core rates "with sparsity" and mark them
# with an asterisk; those are halved here (2:4 structured sparsity doubles the nominal rate,
# and a plain torch.matmul never uses it). "float32" is the non-tensor-core FP32 rate.
# A dtype without a tensor-core rate on that chip is left out (T4 and V100: no tf32/bf16; FP8 only
# from Ada/Hopper on; V100 and the A10G (no datasheet) list no INT8 rate).
_A100_DS = "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
_H100_DS = "NVIDIA H100 Tensor Core GPU datasheet (https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)"
_H200_DS = "NVIDIA H200 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/h200/)"
# A100 datasheet: INT8 624 | 1,248* TOPS; no FP8 tensor cores.
_A100_RATES = {"float32": 19.5, "tf32": 156.0, "bfloat16": 312.0, "float16": 312.0, "int8": 624.0}
# H100 SXM / H200 SXM datasheets: FP8 3,958* TFLOPS, INT8 3,958* TOPS with sparsity.
_HOPPER_SXM_RATES = {"float32": 67.0, "tf32": 494.5, "bfloat16": 989.5, "float16": 989.5, "float8": 1979.0,
                     "int8": 1979.0}
# H100 NVL / H200 NVL datasheets: FP8 3,341* TFLOPS, INT8 3,341* TOPS with sparsity.
_HOPPER_NVL_RATES = {"float32": 60.0, "tf32": 417.5, "bfloat16": 835.5, "float16": 835.5, "float8": 1670.5,
                     "int8": 1670.5}

PEAKS: dict[str, DevicePeak] = {
    p.model: p
    for p in (
        DevicePeak("A100 SXM4 40GB", dict(_A100_RATES), 1555.0, _A100_DS),
        DevicePeak("A100 SXM4 80GB", dict(_A100_RATES), 2039.0, _A100_DS),
        DevicePeak("A100 PCIe 40GB", dict(_A100_RATES), 1555.0, _A100_DS),
        DevicePeak("A100 PCIe 80GB", dict(_A100_RATES), 1935.0, _A100_DS),
        # Datasheet: TF32 989*, BF16/FP16 1,979* TFLOPS with sparsity; 3.35 TB/s HBM3.
        DevicePeak("H100 SXM", dict(_HOPPER_SXM_RATES), 3350.0, _H100_DS),
        # Datasheet: FP32 51, TF32 756*, BF16/FP16 1,513*, FP8 3,026* TFLOPS, INT8 3,026* TOPS with
        # sparsity; 2 TB/s.
        DevicePeak("H100 PCIe", {"float32": 51.0, "tf32": 378.0, "bfloat16": 756.5, "float16": 756.5,
                                 "float8": 1513.0, "int8": 1513.0}, 2000.0, _H100_DS),
        # Datasheet: FP32 60, TF32 835*, BF16/FP16 1,671* TFLOPS with sparsity; 3.9 TB/s.
        DevicePeak("H100 NVL", dict(_HOPPER_NVL_RATES), 3900.0, _H100_DS),
        # Same GH100 compute as the H100 SXM; 4.8 TB/s HBM3e.
        DevicePeak("H200 SXM", dict(_HOPPER_SXM_RATES), 4800.0, _H200_DS),
        # H200 NVL (PCIe card): FP32 60, TF32 835*, BF16/FP16 1,671* with sparsity; 4.8 TB/s.
        DevicePeak("H200 NVL", dict(_HOPPER_NVL_RATES), 4800.0, _H200_DS),
        # Datasheet: FP32 30.3, TF32 120*, BF16/FP16 242*, FP8 485* TFLOPS, INT8 485* TOPS with
        # sparsity; 300 GB/s.
        DevicePeak("L4", {"float32": 30.3, "tf32": 60.0, "bfloat16": 121.0, "float16": 121.0, "float8": 242.5,
                          "int8": 242.5},
                   300.0, "NVIDIA L4 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/l4/)"),
        # Datasheet: FP32 91.6, TF32 183 | 366*, BF16/FP16 362.05 | 733*, FP8 733 | 1,466* TFLOPS,
        # INT8 733 | 1,466* TOPS; 864 GB/s.
        DevicePeak("L40S", {"float32": 91.6, "tf32": 183.0, "bfloat16": 362.05, "float16": 362.05,
                            "float8": 733.0, "int8": 733.0},
                   864.0, "NVIDIA L40S GPU datasheet (https://www.nvidia.com/en-us/data-center/l40s/)"),
        # Datasheet: FP32 31.2, TF32 62.5 | 125*, BF16/FP16 125 | 250*, INT8 250 | 500* TOPS; 600 GB/s.
        DevicePeak("A10", {"float32": 31.2, "tf32": 62.5, "bfloat16": 125.0, "float16": 125.0, "int8": 250.0},
                   600.0, "NVIDIA A10 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/products/a10-gpu/)"),
        # AWS-only variant of the A10 (G5 instances); NVIDIA publishes no datasheet for it.
        # Figures as tabulated from AWS/NVIDIA material by Baseten; treat as approximate.
        DevicePeak("A10G", {"float32": 35.0, "tf32": 35.0, "bfloat16": 70.0, "float16": 70.0},
                   600.0, "https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/"),
        # Datasheet: FP32 8.1, mixed-precision FP16/FP32 65 TFLOPS, INT8 130 TOPS; 320 GB/s. No tf32/bf16.
        DevicePeak("T4", {"float32": 8.1, "float16": 65.0, "int8": 130.0},
                   320.0, "NVIDIA T4 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/tesla-t4/)"),
        # Datasheet (V100 SXM2): FP32 15.7, Tensor 125 TFLOPS; 900 GB/s. No tf32/bf16.
        DevicePeak("V100 SXM2", {"float32": 15.7, "float16": 125.0},
                   900.0, "NVIDIA Tesla V100 GPU datasheet (https://www.nvidia.com/en-us/data-center/v100/)"),
        # Datasheet (V100 PCIe): FP32 14, Tensor 112 TFLOPS; 900 GB/s.
        DevicePeak("V100 PCIe", {"float32": 14.0, "float16": 112.0},
                   900.0, "NVIDIA Tesla V100 GPU datasheet (https://www.nvidia.com/en-us/data-center/v100/)"),
        # Datasheet (V100S PCIe): FP32 16.4, Tensor 130 TFLOPS; 1,134 GB/s.
        DevicePeak("V100S PCIe", {"float32": 16.4, "float16": 130.0},
                   1134.0, "NVIDIA Tesla V100S GPU datasheet (https://www.nvidia.com/en-us/data-center/v100/)"),
    )
}

# (regex on the upper-cased torch/CUPTI device name, PEAKS key), first match wins, so the
# more specific names come first ("A100" before "A10", "A10G" before "A10", "NVL" before SXM).
# Names as torch.cuda.get_device_name prints them, e.g. "NVIDIA A100-SXM4-80GB",
# "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "Tesla V100-SXM2-16GB".
_NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"A100.*PCI.*80\s*GB|A100.*80\s*GB.*PCI", "A100 PCIe 80GB"),
    (r"A100.*PCI", "A100 PCIe 40GB"),
    (r"A100.*80\s*GB", "A100 SXM4 80GB"),
    (r"A100", "A100 SXM4 40GB"),
    (r"H100.*NVL", "H100 NVL"),
    (r"H100.*PCI", "H100 PCIe"),
    (r"H100", "H100 SXM"),
    (r"H200.*NVL", "H200 NVL"),
    (r"H200", "H200 SXM"),
    (r"L40S", "L40S"),
    (r"\bL4\b", "L4"),
    (r"A10G", "A10G"),
    (r"\bA10\b", "A10"),
    (r"\bT4\b", "T4"),
    (r"V100S", "V100S PCIe"),
    (r"V100.*PCI", "V100 PCIe"),
    (r"V100", "V100 SXM2"),
)


def lookup_peak(name: str) -> DevicePeak | None:
    """The datasheet peak of a device named as torch/CUPTI name it, or None if not listed."""
    upper = (name or "").upper()
    for pattern, model in _NAME_PATTERNS:
        if re.search(pattern, upper):
            return PEAKS[model]
    return None


# --- Detection ------------------------------------------------------------------------------

def detect_device(device: str = "auto") -> DeviceInfo:
    """Describe the device a run on ``device`` ("auto", "cpu" or "cuda") would use.

    "auto" picks CUDA when a GPU is visible, else the CPU. "cuda" without a visible GPU
    describes the CPU: ``config.check_device`` then refuses the run with a message.
    """
    import torch

    if device != "cpu" and torch.cuda.is_available():
        return _cuda_info(torch)
    return _cpu_info(torch)


def _cpu_info(torch) -> DeviceInfo:
    import psutil

    memory = psutil.virtual_memory()
    return DeviceInfo(
        kind="cpu",
        name=_cpu_name(),
        total_memory_bytes=int(memory.total),
        free_memory_bytes=int(memory.available),
        torch_version=torch.__version__,
        cpu_count=os.cpu_count(),
    )


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def _cuda_info(torch) -> DeviceInfo:
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    free_bytes, total_bytes = torch.cuda.mem_get_info(index)
    activities = torch.profiler.supported_activities()
    return DeviceInfo(
        kind="cuda",
        name=props.name,
        index=index,
        total_memory_bytes=int(total_bytes),
        free_memory_bytes=int(free_bytes),
        sm_count=int(props.multi_processor_count),
        compute_capability=(int(props.major), int(props.minor)),
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda,
        cupti_available=torch.profiler.ProfilerActivity.CUDA in activities,
        cpu_count=os.cpu_count(),
        peak=lookup_peak(props.name),
    )


# --- What a pool has: device models, counts, nodes -------------------------------------------

@dataclass(frozen=True, kw_only=True)
class DeviceKind:
    """One device model among a pool's warm workers (the page's device choice)."""

    name: str  # DeviceInfo.name, what a run may ask for ("NVIDIA H200")
    kind: str  # "cpu" or "cuda"
    count: int  # workers of this model
    nodes: int  # distinct Ray nodes they run on (1 for the local backend)

    @property
    def text(self) -> str:
        """e.g. "NVIDIA H200 ×8 on 2 nodes"; one node is not said."""
        where = f" on {self.nodes} nodes" if self.nodes > 1 else ""
        return f"{self.name} ×{self.count}{where}"


def device_kinds(workers: list[tuple[DeviceInfo, str | None]]) -> tuple[DeviceKind, ...]:
    """(DeviceInfo, node) of each warm worker → one DeviceKind per model, GPUs first, then by count."""
    groups: dict[tuple[str, str], list[str | None]] = {}
    for info, node in workers:
        groups.setdefault((info.kind, info.name), []).append(node)
    kinds = [DeviceKind(name=name, kind=kind, count=len(nodes), nodes=max(1, len(set(nodes))))
             for (kind, name), nodes in groups.items()]
    return tuple(sorted(kinds, key=lambda k: (k.kind != "cuda", -k.count, k.name)))


def describe_kinds(kinds: tuple[DeviceKind, ...]) -> str:
    """"NVIDIA H200 ×8 on 2 nodes, NVIDIA L4 ×4" ("" for none)."""
    return ", ".join(k.text for k in kinds)

"""Which device a run used, and what it can do at best (peak rates from datasheets).

``DeviceInfo`` is plain data that travels from the worker to the page. ``detect_device``
imports torch lazily; the peak table needs no torch at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DevicePeak:
    """Dense (no sparsity) peak rates of one GPU model, from its vendor datasheet."""

    model: str
    # TFLOP/s per lab dtype ("float32", "tf32", "bfloat16", "float16"), dense.
    tflops: dict[str, float]
    memory_bandwidth_gbs: float
    source: str

    def ridge_flops_per_byte(self, dtype: str) -> float | None:
        """Arithmetic intensity above which a kernel is compute-bound (roofline ridge point)."""
        peak = self.tflops.get(dtype)
        return None if peak is None else peak * 1e12 / (self.memory_bandwidth_gbs * 1e9)


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

    @property
    def label(self) -> str:
        """How the page names the device, e.g. "NVIDIA H200 (cuda:0, 132 SMs)"."""
        if self.kind == "cpu":
            return f"{self.name} (CPU, {self.cpu_count or '?'} cores)"
        return f"{self.name} (cuda:{self.index}, {self.sm_count} SMs)"

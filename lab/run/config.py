"""What to run: ``RunConfig`` and every check that can refuse it before anything is allocated.

``RunConfig(...)`` checks what needs no context (names, labels, positive numbers). The
checks that depend on the host (``check_limits``), on the device (``check_device``) and on
free memory (``check_memory``) are separate functions so the page can run them before it
submits and the worker can run them again before it allocates. Every refusal is a
``ConfigError`` whose message says what to change. No torch import here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from lab.run import workloads
from lab.run.settings import HostSettings
from lab.vocab import DTYPE_BYTES, DTYPE_INFO, DTYPES

DEVICES = ("auto", "cpu", "cuda")
MAX_LABEL_CHARS = 64
# Leave a fifth of free memory to the allocator's caches, the profiler's buffers and the OS.
MEMORY_HEADROOM = 0.8


class ConfigError(ValueError):
    """A run that cannot be made as asked; the message says what to change."""


def check_label(label: str, what: str) -> None:
    if not isinstance(label, str) or not 1 <= len(label) <= MAX_LABEL_CHARS:
        got = len(label) if isinstance(label, str) else type(label).__name__
        raise ConfigError(f"{what} must be 1–{MAX_LABEL_CHARS} characters (got {got}); shorten it")
    if not label.isprintable():
        raise ConfigError(f"{what} may hold printable characters only (no tabs or newlines); remove them")


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    workload: str = "matmul_add"
    m: int = 1024
    k: int = 1024
    n: int = 1024
    dtype: str = "float32"
    device: str = "auto"
    # record_function labels: the whole step, and optional ones around the matmul and the add.
    step_label: str = "matmul_add"
    matmul_label: str | None = None
    add_label: str | None = None
    # torch.profiler.schedule; the seed's defaults. One cycle = wait + warmup + active steps.
    wait: int = 1
    warmup: int = 1
    active: int = 3
    repeat: int = 1
    # Un-profiled iterations before the profiler starts; 0 = a cold run (first-step costs show).
    warmup_iters: int = 2
    record_shapes: bool = True
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    # Run the step through torch.compile; compile time is measured apart from the profile.
    compile: bool = False

    def __post_init__(self) -> None:
        if self.workload not in workloads.WORKLOADS:
            known = ", ".join(workloads.WORKLOADS)
            raise ConfigError(f"unknown workload {self.workload!r}; choose one of: {known}")
        for dim in ("m", "k", "n"):
            value = getattr(self, dim)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{dim.upper()} must be a whole number ≥ 1 (got {value!r})")
        if self.dtype not in DTYPE_BYTES:
            raise ConfigError(f"unknown dtype {self.dtype!r}; choose one of: {', '.join(DTYPES)}")
        if self.device not in DEVICES:
            raise ConfigError(f"unknown device {self.device!r}; choose one of: {', '.join(DEVICES)}")
        check_label(self.step_label, "the step label")
        for name, what in (("matmul_label", "the matmul label"), ("add_label", "the bias-add label")):
            if getattr(self, name) is not None:
                check_label(getattr(self, name), what)
        for name in ("wait", "warmup", "warmup_iters"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be a whole number ≥ 0 (got {value!r})")
        for name in ("active", "repeat"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a whole number ≥ 1 (got {value!r})")

    @property
    def profiled_steps(self) -> int:
        """Iterations run while the profiler is on (its schedule's cycles)."""
        return (self.wait + self.warmup + self.active) * self.repeat

    @property
    def element_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def estimated_bytes(self) -> int:
        """Memory the run's tensors need at once (inputs, intermediates, output)."""
        return workloads.WORKLOADS[self.workload].estimate_bytes(self)

    @property
    def shape_text(self) -> str:
        return f"{self.m}x{self.k}x{self.n}"

    def replace(self, **changes) -> "RunConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config fields {unknown}; remove them")
        return cls(**data)


def check_limits(config: RunConfig, settings: HostSettings) -> None:
    """Refuse sizes and step counts beyond what the host allows."""
    for dim in ("m", "k", "n"):
        value = getattr(config, dim)
        if value > settings.max_dim:
            raise ConfigError(
                f"{dim.upper()}={value} is above this host's limit of {settings.max_dim}; "
                f"use {settings.max_dim} or less (hosts raise it with PROFILER_LAB_MAX_DIM)"
            )
    total = config.profiled_steps + config.warmup_iters
    if total > settings.max_steps:
        raise ConfigError(
            f"the run needs {total} iterations (schedule {config.profiled_steps} + warm-up "
            f"{config.warmup_iters}); this host allows {settings.max_steps}: lower active, repeat or warm-up"
        )


def check_memory(config: RunConfig, available_bytes: int, where: str) -> None:
    """Refuse a run whose tensors cannot fit in ``available_bytes`` of ``where`` memory."""
    need = config.estimated_bytes
    budget = int(available_bytes * MEMORY_HEADROOM)
    if need > budget:
        raise ConfigError(
            f"{config.shape_text} {config.dtype} needs about {_gib(need)} but {where} has "
            f"{_gib(available_bytes)} free ({_gib(budget)} usable); choose smaller M, K or N"
        )


def check_device(config: RunConfig, *, kind: str, compute_capability: tuple[int, int] | None) -> None:
    """Refuse dtypes the chosen device cannot run well; ``kind`` is "cpu" or "cuda"."""
    reason = dtype_refusal(config.dtype, kind=kind, compute_capability=compute_capability)
    reason = reason or workloads.WORKLOADS[config.workload].refusal(kind, compute_capability)
    if reason:
        raise ConfigError(reason)
    if config.device == "cuda" and kind != "cuda":
        raise ConfigError("device 'cuda' was asked for but no CUDA GPU is visible; choose 'cpu' or 'auto'")


def dtype_refusal(dtype: str, *, kind: str, compute_capability: tuple[int, int] | None) -> str | None:
    """Why ``dtype`` cannot run on this device, or None. The page shows these on disabled options."""
    if kind == "cpu":
        if DTYPE_INFO[dtype].tf32:
            return "tf32 is a tensor-core mode of NVIDIA GPUs (Ampere or newer); on CPU choose float32"
        if dtype == "float16":
            return ("float16 matmul on CPU runs a slow reference path, not a tuned kernel; "
                    "choose bfloat16 or float32 on CPU")
        return None
    major = compute_capability[0] if compute_capability else 0
    if DTYPE_INFO[dtype].tf32 and major < 8:
        return f"tf32 needs compute capability 8.0 or newer (this GPU is {major}.x); choose float32"
    if dtype == "bfloat16" and major < 8:
        return f"bfloat16 matmul needs compute capability 8.0 or newer (this GPU is {major}.x); choose float16"
    return None


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**27 else f"{n / 2**20:.1f} MiB"

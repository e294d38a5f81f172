"""The exercises: name → how to build inputs and one step, and what the step costs.

A new exercise is one ``Workload`` entry here (plus its lesson text in ``lab/lessons.py``).
Builders import torch lazily so that ``lab.config`` stays importable without torch.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # pragma: no cover
    from lab.config import RunConfig


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    # What one step computes, in the notation the lesson uses.
    formula: str
    # (config, torch.device, torch.dtype) -> a zero-argument callable running one step.
    build: Callable
    # Bytes of tensors alive at once during a step.
    estimate_bytes: Callable[["RunConfig"], int]
    # Useful floating-point operations per step (2·M·K·N for a GEMM), for TFLOP/s.
    flops: Callable[["RunConfig"], int]


def _label(torch, label: str | None):
    return torch.profiler.record_function(label) if label else nullcontext()


def _random(torch, shape, device, dtype):
    # Random data, never zeros: a GEMM on zeros runs measurably faster on some GPUs.
    return torch.randn(*shape, device=device, dtype=torch.float32).to(dtype)


def _build_matmul_add(config: "RunConfig", device, dtype) -> Callable[[], object]:
    import torch

    x = _random(torch, (config.m, config.k), device, dtype)
    w = _random(torch, (config.k, config.n), device, dtype)
    b = _random(torch, (config.n,), device, dtype)

    def step():
        with _label(torch, config.matmul_label):
            y = torch.matmul(x, w)
        with _label(torch, config.add_label):
            return torch.add(y, b)

    return step


def _matmul_add_bytes(config: "RunConfig") -> int:
    elements = config.m * config.k + config.k * config.n + config.n + 2 * config.m * config.n
    return elements * config.element_bytes


def _gemm_flops(config: "RunConfig") -> int:
    return 2 * config.m * config.k * config.n


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            name="matmul_add",
            title="matmul + bias add",
            formula="y = torch.add(torch.matmul(x, w), b)   x: M×K, w: K×N, b: N",
            build=_build_matmul_add,
            estimate_bytes=_matmul_add_bytes,
            flops=_gemm_flops,
        ),
    )
}

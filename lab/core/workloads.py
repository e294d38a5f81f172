"""The exercises: name → how to build inputs and one step, and what the step costs.

A new exercise is one ``Workload`` entry here (plus, if it gets a lesson, its text in
``lab/core/lessons.py``). Builders import torch lazily so that ``lab.core.config`` stays
importable without torch. This module never imports ``lab.core.config`` (which imports it):
a workload reads only the fields that ``WorkloadConfig`` below names.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from lab.core import workloads_workshop as ws

__all__ = ["WORKLOADS", "Workload", "WorkloadConfig"]


class WorkloadConfig(Protocol):
    """What a workload reads of ``lab.core.config.RunConfig``: its sizes, labels and element size."""

    @property
    def workload(self) -> str: ...
    @property
    def m(self) -> int: ...
    @property
    def k(self) -> int: ...
    @property
    def n(self) -> int: ...
    @property
    def matmul_label(self) -> str | None: ...
    @property
    def add_label(self) -> str | None: ...
    @property
    def element_bytes(self) -> int: ...


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    # What one step computes, in the notation the lesson uses.
    formula: str
    # (config, torch.device, torch.dtype) -> a zero-argument callable running one step.
    build: Callable
    # Bytes of tensors alive at once during a step.
    estimate_bytes: Callable[[WorkloadConfig], int]
    # Useful floating-point operations per step (2·M·K·N for a GEMM), for TFLOP/s.
    flops: Callable[[WorkloadConfig], int]
    # What M, K and N mean for this workload (the page labels its sliders with these).
    dim_names: tuple[str, str, str] = ("M", "K", "N")
    # (device kind, compute capability) -> why this workload cannot run there, or None.
    refusal: Callable[[str, tuple[int, int] | None], str | None] = lambda kind, cc: None


def _label(torch, label: str | None):
    return torch.profiler.record_function(label) if label else nullcontext()


def _random(torch, shape, device, dtype):
    # Random data, never zeros: a GEMM on zeros runs measurably faster on some GPUs.
    return torch.randn(*shape, device=device, dtype=torch.float32).to(dtype)


def _build_matmul_add(config: WorkloadConfig, device, dtype) -> Callable[[], object]:
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


def _build_linear(config: WorkloadConfig, device, dtype) -> Callable[[], object]:
    import torch

    layer = torch.nn.Linear(config.k, config.n, bias=True).to(device=device, dtype=dtype)
    x = _random(torch, (config.m, config.k), device, dtype)

    def step():
        # nn.Linear stores W as N×K: aten::linear runs aten::t (a view, no kernel) and
        # aten::addmm, whose GEMM applies the bias in its epilogue: no separate add kernel.
        with torch.no_grad(), _label(torch, config.matmul_label):
            return layer(x)

    return step


def _build_geglu_mlp(config: WorkloadConfig, device, dtype) -> Callable[[], object]:
    import torch
    import torch.nn.functional as F

    x = _random(torch, (config.m, config.k), device, dtype)
    w_in = _random(torch, (config.k, 2 * config.n), device, dtype) * config.k ** -0.5
    w_out = _random(torch, (config.n, config.k), device, dtype) * config.n ** -0.5

    def step():
        with _label(torch, config.matmul_label):
            h = x @ w_in
        with _label(torch, config.add_label):
            a, g = h.chunk(2, dim=-1)
            act = F.gelu(a) * g  # eager: a gelu kernel and a mul kernel; compiled: one fused kernel
        return act @ w_out

    return step


# Attention: M = sequence length, K = head dimension, N = number of heads (batch 1).
_SDPA_BACKENDS = {"attention_math": "MATH", "attention_flash": "FLASH_ATTENTION",
                  "attention_efficient": "EFFICIENT_ATTENTION"}


def _attention_inputs(torch, config, device, dtype):
    shape = (1, config.n, config.m, config.k)
    return tuple(_random(torch, shape, device, dtype) for _ in range(3))


def _build_attention_naive(config: WorkloadConfig, device, dtype) -> Callable[[], object]:
    import torch

    q, k, v = _attention_inputs(torch, config, device, dtype)
    scale = config.k ** -0.5

    def step():
        with _label(torch, config.matmul_label):
            scores = (q @ k.transpose(-2, -1)) * scale  # materializes heads×M×M scores
        with _label(torch, config.add_label):
            probs = scores.softmax(dim=-1)
        return probs @ v

    return step


def _build_attention_sdpa(config: WorkloadConfig, device, dtype) -> Callable[[], object]:
    import torch
    import torch.nn.functional as F

    q, k, v = _attention_inputs(torch, config, device, dtype)
    backend = _SDPA_BACKENDS.get(config.workload)

    def run():
        with _label(torch, config.matmul_label):
            return F.scaled_dot_product_attention(q, k, v)

    if backend is None:
        return run
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = getattr(SDPBackend, backend)

    def step():
        with sdpa_kernel(chosen):
            return run()

    return step


def _attention_bytes(config: WorkloadConfig) -> int:
    qkvo = 4 * config.n * config.m * config.k
    scores = 2 * config.n * config.m * config.m  # naive: scores and probabilities
    return (qkvo + scores) * config.element_bytes


def _attention_flops(config: WorkloadConfig) -> int:
    return 4 * config.n * config.m * config.m * config.k


def _efficient_refusal(kind: str, cc) -> str | None:
    if kind == "cpu":
        return ("the memory-efficient SDPA backend has no CPU kernel; run it on a CUDA GPU or pick "
                "attention_flash/attention_math")
    return None


def _flash_refusal(kind: str, cc) -> str | None:
    if kind == "cuda" and (cc or (0, 0)) < (8, 0):
        return "FlashAttention needs compute capability 8.0 or newer; pick attention_efficient or attention_math"
    return None


def _geglu_bytes(config: WorkloadConfig) -> int:
    m, k, n = config.m, config.k, config.n
    return (2 * m * k + 3 * k * n + 4 * m * n) * config.element_bytes


def _matmul_add_bytes(config: WorkloadConfig) -> int:
    elements = config.m * config.k + config.k * config.n + config.n + 2 * config.m * config.n
    return elements * config.element_bytes


def _gemm_flops(config: WorkloadConfig) -> int:
    return 2 * config.m * config.k * config.n


def _attention(name: str, title: str, formula: str, build: Callable, *, refusal=None) -> Workload:
    """An attention workload: M = tokens, K = head dim, N = heads; same cost model for each."""
    extra = {"refusal": refusal} if refusal else {}
    return Workload(name=name, title=title, formula=formula, build=build, estimate_bytes=_attention_bytes,
                    flops=_attention_flops, dim_names=("tokens", "head dim", "heads"), **extra)


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
        Workload(
            name="linear",
            title="nn.Linear (x·Wᵀ + b)",
            formula="y = nn.Linear(K, N)(x)   x: M×K  →  aten::linear = aten::t + aten::addmm",
            build=_build_linear,
            estimate_bytes=_matmul_add_bytes,
            flops=_gemm_flops,
        ),
        Workload(
            name="geglu_mlp",
            title="GeGLU MLP",
            formula="h = x @ W_in (K×2N); a, g = h.chunk(2); y = (gelu(a) · g) @ W_out (N×K)",
            build=_build_geglu_mlp,
            estimate_bytes=_geglu_bytes,
            flops=lambda c: 6 * c.m * c.k * c.n,
        ),
        _attention("attention_naive", "attention, written out (QKᵀ, softmax, ·V)",
                   "softmax(Q Kᵀ / √d) V   Q, K, V: 1×N heads×M tokens×K dims", _build_attention_naive),
        _attention("attention_sdpa", "scaled_dot_product_attention (backend chosen by torch)",
                   "F.scaled_dot_product_attention(Q, K, V)", _build_attention_sdpa),
        _attention("attention_math", "SDPA, math backend (written in PyTorch ops)",
                   "with sdpa_kernel(SDPBackend.MATH): F.scaled_dot_product_attention(Q, K, V)",
                   _build_attention_sdpa),
        _attention("attention_flash", "SDPA, FlashAttention backend",
                   "with sdpa_kernel(SDPBackend.FLASH_ATTENTION): F.scaled_dot_product_attention(Q, K, V)",
                   _build_attention_sdpa, refusal=_flash_refusal),
        _attention("attention_efficient", "SDPA, memory-efficient backend",
                   "with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION): F.scaled_dot_product_attention(Q, K, V)",
                   _build_attention_sdpa, refusal=_efficient_refusal),
        # The workshop lessons (issue 23): builders and costs in workloads_workshop.py.
        Workload(name="matmul_chain", title="N matmuls in a row, no sync (the CPU runs ahead)",
                 formula="y = x; N times: y = y @ w   x: M×K, w: K×K", build=ws.build_chain,
                 estimate_bytes=ws.chain_bytes, flops=ws.chain_flops, dim_names=("M", "K", "matmuls per step")),
        Workload(name="matmul_chain_sync", title="N matmuls, then torch.cuda.synchronize() (none on a CPU)",
                 formula="y = x; N times: y = y @ w; torch.cuda.synchronize()",
                 build=partial(ws.build_chain, sync=True), estimate_bytes=ws.chain_bytes,
                 flops=ws.chain_flops, dim_names=("M", "K", "matmuls per step")),
        Workload(name="chain_item", title="N matmuls, .item() after each (a host sync each time)",
                 formula="y = x; N times: y = y @ w; y[0, 0].item()", build=ws.build_chain_item,
                 estimate_bytes=ws.chain_bytes, flops=ws.chain_flops, dim_names=("M", "K", "matmuls per step")),
        Workload(name="chain_item_once", title="N matmuls, the N values read back once per step",
                 formula="y = x; N times: y = y @ w; keep y[0, 0]; torch.stack(kept).tolist()",
                 build=partial(ws.build_chain_item, every=False), estimate_bytes=ws.chain_bytes,
                 flops=ws.chain_flops, dim_names=("M", "K", "matmuls per step")),
        Workload(name="row_loop", title="a Python loop over rows (one small op per row)",
                 formula="for i in range(M): out[i] = x[i] * s[i]   x: M×K, s: M", build=ws.build_row_loop,
                 estimate_bytes=ws.row_bytes, flops=ws.row_flops, dim_names=("rows", "columns", "unused")),
        Workload(name="row_vectorized", title="the row loop as one broadcast multiply",
                 formula="out = x * s[:, None]", build=ws.build_row_vectorized,
                 estimate_bytes=ws.row_bytes, flops=ws.row_flops, dim_names=("rows", "columns", "unused")),
        Workload(name="small_ops", title="N × (y * a + b) on a small tensor, eager",
                 formula="N times: y = y * a + b   y, a, b: M×K", build=ws.build_small_ops,
                 estimate_bytes=ws.small_ops_bytes, flops=ws.small_ops_flops,
                 dim_names=("M", "K", "iterations")),
        Workload(name="small_ops_graphed", title="the same ops captured in a CUDA graph, replayed (eager on a CPU)",
                 formula="g = torch.cuda.CUDAGraph(); with torch.cuda.graph(g): …; each step g.replay()",
                 build=partial(ws.build_small_ops, graphed=True), estimate_bytes=ws.small_ops_bytes,
                 flops=ws.small_ops_flops, dim_names=("M", "K", "iterations")),
        Workload(name="train_mlp", title="a training step: MLP forward, backward, AdamW",
                 formula="loss = mse(Linear(N→K)(gelu(Linear(K→N)(x))), t); loss.backward(); opt.step()",
                 build=ws.build_train_mlp, estimate_bytes=ws.train_bytes, flops=ws.train_flops,
                 dim_names=("rows", "model dim", "hidden dim")),
        Workload(name="copy_pageable", title="host→device copies from pageable memory, non_blocking",
                 formula="N times: dst.copy_(src, non_blocking=True)   src: M×K on the host",
                 build=ws.build_copy, estimate_bytes=ws.copy_bytes, flops=lambda c: 0,
                 dim_names=("rows", "columns", "copies per step")),
        Workload(name="copy_pinned", title="host→device copies from pinned memory, non_blocking (pageable on a CPU)",
                 formula="src = src.pin_memory(); N times: dst.copy_(src, non_blocking=True)",
                 build=partial(ws.build_copy, pinned=True), estimate_bytes=ws.copy_bytes, flops=lambda c: 0,
                 dim_names=("rows", "columns", "copies per step")),
        Workload(name="memory_mlp", title="up-projection, gelu, down-projection, each labelled",
                 formula="h = x @ W1 (K×N); a = gelu(h); y = a @ W2 (N×K)", build=ws.build_memory_mlp,
                 estimate_bytes=ws.memory_mlp_bytes, flops=ws.memory_mlp_flops),
        Workload(name="matmul_shapes", title="three matmuls of equal FLOPs, three shapes",
                 formula="matmul on (M,K,N), (2M,K/4,2N), (4M,K/16,4N)", build=ws.build_shapes,
                 estimate_bytes=ws.shapes_bytes, flops=ws.shapes_flops),
    )
}

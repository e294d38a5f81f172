"""Builders and costs of the workloads about the host's side of a step: launches running ahead of
the GPU and syncs that stop them, values read back with ``.item()``, a Python loop of small ops,
CUDA graphs, host → device copies.

Each builder is ``(config, torch.device, torch.dtype) -> step`` and reads its sizes typed
(``lab.core.workloads.sizes``); torch is imported lazily. On a CPU the GPU-only parts
(``torch.cuda.synchronize``, pinned memory, CUDA graphs) are left out, and the workload's title
says so: a CPU run then shows the same ops without the GPU effect.
"""

from __future__ import annotations

from collections.abc import Callable

from lab.core.workloads.gemm import random
from lab.core.workloads.sizes import HostCopy, MatmulChain, Rows, SmallOps

__all__ = [
    "build_chain", "build_chain_item", "build_copy", "build_row_loop", "build_row_vectorized", "build_small_ops",
    "chain_bytes", "chain_flops", "copy_bytes", "on_gpu", "row_bytes", "row_flops", "small_ops_bytes",
    "small_ops_flops",
]  # fmt: skip


def on_gpu(device) -> bool:
    return getattr(device, "type", str(device)) == "cuda"


# --------------------------------------------------------------------------- launch delay, sync


def _chain_inputs(torch, config, device, dtype):
    s = MatmulChain.of(config)
    x = random(torch, (s.rows, s.width), device, dtype)
    w = random(torch, (s.width, s.width), device, dtype, s.width**-0.5)  # scaled so values stay finite
    return s, x, w


def build_chain(config, device, dtype, *, sync: bool = False) -> Callable[[], object]:
    """y = y @ w, ``matmuls`` times. ``sync``: then ``torch.cuda.synchronize()`` at the end of the
    step (on a GPU), as a timing loop often does."""
    import torch

    s, x, w = _chain_inputs(torch, config, device, dtype)
    synchronize = torch.cuda.synchronize if sync and on_gpu(device) else None

    def step():
        y = x
        for _ in range(s.matmuls):
            y = y @ w
        if synchronize is not None:
            synchronize()
        return y

    return step


def build_chain_item(config, device, dtype, *, every: bool = True) -> Callable[[], object]:
    """The chain, reading one value back after each matmul (``.item()``: a device→host copy and a
    wait) or once per step (the values stay on the device, one ``.tolist()`` at the end)."""
    import torch

    s, x, w = _chain_inputs(torch, config, device, dtype)

    def step():
        y, seen = x, []
        for _ in range(s.matmuls):
            y = y @ w
            seen.append(y[0, 0].item() if every else y[0, 0])
        return seen if every else torch.stack(seen).tolist()

    return step


def chain_flops(config) -> int:
    s = MatmulChain.of(config)
    return 2 * s.rows * s.width * s.width * s.matmuls


def chain_bytes(config) -> int:
    s = MatmulChain.of(config)
    return (3 * s.rows * s.width + s.width * s.width) * config.element_bytes


# --------------------------------------------------------------------------- # of Calls


def build_row_loop(config, device, dtype) -> Callable[[], object]:
    """Each row scaled by its own factor in a Python loop: per row a select, a mul and a copy into
    the output (``out[i] = x[i] * s[i]``)."""
    import torch

    size = Rows.of(config)
    x = random(torch, (size.rows, size.columns), device, dtype)
    s = random(torch, (size.rows,), device, dtype)
    out = torch.empty_like(x)

    def step():
        for i in range(size.rows):
            out[i] = x[i] * s[i]
        return out

    return step


def build_row_vectorized(config, device, dtype) -> Callable[[], object]:
    """The same product as one broadcast multiply: ``x * s[:, None]``."""
    import torch

    size = Rows.of(config)
    x = random(torch, (size.rows, size.columns), device, dtype)
    s = random(torch, (size.rows,), device, dtype)

    def step():
        return x * s[:, None]

    return step


def row_flops(config) -> int:
    s = Rows.of(config)
    return s.rows * s.columns


def row_bytes(config) -> int:
    s = Rows.of(config)
    return (3 * s.rows * s.columns + s.rows) * config.element_bytes


# --------------------------------------------------------------------------- CUDA graphs


def _small_chain(x, a, b, n: int):
    y = x
    for _ in range(n):
        y = y * a + b  # two elementwise kernels per iteration
    return y


def build_small_ops(config, device, dtype, *, graphed: bool = False) -> Callable[[], object]:
    """``iterations`` times ``y = y * a + b`` on a rows × columns tensor. ``graphed`` (GPU only):
    captured once into a ``torch.cuda.CUDAGraph`` at build time, each step one ``replay()``: what
    ``torch.compile(mode="reduce-overhead")`` does for you. On a CPU there is nothing to capture."""
    import torch

    s = SmallOps.of(config)
    x, a, b = (random(torch, (s.rows, s.columns), device, dtype) for _ in range(3))
    if not (graphed and on_gpu(device)):
        return lambda: _small_chain(x, a, b, s.iterations)
    # The capture pattern of torch.cuda.graphs' docs: warm up on a side stream, then capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            _small_chain(x, a, b, s.iterations)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _small_chain(x, a, b, s.iterations)

    def step():
        graph.replay()
        return out

    return step


def small_ops_flops(config) -> int:
    s = SmallOps.of(config)
    return 2 * s.rows * s.columns * s.iterations


def small_ops_bytes(config) -> int:
    s = SmallOps.of(config)
    return 5 * s.rows * s.columns * config.element_bytes


# --------------------------------------------------------------------------- copies


def build_copy(config, device, dtype, *, pinned: bool = False) -> Callable[[], object]:
    """``copies`` copies per step of a host tensor into a device tensor, ``non_blocking=True``. The
    host tensor is page-locked (``pin_memory()``) in the pinned variant, on a GPU only."""
    import torch

    s = HostCopy.of(config)
    src = torch.randn(s.rows, s.columns, dtype=torch.float32).to(dtype)
    if pinned and on_gpu(device):
        src = src.pin_memory()
    dst = torch.empty(s.rows, s.columns, device=device, dtype=dtype)

    def step():
        for _ in range(s.copies):
            dst.copy_(src, non_blocking=True)
        return dst

    return step


def copy_bytes(config) -> int:
    s = HostCopy.of(config)
    return 2 * s.rows * s.columns * config.element_bytes

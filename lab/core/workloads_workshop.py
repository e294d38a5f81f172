"""The workshop lessons' exercises (issue 23): builders and costs, registered in ``workloads.py``.

Each builder is ``(config, torch.device, torch.dtype) -> step`` like the others; each cost
function reads only ``WorkloadConfig``'s fields. torch is imported lazily. On a CPU the GPU-only
parts (``torch.cuda.synchronize``, pinned memory, CUDA graphs) are left out, and the workload's
title in ``workloads.py`` says so: a CPU run then shows the same ops without the GPU effect.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = [
    "build_chain", "build_chain_item", "build_copy", "build_memory_mlp", "build_row_loop", "build_row_vectorized",
    "build_shapes", "build_small_ops", "build_train_mlp", "chain_bytes", "chain_flops", "copy_bytes",
    "memory_mlp_bytes", "memory_mlp_flops", "row_bytes", "row_flops", "shape_triples", "shapes_bytes",
    "shapes_flops", "small_ops_bytes", "small_ops_flops", "train_bytes", "train_flops",
]  # fmt: skip

# The memory lesson's three record_function labels, in the order the step opens them.
MEMORY_LABELS = ("up", "act", "down")
# The training step's labels (the optimizer labels itself: "Optimizer.step#AdamW.step").
TRAIN_LABELS = ("forward", "backward")


def _random(torch, shape, device, dtype, scale: float = 1.0):
    return (torch.randn(*shape, device=device, dtype=torch.float32) * scale).to(dtype)


def _label(torch, name: str):
    return torch.profiler.record_function(name)


def _on_gpu(device) -> bool:
    return getattr(device, "type", str(device)) == "cuda"


# --------------------------------------------------------------------------- launch delay, sync


def build_chain(config, device, dtype, *, sync: bool = False) -> Callable[[], object]:
    """N = matmuls per step: y = y @ w, N times (w scaled so values stay finite). ``sync``: then
    ``torch.cuda.synchronize()`` at the end of the step (on a GPU), as a timing loop often does."""
    import torch

    x = _random(torch, (config.m, config.k), device, dtype)
    w = _random(torch, (config.k, config.k), device, dtype, config.k**-0.5)
    synchronize = torch.cuda.synchronize if sync and _on_gpu(device) else None

    def step():
        y = x
        for _ in range(config.n):
            y = y @ w
        if synchronize is not None:
            synchronize()
        return y

    return step


def build_chain_item(config, device, dtype, *, every: bool = True) -> Callable[[], object]:
    """The chain, reading one value back after each matmul (``.item()``: a device→host copy and a
    wait) or once per step (the values stay on the device, one ``.tolist()`` at the end)."""
    import torch

    x = _random(torch, (config.m, config.k), device, dtype)
    w = _random(torch, (config.k, config.k), device, dtype, config.k**-0.5)

    def step():
        y, seen = x, []
        for _ in range(config.n):
            y = y @ w
            seen.append(y[0, 0].item() if every else y[0, 0])
        return seen if every else torch.stack(seen).tolist()

    return step


def chain_flops(config) -> int:
    return 2 * config.m * config.k * config.k * config.n


def chain_bytes(config) -> int:
    return (3 * config.m * config.k + config.k * config.k) * config.element_bytes


# --------------------------------------------------------------------------- # of Calls


def build_row_loop(config, device, dtype) -> Callable[[], object]:
    """M rows × K columns, each row scaled by its own factor in a Python loop: per row a select,
    a mul and a copy into the output (``out[i] = x[i] * s[i]``)."""
    import torch

    x = _random(torch, (config.m, config.k), device, dtype)
    s = _random(torch, (config.m,), device, dtype)
    out = torch.empty_like(x)

    def step():
        for i in range(config.m):
            out[i] = x[i] * s[i]
        return out

    return step


def build_row_vectorized(config, device, dtype) -> Callable[[], object]:
    """The same product as one broadcast multiply: ``x * s[:, None]``."""
    import torch

    x = _random(torch, (config.m, config.k), device, dtype)
    s = _random(torch, (config.m,), device, dtype)

    def step():
        return x * s[:, None]

    return step


def row_flops(config) -> int:
    return config.m * config.k


def row_bytes(config) -> int:
    return (3 * config.m * config.k + config.m) * config.element_bytes


# --------------------------------------------------------------------------- CUDA graphs


def _small_chain(x, a, b, n: int):
    y = x
    for _ in range(n):
        y = y * a + b  # two elementwise kernels per iteration
    return y


def build_small_ops(config, device, dtype, *, graphed: bool = False) -> Callable[[], object]:
    """N iterations of ``y = y * a + b`` on an M×K tensor. ``graphed`` (GPU only): captured once
    into a ``torch.cuda.CUDAGraph`` at build time, each step one ``replay()``: what
    ``torch.compile(mode="reduce-overhead")`` does for you. On a CPU there is nothing to capture."""
    import torch

    x = _random(torch, (config.m, config.k), device, dtype)
    a = _random(torch, (config.m, config.k), device, dtype)
    b = _random(torch, (config.m, config.k), device, dtype)
    if not (graphed and _on_gpu(device)):
        return lambda: _small_chain(x, a, b, config.n)
    # The capture pattern of torch.cuda.graphs' docs: warm up on a side stream, then capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            _small_chain(x, a, b, config.n)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _small_chain(x, a, b, config.n)

    def step():
        graph.replay()
        return out

    return step


def small_ops_flops(config) -> int:
    return 2 * config.m * config.k * config.n


def small_ops_bytes(config) -> int:
    return 5 * config.m * config.k * config.element_bytes


# --------------------------------------------------------------------------- training step


def build_train_mlp(config, device, dtype) -> Callable[[], object]:
    """A two-layer MLP (K → N → K, GELU) trained on M rows: forward + MSE loss, backward,
    AdamW step (torch's default implementation for the device), gradients set to None."""
    import torch
    import torch.nn.functional as F

    model = torch.nn.Sequential(
        torch.nn.Linear(config.k, config.n), torch.nn.GELU(), torch.nn.Linear(config.n, config.k)
    ).to(device=device, dtype=dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = _random(torch, (config.m, config.k), device, dtype)
    target = _random(torch, (config.m, config.k), device, dtype)

    def step():
        with _label(torch, TRAIN_LABELS[0]):
            loss = F.mse_loss(model(x), target)
        with _label(torch, TRAIN_LABELS[1]):
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def train_flops(config) -> int:
    # forward 2 GEMMs (2·2MKN); backward: layer 2's input and weight gradients, layer 1's weight
    # gradient (its input needs none): 3 more GEMMs of 2MKN each.
    return 10 * config.m * config.k * config.n


def train_bytes(config) -> int:
    params = 2 * config.k * config.n
    # weights, gradients, two AdamW moments; inputs, target, activations (M×N twice) and output.
    return (4 * params + 3 * config.m * config.k + 3 * config.m * config.n) * config.element_bytes


# --------------------------------------------------------------------------- copies


def build_copy(config, device, dtype, *, pinned: bool = False) -> Callable[[], object]:
    """N copies per step of an M×K host tensor into a device tensor, ``non_blocking=True``. The
    host tensor is page-locked (``pin_memory()``) in the pinned variant, on a GPU only."""
    import torch

    src = torch.randn(config.m, config.k, dtype=torch.float32).to(dtype)
    if pinned and _on_gpu(device):
        src = src.pin_memory()
    dst = torch.empty(config.m, config.k, device=device, dtype=dtype)

    def step():
        for _ in range(config.n):
            dst.copy_(src, non_blocking=True)
        return dst

    return step


def copy_bytes(config) -> int:
    return 2 * config.m * config.k * config.element_bytes


# --------------------------------------------------------------------------- profile_memory


def build_memory_mlp(config, device, dtype) -> Callable[[], object]:
    """x (M×K) → h = x @ W1 (M×N) → a = gelu(h) → y = a @ W2 (M×K), each under its own label. ``h``
    is a local that is never deleted: it stays allocated until the step returns."""
    import torch
    import torch.nn.functional as F

    x = _random(torch, (config.m, config.k), device, dtype)
    w1 = _random(torch, (config.k, config.n), device, dtype, config.k**-0.5)
    w2 = _random(torch, (config.n, config.k), device, dtype, config.n**-0.5)
    up, act, down = MEMORY_LABELS

    def step():
        with _label(torch, up):
            h = x @ w1
        with _label(torch, act):
            a = F.gelu(h)
        with _label(torch, down):
            y = a @ w2
        return y

    return step


def memory_mlp_flops(config) -> int:
    return 4 * config.m * config.k * config.n


def memory_mlp_bytes(config) -> int:
    return (2 * config.m * config.k + 2 * config.k * config.n + 2 * config.m * config.n) * config.element_bytes


# --------------------------------------------------------------------------- Self vs Total, shapes


def shape_triples(config) -> tuple[tuple[int, int, int], ...]:
    """Three GEMMs of equal FLOPs: (M, K, N), (2M, K/4, 2N), (4M, K/16, 4N)."""
    return tuple((config.m * f, max(1, config.k // (f * f)), config.n * f) for f in (1, 2, 4))


def build_shapes(config, device, dtype) -> Callable[[], object]:
    """``torch.matmul`` on each of ``shape_triples``' pairs, in turn."""
    import torch

    pairs = [
        (_random(torch, (m, k), device, dtype), _random(torch, (k, n), device, dtype))
        for m, k, n in shape_triples(config)
    ]

    def step():
        return [torch.matmul(a, b) for a, b in pairs]

    return step


def shapes_flops(config) -> int:
    return sum(2 * m * k * n for m, k, n in shape_triples(config))


def shapes_bytes(config) -> int:
    return sum(m * k + k * n + m * n for m, k, n in shape_triples(config)) * config.element_bytes

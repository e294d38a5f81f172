"""Builders and costs of the workloads about a model's step: a training step (forward, backward,
AdamW), an MLP whose activations are watched by ``profile_memory``, and three matmuls of equal
FLOPs in three shapes.

Each builder is ``(config, torch.device, torch.dtype) -> step`` and reads its sizes typed
(``lab.core.workloads.sizes``); torch is imported lazily.
"""

from __future__ import annotations

from collections.abc import Callable

from lab.core.workloads.gemm import label, random
from lab.core.workloads.sizes import GemmShape, Mlp

__all__ = [
    "MEMORY_LABELS", "TRAIN_LABELS", "build_memory_mlp", "build_shapes", "build_train_mlp", "memory_mlp_bytes",
    "memory_mlp_flops", "shape_triples", "shapes_bytes", "shapes_flops", "train_bytes", "train_flops",
]  # fmt: skip

# The memory lesson's three record_function labels, in the order the step opens them.
MEMORY_LABELS = ("up", "act", "down")
# The training step's labels (the optimizer labels itself: "Optimizer.step#AdamW.step").
TRAIN_LABELS = ("forward", "backward")


# --------------------------------------------------------------------------- training step


def build_train_mlp(config, device, dtype) -> Callable[[], object]:
    """A two-layer MLP (model_dim → hidden_dim → model_dim, GELU) trained on ``rows`` inputs:
    forward + MSE loss, backward, AdamW step (torch's default implementation for the device),
    gradients set to None."""
    import torch
    import torch.nn.functional as F

    s = Mlp.of(config)
    model = torch.nn.Sequential(
        torch.nn.Linear(s.model_dim, s.hidden_dim), torch.nn.GELU(), torch.nn.Linear(s.hidden_dim, s.model_dim)
    ).to(device=device, dtype=dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = random(torch, (s.rows, s.model_dim), device, dtype)
    target = random(torch, (s.rows, s.model_dim), device, dtype)

    def step():
        with label(torch, TRAIN_LABELS[0]):
            loss = F.mse_loss(model(x), target)
        with label(torch, TRAIN_LABELS[1]):
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def train_flops(config) -> int:
    # forward 2 GEMMs (2·2·rows·model·hidden); backward: layer 2's input and weight gradients, layer
    # 1's weight gradient (its input needs none): 3 more GEMMs of 2·rows·model·hidden each.
    s = Mlp.of(config)
    return 10 * s.rows * s.model_dim * s.hidden_dim


def train_bytes(config) -> int:
    s = Mlp.of(config)
    params = 2 * s.model_dim * s.hidden_dim
    # weights, gradients, two AdamW moments; inputs, target, activations (rows × hidden twice) and output.
    return (4 * params + 3 * s.rows * s.model_dim + 3 * s.rows * s.hidden_dim) * config.element_bytes


# --------------------------------------------------------------------------- profile_memory


def build_memory_mlp(config, device, dtype) -> Callable[[], object]:
    """x (rows × model) → h = x @ W1 (rows × hidden) → a = gelu(h) → y = a @ W2 (rows × model), each
    under its own label. ``h`` is a local that is never deleted: it stays allocated until the step
    returns."""
    import torch
    import torch.nn.functional as F

    s = Mlp.of(config)
    x = random(torch, (s.rows, s.model_dim), device, dtype)
    w1 = random(torch, (s.model_dim, s.hidden_dim), device, dtype, s.model_dim**-0.5)
    w2 = random(torch, (s.hidden_dim, s.model_dim), device, dtype, s.hidden_dim**-0.5)
    up, act, down = MEMORY_LABELS

    def step():
        with label(torch, up):
            h = x @ w1
        with label(torch, act):
            a = F.gelu(h)
        with label(torch, down):
            y = a @ w2
        return y

    return step


def memory_mlp_flops(config) -> int:
    s = Mlp.of(config)
    return 4 * s.rows * s.model_dim * s.hidden_dim


def memory_mlp_bytes(config) -> int:
    s = Mlp.of(config)
    elements = 2 * s.rows * s.model_dim + 2 * s.model_dim * s.hidden_dim + 2 * s.rows * s.hidden_dim
    return elements * config.element_bytes


# --------------------------------------------------------------------------- Self vs Total, shapes


def shape_triples(config) -> tuple[tuple[int, int, int], ...]:
    """Three GEMMs of equal FLOPs: (M, K, N), (2M, K/4, 2N), (4M, K/16, 4N)."""
    s = GemmShape.of(config)
    return tuple((s.m * f, max(1, s.k // (f * f)), s.n * f) for f in (1, 2, 4))


def build_shapes(config, device, dtype) -> Callable[[], object]:
    """``torch.matmul`` on each of ``shape_triples``' pairs, in turn."""
    import torch

    pairs = [
        (random(torch, (m, k), device, dtype), random(torch, (k, n), device, dtype))
        for m, k, n in shape_triples(config)
    ]

    def step():
        return [torch.matmul(a, b) for a, b in pairs]

    return step


def shapes_flops(config) -> int:
    return sum(2 * m * k * n for m, k, n in shape_triples(config))


def shapes_bytes(config) -> int:
    return sum(m * k + k * n + m * n for m, k, n in shape_triples(config)) * config.element_bytes

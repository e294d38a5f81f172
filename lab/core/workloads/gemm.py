"""Builders and costs of the matrix-product and attention workloads: a matmul and a bias add,
``nn.Linear``, a GeGLU MLP, attention written out and through ``scaled_dot_product_attention``.

Each builder is ``(config, torch.device, torch.dtype) -> step`` and reads its sizes typed
(``GemmShape``, ``Mlp``, ``Attention``: ``lab.core.workloads.sizes``); each cost function reads
only the config's sizes and element size. torch is imported lazily.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

from lab.core.workloads.sizes import Attention, GemmShape, Mlp

__all__ = [
    "SDPA_BACKENDS", "attention_bytes", "attention_flops", "build_attention_naive", "build_attention_sdpa",
    "build_geglu_mlp", "build_linear", "build_matmul_add", "efficient_refusal", "flash_refusal", "geglu_bytes",
    "geglu_flops", "gemm_flops", "matmul_add_bytes",
]  # fmt: skip

# The SDPA backend each attention workload forces (none: torch picks one).
SDPA_BACKENDS = {"attention_math": "MATH", "attention_flash": "FLASH_ATTENTION",
                 "attention_efficient": "EFFICIENT_ATTENTION"}


def label(torch, name: str | None):
    return torch.profiler.record_function(name) if name else nullcontext()


def random(torch, shape, device, dtype, scale: float = 1.0):
    # Random data, never zeros: a GEMM on zeros runs measurably faster on some GPUs.
    data = torch.randn(*shape, device=device, dtype=torch.float32)
    return (data * scale if scale != 1.0 else data).to(dtype)


def build_matmul_add(config, device, dtype) -> Callable[[], object]:
    import torch

    s = GemmShape.of(config)
    x = random(torch, (s.m, s.k), device, dtype)
    w = random(torch, (s.k, s.n), device, dtype)
    b = random(torch, (s.n,), device, dtype)

    def step():
        with label(torch, config.matmul_label):
            y = torch.matmul(x, w)
        with label(torch, config.add_label):
            return torch.add(y, b)

    return step


def build_linear(config, device, dtype) -> Callable[[], object]:
    import torch

    s = GemmShape.of(config)
    layer = torch.nn.Linear(s.k, s.n, bias=True).to(device=device, dtype=dtype)
    x = random(torch, (s.m, s.k), device, dtype)

    def step():
        # nn.Linear stores W as N×K: aten::linear runs aten::t (a view, no kernel) and
        # aten::addmm, whose GEMM applies the bias in its epilogue: no separate add kernel.
        with torch.no_grad(), label(torch, config.matmul_label):
            return layer(x)

    return step


def build_geglu_mlp(config, device, dtype) -> Callable[[], object]:
    import torch
    import torch.nn.functional as F

    s = Mlp.of(config)
    x = random(torch, (s.rows, s.model_dim), device, dtype)
    w_in = random(torch, (s.model_dim, 2 * s.hidden_dim), device, dtype) * s.model_dim**-0.5
    w_out = random(torch, (s.hidden_dim, s.model_dim), device, dtype) * s.hidden_dim**-0.5

    def step():
        with label(torch, config.matmul_label):
            h = x @ w_in
        with label(torch, config.add_label):
            a, g = h.chunk(2, dim=-1)
            act = F.gelu(a) * g  # eager: a gelu kernel and a mul kernel; compiled: one fused kernel
        return act @ w_out

    return step


def _attention_inputs(torch, config, device, dtype):
    s = Attention.of(config)
    shape = (1, s.heads, s.tokens, s.head_dim)
    return tuple(random(torch, shape, device, dtype) for _ in range(3))


def build_attention_naive(config, device, dtype) -> Callable[[], object]:
    import torch

    q, k, v = _attention_inputs(torch, config, device, dtype)
    scale = Attention.of(config).head_dim ** -0.5

    def step():
        with label(torch, config.matmul_label):
            scores = (q @ k.transpose(-2, -1)) * scale  # materializes heads × tokens × tokens scores
        with label(torch, config.add_label):
            probs = scores.softmax(dim=-1)
        return probs @ v

    return step


def build_attention_sdpa(config, device, dtype) -> Callable[[], object]:
    import torch
    import torch.nn.functional as F

    q, k, v = _attention_inputs(torch, config, device, dtype)
    backend = SDPA_BACKENDS.get(config.workload)

    def run():
        with label(torch, config.matmul_label):
            return F.scaled_dot_product_attention(q, k, v)

    if backend is None:
        return run
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = getattr(SDPBackend, backend)

    def step():
        with sdpa_kernel(chosen):
            return run()

    return step


def attention_bytes(config) -> int:
    s = Attention.of(config)
    qkvo = 4 * s.heads * s.tokens * s.head_dim
    scores = 2 * s.heads * s.tokens * s.tokens  # written out: scores and probabilities
    return (qkvo + scores) * config.element_bytes


def attention_flops(config) -> int:
    s = Attention.of(config)
    return 4 * s.heads * s.tokens * s.tokens * s.head_dim


def efficient_refusal(kind: str, cc) -> str | None:
    if kind == "cpu":
        return ("the memory-efficient SDPA backend has no CPU kernel; run it on a CUDA GPU or pick "
                "attention_flash/attention_math")
    return None


def flash_refusal(kind: str, cc) -> str | None:
    if kind == "cuda" and (cc or (0, 0)) < (8, 0):
        return "FlashAttention needs compute capability 8.0 or newer; pick attention_efficient or attention_math"
    return None


def geglu_bytes(config) -> int:
    s = Mlp.of(config)
    rows, model, hidden = s.rows, s.model_dim, s.hidden_dim
    return (2 * rows * model + 3 * model * hidden + 4 * rows * hidden) * config.element_bytes


def geglu_flops(config) -> int:
    s = Mlp.of(config)
    return 6 * s.rows * s.model_dim * s.hidden_dim


def matmul_add_bytes(config) -> int:
    s = GemmShape.of(config)
    elements = s.m * s.k + s.k * s.n + s.n + 2 * s.m * s.n
    return elements * config.element_bytes


def gemm_flops(config) -> int:
    s = GemmShape.of(config)
    return 2 * s.m * s.k * s.n

"""The exercises: name → how to build inputs and one step, what the step costs, and what its
sizes mean.

A new exercise is one ``Workload`` entry here, with its builder and cost functions in a module of
this package (``gemm``: matrix products and attention; ``host``: launches, syncs, Python loops,
CUDA graphs, copies; ``training``: a training step, a memory-watched MLP, GEMM shapes; ``distributed``: a DDP job over
gloo) and its
sizes typed by a class of ``sizes`` (``GemmShape``, ``Attention``, ``Rows``…). Builders import torch
lazily so that ``lab.core.config`` stays importable without torch. This package never imports
``lab.core.config`` (which imports it): a workload reads only the fields ``WorkloadConfig`` names.

A lesson may carry a workload of its own, in its own module: the module defines ``WORKLOADS``, a
tuple of ``Workload``s each named ``"<that module>.<name>"`` (``lab.lessons.input_pipeline.starved``),
with its builder, cost model and ``Sizes`` class beside them. ``WORKLOADS[name]`` finds such a
workload by importing the module its name gives, as pickle finds a function by its qualified
name: no package below imports the lessons, and nothing registers itself at import time. Only
names of modules under ``lab.`` are looked up (a config's workload may come from a form or a
command line); iterating ``WORKLOADS`` gives the built-in ones, the form's list.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from lab.core.workloads import distributed, gemm, host, training
from lab.core.workloads.sizes import Attention, GemmShape, HostCopy, MatmulChain, Mlp, Rows, Sizes, SmallOps

__all__ = [
    "WORKLOADS", "Attention", "GemmShape", "HostCopy", "MatmulChain", "Mlp", "Rows", "Sizes", "SmallOps", "Workload",
    "WorkloadConfig", "Workloads",
]  # fmt: skip


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
    @property
    def ranks(self) -> int: ...
    @property
    def straggler(self) -> int: ...
    @property
    def straggler_ms(self) -> int: ...
    @property
    def straggler_cause(self) -> str: ...


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
    # What its sizes are (the config's m, k and n carry them: ``Sizes.CARRIED``).
    sizes: type[Sizes] = GemmShape
    # (device kind, compute capability) -> why this workload cannot run there, or None.
    refusal: Callable[[str, tuple[int, int] | None], str | None] = lambda kind, cc: None
    # A job of ``ranks`` processes (torch.distributed), each building the step in its own process.
    distributed: bool = False

    @property
    def dim_names(self) -> tuple[str, str, str]:
        """What M, K and N mean for this workload (the page labels its sliders with these)."""
        return self.sizes.LABELS


def _attention(name: str, title: str, formula: str, build: Callable, *, refusal=None) -> Workload:
    """An attention workload: the same sizes and cost model for each."""
    extra = {"refusal": refusal} if refusal else {}
    return Workload(name=name, title=title, formula=formula, build=build, estimate_bytes=gemm.attention_bytes,
                    flops=gemm.attention_flops, sizes=Attention, **extra)


def _chain(name: str, title: str, formula: str, build: Callable) -> Workload:
    return Workload(name=name, title=title, formula=formula, build=build, estimate_bytes=host.chain_bytes,
                    flops=host.chain_flops, sizes=MatmulChain)


_SEED = (
    Workload(name="matmul_add", title="matmul + bias add",
             formula="y = torch.add(torch.matmul(x, w), b)   x: M×K, w: K×N, b: N", build=gemm.build_matmul_add,
             estimate_bytes=gemm.matmul_add_bytes, flops=gemm.gemm_flops),
    Workload(name="linear", title="nn.Linear (x·Wᵀ + b)",
             formula="y = nn.Linear(K, N)(x)   x: M×K  →  aten::linear = aten::t + aten::addmm",
             build=gemm.build_linear, estimate_bytes=gemm.matmul_add_bytes, flops=gemm.gemm_flops),
    Workload(name="geglu_mlp", title="GeGLU MLP",
             formula="h = x @ W_in (model×2·hidden); a, g = h.chunk(2); y = (gelu(a) · g) @ W_out (hidden×model)",
             build=gemm.build_geglu_mlp, estimate_bytes=gemm.geglu_bytes, flops=gemm.geglu_flops, sizes=Mlp),
    _attention("attention_naive", "attention, written out (QKᵀ, softmax, ·V)",
               "softmax(Q Kᵀ / √d) V   Q, K, V: 1 × heads × tokens × head dim", gemm.build_attention_naive),
    _attention("attention_sdpa", "scaled_dot_product_attention (backend chosen by torch)",
               "F.scaled_dot_product_attention(Q, K, V)", gemm.build_attention_sdpa),
    _attention("attention_math", "SDPA, math backend (written in PyTorch ops)",
               "with sdpa_kernel(SDPBackend.MATH): F.scaled_dot_product_attention(Q, K, V)",
               gemm.build_attention_sdpa),
    _attention("attention_flash", "SDPA, FlashAttention backend",
               "with sdpa_kernel(SDPBackend.FLASH_ATTENTION): F.scaled_dot_product_attention(Q, K, V)",
               gemm.build_attention_sdpa, refusal=gemm.flash_refusal),
    _attention("attention_efficient", "SDPA, memory-efficient backend",
               "with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION): F.scaled_dot_product_attention(Q, K, V)",
               gemm.build_attention_sdpa, refusal=gemm.efficient_refusal),
)
_HOST = (
    _chain("matmul_chain", "N matmuls in a row, no sync (the CPU runs ahead)",
           "y = x; N times: y = y @ w   x: rows×width, w: width×width", host.build_chain),
    _chain("matmul_chain_sync", "N matmuls, then torch.cuda.synchronize() (none on a CPU)",
           "y = x; N times: y = y @ w; torch.cuda.synchronize()", partial(host.build_chain, sync=True)),
    _chain("chain_item", "N matmuls, .item() after each (a host sync each time)",
           "y = x; N times: y = y @ w; y[0, 0].item()", host.build_chain_item),
    _chain("chain_item_once", "N matmuls, the N values read back once per step",
           "y = x; N times: y = y @ w; keep y[0, 0]; torch.stack(kept).tolist()",
           partial(host.build_chain_item, every=False)),
    Workload(name="row_loop", title="a Python loop over rows (one small op per row)",
             formula="for i in range(rows): out[i] = x[i] * s[i]   x: rows×columns, s: rows",
             build=host.build_row_loop, estimate_bytes=host.row_bytes, flops=host.row_flops, sizes=Rows),
    Workload(name="row_vectorized", title="the row loop as one broadcast multiply", formula="out = x * s[:, None]",
             build=host.build_row_vectorized, estimate_bytes=host.row_bytes, flops=host.row_flops, sizes=Rows),
    Workload(name="small_ops", title="N × (y * a + b) on a small tensor, eager",
             formula="N times: y = y * a + b   y, a, b: rows×columns", build=host.build_small_ops,
             estimate_bytes=host.small_ops_bytes, flops=host.small_ops_flops, sizes=SmallOps),
    Workload(name="small_ops_graphed", title="the same ops captured in a CUDA graph, replayed (eager on a CPU)",
             formula="g = torch.cuda.CUDAGraph(); with torch.cuda.graph(g): …; each step g.replay()",
             build=partial(host.build_small_ops, graphed=True), estimate_bytes=host.small_ops_bytes,
             flops=host.small_ops_flops, sizes=SmallOps),
    Workload(name="copy_pageable", title="host→device copies from pageable memory, non_blocking",
             formula="N times: dst.copy_(src, non_blocking=True)   src: rows×columns on the host",
             build=host.build_copy, estimate_bytes=host.copy_bytes, flops=lambda c: 0, sizes=HostCopy),
    Workload(name="copy_pinned", title="host→device copies from pinned memory, non_blocking (pageable on a CPU)",
             formula="src = src.pin_memory(); N times: dst.copy_(src, non_blocking=True)",
             build=partial(host.build_copy, pinned=True), estimate_bytes=host.copy_bytes, flops=lambda c: 0,
             sizes=HostCopy),
)
_MODEL = (
    Workload(name="train_mlp", title="a training step: MLP forward, backward, AdamW",
             formula="loss = mse(Linear(hidden→model)(gelu(Linear(model→hidden)(x))), t); loss.backward(); opt.step()",
             build=training.build_train_mlp, estimate_bytes=training.train_bytes, flops=training.train_flops,
             sizes=Mlp),
    Workload(name="memory_mlp", title="up-projection, gelu, down-projection, each labelled",
             formula="h = x @ W1 (model×hidden); a = gelu(h); y = a @ W2 (hidden×model)",
             build=training.build_memory_mlp, estimate_bytes=training.memory_mlp_bytes,
             flops=training.memory_mlp_flops, sizes=Mlp),
    Workload(name="matmul_shapes", title="three matmuls of equal FLOPs, three shapes",
             formula="matmul on (M,K,N), (2M,K/4,2N), (4M,K/16,4N)", build=training.build_shapes,
             estimate_bytes=training.shapes_bytes, flops=training.shapes_flops),
)
_JOBS = (
    Workload(name="ddp_gloo", title="a DDP training step over gloo, one process per rank, one rank slow",
             formula="N processes: load_batch; loss = mse(MLP(x), t); loss.backward() (all_reduce of the "
                     "gradients over gloo); opt.step()",
             build=distributed.build_ddp_step, estimate_bytes=distributed.ddp_bytes, flops=distributed.ddp_flops,
             sizes=Mlp, refusal=distributed.cpu_refusal, distributed=True),
)
# A module-qualified workload name: "lab.<package>.<module>.<name>", lower-case identifiers only.
_QUALIFIED = re.compile(r"^(lab(?:\.[a-z_][a-z0-9_]*)+)\.([a-z_][a-z0-9_]*)$")


class Workloads(Mapping[str, Workload]):
    """The built-in workloads by name, and a module's own (``"<module>.<name>"``) found through
    that module's ``WORKLOADS`` tuple when asked for; iterating gives the built-in ones."""

    def __init__(self, builtin: tuple[Workload, ...]) -> None:
        self._builtin = {w.name: w for w in builtin}

    def __getitem__(self, name: str) -> Workload:
        if name in self._builtin:
            return self._builtin[name]
        found = _QUALIFIED.match(name) if isinstance(name, str) else None
        if found is None:
            raise KeyError(name)
        try:
            module = importlib.import_module(found.group(1))
        except ImportError:
            raise KeyError(name) from None
        own = getattr(module, "WORKLOADS", ())
        match = next((w for w in own if isinstance(w, Workload) and w.name == name), None)
        if match is None:
            raise KeyError(name)
        return match

    def __iter__(self) -> Iterator[str]:
        return iter(self._builtin)

    def __len__(self) -> int:
        return len(self._builtin)


WORKLOADS: Workloads = Workloads((*_SEED, *_HOST, *_MODEL, *_JOBS))

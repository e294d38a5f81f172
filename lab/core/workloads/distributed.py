"""A distributed workload: a DDP training step over gloo, one rank per process, one rank planted slow.

The builder runs inside each rank's process (``lab.run.ddp_rank``), after
``torch.distributed.init_process_group``: it reads its rank from torch.distributed. Every rank
runs the same step on a batch of its own: ``record_function("load_batch")`` builds the batch,
then forward, MSE loss, backward (DDP all-reduces the gradients over gloo) and an SGD step. The
straggler rank (``config.straggler``) adds ``straggler_ms`` per step: a sleep inside
``load_batch`` (a slow input pipeline), or matmuls inside ``record_function("extra_compute")``
until that much wall time has passed. The model is a two-layer MLP of ``Mlp`` sizes
(rows = per-rank batch, model dim, hidden dim); torch is imported lazily.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lab.core.workloads.gemm import label
from lab.core.workloads.sizes import Mlp

__all__ = ["COMPUTE_LABEL", "LOAD_LABEL", "build_ddp_step", "cpu_refusal", "ddp_bytes", "ddp_flops"]

# The record_function ranges the step opens: the batch's loading (where a slow input pipeline
# sleeps) and the straggler's extra compute.
LOAD_LABEL = "load_batch"
COMPUTE_LABEL = "extra_compute"


def build_ddp_step(config, device, dtype) -> Callable[[], object]:
    """One DDP training step of this process's rank (torch.distributed must be initialised)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    s = Mlp.of(config)
    rank = dist.get_rank()
    torch.manual_seed(0)  # every rank starts from the same weights, as DDP expects
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(s.model_dim, s.hidden_dim), torch.nn.GELU(), torch.nn.Linear(s.hidden_dim, s.model_dim)
    ).to(device=device, dtype=dtype))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(rank)  # each rank its own batches
    slow = rank == config.straggler
    delay_s = config.straggler_ms / 1000
    busy = torch.randn(s.model_dim, s.model_dim, dtype=dtype) if slow and config.straggler_cause == "compute" else None

    def step():
        with label(torch, LOAD_LABEL):
            x = torch.randn(s.rows, s.model_dim, generator=gen).to(dtype)
            target = torch.randn(s.rows, s.model_dim, generator=gen).to(dtype)
            if slow and busy is None:
                time.sleep(delay_s)  # the planted slow input pipeline
        if busy is not None:
            with label(torch, COMPUTE_LABEL):
                end = time.perf_counter() + delay_s
                while time.perf_counter() < end:  # the planted extra compute
                    torch.mm(busy, busy)
        loss = F.mse_loss(model(x), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def ddp_flops(config) -> int:
    """One rank's step: forward 2 GEMMs, backward 3 (layer 1's input needs no gradient)."""
    s = Mlp.of(config)
    return 5 * 2 * s.rows * s.model_dim * s.hidden_dim


def ddp_bytes(config) -> int:
    """The job's tensors at once on this host: per rank its weights, their gradients, the batch, target
    and activations, times the ranks (each rank is a process here)."""
    s = Mlp.of(config)
    weights = 2 * s.model_dim * s.hidden_dim + s.hidden_dim + s.model_dim
    activations = s.rows * (3 * s.model_dim + 2 * s.hidden_dim)
    return (2 * weights + activations) * config.element_bytes * config.ranks


def cpu_refusal(kind: str, compute_capability) -> str | None:
    """gloo all-reduces CPU tensors: the job's ranks run on the host's cores."""
    if kind == "cuda":
        return "ddp_gloo runs its ranks on this host's CPU cores over gloo; choose device 'cpu'"
    return None

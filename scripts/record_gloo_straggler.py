"""Record a real multi-process DDP job over gloo on this host's CPUs, one rank planted as a straggler.

    python scripts/record_gloo_straggler.py OUT_DIR --ranks 4 --straggler 2 --sleep-ms 60 --steps 3

N processes (``torch.multiprocessing.spawn``) run the same small MLP training step under
``DistributedDataParallel`` over gloo. Each step opens with ``record_function("load_batch")``,
in which the straggler rank sleeps ``--sleep-ms`` before its forward (a slow input pipeline);
every other rank's load_batch only builds its batch. Every rank profiles the same steps
(``schedule(wait=1, warmup=1, active=--steps)``) with ``record_shapes`` and writes one trace
through ``tensorboard_trace_handler(OUT_DIR, worker_name=f"rank{r}", use_gzip=True)``:
``rankR.<time_ns>.pt.trace.json.gz``. ``OUT_DIR/facts.json`` says what was planted.

torch only (no ``lab`` import): the recording is the ground truth the lab is tested against.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

WIDTH = 256  # the MLP's width: a few ms of compute per step, small beside the planted sleep
BATCH = 32
WAIT, WARMUP = 1, 1  # the profiler's schedule before the recorded steps


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _model() -> torch.nn.Module:
    torch.manual_seed(0)  # every rank starts from the same weights, as DDP expects
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH),
                               torch.nn.ReLU(), torch.nn.Linear(WIDTH, 10))


def _worker(rank: int, world: int, port: int, out: str, straggler: int, sleep_ms: float, steps: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # N processes share the host's cores: one thread each
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = DistributedDataParallel(_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    handler = tensorboard_trace_handler(out, worker_name=f"rank{rank}", use_gzip=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=WAIT, warmup=WARMUP, active=steps, repeat=1), on_trace_ready=handler) as prof:
        for _ in range(WAIT + WARMUP + steps):
            with record_function("load_batch"):
                x = torch.randn(BATCH, WIDTH, generator=gen)
                y = torch.randint(0, 10, (BATCH,), generator=gen)
                if rank == straggler:
                    time.sleep(sleep_ms / 1000)  # the planted slow input pipeline
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--straggler", type=int, default=2)
    p.add_argument("--sleep-ms", type=float, default=60.0)
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()
    if not 0 <= a.straggler < a.ranks:
        p.error(f"--straggler must be a rank of 0..{a.ranks - 1}")
    a.out.mkdir(parents=True, exist_ok=True)
    mp.spawn(_worker, args=(a.ranks, _free_port(), str(a.out), a.straggler, a.sleep_ms, a.steps), nprocs=a.ranks)
    facts = {"ranks": a.ranks, "backend": "gloo", "straggler": a.straggler, "sleep_ms": a.sleep_ms,
             "range": "load_batch", "steps": a.steps, "width": WIDTH, "batch": BATCH, "torch": torch.__version__,
             "cpus": os.cpu_count()}
    (a.out / "facts.json").write_text(json.dumps(facts, indent=2) + "\n")


if __name__ == "__main__":
    main()

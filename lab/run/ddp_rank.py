"""One rank of a distributed run: the process ``lab.run.ddp`` starts per rank, which profiles its own steps.

It starts as ``python -c RANK_CODE CONFIG_JSON OUT_DIR`` with its rank and the job's size in
``RANK_ENV`` / ``WORLD_ENV``, joins the job's gloo group through a file store in ``OUT_DIR``,
builds the workload's step (``Workload.build``: it reads the rank from torch.distributed), and
runs what ``lab.run.runner`` runs for one process, with the same schedule and labels: the
warm-up iterations, the profiled iterations under ``torch.profiler.profile`` (CPU activity, the
config's profiler keywords), and ``TIMED_STEPS`` un-profiled ones. Each rank writes its trace
through ``tensorboard_trace_handler(OUT_DIR, worker_name=f"rank{r}", use_gzip=True)``, i.e.
``rankR.<time_ns>.pt.trace.json.gz``, and its step times to ``rankR.timing.json``; rank 0 also
writes its key averages and tables (``SUMMARY_NAME``, a pickle the parent reads back).

Every rank makes the same number of steps, so every collective has all its ranks.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
from pathlib import Path

__all__ = ["RANK_CODE", "RANK_ENV", "SUMMARY_NAME", "TIMED_STEPS", "WORLD_ENV", "rank_entry", "timing_name"]

RANK_CODE = "from lab.run.ddp_rank import rank_entry; rank_entry()"
RANK_ENV, WORLD_ENV = "PROFILER_LAB_RANK", "PROFILER_LAB_WORLD"
SUMMARY_NAME = "rank0.summary.pkl"
# Un-profiled steps each rank times after the profile: the same count on every rank (each step
# all-reduces), few because every step of an N-process job costs N processes' time.
TIMED_STEPS = 3


def timing_name(rank: int) -> str:
    return f"rank{rank}.timing.json"


def rank_entry() -> None:
    """Entry point of a rank's interpreter (see ``RANK_CODE``)."""
    from lab.core.config import RunConfig

    config = RunConfig.from_dict(json.loads(sys.argv[1]))
    out = Path(sys.argv[2])
    rank, world = int(os.environ[RANK_ENV]), int(os.environ[WORLD_ENV])
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    import torch
    import torch.distributed as dist

    # The ranks share this host's cores: an equal share each, at least one thread.
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    dist.init_process_group("gloo", init_method=f"file://{out / 'store'}", rank=rank, world_size=world)
    try:
        _run_rank(torch, config, rank, out)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _run_rank(torch, config, rank: int, out: Path) -> None:
    from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

    from lab.core import workloads
    from lab.vocab import torch_dtype_name

    inner = workloads.WORKLOADS[config.workload].build(config, torch.device("cpu"),
                                                       getattr(torch, torch_dtype_name(config.dtype)))

    def step() -> float:
        start = time.perf_counter()
        with record_function(config.step_label):
            inner()
        return (time.perf_counter() - start) * 1e6

    for _ in range(config.warmup_iters):
        step()
    cycle = config.wait + config.warmup + config.active
    profiled_us = []
    handler = tensorboard_trace_handler(str(out), worker_name=f"rank{rank}", use_gzip=True)
    with profile(activities=[ProfilerActivity.CPU], on_trace_ready=handler,
                 schedule=schedule(wait=config.wait, warmup=config.warmup, active=config.active, repeat=config.repeat),
                 **config.profiler_args()) as prof:
        for i in range(config.profiled_steps):
            took_us = step()
            if i % cycle >= config.wait + config.warmup:  # the schedule's recorded steps
                profiled_us.append(took_us)
            prof.step()
    unprofiled_us = [step() for _ in range(TIMED_STEPS)]
    (out / timing_name(rank)).write_text(json.dumps({"profiled_us": profiled_us, "unprofiled_us": unprofiled_us}))
    if rank == 0:
        from lab.run.runner import averages_frame, averages_tables

        labels = {config.step_label}
        averages = prof.key_averages()
        summary = {"key_averages": averages_frame(averages, labels, with_shapes=False),
                   "by_shape": averages_frame(prof.key_averages(group_by_input_shape=True), labels, with_shapes=True),
                   "tables": averages_tables(averages, cuda=False)}
        (out / SUMMARY_NAME).write_bytes(pickle.dumps(summary))

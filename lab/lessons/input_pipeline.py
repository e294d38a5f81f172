"""The lesson “An input pipeline that starves the GPU”, whole: its workloads (``WORKLOADS``: a
DataLoader whose items take host time, without workers and with them, feeding a chain of GEMMs;
their builder, cost model and typed sizes ``InputBatches``), its text and explanation, its runs,
its check (``_input_pipeline``: the explain model's attribution of each step to causes), its
questions (each answer computed from the runs) and its claims (each checked on the H200
recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import Sizes, Workload
from lab.core.workloads.gemm import random
from lab.explain.classes import INPUT_PIPELINE_PATTERN
from lab.lessons.answers import banded, labels, step_time_ratio, where_window
from lab.lessons.checks import cause_share_pct
from lab.lessons.schema import (
    ANY_DEVICE,
    CPU_RUN,
    Band,
    Lesson,
    Question,
    Signal,
    Where,
    claim_between,
    claim_equals,
    lesson_run,
    question,
)
from lab.units import fmt_us

__all__ = ["LESSON", "WORKERS", "WORKLOADS", "InputBatches"]


@dataclass(frozen=True, kw_only=True)
class InputBatches(Sizes):
    """Batches of ``items`` rows of ``width`` features, each item made by the host in ``item_us``;
    the step multiplies the batch's width × width product by a width × width weight, ``GEMMS`` times."""

    CARRIED = ("items", "item_us", "width")
    LABELS = ("items per batch", "host µs per item", "width")
    items: int
    item_us: int
    width: int


# GEMMs of width³ a step runs on the batch: enough GPU work (about 13 ms at 8192 in bf16 on an
# H200) that workers can hide the input's host time behind it.
GEMMS = 8
# DataLoader worker processes of the second run: each makes a whole batch, so four of them
# deliver a batch every items · item_us / 4.
WORKERS = 4
STARVED, FED = f"{__name__}.starved", f"{__name__}.workers"


class _SlowItems:
    """A map-style dataset whose every item takes ``item_us`` of host time (a decode, an augmentation)."""

    def __init__(self, width: int, item_us: int) -> None:
        self.width, self.item_us = width, item_us

    def __len__(self) -> int:
        return 1 << 30  # never exhausted: each step takes the next batch

    def __getitem__(self, index: int):
        import torch

        time.sleep(self.item_us / 1e6)
        return torch.full((self.width,), float(index % 7) / 7.0)


def build_input_steps(config, device, dtype, *, workers: int) -> Callable[[], object]:
    """One step: the next batch from the DataLoader, copied to the device, then ``GEMMS`` products."""
    import torch
    from torch.utils.data import DataLoader

    s = InputBatches.of(config)
    w = random(torch, (s.width, s.width), device, dtype, s.width**-0.5)
    dataset: Any = _SlowItems(s.width, s.item_us)  # map-style: __len__ and __getitem__ are all a DataLoader reads
    loader: Any = DataLoader(dataset, batch_size=s.items, num_workers=workers)
    batches = iter(loader)

    def step():
        x = next(batches).to(device=device, dtype=dtype)
        h = x.T @ x
        for _ in range(GEMMS):
            h = h @ w
        return h

    return step


def input_bytes(config) -> int:
    s = InputBatches.of(config)
    return (s.items * s.width + 3 * s.width * s.width) * config.element_bytes


def input_flops(config) -> int:
    s = InputBatches.of(config)
    return 2 * s.items * s.width * s.width + GEMMS * 2 * s.width**3


WORKLOADS = (
    Workload(name=STARVED, title="a DataLoader without workers feeding GEMMs",
             formula=f"x = next(DataLoader(slow items, batch_size=items)); h = xᵀx; {GEMMS}× h = h @ w",
             build=partial(build_input_steps, workers=0), estimate_bytes=input_bytes, flops=input_flops,
             sizes=InputBatches),
    Workload(name=FED, title=f"the same DataLoader with {WORKERS} worker processes",
             formula=f"DataLoader(slow items, batch_size=items, num_workers={WORKERS}); the same step",
             build=partial(build_input_steps, workers=WORKERS), estimate_bytes=input_bytes, flops=input_flops,
             sizes=InputBatches),
)


def _input_pipeline(runs: list[Run]) -> list[Signal]:
    starved, fed = runs
    s_in, f_in = cause_share_pct(starved, "input"), cause_share_pct(fed, "input")
    t_s, t_f = fig.profiled_step_us(starved), fig.profiled_step_us(fed)
    return [
        Signal("the input pipeline holds up most of the starved step", s_in >= _MOST_PCT,
               f"{s_in:.0f} % of the step time (median) is the input pipeline (attribution)"),
        Signal(f"with {WORKERS} workers it no longer does", f_in < _MOST_PCT,
               f"{f_in:.0f} % with workers, against {s_in:.0f} %"),
        Signal("the step with workers is faster", t_f < t_s, f"{fmt_us(t_s)} vs {fmt_us(t_f)} per step"),
    ]


# "Most of the step": over half of its wall time is one cause, the judge's dominant cause.
_MOST_PCT = 50.0

_SHARE = (Band(label="under 25 %", below=25.0), Band(label="25–60 %", below=60.0), Band(label="over 60 %"))
_SPEEDUP = (Band(label="under 1.5×", below=1.5), Band(label="1.5–4×", below=4.0), Band(label="4× or more"))


def _where_input(runs: Sequence[Run]) -> Where:
    names = runs[0].trace.events["name"].astype(str)
    rows = np.flatnonzero(names.str.match(INPUT_PIPELINE_PATTERN).to_numpy())
    return where_window(runs[0], 0, rows, "the starved run's first step: the DataLoader's __next__ and the GPU lane")


_starved_share = banded(lambda runs: cause_share_pct(runs[0], "input"), _SHARE,
                        lambda v: f"{v:.0f} % of the starved run's step time is the input pipeline",
                        _where_input)

QUESTIONS: tuple[Question, ...] = (
    question("input_pipeline.starved_share",
             "Without workers, what share of a step's time will the explanation put on the input pipeline?",
             labels(_SHARE), _starved_share, ANY_DEVICE, "", {}),
    question("input_pipeline.speedup", f"How many times faster will a step be with {WORKERS} workers?",
             labels(_SPEEDUP), step_time_ratio(0, 1, _SPEEDUP, f"no workers vs {WORKERS} workers"), ANY_DEVICE,
             "", {}),
)

LESSON = Lesson(
    key="input_pipeline",
    title="An input pipeline that starves the GPU",
    text=(
        "A training loop takes its next batch from a `DataLoader`, and the GPU can only run the "
        "step's kernels once the batch is there. Here each item takes 1 ms of host time to make "
        "(a decode, an augmentation) and a batch has 32 items; the step turns the batch into an "
        "8192×8192 bf16 matrix and multiplies it by an 8192×8192 weight eight times: nine GEMM "
        "kernels a step (on a CPU: 8 items of 4 ms, 384 wide, float32). The first run loads in the "
        f"training process itself (`num_workers=0`); the second with {WORKERS} worker processes, "
        "which make batches ahead while the GPU computes. **Look at** the DataLoader's `__next__` "
        "rows, the gaps in the GPU lane and the Summary's step time by cause."
    ),
    look_for="the DataLoader __next__ rows; the step's time by cause (input pipeline against GEMM)",
    # On a CPU the step's GEMMs (C) must lie between a batch's host time over the workers (I/4 =
    # 8 ms: below it the workers cannot keep up and the fed steps still wait) and the batch's host
    # time (I = 32 ms: above it the GEMMs, not the input, hold up the starved step). 384 wide puts
    # C at 6–17 ms on a 2-core Xeon, 16–28 ms beside two CPU hogs; 256 wide (2–7 ms) left the fed
    # steps waiting 13–71 % of the time, by where the profiled steps fell in the workers' bursts.
    runs=(
        lesson_run("no workers", STARVED, "train_step", gpu=InputBatches(items=32, item_us=1000, width=8192),
                   cpu=InputBatches(items=8, item_us=4000, width=384)),
        lesson_run(f"{WORKERS} workers", FED, "train_step", gpu=InputBatches(items=32, item_us=1000, width=8192),
                   cpu=InputBatches(items=8, item_us=4000, width=384)),
    ),
    explain=(
        "On the H200 recording a step without workers takes about 38 ms, and the batch is made "
        "inside it (32 items × 1 ms in `__next__`): the GPU is busy only about 30 % of the time (its "
        "GEMMs, about 1.2 ms each, run while the host makes the next batch). The explanation puts "
        "the GPU's idle time on the input pipeline, and the verdict says what workers would save. "
        f"With {WORKERS} workers the batches are ready when the loop asks, the GPU is busy over 90 % "
        "of the time and a step takes about 12 ms: about 3× faster, with the profiler and without. "
        "The GEMMs did not change; only the wait for input went away. On a CPU the items' host "
        "time is the same wait, without a GPU to starve."
    ),
    claims=(
        claim_equals("nine GEMM kernels a step", "gemms_per_step", "no workers", float(GEMMS + 1)),
        claim_equals("nine GEMM kernels a step", "gemms_per_step", f"{WORKERS} workers", float(GEMMS + 1)),
        claim_between("8 items of 4 ms", "profiled_step_us", "no workers", 32_000.0, float("inf"), device=CPU_RUN),
        claim_between("takes about 38 ms", "profiled_step_us", "no workers", 33_000.0, 43_000.0),
        claim_between("busy only about 30 % of the time", "gpu_busy_pct", "no workers", 20.0, 40.0),
        claim_between("about 1.2 ms each", "gemm_kernel_us", "no workers", 1_000.0, 1_400.0),
        claim_between("busy over 90 %", "gpu_busy_pct", f"{WORKERS} workers", 90.0, 100.0),
        claim_between("a step takes about 12 ms", "profiled_step_us", f"{WORKERS} workers", 10_000.0, 14_000.0),
        claim_between("about 3× faster, with the profiler", "profiled_step_us", "no workers", 2.5, 4.0,
                      over=f"{WORKERS} workers"),
        claim_between("and without", "unprofiled_step_us", "no workers", 2.5, 4.0, over=f"{WORKERS} workers"),
        claim_between("The GEMMs did not change", "gemm_kernel_us", "no workers", 0.9, 1.1, over=f"{WORKERS} workers"),
        claim_between("without a GPU to starve", "profiled_step_us", "no workers", 1.5, float("inf"),
                      over=f"{WORKERS} workers", device=CPU_RUN),
    ),
    check=_input_pipeline,
    questions=QUESTIONS,
    order=18,
)

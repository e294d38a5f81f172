"""The lesson “One slow rank holds everyone”, whole: a real DDP job over gloo of four processes on this
host, rank 2's input pipeline planted slow (a sleep inside ``record_function("load_batch")``). The
run opens rank 0's trace (a fast rank) as the lesson's run, and all four ranks as one job in the Ranks
view. Its check, questions and claims read rank 0: its own input pipeline is fast, yet its step holds
the straggler's delay, spent waiting in the gradients' all-reduce.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lab.analysis.bundle import Run
from lab.analysis.figures import phase_us, step_us
from lab.core.workloads import Mlp
from lab.core.workloads.distributed import LOAD_LABEL
from lab.lessons.answers import named_rows, where_window
from lab.lessons.schema import (
    CPU,
    CPU_RUN,
    Answer,
    Band,
    Lesson,
    Question,
    Signal,
    Where,
    band_of,
    claim_between,
    lesson_run,
    question,
)

__all__ = ["LESSON"]

RANKS, STRAGGLER, DELAY_MS = 4, 2, 60  # the job: rank 2 sleeps 60 ms per step in load_batch
# A small MLP (32 rows, 256 → 256 → 256): about a millisecond of work per step, so the plant dominates.
_SIZES = Mlp(rows=32, model_dim=256, hidden_dim=256)
# Rank 0's step holds the plant when it is at least this share of it: the rest of the wait is
# hidden only if rank 0 also slowed (it does not), and a busy 2-core host adds, never removes.
_HOLDS = 0.85


def _slow_rank(runs: list[Run]) -> list[Signal]:
    rank0 = runs[0]
    step, load = step_us(rank0), phase_us(rank0, LOAD_LABEL)
    evidence = (f"rank 0: step {step / 1e3:.1f} ms, its own '{LOAD_LABEL}' {load / 1e3:.2f} ms per step; "
                f"rank {STRAGGLER} sleeps {DELAY_MS} ms per step there")
    return [Signal(f"a fast rank's step holds rank {STRAGGLER}'s delay", step >= _HOLDS * DELAY_MS * 1e3, evidence)]


_STEP = (Band(label="under 10 ms", below=10_000.0), Band(label="10–50 ms", below=50_000.0),
         Band(label="50 ms or more"))


def _step(runs: Sequence[Run]) -> Answer:
    rank0 = runs[0]
    us = step_us(rank0)
    steps = np.flatnonzero(rank0.trace.events["name"].astype(str).str.startswith("ProfilerStep#").to_numpy())
    return Answer(choice=band_of(us, _STEP), measured=us,
                  measured_text=f"rank 0's median step: {us / 1e3:.1f} ms",
                  where=where_window(rank0, 0, steps, "rank 0's first recorded step, from its label to its end"))


_LOAD = (Band(label="under 1 ms", below=1_000.0), Band(label="1–30 ms", below=30_000.0), Band(label="30 ms or more"))


def _load(runs: Sequence[Run]) -> Answer:
    rank0 = runs[0]
    us = phase_us(rank0, LOAD_LABEL)
    rows = named_rows(rank0, (LOAD_LABEL,))
    where = where_window(rank0, 0, rows, f"rank 0's '{LOAD_LABEL}' in its first recorded step")
    if not len(rows):
        where = Where(text=f"the key_averages row '{LOAD_LABEL}'", row=LOAD_LABEL)
    return Answer(choice=band_of(us, _LOAD), measured=us,
                  measured_text=f"rank 0's '{LOAD_LABEL}': {us / 1e3:.2f} ms per step", where=where)


QUESTIONS: tuple[Question, ...] = (
    question("slow_rank.step", "How long will rank 0's step take (median)?", [b.label for b in _STEP], _step, (CPU,),
             tells={"50 ms or more": ("holds the straggler's delay", "waits for rank 2")}),
    question("slow_rank.load", f"How long will rank 0 itself spend in '{LOAD_LABEL}' per step?",
             [b.label for b in _LOAD], _load, (CPU,), tells={"under 1 ms": ("only rank 2 is slow",)}),
)

LESSON = Lesson(
    key="slow_rank",
    title="One slow rank holds everyone (a real gloo job)",
    text=(
        f"Four processes on this host train the same small MLP with `DistributedDataParallel` over gloo: "
        f"each step loads a batch inside `record_function(\"{LOAD_LABEL}\")`, runs forward and backward (where "
        f"DDP all-reduces the gradients across the ranks) and an optimizer step. Rank {STRAGGLER}'s input "
        f"pipeline is planted slow: it sleeps {DELAY_MS} ms per step inside its `{LOAD_LABEL}`. The run opens "
        f"rank 0's trace, and all four ranks as one job in the **Ranks** tab. **Look at** rank 0's steps in "
        f"the Timeline, its own `{LOAD_LABEL}`, and in the Ranks tab the straggler line and each rank's wait."
    ),
    look_for=f"rank 0's step is as long as rank {STRAGGLER}'s planted delay, though its own loading is fast",
    explain=(
        f"Rank 0's own `{LOAD_LABEL}` takes well under a millisecond, yet its step takes over {DELAY_MS} ms: "
        f"backward cannot finish until every rank has sent its gradients, so rank 0 waits in gloo's "
        f"all-reduce for rank {STRAGGLER}, every step. The Ranks tab names rank {STRAGGLER} as the straggler "
        f"by its cause (its `{LOAD_LABEL}`), shows its wait near zero and the others' near the plant. One "
        f"slow rank sets the pace of the whole job: fix its input pipeline (more loader workers, prefetch), "
        f"not the fast ranks."
    ),
    runs=(lesson_run("job", "ddp_gloo", "train_step", gpu=_SIZES, cpu=_SIZES, gpu_dtype="float32", ranks=RANKS,
                     straggler=STRAGGLER, straggler_ms=DELAY_MS),),
    check=_slow_rank,
    questions=QUESTIONS,
    claims=(
        claim_between("takes well under a millisecond", "phase_us", "job", 0.0, 1_000.0, args=(LOAD_LABEL,),
                      device=CPU_RUN),
        claim_between(f"yet its step takes over {DELAY_MS} ms", "profiled_step_us", "job", DELAY_MS * 1e3, float("inf"),
                      device=CPU_RUN),
    ),
    order=18,
    host_only=True,
)

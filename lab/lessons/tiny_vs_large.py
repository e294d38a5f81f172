"""The lesson “Tiny vs large: overhead-bound or compute-bound?”, whole: its text and explanation, its
runs (in the workload's own sizes), its check (``_tiny_vs_large``: what the lab looks for in the
runs, a pure function of their analyses), its questions (``QUESTIONS``: each answer computed from
the runs) and its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lab.analysis.bundle import Run
from lab.analysis.figures import gemm_op_share_pct, launch_delay_share_pct
from lab.analysis.gpu import GPU_BOUND_BUSY_PCT
from lab.core.workloads import GemmShape
from lab.lessons.answers import cat_rows, ka_row, named_rows, where_window
from lab.lessons.schema import (
    CPU,
    GPU,
    Answer,
    Band,
    Lesson,
    Question,
    Signal,
    Where,
    band_of,
    claim_between,
    claim_equals,
    lesson_run,
    question,
)
from lab.units import fmt_pct
from lab.vocab import ADD_KERNEL_NAMES

__all__ = ["LESSON"]


# The active window, defined where a lesson first uses it (lab.analysis.gpu).
ACTIVE_WINDOW = ("The GPU's *active window* is the span from the trace's first GPU activity to its last; "
                 "its *busy share* is the part of that span in which a kernel, copy or memset runs.")


# CPU traces: the GEMM op must take at least this share of a large run's step to count as
# compute-bound, and under the lower share of a tiny run's step for overhead-bound: at 64³ the
# dispatcher and Python cost more than the multiply itself (seen here: ~20 % on 2 CPU cores).
COMPUTE_SHARE_LARGE_PCT = 70.0


COMPUTE_SHARE_TINY_PCT = 50.0


def _tiny_vs_large(runs: list[Run]) -> list[Signal]:
    tiny, large = runs
    out = []
    for run, want_overhead in ((tiny, True), (large, False)):
        kind = "overhead-bound" if want_overhead else "compute-bound"
        if run.trace.has_gpu:  # does the GPU wait for the host (busy under the GPU-bound line)?
            busy_pct = run.analysis.utilization.active_busy_pct
            present = (busy_pct < GPU_BOUND_BUSY_PCT) == want_overhead
            evidence = (f"GPU busy {fmt_pct(busy_pct)} of its active window (GPU-bound from "
                        f"{GPU_BOUND_BUSY_PCT:.0f} %)")
        else:  # CPU only: how much of the step is the multiply itself?
            share = gemm_op_share_pct(run)
            present = share < COMPUTE_SHARE_TINY_PCT if want_overhead else share >= COMPUTE_SHARE_LARGE_PCT
            evidence = f"the GEMM itself is {fmt_pct(share)} of the step's CPU time"
        out.append(Signal(f"{run.name} is {kind}", bool(present), evidence))
    return out


_SELF_BANDS = (Band(label="Self CPU", below=1.0), Band(label="Self CUDA"))  # ratio CUDA / CPU


def _self_cpu_vs_cuda(runs: Sequence[Run]) -> Answer:
    row = ka_row(runs[0], "aten::mm")
    ratio = row["self_device_us"] / row["self_cpu_us"] if row["self_cpu_us"] > 0 else float("inf")
    return Answer(choice=band_of(ratio, _SELF_BANDS), measured=ratio,
                  measured_text=(f"aten::mm: Self CPU {row['self_cpu_us']:,.1f} µs, Self CUDA "
                                 f"{row['self_device_us']:,.1f} µs (CUDA/CPU = {ratio:.2f})"),
                  where=Where(text="the table's aten::mm row of the tiny run: Self CPU and Self CUDA",
                              row="aten::mm", run=0))


_HALF = (Band(label="less than half", below=50.0), Band(label="half or more"))


def _gpu_busy(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    pct = float(run.analysis.utilization.active_busy_pct)
    return Answer(choice=band_of(pct, _HALF), measured=pct,
                  measured_text=f"GPU busy {fmt_pct(pct)} of its active window",
                  where=where_window(run, 0, cat_rows(run, "kernel"),
                                      "the tiny run's first step: the GPU lane's kernels and the gaps between them"))


def _gemm_share(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    mm = named_rows(run, ("aten::mm",))
    # The lesson check's own figure (``check`` above), so the two boxes say one number.
    pct = gemm_op_share_pct(run)
    return Answer(choice=band_of(pct, _HALF), measured=pct,
                  measured_text=f"aten::mm is {fmt_pct(pct)} of a step's CPU time (medians)",
                  where=where_window(run, 0, mm, "the tiny run's first step: aten::mm inside it"))


_SHARE = (Band(label="under 10 %", below=10.0), Band(label="10–50 %", below=50.0), Band(label="over half"))


def _launch_share(runs: Sequence[Run]) -> Answer:
    tiny = runs[0]
    pct = launch_delay_share_pct(tiny)
    launches = np.flatnonzero(np.isin(tiny.trace.events["cat"].astype(str).to_numpy(), ("cuda_runtime", "kernel")))
    return Answer(choice=band_of(pct, _SHARE), measured=pct,
                  measured_text=(f"launch call start → its kernel's start is {pct:.1f} % of a step (median over the "
                                 f"steps): the rest of the step is the CPU's own work — Python, dispatch, the "
                                 f"profiler's per-op records"),
                  where=where_window(tiny, 0, launches, "the tiny run's first step: a launch call and the arrow "
                                                         "to its kernel"))


QUESTIONS: tuple[Question, ...] = (
    question("tiny_vs_large.self_cpu_vs_cuda",
        "At 64³, which is larger in the table's aten::mm row: Self CPU or Self CUDA?",
       [b.label for b in _SELF_BANDS], _self_cpu_vs_cuda, (GPU,), "a CPU run has no Self CUDA column",
       tells={"Self CPU": ("far above Self CUDA", "mostly empty", "waiting for launches", "a few microseconds"),
              "Self CUDA": ("far above Self CPU", "busy nearly all")}),
    question("tiny_vs_large.gpu_busy", "At 64³, what share of its active window will the GPU be busy?",
       [b.label for b in _HALF], _gpu_busy, (GPU,), "a CPU run has no GPU to be busy",
       tells={"less than half": ("mostly empty", "mostly idle", "waiting for launches", "busy 2 %"),
              "half or more": ("busy nearly all",)}),
    question("tiny_vs_large.launch_share", "At 64³, what share of a step passes between the start of its first launch "
       "call and the start of that kernel on the GPU?", [b.label for b in _SHARE], _launch_share, (GPU,),
       "a CPU run launches no kernels",
       tells={"under 10 %": ("a small part of the step", "the CPU's own work"),
              "over half": ("most of the step is the launch",)}),
    question("tiny_vs_large.gemm_share", "At 64³ on this CPU, will the matmul itself (aten::mm) be more or less than "
       "half of each step's time?", [b.label for b in _HALF], _gemm_share, (CPU,),
       tells={"less than half": ("cost more than the multiply",), "half or more": ("mostly the GEMM",)}),
)

LESSON = Lesson(
    key="tiny_vs_large",
    title="Tiny vs large: overhead-bound or compute-bound?",
    text=(
        "A 64×64 matmul does 0.5 MFLOP; a 4096³ one does 137 GFLOP, 262,144 times the work. Both "
        "run the same Python: a matmul and a bias add, each dispatched on the CPU and launched as "
        f"GPU work. {ACTIVE_WINDOW} **Try:** open both runs and compare the table's *Self CPU* and "
        "*Self CUDA* columns, the GPU's busy share, the launch → kernel arrows in the Timeline, "
        "and the CPU/GPU verdict."
    ),
    look_for="overhead-bound verdict on the tiny run, GPU-bound on the large one",
    explain=(
        "At 64³ the GPU finishes each kernel in about 2 µs, while Python, the dispatcher, the "
        "launches and the profiler's own records take about 150 µs a step on the CPU (H200 host): "
        "the table's aten::mm row has Self CPU far "
        "above Self CUDA, and on the H200 the GPU was busy 2 % of its active window. The wait "
        "from a launch call to its kernel is a small part of the step: the step is the CPU's own "
        "work. At 4096³ each step is a GEMM kernel and an add kernel and the GPU is busy nearly "
        "all the time; the add is still about a fifth of the GPU time on the H200. Small work "
        "wants batching, CUDA graphs or `torch.compile(mode=\"reduce-overhead\")`; large work "
        "wants a faster kernel, or the add fused into the GEMM."
    ),
    claims=(
        claim_between("finishes each kernel in about 2 µs", "gemm_kernel_us", "tiny", 1.0, 3.0),
        claim_between("about 150 µs a step", "step_us", "tiny", 120.0, 180.0),
        claim_between("Self CPU far above Self CUDA", "self_cuda_over_self_cpu", "tiny", 0.0, 0.2,
                      args=("aten::mm",)),
        claim_between("busy 2 % of its active window", "gpu_busy_pct", "tiny", 1.0, 3.5),
        claim_between("a small part of the step", "launch_delay_share_pct", "tiny", 0.0, 15.0),
        claim_equals("a GEMM kernel and an add kernel", "kernels_per_step", "large", 2.0),
        claim_between("busy nearly all the time", "gpu_busy_pct", "large", 90.0, 100.0),
        claim_between("about a fifth of the GPU time", "kernel_time_share_pct", "large", 15.0, 25.0,
                      args=(ADD_KERNEL_NAMES,)),
    ),
    runs=(
        # Ten active steps: tiny steps cost microseconds, and medians over ten shrug off
        # the odd step stalled by a busy machine.
        lesson_run("tiny", "matmul_add", "matmul_add", gpu=GemmShape(m=64, k=64, n=64),
                   cpu=GemmShape(m=64, k=64, n=64), active=10),
        lesson_run("large", "matmul_add", "matmul_add", gpu=GemmShape(m=4096, k=4096, n=4096),
                   cpu=GemmShape(m=1024, k=1024, n=1024)),
    ),
    check=_tiny_vs_large,
    questions=QUESTIONS,
    order=1,
)

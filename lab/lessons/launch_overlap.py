"""The lesson “Launch delay and CPU/GPU overlap, and what a sync does to the table”, whole: its text
and explanation, its runs (in the workload's own sizes), its check (``_launch_overlap``: what the
lab looks for in the runs, a pure function of their analyses), its questions (``QUESTIONS``: each
answer computed from the runs) and its claims (each checked on the H200 recording or a CPU run by
tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import MatmulChain
from lab.lessons.answers import HALF_BANDS, banded, kernels_where, labels, op_share, table_row
from lab.lessons.checks import all_on_gpu
from lab.lessons.schema import (
    CPU,
    CPU_RUN,
    GPU,
    Answer,
    Band,
    Lesson,
    Question,
    Signal,
    band_of,
    claim_between,
    claim_equals,
    lesson_run,
    question,
)
from lab.units import fmt_us

__all__ = ["LESSON"]


# A launch delay "grows" when the last recorded step's is at least this many times the first's,
# and stays "flat" within this factor (H200: 13.9 → 812 µs without a sync, 17 → 12 µs with one).
DELAY_GROWTH = 3.0


_ON_GPU_ONLY = "a CPU run has no launch queue: open the H200 recording"


def _delays_text(delays: list[float]) -> str:
    return " → ".join(fmt_us(d) for d in delays) or "no kernels"


def _launch_overlap(runs: list[Run]) -> list[Signal]:
    free, synced = runs
    if not all_on_gpu(runs):
        text = f"steps {fmt_us(fig.profiled_step_us(free))} vs {fmt_us(fig.profiled_step_us(synced))}; {_ON_GPU_ONLY}"
        return [Signal("the CPU runs ahead of the GPU", False, text, expected=False)]
    d_free, d_sync = fig.launch_delays_us(free), fig.launch_delays_us(synced)
    grows = len(d_free) >= 2 and d_free[-1] >= DELAY_GROWTH * max(d_free[0], 1e-3)
    flat = len(d_sync) >= 2 and max(d_sync) <= DELAY_GROWTH * max(min(d_sync), 1e-3)
    share = fig.call_share_pct(synced, "cudaDeviceSynchronize")
    return [
        Signal(
            f"without a sync the launch delay grows step after step ({free.name})",
            grows,
            f"first kernel of each step: {_delays_text(d_free)} after its launch",
        ),
        Signal(f"with a sync it stays short ({synced.name})", flat, f"{_delays_text(d_sync)}"),
        Signal(
            "cudaDeviceSynchronize holds the synced steps' CPU time",
            share > 50.0,
            f"{share:.0f} % of the steps' CPU time is spent waiting in it",
        ),
    ]


_NO_QUEUE = "a CPU run has no launch queue and no GPU to wait for"


_TREND = (
    Band(label="it shrinks", below=1 / 3),
    Band(label="it stays about the same", below=3.0),
    Band(label="it grows"),
)


def _delay_trend(runs: Sequence[Run]) -> Answer:
    delays = fig.launch_delays_us(runs[0])
    ratio = delays[-1] / max(delays[0], 1e-3) if len(delays) >= 2 else float("nan")
    last = max(len(runs[0].analysis.steps) - 1, 0)
    return Answer(
        choice=band_of(ratio, _TREND),
        measured=ratio,
        measured_text=(
            "first kernel's launch delay per step: "
            + " → ".join(f"{d:,.0f} µs" for d in delays)
            + f" ({ratio:.0f}× from first to last)"
        ),
        where=kernels_where(runs, 0, last, "the last step's kernels, each after its launch's arrow"),
    )


_SHARE = (Band(label="under 25 %", below=25.0), Band(label="25–75 %", below=75.0), Band(label="over 75 %"))


_sync_share = banded(lambda runs: fig.call_share_pct(runs[1], "cudaDeviceSynchronize"), _SHARE,
                      lambda v: f"cudaDeviceSynchronize: {v:.0f} % of the synced steps' CPU time",
                      lambda runs: table_row(1, "cudaDeviceSynchronize",
                                        "the synced run's cudaDeviceSynchronize row: Self CPU"))


QUESTIONS: tuple[Question, ...] = (
    question("launch_overlap.delay_trend",
        "Without a sync, how will the launch delay of each step's first kernel change "
     "from the first recorded step to the last?", labels(_TREND), _delay_trend, (GPU,), _NO_QUEUE,
     {"it grows": ("queue grows", "delay grows", "longer and longer"), "it shrinks": ("delay shrinks",),
      "it stays about the same": ("delay stays",)}),
    question("launch_overlap.sync_share",
        "In the synced run, what share of the steps' CPU time will cudaDeviceSynchronize "
     "take?", labels(_SHARE), _sync_share, (GPU,), _NO_QUEUE,
     {"25–75 %": ("60 %", "about 60"), "over 75 %": ("most of the step",)}),
    question("launch_overlap.mm_share", "On this CPU, what share of each step of the first run will the four matmuls "
     "(aten::mm) take?", labels(HALF_BANDS), op_share(0, "aten::mm", "no-sync"), (CPU,), "",
     {"50 % or more": ("most of each step", "most of the step")}),
)

LESSON = Lesson(
    key="launch_overlap",
    title="Launch delay and CPU/GPU overlap, and what a sync does to the table",
    text=(
        "A CUDA launch only queues work: the launch call (`cudaLaunchKernel`; `cuLaunchKernelEx` for "
        "cuBLAS's GEMMs on the H200 recording) returns while the GPU is still busy with earlier "
        "kernels, so the host can run ahead of the GPU. In the Timeline each "
        "launch has an arrow to its kernel; the arrow's horizontal length is the *launch delay* "
        "(kernel start − launch start). Both runs do four 4096³ bf16 matmuls a step (on a CPU "
        "256³); the second ends each step with `torch.cuda.synchronize()`, as hand-written "
        "timing loops often do. **Look at** the arrows of the first and the last step of each "
        "run, and the Table's *Self CPU* column of the synced run. A CPU run has no queue and no "
        "sync to wait in: open the H200 recording."
    ),
    look_for="how the launch delay changes from step to step in each run; which row holds the synced "
    "run's Self CPU",
    runs=(
        lesson_run("no sync", "matmul_chain", "chain", gpu=MatmulChain(rows=4096, width=4096, matmuls=4),
                   cpu=MatmulChain(rows=256, width=256, matmuls=4)),
        lesson_run("sync each step", "matmul_chain_sync", "chain_sync",
                   gpu=MatmulChain(rows=4096, width=4096, matmuls=4), cpu=MatmulChain(rows=256, width=256, matmuls=4)),
    ),
    explain=(
        "Without a sync the first kernel of each step waits longer every step: 14 µs in the first, "
        "over 800 µs in the third on the H200, because the host queues a step's GEMMs faster than "
        "the GPU runs them. With a sync each step the delay stays near 13 µs, and "
        "`cudaDeviceSynchronize` holds about 60 % of the synced steps' CPU time: the host's wait "
        "is booked as the Self CPU of the sync row, not of the ops that made the GPU busy. The "
        "no-sync table has one `cudaDeviceSynchronize` too, outside the steps: the lab's own, "
        "when the recording ends."
    ),
    claims=(
        claim_equals("`cuLaunchKernelEx` for cuBLAS's GEMMs on the H200 recording", "calls_per_step",
                     "no sync", 4.0, args=("cuLaunchKernelEx",)),
        claim_equals("four 4096³ bf16 matmuls a step", "gemms_per_step", "no sync", 4.0),
        claim_equals("four 4096³ bf16 matmuls a step", "gemms_per_step", "sync each step", 4.0),
        claim_equals("(on a CPU 256³)", "gemms_per_step", "no sync", 4.0, device=CPU_RUN),
        claim_equals("ends each step with `torch.cuda.synchronize()`", "calls_per_step", "sync each step", 1.0,
                     args=("cudaDeviceSynchronize",)),
        claim_between("14 µs in the first", "launch_delay_of_step_us", "no sync", 10.0, 20.0, args=(0,)),
        claim_between("over 800 µs in the third", "launch_delay_of_step_us", "no sync", 800.0, 1000.0,
                      args=(-1,)),
        claim_between("the delay stays near 13 µs", "launch_delay_of_step_us", "sync each step", 10.0, 20.0,
                      args=(-1,)),
        claim_between("about 60 % of the synced steps' CPU time", "call_share_pct", "sync each step", 55.0, 65.0,
                      args=("cudaDeviceSynchronize",)),
        claim_equals("The no-sync table has one `cudaDeviceSynchronize` too", "top_self_cpu_row", "no sync",
                     "cudaDeviceSynchronize"),
        claim_equals("outside the steps", "calls_per_step", "no sync", 0.0, args=("cudaDeviceSynchronize",)),
    ),
    check=_launch_overlap,
    questions=QUESTIONS,
    order=9,
)

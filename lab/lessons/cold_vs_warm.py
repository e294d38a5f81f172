"""The lesson “Cold vs warm: why the first step is slow”, whole: its text and explanation, its runs (in
the workload's own sizes), its check (``_cold_vs_warm``: what the lab looks for in the runs, a pure
function of their analyses), its questions (``QUESTIONS``: each answer computed from the runs) and
its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lab.analysis.bundle import Run
from lab.analysis.figures import first_step_ratio, first_step_share_pct
from lab.core.workloads import GemmShape
from lab.lessons.answers import cat_rows, where_window
from lab.lessons.schema import GPU, Answer, Band, Lesson, Question, Signal, band_of, claim_between, lesson_run, question

__all__ = ["LESSON"]


# Cold: record from the very first iteration. Warm: un-profiled iterations first, and the
# profiler's own schedule warm-up (its first recorded step carries its set-up costs too).
_COLD = dict(warmup_iters=0, wait=0, warmup=0, active=5)


_WARM = dict(warmup_iters=3, wait=1, warmup=1, active=5)


def _cold_vs_warm(runs: list[Run]) -> list[Signal]:
    # Each run's first step against its own later steps (lab.analysis.figures.first_step_ratio):
    # absolute times move with machine load, the ratio of one run's steps does not. Where the
    # cold step's time goes is read from the first aten::mm and the profiler's own lane: on the
    # H200 the label → first-op gap grew 55 → 28 µs while the step grew by 10,433 µs.
    cold, warm = runs
    if len(cold.analysis.steps) < 2 or len(warm.analysis.steps) < 2:
        return [Signal("first step measurable", False, "fewer than two recorded steps in a run")]
    cold_ratio, warm_ratio = first_step_ratio(cold), first_step_ratio(warm)
    evidence = f"first step vs the median later one: cold {cold_ratio:.1f}×, warm {warm_ratio:.1f}×"
    mm, prof = first_step_share_pct(cold, "aten::mm"), first_step_share_pct(cold, "profiler")
    if mm == mm and prof == prof:
        evidence += (f"; of the cold step's extra time {mm:.0f} % is inside its first aten::mm and "
                     f"{prof:.0f} % is the profiler's own work")
    on_gpu = cold.trace.has_gpu and warm.trace.has_gpu
    if not on_gpu:
        # The costs this lesson is about (CUDA context, cuBLAS handles and workspaces, CUPTI
        # buffers) are GPU costs. A CPU worker has already run matmuls while warming up, so its
        # "cold" run is barely colder: seen here, the ratios came out either way run to run.
        evidence += ("; on a CPU the worker is already warm, so expect little difference — "
                     "open the H200 recording to see the real first-step cost")
    return [Signal("the cold run's first step is far slower than the warm run's", cold_ratio > warm_ratio,
                   evidence, expected=on_gpu)]


_FIRST_STEP = (Band(label="under 1.5×", below=1.5), Band(label="1.5–5×", below=5.0), Band(label="over 5×"))


def _first_step(runs: Sequence[Run]) -> Answer:
    cold = runs[0]
    cpu = cold.analysis.steps["cpu_us"].to_numpy(dtype=float)
    ratio = first_step_ratio(cold)
    rest = float(cpu[0]) / ratio if ratio > 0 else float("nan")
    step_rows = np.flatnonzero(cold.trace.events["name"].astype(str).str.startswith("ProfilerStep#").to_numpy())
    return Answer(choice=band_of(ratio, _FIRST_STEP), measured=ratio,
                  measured_text=(f"cold first step {cpu[0]:,.0f} µs vs {rest:,.0f} µs median later step: "
                                 f"{ratio:.1f} times as long"),
                  where=where_window(cold, 0, step_rows, "the cold run's first step, from its label to its last op"))


_SHARE = (Band(label="under 10 %", below=10.0), Band(label="10–50 %", below=50.0), Band(label="over half"))


def _profiler_share(runs: Sequence[Run]) -> Answer:
    cold = runs[0]
    pct = first_step_share_pct(cold, "profiler")
    rows = cat_rows(cold, "overhead")
    return Answer(choice=band_of(pct, _SHARE), measured=pct,
                  measured_text=(f"the profiler's own events cover {pct:.0f} % of the cold first step's extra time "
                                 f"(first step minus the median later one); most of the rest is inside its first "
                                 f"aten::mm ({first_step_share_pct(cold, 'aten::mm'):.0f} %)"),
                  where=where_window(cold, 0, rows, "the cold run's first step: the profiler's own lane"))


QUESTIONS: tuple[Question, ...] = (
    question("cold_vs_warm.first_step", "In the cold run, how many times as long as the median later step will the "
       "first step be?", [b.label for b in _FIRST_STEP], _first_step,
       tells={"over 5×": ("over 90 times", "10.5 ms", "ninety", "many times its later"),
              "under 1.5×": ("barely slower",)}),
    question("cold_vs_warm.profiler_share",
        "Of the time the cold run's first step takes beyond a later step, what share "
       "is the profiler's own work (its lane), not your code's?", [b.label for b in _SHARE], _profiler_share, (GPU,),
       "the profiler's buffer requests are CUPTI's, on a GPU",
       tells={"10–50 %": ("about a quarter", "2.3 ms", "2,338"), "over half": ("most of it is the profiler",)}),
)

LESSON = Lesson(
    key="cold_vs_warm",
    title="Cold vs warm: why the first step is slow",
    text=(
        "The first time an operator runs, PyTorch loads its kernels and creates cuBLAS handles and "
        "workspaces, and the profiler allocates its buffers. The cold run records from the very "
        "first iteration; the warm one runs three un-profiled iterations first, then records with "
        "`torch.profiler.schedule(wait=1, warmup=1, active=5)`. **Look at** each run's first step in "
        "the Timeline: its length against the later steps, which operator inside it is long, and "
        "the profiler's own lane. On a CPU host the lab's worker has already run matmuls, so the "
        "difference there is small: open the H200 recording to see the real cost."
    ),
    look_for="the cold run's first step is many times its later steps; the warm run's is not",
    explain=(
        "On the H200 the cold run's first step took over 90 times as long as its later steps "
        "(10.5 ms against a median 113 µs). Most of the extra time is inside that step's first "
        "`aten::mm` (cuBLAS loading its kernel, creating its handle and workspace), and about a "
        "quarter is the profiler's own *Activity Buffer Request* and *Lazy Function Loading* on its "
        "lane, which is not your code. The warm run's first step is a few times its later ones, not "
        "ninety: its start-up happened before the recording. That is what `schedule`'s `wait` and "
        "`warmup` steps and un-profiled warm-up iterations are for."
    ),
    claims=(
        claim_between("over 90 times as long", "first_step_ratio", "cold", 90.0, float("inf")),
        claim_between("(10.5 ms", "first_step_us", "cold", 10_000.0, 11_000.0),
        claim_between("against a median 113 µs)", "later_step_median_us", "cold", 105.0, 120.0),
        claim_between("Most of the extra time is inside that step's first", "first_step_share_pct", "cold",
                      50.0, 100.0, args=("aten::mm",)),
        claim_between("about a quarter is the profiler's own", "first_step_share_pct", "cold", 15.0, 35.0,
                      args=("profiler",)),
        claim_between("a few times its later ones, not ninety", "first_step_ratio", "warm", 1.0, 5.0),
    ),
    runs=(
        lesson_run("cold", "matmul_add", "matmul_add", gpu=GemmShape(m=1024, k=1024, n=1024),
                   cpu=GemmShape(m=256, k=256, n=256), gpu_dtype="float32", **_COLD),
        lesson_run("warm", "matmul_add", "matmul_add", gpu=GemmShape(m=1024, k=1024, n=1024),
                   cpu=GemmShape(m=256, k=256, n=256), gpu_dtype="float32", **_WARM),
    ),
    check=_cold_vs_warm,
    questions=QUESTIONS,
    order=2,
)

"""The lesson “Profiling a compiled function without warming it up”, whole: its workload
(``WORKLOADS``: a block that ``torch.compile`` compiles on its first call, in the lab's
``GemmShape`` sizes, with its builder and cost model), its text and explanation, its runs (the
first call inside the profiled window, and after warm-up), its check (``_compile_first_call``:
the explain model's compile cause and the judge's finding), its questions (each answer computed
from the runs) and its claims (each checked on the H200 recording or a CPU run by
tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import GemmShape, Workload
from lab.core.workloads.gemm import gemm_flops, matmul_add_bytes, random
from lab.explain.classes import COMPILE_PATTERN
from lab.lessons.answers import banded, labels, where_window
from lab.lessons.checks import cause_window_pct, judgement_of
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

__all__ = ["LESSON", "WORKLOADS"]

WORKLOAD = f"{__name__}.block"


def build_compiled_block(config, device, dtype) -> Callable[[], object]:
    """One step: gelu(x @ w + b) · 0.5 through ``torch.compile``, compiled when the step first runs
    (the compiler's state is reset here, so every run compiles afresh)."""
    import torch
    import torch.nn.functional as F

    s = GemmShape.of(config)
    x = random(torch, (s.m, s.k), device, dtype)
    w = random(torch, (s.k, s.n), device, dtype, s.k**-0.5)
    b = random(torch, (s.n,), device, dtype)

    def block(x, w, b):
        return F.gelu(x @ w + b) * 0.5

    torch._dynamo.reset()
    compiled = torch.compile(block)

    def step():
        return compiled(x, w, b)

    return step


WORKLOADS = (
    Workload(name=WORKLOAD, title="a torch.compile'd matmul + bias + GELU, compiled on its first call",
             formula="f = torch.compile(lambda x, w, b: gelu(x @ w + b) * 0.5); each step f(x, w, b)",
             build=build_compiled_block, estimate_bytes=matmul_add_bytes, flops=gemm_flops),
)

# The first run's first profiled step is the compiled function's first call: no warm-up at all.
_IN_WINDOW = dict(warmup_iters=0, wait=0, warmup=0, active=3)
# The second warms it up first (the lab's defaults): the compile is over before the profile starts.
_WARMED = dict(warmup_iters=2, wait=1, warmup=1, active=3)


def _compile_first_call(runs: list[Run]) -> list[Signal]:
    cold, warm = runs
    c_share, w_share = cause_window_pct(cold, "compile"), cause_window_pct(warm, "compile")
    found = judgement_of(cold).verdict_finding
    return [
        Signal("compilation is most of the first run's profiled window", c_share >= _MOST_PCT,
               f"{c_share:.0f} % of the steps' time is torch.compile compiling (attribution)"),
        Signal("the verdict names the compile", found is not None and found.cause == "compile",
               f"verdict: {found.title if found else 'no cause'}"),
        Signal("after warm-up no compile is left in the window", w_share == 0.0,
               f"{w_share:.1f} % compile in the warmed-up run; its step: {fmt_us(fig.profiled_step_us(warm))}"),
    ]


# "Most of the window": over half of it is one cause.
_MOST_PCT = 50.0

_SHARE = (Band(label="under 10 %", below=10.0), Band(label="10–90 %", below=90.0), Band(label="over 90 %"))
_FIRST = (Band(label="under 10×", below=10.0), Band(label="10–100×", below=100.0), Band(label="100–1,000×",
          below=1000.0), Band(label="over 1,000×"))


def _where_first(runs: Sequence[Run]) -> Where:
    names = runs[0].trace.events["name"].astype(str)
    rows = np.flatnonzero(names.str.contains(COMPILE_PATTERN).to_numpy())
    return where_window(runs[0], 0, rows, "the first run's first step: Dynamo's and Inductor's compile events")


_window_share = banded(lambda runs: cause_window_pct(runs[0], "compile"), _SHARE,
                       lambda v: f"{v:.0f} % of the first run's profiled steps is torch.compile compiling",
                       _where_first)


_first_step = banded(lambda runs: fig.first_step_ratio(runs[0]), _FIRST,
                     lambda v: f"the first profiled step takes {v:,.0f}× the median of the later ones", _where_first)

QUESTIONS: tuple[Question, ...] = (
    question("compile_first_call.window_share",
             "Without warm-up, what share of the profiled steps' time will the explanation put on compiling?",
             labels(_SHARE), _window_share, ANY_DEVICE, "", {}),
    question("compile_first_call.first_step", "How many times a later step will the first profiled step take?",
             labels(_FIRST), _first_step, ANY_DEVICE, "", {}),
)

LESSON = Lesson(
    key="compile_first_call",
    title="Profiling a compiled function without warming it up",
    text=(
        "`torch.compile` compiles a function on its first call: Dynamo captures the Python into a "
        "graph and Inductor generates and builds its kernels (Triton on a GPU, C++ on a CPU). "
        "Both runs profile the same compiled block, gelu(x @ w + b) · 0.5 over 4096×4096 bf16 "
        "(on a CPU 256² float32), for three steps. The first starts the profiler before the "
        "function was ever called, so its first profiled step is the first call; the second "
        "calls it twice before profiling. **Look at** the first step on the Timeline, the "
        "Summary's step time by cause, and the verdict."
    ),
    look_for="the first step's length and its compile events; the step time by cause",
    runs=(
        lesson_run("first call profiled", WORKLOAD, "block", gpu=GemmShape(m=4096, k=4096, n=4096),
                   cpu=GemmShape(m=256, k=256, n=256), gpu_dtype="bfloat16", **_IN_WINDOW),
        lesson_run("warmed up", WORKLOAD, "block", gpu=GemmShape(m=4096, k=4096, n=4096),
                   cpu=GemmShape(m=256, k=256, n=256), gpu_dtype="bfloat16", **_WARMED),
    ),
    explain=(
        "On the H200 recording the first profiled step takes about 3.6 s, thousands of times "
        "a later step: nearly all of it is Dynamo and Inductor at work, and the GPU is busy for "
        "under 1 % of that run's window. The explanation puts that time on torch.compile "
        "compiling, and the verdict names the compile as a cost paid once, not per step. After "
        "warm-up the same function runs two kernels a step (the GEMM and one fused Triton "
        "kernel for the bias, GELU and scale), a step takes about 0.3 ms and the GPU is busy "
        "about three quarters of it. A profile that starts cold measures the compiler; warm up "
        "(or skip the first steps with the profiler's schedule) before reading the step."
    ),
    claims=(
        claim_equals("for three steps", "recorded_steps", "first call profiled", 3.0),
        claim_equals("for three steps", "recorded_steps", "first call profiled", 3.0, device=CPU_RUN),
        claim_equals("for three steps", "recorded_steps", "warmed up", 3.0, device=CPU_RUN),
        claim_between("the first profiled step takes about 3.6 s", "first_step_us", "first call profiled",
                      3.0e6, 4.2e6),
        claim_between("thousands of times a later step", "first_step_ratio", "first call profiled", 1_000.0, 10_000.0),
        claim_between("under 1 % of that run's window", "gpu_busy_pct", "first call profiled", 0.0, 1.0),
        claim_equals("runs two kernels a step", "kernels_per_step", "warmed up", 2.0),
        claim_equals("one fused Triton kernel", "kernels_matching_per_step", "warmed up", 1.0, args=("^triton_",)),
        claim_between("a step takes about 0.3 ms", "profiled_step_us", "warmed up", 250.0, 400.0),
        claim_between("about three quarters of it", "gpu_busy_pct", "warmed up", 65.0, 85.0),
        # "Measures the compiler": the first step an order of magnitude over a later one. On a CPU the
        # compile takes seconds against steps of tens of ms; the ratio moves with the host's load
        # (74.5 on a busy 2-core box, over 100 on a quiet one), so the bar is the order of magnitude.
        claim_between("A profile that starts cold measures the compiler", "first_step_ratio", "first call profiled",
                      10.0, float("inf"), device=CPU_RUN),
    ),
    check=_compile_first_call,
    questions=QUESTIONS,
    order=19,
)

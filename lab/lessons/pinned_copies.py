"""The lesson “Host→device copies: pageable vs pinned memory”, whole: its text and explanation, its
runs (in the workload's own sizes), its check (``_pinned_copies``: what the lab looks for in the
runs, a pure function of their analyses), its questions (``QUESTIONS``: each answer computed from
the runs) and its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import HostCopy
from lab.lessons.answers import HALF_BANDS, banded, kernels_where, labels, op_share
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

__all__ = ["LESSON"]


_MIB_64 = 64 * 2**20


def _pinned_copies(runs: list[Run]) -> list[Signal]:
    pageable, pinned = runs
    if not all_on_gpu(runs):
        return [
            Signal(
                "pinned copies run faster",
                False,
                "host to host on a CPU: no DMA, nothing to pin; open the H200 recording",
                expected=False,
            )
        ]
    bw_page, bw_pin = fig.copy_gb_per_s(pageable), fig.copy_gb_per_s(pinned)
    r_page, r_pin = fig.copy_call_ratio(pageable), fig.copy_call_ratio(pinned)
    return [
        Signal(
            "the trace names the host memory of each copy",
            any("Pageable" in n for n in fig.copy_names(pageable))
            and any("Pinned" in n for n in fig.copy_names(pinned)),
            f"{', '.join(fig.copy_names(pageable))}; {', '.join(fig.copy_names(pinned))}",
        ),
        Signal("the pinned copy is faster", bw_pin > bw_page, f"{bw_page:.1f} vs {bw_pin:.1f} GB/s"),
        Signal(
            "from pageable memory cudaMemcpyAsync holds the CPU for the whole copy",
            r_page >= 0.9 and r_pin < 0.1,
            f"its CPU time over the copy's: {r_page:.2f} (pageable) vs {r_pin:.3f} (pinned)",
        ),
    ]


_BANDWIDTH = (Band(label="under 1.5×", below=1.5), Band(label="1.5–4×", below=4.0), Band(label="over 4×"))


_BLOCKING = (Band(label="a few µs: it returns at once", below=0.5), Band(label="about as long as the copy"))


def _bandwidth(runs: Sequence[Run]) -> Answer:
    page, pin = fig.copy_gb_per_s(runs[0]), fig.copy_gb_per_s(runs[1])
    ratio = pin / page if page > 0 else float("nan")
    return Answer(
        choice=band_of(ratio, _BANDWIDTH),
        measured=ratio,
        measured_text=f"{page:.1f} GB/s pageable vs {pin:.1f} GB/s pinned ({ratio:.1f}×)",
        where=kernels_where(runs, 1, 0, "the pinned run's first step: its copy"),
    )


_blocking = banded(lambda runs: fig.copy_call_ratio(runs[0]), _BLOCKING,
                    lambda v: f"cudaMemcpyAsync's CPU time is {v:.2f}× its copy's GPU time",
                    lambda runs: kernels_where(runs, 0, 0, "the pageable run's first step: the call and its copy"))


QUESTIONS: tuple[Question, ...] = (
    question("pinned_copies.bandwidth", "How many times the pageable copy's GB/s will the pinned copy reach?",
     labels(_BANDWIDTH), _bandwidth, (GPU,), "a CPU run copies host to host", {"over 4×": ("7–8×", "55 GB/s")}),
    question("pinned_copies.blocking",
        "With non_blocking=True from pageable memory, how long will cudaMemcpyAsync keep "
     "the CPU?", labels(_BLOCKING), _blocking, (GPU,), "a CPU run makes no cudaMemcpyAsync call",
     {"about as long as the copy": ("as long as the copy", "cannot make a pageable copy asynchronous")}),
    question("pinned_copies.copy_share", "On this CPU, what share of each pageable step will aten::copy_ take?",
     labels(HALF_BANDS), op_share(0, "aten::copy_", "pageable"), (CPU,), "",
     {"50 % or more": ("most of each step", "most of the step")}),
)

LESSON = Lesson(
    key="pinned_copies",
    title="Host→device copies: pageable vs pinned memory",
    text=(
        "The GPU's copy engines read host memory by DMA, which needs page-locked (*pinned*) "
        "memory. From ordinary (*pageable*) memory the driver stages the data through a pinned "
        "buffer of its own (NVIDIA's CUDA documentation). Both runs copy a 4096×4096 float32 host "
        "tensor (64 MiB) to the GPU "
        "with `copy_(src, non_blocking=True)`; the second pins it first with `pin_memory()`. The "
        "trace names each copy `Memcpy HtoD (Pageable -> Device)` or `(Pinned -> Device)`. "
        "**Look at** each copy's duration (GB/s = bytes / time) and how long `cudaMemcpyAsync` "
        "keeps the CPU. On a CPU both runs copy host to host (1024×1024): no DMA, no pinning."
    ),
    look_for="the Memcpy rows' durations; cudaMemcpyAsync's CPU time against its copy's",
    runs=(
        lesson_run("pageable", "copy_pageable", "copy_pageable", gpu=HostCopy(rows=4096, columns=4096, copies=1),
                   cpu=HostCopy(rows=1024, columns=1024, copies=1), gpu_dtype="float32"),
        lesson_run("pinned", "copy_pinned", "copy_pinned", gpu=HostCopy(rows=4096, columns=4096, copies=1),
                   cpu=HostCopy(rows=1024, columns=1024, copies=1), gpu_dtype="float32"),
    ),
    explain=(
        "On the H200 recording the pageable copy runs at about 7 GB/s and `cudaMemcpyAsync` "
        "lasts as long as the copy itself: `non_blocking=True` cannot make a pageable copy "
        "asynchronous. The pinned copy runs at about 55 GB/s, 7–8× faster, and its call returns "
        "after about 1 % of the copy's time, so the host is free while the DMA runs."
    ),
    claims=(
        claim_equals("(64 MiB)", "copy_bytes_per_step", "pageable", float(_MIB_64)),
        claim_equals("`Memcpy HtoD (Pageable -> Device)`", "copy_kinds", "pageable",
                     "Memcpy HtoD (Pageable -> Device)"),
        claim_equals("`(Pinned -> Device)`", "copy_kinds", "pinned", "Memcpy HtoD (Pinned -> Device)"),
        claim_equals("copy host to host (1024×1024): no DMA", "copy_kinds", "pageable", "", device=CPU_RUN),
        claim_equals("copy host to host (1024×1024): no DMA", "calls_per_step", "pinned", 1.0,
                     args=("aten::copy_",), device=CPU_RUN),
        claim_between("about 7 GB/s", "copy_gb_per_s", "pageable", 5.0, 9.0),
        claim_between("lasts as long as the copy itself", "copy_call_ratio", "pageable", 0.9, 1.1),
        claim_between("about 55 GB/s", "copy_gb_per_s", "pinned", 45.0, 65.0),
        claim_between("7–8× faster", "copy_gb_per_s", "pinned", 7.0, 8.5, over="pageable"),
        claim_between("about 1 % of the copy's time", "copy_call_ratio", "pinned", 0.0, 0.03),
    ),
    check=_pinned_copies,
    questions=QUESTIONS,
    order=14,
)

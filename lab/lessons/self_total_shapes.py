"""The lesson “Self vs Total, and grouping by input shape”, whole: its text and explanation, its runs
(in the workload's own sizes), its check (``_self_total_shapes``: what the lab looks for in the
runs, a pure function of their analyses), its questions (``QUESTIONS``: each answer computed from
the runs) and its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import GemmShape
from lab.lessons.answers import banded, labels, table_row
from lab.lessons.schema import (
    ANY_DEVICE,
    CPU_RUN,
    Answer,
    Band,
    Lesson,
    Question,
    Signal,
    claim_between,
    claim_equals,
    lesson_run,
    question,
)

__all__ = ["LESSON"]


def _self_total_shapes(runs: list[Run]) -> list[Signal]:
    (run,) = runs
    share = fig.self_share_pct(run, "aten::matmul")
    shapes = fig.shape_rows(run, "aten::mm")
    per_step = {calls / fig.step_count(run) for _, calls, _ in shapes}
    return [
        Signal(
            "aten::matmul's Self CPU is a small part of its Total",
            share < 50.0,
            f"Self CPU {share:.0f} % of its CPU total: the rest is aten::mm",
        ),
        Signal(
            "grouped by shape, aten::mm splits into three rows of one call per step",
            len(shapes) == 3 and per_step == {1.0},
            "; ".join(f"{s}: {t:,.0f} µs" for s, _, t in shapes),
        ),
    ]


_SHARE = (Band(label="under 25 %", below=25.0), Band(label="25–75 %", below=75.0), Band(label="over 75 %"))


_SHAPES = ("(M, K, N)", "(2M, K/4, 2N)", "(4M, K/16, 4N)")


def _top_shape(runs: Sequence[Run]) -> Answer:
    rows = fig.shape_rows(runs[0], "aten::mm")
    firsts = [int(s.strip("[]").split(",")[0]) for s, _, _ in rows]
    index = int(round(np.log2(firsts[0] / min(firsts)))) if rows else 0
    return Answer(
        choice=_SHAPES[min(index, 2)],
        measured=rows[0][2] if rows else float("nan"),
        measured_text="; ".join(f"{s}: {t:,.0f} µs" for s, _, t in rows),
        where=table_row(0, "aten::mm", "the Table grouped by input shape: the aten::mm rows"),
    )


_matmul_self = banded(lambda runs: fig.self_share_pct(runs[0], "aten::matmul"), _SHARE,
                       lambda v: f"aten::matmul: Self CPU {v:.1f} % of its total",
                       lambda runs: table_row(0, "aten::matmul", "the aten::matmul row: Self CPU and CPU total"))


QUESTIONS: tuple[Question, ...] = (
    question("self_total_shapes.matmul_self", "What share of aten::matmul's CPU total will its Self CPU be?",
     labels(_SHARE), _matmul_self, ANY_DEVICE, "", {"under 25 %": ("only dispatches", "5 %")}),
    question("self_total_shapes.top_shape",
        "Grouped by input shape, which aten::mm shape will take the most time (Self "
     "CUDA on a GPU, Self CPU on a CPU)?", _SHAPES, _top_shape, ANY_DEVICE, "",
     {"(4M, K/16, 4N)": ("16384×256", "larger output")}),
)

LESSON = Lesson(
    key="self_total_shapes",
    title="Self vs Total, and grouping by input shape",
    text=(
        "*Total* time of an op includes the ops it calls; *Self* time is what is left when they "
        "are taken out. `torch.matmul` dispatches to `aten::mm`, which launches the kernel (on a "
        "CPU, computes the product). The step multiplies three pairs of equal FLOPs: (M, K, N), "
        "(2M, K/4, 2N) and (4M, K/16, 4N), with M = K = N = 4096 bf16 (on a CPU 256 float32), so "
        "`aten::mm` is one row of 3 calls per step. `key_averages(group_by_input_shape=True)` "
        "(the Table's *Group by input shape*) splits it by shape. **Look at** aten::matmul's "
        "Self and Total, then the by-shape rows of aten::mm."
    ),
    look_for="aten::matmul's Self against its Total; aten::mm's rows by shape",
    runs=(lesson_run("shapes", "matmul_shapes", "shapes", gpu=GemmShape(m=4096, k=4096, n=4096),
                     cpu=GemmShape(m=256, k=256, n=256)),),
    explain=(
        "aten::matmul's Self CPU is about 5 % of its total on the H200 host (under 15 % on either "
        "device): it only dispatches, and `aten::mm` holds the rest. By shape, the 16384×256 @ "
        "256×16384 product takes the most GPU time on the H200: the same FLOPs as the square one, "
        "but a 16× larger output to write."
    ),
    claims=(
        claim_equals("`aten::mm` is one row of 3 calls per step", "calls_per_step", "shapes", 3.0,
                     args=("aten::mm",)),
        claim_equals("`aten::mm` is one row of 3 calls per step", "calls_per_step", "shapes", 3.0,
                     args=("aten::mm",), device=CPU_RUN),
        claim_equals("splits it by shape", "shape_row_count", "shapes", 3.0, args=("aten::mm",)),
        claim_equals("splits it by shape", "shape_row_count", "shapes", 3.0, args=("aten::mm",), device=CPU_RUN),
        claim_between("about 5 % of its total on the H200 host", "self_share_pct", "shapes", 2.0, 10.0,
                      args=("aten::matmul",)),
        claim_between("under 15 % on either", "self_share_pct", "shapes", 0.0, 15.0, args=("aten::matmul",),
                      device=CPU_RUN),
        claim_equals("the 16384×256 @ 256×16384 product takes the most GPU time", "top_shape", "shapes",
                     "[[16384, 256], [256, 16384]]", args=("aten::mm",)),
    ),
    check=_self_total_shapes,
    questions=QUESTIONS,
    order=17,
)

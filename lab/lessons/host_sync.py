"""The lesson “A host sync in the loop: .item()”, whole: its text and explanation, its runs (in the
workload's own sizes), its check (``_host_sync``: what the lab looks for in the runs, a pure
function of their analyses), its questions (``QUESTIONS``: each answer computed from the runs) and
its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import MatmulChain
from lab.lessons.answers import banded, labels, step_time_ratio, table_row
from lab.lessons.checks import all_on_gpu
from lab.lessons.schema import (
    ANY_DEVICE,
    CPU_RUN,
    GPU,
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
from lab.units import fmt_us

__all__ = ["LESSON"]


def _host_sync(runs: list[Run]) -> list[Signal]:
    each, once = runs
    child = fig.child_op(each, "aten::item")
    out = [
        Signal(
            "aten::item runs aten::_local_scalar_dense",
            child == "aten::_local_scalar_dense",
            f"aten::item's child: {child or 'none'}",
        )
    ]
    if not all_on_gpu(runs):
        return out + [
            Signal(
                "each .item() waits for the GPU",
                False,
                "a CPU tensor's value is already on the host: no copy, no wait",
                expected=False,
            )
        ]
    s_each = fig.calls_per_step(each, "cudaStreamSynchronize")
    s_once = fig.calls_per_step(once, "cudaStreamSynchronize")
    gemms, _ = fig.gemms_per_step(each)
    return out + [
        Signal(
            "the .item() run waits once per matmul, the read-once run once per step",
            s_each == gemms and s_once == 1,
            f"cudaStreamSynchronize per step: {s_each:.0f} vs {s_once:.0f} ({gemms:.0f} matmuls a step)",
        ),
        _read_once_faster(each, once, gemms),
    ]


def _read_once_faster(each: Run, once: Run, gemms: float) -> Signal:
    """Information, not a check: whether dropping the syncs paid off depends on who waits for whom."""
    t_each, t_once = fig.profiled_step_us(each), fig.profiled_step_us(once)
    kernel_us = fig.gemm_kernel_us(once)
    host_us = float(once.analysis.steps["cpu_us"].median()) / max(gemms, 1.0)
    evidence = (
        f"{fmt_us(t_each)} with .item() vs {fmt_us(t_once)} reading once per step; GPU busy "
        f"{each.analysis.utilization.active_busy_pct:.0f} % vs {once.analysis.utilization.active_busy_pct:.0f} %"
    )
    if kernel_us < host_us:
        evidence += (
            f": a GEMM kernel takes {fmt_us(kernel_us)} and the host {fmt_us(host_us)} per matmul, so the "
            "GPU waits for the host in both runs and there is no queue for a sync to drain"
        )
    return Signal("reading once per step is faster", t_once < t_each, evidence, expected=t_once < t_each)


_SYNCS = (Band(label="zero", below=0.5), Band(label="one or two", below=2.5), Band(label="about eight"))


_VERSUS = (
    Band(label="shorter", below=0.8),
    Band(label="about the same (within 20 %)", below=1.2),
    Band(label="longer"),
)


_CHILD = ("aten::_local_scalar_dense", "aten::copy_", "no child op")


def _item_child(runs: Sequence[Run]) -> Answer:
    child = fig.child_op(runs[0], "aten::item")
    choice = child if child in _CHILD else _CHILD[2]
    return Answer(
        choice=choice,
        measured=float(bool(child)),
        measured_text=f"aten::item's child op: {child or 'none'}",
        where=table_row(0, child or "aten::item", "the .item() run's table: the op under aten::item"),
    )


_once_syncs = banded(lambda runs: fig.calls_per_step(runs[1], "cudaStreamSynchronize"), _SYNCS,
                      lambda v: f"{v:.1f} cudaStreamSynchronize calls per step",
                      lambda runs: table_row(1, "cudaStreamSynchronize",
                                        "the read-once run's cudaStreamSynchronize row: # of Calls"))


QUESTIONS: tuple[Question, ...] = (
    question("host_sync.once_syncs", "In the read-once run, how many cudaStreamSynchronize calls will a step make?",
     labels(_SYNCS), _once_syncs, (GPU,), "a CPU tensor is already on the host: nothing to wait for",
     {"one or two": ("one of each", "a single sync"), "about eight": ("8 `cudaStreamSynchronize`",)}),
    question("host_sync.item_vs_once", "How will a step with .item() after every matmul compare with a read-once step?",
     labels(_VERSUS), step_time_ratio(0, 1, _VERSUS, ".item() each matmul vs read once"), (GPU,),
     "on a CPU .item() waits for nothing",
     {"shorter": ("not the slower one", "syncs cost little"), "longer": ("the syncs make it slower",)}),
    question("host_sync.item_child", "Which op will aten::item call underneath?", _CHILD, _item_child, ANY_DEVICE, "",
        {}),
)

LESSON = Lesson(
    key="host_sync",
    title="A host sync in the loop: .item()",
    text=(
        "`.item()`, `.tolist()`, `print(t)` or `if t > 0:` need a value the GPU has not computed "
        "yet: the host copies it back (a device→host `Memcpy`) and waits in "
        "`cudaStreamSynchronize` until every queued kernel has run. Both runs do eight 2048³ bf16 "
        "matmuls a step (on a CPU 128³) and read one value of each result: the first with "
        "`.item()` after every matmul, the second keeps the values on the device and reads them "
        "all at the end of the step. **Look at** the GPU lane between the GEMM kernels, the "
        "`cudaStreamSynchronize` rows and the step time."
    ),
    look_for="the gaps in the GPU lane of each run; the cudaStreamSynchronize calls per step",
    runs=(
        lesson_run("item() each matmul", "chain_item", "item_each", gpu=MatmulChain(rows=2048, width=2048, matmuls=8),
                   cpu=MatmulChain(rows=128, width=128, matmuls=8)),
        lesson_run("read once", "chain_item_once", "item_once", gpu=MatmulChain(rows=2048, width=2048, matmuls=8),
                   cpu=MatmulChain(rows=128, width=128, matmuls=8)),
    ),
    explain=(
        "The `.item()` step makes 8 `cudaStreamSynchronize` calls and 8 device→host copies; the "
        "read-once step makes one of each (after a `cat` kernel gathers the values). "
        "`aten::item` does its work in `aten::_local_scalar_dense`, on any device. On the H200 "
        "recording the syncs cost little time, though: a 2048³ matmul is about 24 µs of GPU work, "
        "so both steps are host-bound (the GPU is busy under half of its window in either run) and "
        "the `.item()` step is not the slower one, profiled or not. A sync hurts where the GPU "
        "has a long queue to drain: larger work, or a sync inside a loop that launches ahead."
    ),
    claims=(
        claim_equals("eight 2048³ bf16 matmuls a step", "gemms_per_step", "item() each matmul", 8.0),
        claim_equals("eight 2048³ bf16 matmuls a step", "gemms_per_step", "read once", 8.0),
        claim_equals("(on a CPU 128³)", "gemms_per_step", "read once", 8.0, device=CPU_RUN),
        claim_equals("makes 8 `cudaStreamSynchronize` calls", "calls_per_step", "item() each matmul", 8.0,
                     args=("cudaStreamSynchronize",)),
        claim_equals("8 device→host copies", "calls_per_step", "item() each matmul", 8.0,
                     args=("cudaMemcpyAsync",)),
        claim_equals("makes one of each", "calls_per_step", "read once", 1.0, args=("cudaStreamSynchronize",)),
        claim_equals("makes one of each", "calls_per_step", "read once", 1.0, args=("cudaMemcpyAsync",)),
        claim_equals("a `cat` kernel gathers the values", "kernels_matching_per_step", "read once", 1.0,
                     args=("CatArray",)),
        claim_equals("does its work in `aten::_local_scalar_dense`", "child_op", "item() each matmul",
                     "aten::_local_scalar_dense", args=("aten::item",)),
        claim_equals("does its work in `aten::_local_scalar_dense`", "child_op", "item() each matmul",
                     "aten::_local_scalar_dense", args=("aten::item",), device=CPU_RUN),
        claim_between("about 24 µs of GPU work", "gemm_kernel_us", "item() each matmul", 20.0, 28.0),
        claim_between("busy under half of its window", "gpu_busy_pct", "item() each matmul", 0.0, 50.0),
        claim_between("busy under half of its window", "gpu_busy_pct", "read once", 0.0, 50.0),
        claim_between("is not the slower one, profiled", "profiled_step_us", "item() each matmul", 0.0, 1.0,
                      over="read once"),
        claim_between("or not", "unprofiled_step_us", "item() each matmul", 0.0, 1.0, over="read once"),
    ),
    check=_host_sync,
    questions=QUESTIONS,
    order=11,
)

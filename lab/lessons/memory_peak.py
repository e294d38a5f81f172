"""The lesson “profile_memory: who holds the peak”, whole: its text and explanation, its runs (in the
workload's own sizes), its check (``_memory_peak``: what the lab looks for in the runs, a pure
function of their analyses), its questions (``QUESTIONS``: each answer computed from the runs) and
its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import Mlp
from lab.lessons.answers import banded, labels, table_row
from lab.lessons.schema import (
    ANY_DEVICE,
    CPU_RUN,
    Answer,
    Band,
    Lesson,
    Question,
    Signal,
    claim_equals,
    lesson_run,
    question,
)

__all__ = ["LESSON"]


_MIB_64 = 64 * 2**20


def _memory_peak(runs: list[Run]) -> list[Signal]:
    (run,) = runs
    if run.analysis.memory is None:
        return [Signal("profile_memory records allocations", False, "no [memory] records in this trace")]
    label, units = fig.memory_peak_label(run), fig.memory_rise_units(run)
    return [
        Signal("the peak is in the step's last label (h, a and y alive)", label == "down", f"the peak is in '{label}'"),
        Signal(
            "three tensors of the step are alive at the peak",
            round(units) == 3,
            f"peak − the step's starting level = {units:.2f} × its largest allocation",
        ),
    ]


_PEAK_LABELS = ("up", "act", "down")


_ALIVE = (Band(label="1", below=1.5), Band(label="2", below=2.5), Band(label="3 or more"))


def _peak_label(runs: Sequence[Run]) -> Answer:
    label = fig.memory_peak_label(runs[0])
    choice = label if label in _PEAK_LABELS else _PEAK_LABELS[0]
    return Answer(
        choice=choice,
        measured=float(_PEAK_LABELS.index(choice)),
        measured_text=f"the peak is inside '{label}'",
        where=table_row(0, label or "aten::mm", "the op and label at the peak, marked ▼ on the chart", view="Memory"),
    )


_alive = banded(lambda runs: fig.memory_rise_units(runs[0]), _ALIVE,
                 lambda v: f"peak − the step's starting level = {v:.2f} × the step's largest allocation",
                 lambda runs: table_row(0, "aten::mm", "the curve inside one step", view="Memory"))


QUESTIONS: tuple[Question, ...] = (
    question("memory_peak.peak_label", "Which label will be open at the step's memory peak?", _PEAK_LABELS, _peak_label,
     ANY_DEVICE, "", {"down": ("peak comes in", "peak is in")}),
    question("memory_peak.alive",
        "At that peak, how many of the step's own tensors (h, a, y: one size) will be allocated?",
     labels(_ALIVE), _alive, ANY_DEVICE, "", {"3 or more": ("3 tensors", "three tensors", "all three")}),
)

LESSON = Lesson(
    key="memory_peak",
    title="profile_memory: who holds the peak",
    text=(
        "With `profile_memory=True` the trace records every allocation and free of the caching "
        "allocator, with the total allocated after each: the **Memory** view draws that curve "
        "and names the op and label running at its peak. The step: `h = x @ W1` (label `up`), "
        "`a = gelu(h)` (`act`), `y = a @ W2` (`down`); x is 4096×8192 bf16 and h, a and y are "
        "each 4096×8192 (64 MiB; on a CPU 256×512 float32). **Look at** the curve inside one step "
        "and what each label allocates."
    ),
    look_for="the allocations inside each label; the curve's highest point in a step",
    runs=(
        lesson_run("memory", "memory_mlp", "mlp", gpu=Mlp(rows=4096, model_dim=8192, hidden_dim=8192),
                   cpu=Mlp(rows=256, model_dim=512, hidden_dim=512), profile_memory=True),
    ),
    explain=(
        "The peak comes in `down`, on the GPU and on a CPU: `h` is still alive (nothing freed it), "
        "`a` too, and `y` is being allocated, so the curve stands 3 tensors above the step's "
        "start. Freeing `h` after `act` (`del h`) would lower the peak by one tensor."
    ),
    claims=(
        claim_equals("(64 MiB;", "memory_largest_allocation_bytes", "memory", float(_MIB_64)),
        claim_equals("on a CPU 256×512 float32)", "memory_largest_allocation_bytes", "memory",
                     float(256 * 512 * 4), device=CPU_RUN),
        claim_equals("The peak comes in `down`", "memory_peak_label", "memory", "down"),
        claim_equals("The peak comes in `down`", "memory_peak_label", "memory", "down", device=CPU_RUN),
        claim_equals("3 tensors above the step's", "memory_rise_units", "memory", 3.0),
        claim_equals("3 tensors above the step's", "memory_rise_units", "memory", 3.0, device=CPU_RUN),
    ),
    check=_memory_peak,
    questions=QUESTIONS,
    order=15,
)

"""The lesson “A training step: forward, backward, optimizer”, whole: its text and explanation, its
runs (in the workload's own sizes), its check (``_training_step``: what the lab looks for in the
runs, a pure function of their analyses), its questions (``QUESTIONS``: each answer computed from
the runs) and its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import Mlp
from lab.lessons.answers import labels, table_row, where_window
from lab.lessons.schema import (
    ANY_DEVICE,
    CPU_RUN,
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


_BACKWARD_OP = "autograd::engine::evaluate_function"


def _training_step(runs: list[Run]) -> list[Signal]:
    (run,) = runs
    names = set(run.analysis.key_averages["name"].astype(str))
    backward = sorted(n.split(": ", 1)[1] for n in names if n.startswith("autograd::engine::evaluate_function: "))
    gemms, unit = fig.gemms_per_step(run)
    return [
        Signal(
            "backward ops appear as autograd::engine::evaluate_function rows",
            bool(backward),
            ", ".join(backward) or "none",
        ),
        Signal(
            "five matrix multiplications per step: 2 forward, 3 backward", gemms == 5, f"{gemms:.0f} {unit} per step"
        ),
        Signal("the optimizer labels itself", "Optimizer.step#AdamW.step" in names, "Optimizer.step#AdamW.step"),
    ]


_GEMMS = (
    Band(label="2", below=2.5),
    Band(label="3–4", below=4.5),
    Band(label="5–6", below=6.5),
    Band(label="7 or more"),
)


_PHASES = {"forward": "forward", "backward": "backward", "optimizer step": "Optimizer.step#AdamW.step"}


def _gemms(runs: Sequence[Run]) -> Answer:
    n, unit = fig.gemms_per_step(runs[0])
    rows = fig.kernel_step_index(runs[0])[0]
    return Answer(
        choice=band_of(n, _GEMMS),
        measured=n,
        measured_text=f"{n:.0f} {unit} per step",
        where=where_window(runs[0], 0, rows, "the first step: forward, backward and optimizer"),
    )


def _longest_phase(runs: Sequence[Run]) -> Answer:
    times = {choice: fig.phase_us(runs[0], label) for choice, label in _PHASES.items()}
    top = max(times, key=lambda c: times[c])
    unit = "GPU" if runs[0].trace.has_gpu else "CPU"
    return Answer(
        choice=top,
        measured=times[top],
        measured_text=", ".join(f"{c} {t:,.0f} µs" for c, t in times.items()) + f" of {unit} time per step",
        where=table_row(0, _PHASES[top], f"the {_PHASES[top]} label's row"),
    )


QUESTIONS: tuple[Question, ...] = (
    question("training_step.gemms",
        "How many matrix multiplications (GEMM kernels on a GPU, aten::mm/addmm on a CPU) will "
     "one training step run?", labels(_GEMMS), _gemms, ANY_DEVICE, "",
     {"5–6": ("5 GEMMs", "five GEMMs", "3 backward"), "3–4": ("4 GEMMs",)}),
    question("training_step.longest_phase",
        "Which phase will take the most time (GPU time on a GPU, CPU time on a CPU)?",
     tuple(_PHASES), _longest_phase, ANY_DEVICE, "", {"backward": ("backward's GPU work is the longest",)}),
)

LESSON = Lesson(
    key="training_step",
    title="A training step: forward, backward, optimizer",
    text=(
        "A two-layer MLP (Linear K→N, GELU, Linear N→K) on 4096 rows, K = 2048, N = 8192, bf16 "
        "(on a CPU 128 rows, 64 → 256, float32), trained with MSE loss and AdamW. The step is "
        "labelled `forward` and `backward`; the optimizer step labels itself "
        "(`Optimizer.step#AdamW.step`). Backward ops appear in the table as "
        "`autograd::engine::evaluate_function: <Op>Backward0`, each wrapping the aten ops that "
        "compute its gradients, and, on a GPU, run on autograd's own thread. **Look at** the GEMMs "
        "of each phase and the time between the labels. Which gradients does the first layer need?"
    ),
    look_for="the matrix multiplications in each phase; the time of each phase",
    runs=(lesson_run("train step", "train_mlp", "train", gpu=Mlp(rows=4096, model_dim=2048, hidden_dim=8192),
                     cpu=Mlp(rows=128, model_dim=64, hidden_dim=256)),),
    explain=(
        "A step runs 5 GEMMs: 2 forward, each an `aten::addmm` with the bias applied by cuBLAS "
        "on the GPU, and 3 backward — the second layer needs the gradients of its weight and of "
        "its input, the first layer only its weight's, since x needs no gradient. On the H200 "
        "backward's GPU work is the longest phase, about 1.6× the forward's; AdamW's update of "
        "the four parameters runs as 16 multi-tensor kernels a step (torch's `foreach` path)."
    ),
    claims=(
        claim_between("labelled `forward` and `backward`", "phase_us",
                      "train step", 1.0, float("inf"), args=("backward",)),
        claim_between("the optimizer step labels itself", "phase_us", "train step", 1.0, float("inf"),
                      args=("Optimizer.step#AdamW.step",)),
        claim_equals("`autograd::engine::evaluate_function: <Op>Backward0`", "calls_per_step", "train step",
                     2.0, args=(f"{_BACKWARD_OP}: AddmmBackward0",)),
        claim_equals("on a GPU, run on autograd's own thread", "on_other_thread", "train step", 1.0,
                     args=(_BACKWARD_OP, "forward")),
        claim_equals("on a GPU, run on autograd's own thread", "on_other_thread", "train step", 0.0,
                     args=(_BACKWARD_OP, "forward"), device=CPU_RUN),
        claim_equals("A step runs 5 GEMMs", "gemms_per_step", "train step", 5.0),
        claim_equals("A step runs 5 GEMMs", "gemms_per_step", "train step", 5.0, device=CPU_RUN),
        claim_equals("2 forward, each an `aten::addmm`", "calls_per_step", "train step", 2.0,
                     args=("aten::addmm",)),
        claim_equals("with the bias applied by cuBLAS", "kernels_matching_per_step", "train step", 2.0,
                     args=("bias",)),
        claim_equals("and 3 backward", "calls_per_step", "train step", 3.0, args=("aten::mm",)),
        claim_between("backward's GPU work is the longest phase", "phase_ratio", "train step", 1.05,
                      float("inf"), args=("backward", "Optimizer.step#AdamW.step")),
        claim_between("about 1.6× the forward's", "phase_ratio", "train step", 1.4, 1.8,
                      args=("backward", "forward")),
        claim_equals("runs as 16 multi-tensor kernels a step", "kernels_matching_per_step", "train step", 16.0,
                     args=("multi_tensor",)),
    ),
    check=_training_step,
    questions=QUESTIONS,
    order=13,
)

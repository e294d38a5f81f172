"""The lesson “Memory-bound ops against the HBM roof”, whole: its workload (``WORKLOADS``: five
memory-bound ops over one large tensor, its builder and cost model, in the lab's ``Rows`` sizes),
its text and explanation, its runs, its check (``_memory_roofs``: each op's row of the explain
model's roof table), its questions (each answer computed from the runs) and its claims (each
checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import Rows, Workload
from lab.core.workloads.gemm import random
from lab.lessons.answers import banded, labels, table_row
from lab.lessons.checks import all_on_gpu, explanation_of, roof_row
from lab.lessons.schema import (
    CPU,
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

__all__ = ["LESSON", "OPS", "WORKLOADS"]

WORKLOAD = f"{__name__}.ops"
# The five ops of a step, by the name of their row in the roof table (the op that launches the
# kernel: LayerNorm and softmax run inside aten::native_layer_norm and aten::_softmax), and how
# the lesson names them.
OPS: tuple[tuple[str, str], ...] = (
    ("aten::native_layer_norm", "LayerNorm"),
    ("aten::_softmax", "softmax"),
    ("aten::gelu", "GELU"),
    ("aten::add", "add"),
    ("aten::sum", "row sum"),
)
# Tensors of rows × columns a step touches: x and y, and the four outputs of that size
# (layer_norm, softmax, gelu, add); the row sum's output is one column.
_TENSORS_ALIVE = 6


def build_ops(config, device, dtype) -> Callable[[], object]:
    """One step: LayerNorm, softmax, GELU, an add and a row sum, each over x (rows × columns)."""
    import torch
    import torch.nn.functional as F

    s = Rows.of(config)
    x = random(torch, (s.rows, s.columns), device, dtype)
    y = random(torch, (s.rows, s.columns), device, dtype)
    weight = torch.ones(s.columns, device=device, dtype=dtype)
    bias = torch.zeros(s.columns, device=device, dtype=dtype)

    def step():
        return (F.layer_norm(x, (s.columns,), weight, bias), torch.softmax(x, dim=-1), F.gelu(x), x + y,
                x.sum(dim=-1))

    return step


def ops_bytes(config) -> int:
    s = Rows.of(config)
    return _TENSORS_ALIVE * s.rows * s.columns * config.element_bytes


def ops_flops(config) -> int:
    # About one operation per element an op writes or reduces: the roofline puts them at the far left.
    s = Rows.of(config)
    return len(OPS) * s.rows * s.columns


WORKLOADS = (
    Workload(name=WORKLOAD, title="LayerNorm, softmax, GELU, add and row sum over one large tensor",
             formula="layer_norm(x); softmax(x, -1); gelu(x); x + y; x.sum(-1)   x, y: rows×columns",
             build=build_ops, estimate_bytes=ops_bytes, flops=ops_flops, sizes=Rows),
)


def _pct(run: Run, op: str) -> float:
    row = roof_row(run, op)
    return float(row["pct_of_roof"]) if row is not None else float("nan")


def _gbs(run: Run, op: str) -> float:
    row = roof_row(run, op)
    return float(row["gbs"]) if row is not None else float("nan")


def _memory_roofs(runs: list[Run]) -> list[Signal]:
    (run,) = runs
    if not all_on_gpu(runs):
        return [Signal("each op against the HBM roof", False,
                       "a CPU run has no device peak to measure against; open the H200 recording", expected=False)]
    roofs = explanation_of(run).roofs
    mine = roofs[roofs["name"].isin([op for op, _ in OPS])]
    bounds = ", ".join(f"{r['name']}: {r['bound']}" for _, r in mine.iterrows())
    pcts = {label: _pct(run, op) for op, label in OPS}
    near = [label for label, p in pcts.items() if p >= _NEAR_ROOF_PCT]
    far = [label for label, p in pcts.items() if p < _FAR_BELOW_PCT]
    said = ", ".join(f"{label} {p:.0f} %" for label, p in pcts.items())
    return [
        Signal("every op is memory-bound", len(mine) == len(OPS) and set(mine["bound"]) == {"memory-bound"}, bounds),
        Signal("some op runs near the HBM roof", bool(near), f"of the roof: {said}"),
        Signal("some op runs far below it", bool(far), f"under {_FAR_BELOW_PCT:.0f} %: {', '.join(far) or 'none'}"),
    ]


# An op at 70 % of the HBM roof or more has little left to gain: measured copies and adds on
# Hopper reach about 90 % of the datasheet's bandwidth (the explain corpus' memory_bound_ops).
_NEAR_ROOF_PCT = 70.0
# Under 40 % an op leaves more than half of the bandwidth unused: a rewrite can pay.
_FAR_BELOW_PCT = 40.0

_CLOSEST = tuple(label for _, label in OPS)


def _closest(runs: Sequence[Run]) -> Answer:
    pcts = {label: _pct(runs[0], op) for op, label in OPS}
    best = max(pcts, key=lambda k: pcts[k] if pcts[k] == pcts[k] else -1.0)
    op = next(o for o, label in OPS if label == best)
    return Answer(choice=best, measured=pcts[best], measured_text=f"{best}: {pcts[best]:.0f} % of the HBM roof "
                  f"({_gbs(runs[0], op):,.0f} GB/s)", where=table_row(0, op, f"the roof table's {op} row: % of roof"))


_SOFTMAX = (Band(label="under 40 %", below=40.0), Band(label="40–70 %", below=70.0), Band(label="70 % or more"))

_softmax_share = banded(lambda runs: _pct(runs[0], "aten::_softmax"), _SOFTMAX,
                        lambda v: f"aten::_softmax reaches {v:.0f} % of the HBM roof",
                        lambda runs: table_row(0, "aten::_softmax", "the roof table's aten::_softmax row: % of roof"))

_SUM_SHARE = (Band(label="under 5 %", below=5.0), Band(label="5–20 %", below=20.0), Band(label="over 20 %"))

_sum_share = banded(lambda runs: fig.call_share_pct(runs[0], "aten::sum"), _SUM_SHARE,
                    lambda v: f"aten::sum: {v:.1f} % of the steps' CPU time",
                    lambda runs: table_row(0, "aten::sum", "the Table's aten::sum row: CPU total against the step's"))


QUESTIONS: tuple[Question, ...] = (
    question("memory_roofs.closest", "Which op will come closest to the H200's HBM roof (its % of roof)?",
             _CLOSEST, _closest, (GPU,), "a CPU run has no HBM roof to measure against", {}),
    question("memory_roofs.softmax", "What share of the HBM roof will the softmax reach?", labels(_SOFTMAX),
             _softmax_share, (GPU,), "a CPU run has no HBM roof to measure against", {}),
    question("memory_roofs.cpu_row_sum", "On this CPU, what share of a step's time will the row sum take?",
             labels(_SUM_SHARE), _sum_share, (CPU,), "", {}),
)

LESSON = Lesson(
    key="memory_roofs",
    title="Memory-bound ops against the HBM roof",
    text=(
        "LayerNorm, softmax, GELU, an add and a row sum do a few operations per element: their "
        "speed is the rate at which they read and write memory, and the H200's roof for that is "
        "its HBM bandwidth (4.8 TB/s on the datasheet). The run applies each op once a step to one "
        "8192×8192 bf16 tensor (128 MiB; the add also reads a second one); on a CPU 1024×1024 "
        "float32. Each op moves at least its inputs once and its output once, so its bytes over "
        "its GPU time is a bandwidth. **Look at** the roof table of the Summary: each op's GB/s "
        "and its % of the roof."
    ),
    look_for="each op's GB/s and % of the HBM roof in the roof table",
    runs=(
        lesson_run("five ops", WORKLOAD, "memory_ops", gpu=Rows(rows=8192, columns=8192),
                   cpu=Rows(rows=1024, columns=1024)),
    ),
    explain=(
        "On the H200 recording every op is memory-bound, and they are not equally good at it. "
        "The add reads two tensors and writes one (384 MiB) in about 93 µs: about 4.3 TB/s, "
        "90 % of the roof, nothing left to gain. GELU moves 256 MiB in about 88 µs, about "
        "63 %. LayerNorm (about 112 µs) and the row sum (about 56 µs for 128 MiB) reach about "
        "half. The softmax takes about 258 µs for the same 256 MiB as GELU: about 22 % of the "
        "roof, the op a better kernel (or a fusion that reads x once) would speed up most. The "
        "step's time is the sum of these, so the softmax alone is about two fifths of it. On a "
        "CPU there is no HBM roof; there the row sum, which writes one value a row, takes a few "
        "per cent of the step, and the ops that write a whole new tensor the rest."
    ),
    claims=(
        claim_equals("applies each op once a step", "calls_per_step", "five ops", 1.0, args=("aten::softmax",)),
        claim_equals("applies each op once a step", "calls_per_step", "five ops", 1.0, args=("aten::softmax",),
                     device=CPU_RUN),
        claim_between("(384 MiB) in about 93 µs", "kernel_mean_us", "five ops", 85.0, 100.0, args=("CUDAFunctor_add",)),
        claim_between("256 MiB in about 88 µs", "kernel_mean_us", "five ops", 80.0, 96.0, args=("GeluCUDA",)),
        claim_between("LayerNorm (about 112 µs)", "kernel_mean_us", "five ops", 100.0, 125.0, args=("layer_norm",)),
        claim_between("about 56 µs for 128 MiB", "kernel_mean_us", "five ops", 50.0, 62.0, args=("reduce_kernel",)),
        claim_between("takes about 258 µs", "kernel_mean_us", "five ops", 235.0, 280.0, args=("SoftMaxForward",)),
        claim_between("about two fifths of it", "kernel_time_share_pct", "five ops", 35.0, 48.0,
                      args=("SoftMaxForward",)),
        claim_between("takes a few per cent of the step", "call_share_pct", "five ops", 0.0, 10.0, args=("aten::sum",),
                      device=CPU_RUN),
    ),
    check=_memory_roofs,
    questions=QUESTIONS,
    order=20,
)

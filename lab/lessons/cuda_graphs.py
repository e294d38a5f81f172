"""The lesson “CUDA graphs: one launch replays a whole step”, whole: its text and explanation, its runs
(in the workload's own sizes), its check (``_cuda_graphs``: what the lab looks for in the runs, a
pure function of their analyses), its questions (``QUESTIONS``: each answer computed from the runs)
and its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.analysis import figures as fig
from lab.analysis.bundle import Run
from lab.core.workloads import SmallOps
from lab.lessons.answers import banded, kernels_where, labels, step_time_ratio, table_row
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


def _cuda_graphs(runs: list[Run]) -> list[Signal]:
    eager, graphed = runs
    if not all_on_gpu(runs):
        return [
            Signal(
                "one cudaGraphLaunch replays the step",
                False,
                "a CPU has no CUDA graphs: the 'graphed' run is eager here; open the H200 recording",
                expected=False,
            )
        ]
    k_eager = len(fig.kernel_step_index(eager)[0]) / fig.step_count(eager)
    k_graph = len(fig.kernel_step_index(graphed)[0]) / fig.step_count(graphed)
    launches = fig.calls_per_step(graphed, "cudaGraphLaunch")
    return [
        Signal(
            "the graphed step is one cudaGraphLaunch, no cudaLaunchKernel",
            launches == 1 and fig.calls_per_step(graphed, "cudaLaunchKernel") == 0,
            f"{launches:.0f} cudaGraphLaunch per step",
        ),
        Signal(
            "the GPU still runs every kernel", k_graph == k_eager, f"{k_eager:.0f} vs {k_graph:.0f} kernels per step"
        ),
        Signal(
            "the graphed step is faster",
            fig.profiled_step_us(graphed) < fig.profiled_step_us(eager),
            f"{fmt_us(fig.profiled_step_us(eager))} vs {fmt_us(fig.profiled_step_us(graphed))} per step",
        ),
    ]


_GRAPH_KERNELS = ("1: the graph runs as one kernel", "fewer than eager", "as many as eager")


_SPEEDUP = (Band(label="under 1.5×", below=1.5), Band(label="1.5–5×", below=5.0), Band(label="over 5×"))


def _graph_kernels(runs: Sequence[Run]) -> Answer:
    eager = len(fig.kernel_step_index(runs[0])[0]) / fig.step_count(runs[0])
    graphed = len(fig.kernel_step_index(runs[1])[0]) / fig.step_count(runs[1])
    choice = (
        _GRAPH_KERNELS[2] if abs(graphed - eager) <= 0.5 else _GRAPH_KERNELS[0] if graphed <= 1.5 else _GRAPH_KERNELS[1]
    )
    return Answer(
        choice=choice,
        measured=graphed,
        measured_text=f"{eager:.0f} (eager) vs {graphed:.0f} (graphed) kernels per step",
        where=kernels_where(runs, 1, 0, "the graphed run's first step: its GPU lane"),
    )


_EAGER_OPS = (Band(label="about 16", below=24.0), Band(label="about 32", below=40.0), Band(label="48 or more"))


_eager_ops = banded(lambda runs: fig.ops_per_step(runs[0]), _EAGER_OPS,
                     lambda v: f"{v:.1f} operators per step in the eager run (aten::mul and aten::add per iteration)",
                     lambda runs: table_row(0, "aten::mul",
                         "the eager run's table: aten::mul and aten::add, # of Calls"))


_GRAPHS_GPU = "a CPU has no CUDA graphs"


QUESTIONS: tuple[Question, ...] = (
    question("cuda_graphs.graph_kernels", "How many kernels per step will the GPU run in the graphed run?",
        _GRAPH_KERNELS,
     _graph_kernels, (GPU,), "a CPU has no CUDA graphs and runs no kernels",
     {"as many as eager": ("replays them", "same 32 kernels", "the same kernels"),
      _GRAPH_KERNELS[0]: ("one kernel",)}),
    question("cuda_graphs.speedup", "How many times faster will the graphed step be than the eager one?",
        labels(_SPEEDUP),
     step_time_ratio(0, 1, _SPEEDUP, "eager vs graphed"), (GPU,), _GRAPHS_GPU,
     {"over 5×": ("5× faster",), "1.5–5×": ("3× faster", "about 3×")}),
    question("cuda_graphs.eager_ops", "How many operators per step will the eager run call?", labels(_EAGER_OPS),
     _eager_ops, ANY_DEVICE, "", {"about 32": ("32 operators", "32 ops", "two ops per iteration")}),
)

LESSON = Lesson(
    key="cuda_graphs",
    title="CUDA graphs: one launch replays a whole step",
    text=(
        "Sixteen iterations of `y = y * a + b` on a 256×256 bf16 tensor: each op's kernel runs in "
        "about a microsecond on the H200, less than it takes the host to launch it. A "
        "`torch.cuda.CUDAGraph` records the step's work once (the capture happens before "
        'profiling) and replays it with one `cudaGraphLaunch`; `torch.compile(mode="reduce-overhead")` '
        "does this capture for you. **Look at** the CPU lane and the runtime calls of both runs, "
        "the GPU lane, and the step time. On a CPU there is nothing to capture: its 'graphed' run is eager."
    ),
    look_for="the runtime calls per step in each run; what the GPU lane shows under a replay",
    runs=(
        lesson_run("eager", "small_ops", "small_ops", gpu=SmallOps(rows=256, columns=256, iterations=16),
                   cpu=SmallOps(rows=64, columns=64, iterations=16)),
        lesson_run("graphed", "small_ops_graphed", "small_ops_graphed",
                   gpu=SmallOps(rows=256, columns=256, iterations=16),
                   cpu=SmallOps(rows=64, columns=64, iterations=16)),
    ),
    explain=(
        "Eager, each step calls 32 operators (`aten::mul` and `aten::add` per iteration) and makes 32 "
        "`cudaLaunchKernel` calls of about 7 µs each for 32 kernels. "
        "Graphed, the CPU lane shows one `cudaGraphLaunch` and no operator at all, and the GPU "
        "still runs the same 32 kernels. The graphed step is over 5× faster profiled and about "
        "7× unprofiled on the H200 (the Summary cards' per-iteration times): the profiler's per-op "
        "records weigh most on the eager run, which has the ops."
    ),
    claims=(
        claim_between("runs in about a microsecond on the H200", "kernel_mean_us", "eager", 0.5, 2.0),
        claim_between("less than it takes the host to launch it", "call_mean_us", "eager", 2.0, 20.0,
                      args=("cudaLaunchKernel",)),
        claim_equals("replays it with one `cudaGraphLaunch`", "calls_per_step", "graphed", 1.0,
                     args=("cudaGraphLaunch",)),
        claim_between("its 'graphed' run is eager", "ops_per_step", "graphed", 0.99, 1.01, over="eager",
                      device=CPU_RUN),
        claim_equals("each step calls 32 operators", "ops_per_step", "eager", 32.0),
        claim_equals("each step calls 32 operators", "ops_per_step", "eager", 32.0, device=CPU_RUN),
        claim_equals("makes 32 `cudaLaunchKernel` calls", "calls_per_step", "eager", 32.0,
                     args=("cudaLaunchKernel",)),
        claim_equals("for 32 kernels", "kernels_per_step", "eager", 32.0),
        claim_equals("no operator at all", "ops_per_step", "graphed", 0.0),
        claim_equals("the same 32 kernels", "kernels_per_step", "graphed", 32.0),
        claim_between("over 5× faster profiled", "profiled_step_us", "eager", 5.0, 6.5, over="graphed"),
        claim_between("7× unprofiled", "unprofiled_step_us", "eager", 6.0, 9.0,
                      over="graphed"),
    ),
    check=_cuda_graphs,
    questions=QUESTIONS,
    order=12,
)

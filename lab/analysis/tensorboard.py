"""The TensorBoard plugin's three views of one trace, together: ``step_time`` (its Overview's
step-time breakdown), ``kernel_view`` (its Kernel view) and ``module_view`` (its Module view).

Not part of ``analyze``: only the page's "TensorBoard" tab shows them, so they are computed when
it is opened, in a reader (``lab.read.JobKind.TENSORBOARD``), and by the tests and scripts that
check them. Inside every ``analyze`` they took bench/data/transformer_step_h200.json.gz's analysis
from 108 ms to ~0.5 s wall on the shared 2-core box; measured side by side, analyze + insights
costs 109 ms CPU without them and 246 ms with them (kernel_view 79 ms, module_view 69 ms,
step_time 8 ms CPU: BENCHMARKS.md "Analyze"). step_time is cheap but only this tab reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.analysis.kernels import KernelView, kernel_view
from lab.analysis.modules import ModuleView, module_view
from lab.analysis.step_time import StepTime, step_time
from lab.trace.load import Trace

__all__ = ["TensorBoardViews", "tensorboard_views"]


@dataclass(frozen=True, kw_only=True)
class TensorBoardViews:
    """What the "TensorBoard" tab lays out (lab.views.tensorboard)."""

    step_time: StepTime
    kernel_view: KernelView
    modules: ModuleView


def tensorboard_views(trace: Trace) -> TensorBoardViews:
    return TensorBoardViews(step_time=step_time(trace), kernel_view=kernel_view(trace), modules=module_view(trace))

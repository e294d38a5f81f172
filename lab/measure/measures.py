"""``Measures``: one trace's figures, each computed once, and ``measure`` that computes them.

The one definitions it holds, and where each lives:

* GPU activity: events whose ``cat`` is in ``lab.vocab.GPU_ACTIVITY_CATS`` (``gpu_activity_rows``);
* the GPU-busy union: ``lab.analysis.gpu.gpu_utilization``'s ``busy_intervals``
  (``lab.analysis.intervals.merge_intervals`` over the GPU activity);
* the steps: ``lab.analysis.diagnoses.steps.step_spans``; a step's window (its time, and what is
  "in" it): ``lab.analysis.steps.step_windows``; an instant's step: ``Measures.step_of``;
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lab.analysis import Analysis, analyze
from lab.analysis.diagnoses.steps import StepSpans
from lab.analysis.gpu import GpuUtilization, LaunchStats
from lab.analysis.operators import Links
from lab.analysis.steps import step_of, step_windows
from lab.core.config import RunConfig
from lab.core.devices import DevicePeak
from lab.trace import Trace

__all__ = ["Measures", "measure"]


@dataclass(frozen=True)
class Measures:
    """Every figure of one trace, computed once by ``measure``. The tables are ``analysis``'s
    (``Analysis`` stays what the tabs, the insights and the lessons read); the arrays below are
    the ones the attribution, the op roofs and the findings share."""

    trace: Trace = field(repr=False)
    analysis: Analysis = field(repr=False)
    gpu_rows: np.ndarray  # rows of Trace.events that are GPU activity, in row order
    busy_start_us: np.ndarray  # the GPU-busy union over all devices: sorted, disjoint
    busy_end_us: np.ndarray
    window_start_us: np.ndarray  # each step's window (step_windows): the steps' wall time
    window_end_us: np.ndarray

    # --- the analysis' tables, under the names the later stages read ---------------------
    @property
    def links(self) -> Links:
        return self.analysis.links

    @property
    def spans(self) -> StepSpans:
        return self.analysis.findings.steps

    @property
    def peak(self) -> DevicePeak | None:
        return self.analysis.peak

    @property
    def utilization(self) -> GpuUtilization:
        return self.analysis.utilization

    @property
    def launches(self) -> LaunchStats:
        return self.analysis.launches

    @property
    def steps(self) -> pd.DataFrame:
        return self.analysis.steps

    @property
    def key_averages(self) -> pd.DataFrame:
        return self.analysis.key_averages

    @property
    def busy_us(self) -> float:
        return self.analysis.utilization.busy_us

    def step_of(self, t: np.ndarray) -> np.ndarray:
        """Per instant, the index of the step window holding it, -1 outside every step."""
        return step_of(self.window_start_us, self.window_end_us, t)


def measure(trace: Trace, *, peak: DevicePeak | None = None, config: RunConfig | None = None,
            analysis: Analysis | None = None) -> Measures:
    """``trace``'s figures, each once. ``analysis``: ``analyze(trace)`` when the caller has it."""
    analysis = analysis if analysis is not None else analyze(trace, peak=peak, config=config)
    busy = analysis.utilization.busy_intervals
    win_start, win_end = analysis.step_windows_us
    if len(win_start) != len(analysis.findings.steps):  # an Analysis built without its windows
        win_start, win_end = step_windows(trace, analysis.findings.steps, analysis.links,
                                          gpu_rows=analysis.utilization.activity_rows)
    return Measures(
        trace=trace, analysis=analysis, gpu_rows=analysis.utilization.activity_rows,
        busy_start_us=busy["start_us"].to_numpy(), busy_end_us=busy["end_us"].to_numpy(),
        window_start_us=win_start, window_end_us=win_end,
    )

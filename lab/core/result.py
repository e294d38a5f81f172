"""What a profile run returns: plain, picklable data (no torch objects).

It crosses the worker-process boundary, lives in a user's session and feeds every view.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lab.core.columns import KEY_AVERAGES_COLUMNS
from lab.core.config import RunConfig
from lab.core.devices import DeviceInfo
from lab.core.workloads import WORKLOADS
from lab.stats import median

__all__ = ["KEY_AVERAGES_COLUMNS", "RunError", "RunResult", "Timing"]


class RunError(RuntimeError):
    """A run that started but could not finish (e.g. out of memory); the message says what to change.

    Defined here, not in the runner, so callers can catch it without importing torch.
    """


@dataclass(frozen=True)
class Timing:
    """Per-iteration time of the same step, measured the same way with and without the profiler."""

    method: str  # "cuda events" or "wall clock"
    profiled_us: tuple[float, ...]
    unprofiled_us: tuple[float, ...]
    compile_s: float | None = None  # torch.compile time, kept out of the profile

    @property
    def profiled_median_us(self) -> float:
        return median(self.profiled_us)

    @property
    def unprofiled_median_us(self) -> float:
        return median(self.unprofiled_us)

    @property
    def overhead_pct(self) -> float:
        base = self.unprofiled_median_us
        return 100.0 * (self.profiled_median_us - base) / base if base > 0 else float("nan")


@dataclass(frozen=True)
class RunResult:
    config: RunConfig
    device: DeviceInfo
    trace_gz: bytes  # the Chrome trace exactly as torch exported it, gzipped
    key_averages: pd.DataFrame  # grouped by name; columns KEY_AVERAGES_COLUMNS
    key_averages_by_shape: pd.DataFrame  # grouped by name and input shapes
    # The classic text table as torch prints it, per sort key (row_limit=-1: all rows).
    tables: dict[str, str]
    timing: Timing
    stage_s: dict[str, float]  # seconds spent in each stage of the run
    warnings: tuple[str, ...] = ()
    # A distributed run's traces, one per rank in rank order: (tensorboard_trace_handler's file
    # name, its gzipped JSON); trace_gz is rank 0's. Empty for a one-process run.
    rank_traces: tuple[tuple[str, bytes], ...] = ()

    @property
    def step_tflops(self) -> float | None:
        """Useful FLOPs of one step over its median time without the profiler (None: not timed).
        The Summary's "Step throughput" card and a CPU run's roofline point both quote it."""
        us = self.timing.unprofiled_median_us
        return WORKLOADS[self.config.workload].flops(self.config) / us / 1e6 if us > 0 else None

    @property
    def trace_stem(self) -> str:
        """Download name stem, e.g. ``matmul_add_4096x4096x4096_bfloat16_cuda``."""
        c = self.config
        tag = "_compiled" if c.compile else ""
        return f"{c.workload}{tag}_{c.shape_text}_{c.dtype}_{self.device.kind}"


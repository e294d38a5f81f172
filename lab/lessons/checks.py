"""What several lessons' checks read: a trace's operators and kernels, by name, and who runs fewer per step."""

from __future__ import annotations

import re

from lab.analysis.bundle import Run
from lab.analysis.figures import work_per_step
from lab.lessons.schema import Signal
from lab.trace.load import Trace
from lab.vocab import ADD_KERNEL_NAMES

__all__ = ["ADD_KERNEL", "all_on_gpu", "cpu_ops", "fewer_per_step", "kernel_events", "name_set"]


ADD_KERNEL = re.compile(ADD_KERNEL_NAMES, re.IGNORECASE)


def cpu_ops(trace: Trace):
    ev = trace.events
    return ev[(ev["lane_kind"] == "cpu") & (ev["cat"] == "cpu_op")]


def kernel_events(trace: Trace):
    ev = trace.events
    return ev[ev["cat"] == "kernel"]


def name_set(frame) -> set[str]:
    return set(frame["name"].astype(str))


def fewer_per_step(first: Run, second: Run, what: str) -> Signal:
    # The active steps' work only (lab.analysis.figures): the reveal counts the same.
    a, unit = work_per_step(first)
    b, _ = work_per_step(second)
    return Signal(f"{second.name} runs fewer {unit} per step", b < a, f"{a:.1f} vs {b:.1f} {unit} per step ({what})")


def all_on_gpu(runs: list[Run]) -> bool:
    return all(r.trace.has_gpu for r in runs)

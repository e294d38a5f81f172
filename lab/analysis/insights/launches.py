"""Rules on a trace without GPU activity (``lab.analysis.launches`` says which of its three
kinds it is): launch calls whose GPU side was lost (critical: CUPTI), or CUDA calls that launch
nothing (info: described, its memory included). Rules as in ``rules.py``."""

from __future__ import annotations

from typing import Any

from lab.analysis.insights.record import Insight
from lab.analysis.launches import gpu_use, gpu_work_text
from lab.trace import Trace

__all__ = ["CUPTI_TITLE", "LAUNCH_RULES", "NOTHING_LAUNCHED_TITLE", "cupti_missing", "nothing_launched"]

CUPTI_DOCS = "https://docs.nvidia.com/cupti/"
PROFILER_DOCS = "https://pytorch.org/docs/stable/profiler.html#torch.profiler.profile"
CUPTI_TITLE = "No GPU activity recorded although a GPU was used"
NOTHING_LAUNCHED_TITLE = "Nothing was launched on the GPU"


def cupti_missing(trace: Trace, analysis: Any) -> Insight | None:
    """Launch calls without any GPU activity: the GPU's side of the trace was lost."""
    use = gpu_use(trace)
    if use.gpu_activities or not use.launched:
        return None
    props = f" and device properties of {use.devices_listed} GPU(s)" if use.devices_listed else ""
    return Insight(
        severity="critical",
        title=CUPTI_TITLE,
        evidence=(f"The trace has {use.launch_calls:,} launch call(s) among {use.calls_text()}{props} but no "
                  f"kernel, memcpy or memset events."),
        suggestion=("Profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]; if that is already "
                    "set, CUPTI is missing or not permitted (check torch.autograd.kineto_available(), libcupti on "
                    "the library path, and that the container allows GPU performance counters)."),
        learn_more=CUPTI_DOCS,
    )


def nothing_launched(trace: Trace, analysis: Any) -> Insight | None:
    """CUDA calls that launch nothing (allocations, queries, syncs): described, no alarm."""
    use = gpu_use(trace)
    if use.gpu_activities or use.launched or not use.runtime_calls:
        return None
    return Insight(
        severity="info",
        title=NOTHING_LAUNCHED_TITLE,
        evidence=gpu_work_text(use, getattr(analysis, "memory", None)),
        suggestion=("If the GPU was meant to compute here, the work ran outside the profiled window (widen the "
                    "schedule's active steps) or on the CPU (check the tensors' device); an allocation-only "
                    "program is read in the Memory view."),
        learn_more=PROFILER_DOCS,
    )


LAUNCH_RULES = (cupti_missing, nothing_launched)

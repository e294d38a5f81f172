"""What a trace says was sent to a GPU: the premise of every "the GPU ..." statement.

A trace without kernel, memcpy or memset events is three different things, told apart by its
CUDA runtime/driver calls (``lab.vocab.is_launch_call``):

* launch calls (cudaLaunchKernel, cudaMemcpyAsync, cudaGraphLaunch …) but no GPU activity:
  work was sent and its activity was lost — CUPTI missing, not permitted, or activities without
  ``ProfilerActivity.CUDA``. The one case for "No GPU activity recorded although a GPU was used".
* calls that launch nothing (an allocation-only program: 467 calls, ``cudaMalloc``,
  ``cudaStreamIsCapturing``, ``cudaDeviceSynchronize``): nothing ran on the GPU, and nothing is
  wrong with CUPTI; the trace is described for what it is, its memory included.
* no CUDA call at all, only ``deviceProperties`` (Kineto lists the host's GPUs in every trace of
  a CUDA build): the program ran on the CPU, or the profile was taken without
  ``ProfilerActivity.CUDA``.

``lab.judge``'s rules on a trace without GPU activity read ``gpu_use`` here (``lab/judge/context.py``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from lab.analysis.columns import gpu_activity_mask, mask_in, texts
from lab.trace import Trace
from lab.units import fmt_mem_bytes
from lab.vocab import LAUNCH_CATS, is_launch_call

__all__ = ["GpuUse", "gpu_use", "gpu_work_text", "memory_text"]

_NAMED_CALLS = 3  # the most frequent call names quoted in a sentence


@dataclass(frozen=True)
class GpuUse:
    """The trace's CUDA calls and GPU activity, counted."""

    runtime_calls: int  # cuda_runtime + cuda_driver events
    launch_calls: int  # of them, calls that put work on a stream
    calls: tuple[tuple[str, int], ...]  # (name, count), most frequent first
    gpu_activities: int  # kernel + gpu_memcpy + gpu_memset events
    devices_listed: int  # deviceProperties entries

    @property
    def launched(self) -> bool:
        return self.launch_calls > 0

    def calls_text(self) -> str:
        named = ", ".join(f"{name} ×{n:,}" for name, n in self.calls[:_NAMED_CALLS])
        more = f" and {len(self.calls) - _NAMED_CALLS} other name(s)" if len(self.calls) > _NAMED_CALLS else ""
        return f"{self.runtime_calls:,} CUDA runtime/driver call(s) ({named}{more})"


def gpu_use(trace: Trace) -> GpuUse:
    ev = trace.events
    rows = np.flatnonzero(mask_in(ev["cat"], LAUNCH_CATS))
    counts = Counter(texts(ev["name"], rows).astype(str).tolist()) if len(rows) else Counter()
    calls = tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return GpuUse(runtime_calls=len(rows), launch_calls=sum(n for name, n in calls if is_launch_call(name)),
                  calls=calls, gpu_activities=int(gpu_activity_mask(trace).sum()),
                  devices_listed=len(trace.meta.device_properties or ()))


def memory_text(memory: Any) -> str:
    """One sentence on profile_memory's records (``Analysis.memory``), or what would give them."""
    if memory is None:
        return "The trace has no memory records: profile_memory=True would show what was allocated."
    parts = [f"{d.device} peaked at {fmt_mem_bytes(d.peak.allocated_bytes)} allocated"
             + (f" ({fmt_mem_bytes(d.max_reserved_bytes)} reserved at most)" if d.max_reserved_bytes else "")
             + f" over {d.allocations:,} allocation(s) and {d.frees:,} free(s)" for d in memory.devices]
    return "Memory: " + "; ".join(parts) + "."


def gpu_work_text(use: GpuUse, memory: Any) -> str:
    """What a trace without GPU activity holds, for the verdict and the insight."""
    return (f"The trace has {use.calls_text()} but none launches a kernel, copy or memset, so nothing ran on "
            f"the GPU; GPU time is not to be judged here. {memory_text(memory)}")

"""Each diagnosis finding → an ``Insight`` whose evidence cites the finding's numbers.

Titles are constant per diagnosis (comparisons match insights across traces by title); the
numbers go into ``evidence``.
"""

from __future__ import annotations

from lab.analysis.diagnoses.capture import EmptyCapture, ProfilerInflation
from lab.analysis.diagnoses.comm import Collectives
from lab.analysis.diagnoses.copies import PageableCopies
from lab.analysis.diagnoses.graphs import GraphReplays
from lab.analysis.diagnoses.host import HOST_GAP_MIN_STRETCH_US, HostGaps, HostSyncs
from lab.analysis.insights.record import Insight
from lab.units import fmt_bytes, fmt_us

__all__ = [
    "collectives_insight", "empty_capture_insight", "graph_replays_insight", "host_gaps_insight",
    "host_syncs_insight", "pageable_copies_insight", "profiler_inflation_insight",
]  # fmt: skip

# Where to read more (the same pages insights.py links; de-duplicate at merge).
TUNING_SYNC = "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization"
HTA_IDLE = "https://hta.readthedocs.io/en/latest/source/features/idle_time_breakdown.html"
PIN_MEMORY_GUIDE = "https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html"
CUDA_GRAPHS = "https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs"
HTA_OVERLAP = "https://hta.readthedocs.io/en/latest/source/features/comm_comp_overlap.html"
PROFILER_SCHEDULE = "https://pytorch.org/docs/stable/profiler.html#torch.profiler.schedule"
PROFILER_RECIPE = "https://pytorch.org/tutorials/recipes/recipes/profiler_recipe.html"


def _pct(value: float) -> str:
    return f"{value:.0f} %" if value >= 10 else f"{value:.1f} %"


def _per_step(steps: int, source: str) -> str:
    if not source:
        return "in the whole trace (it has no ProfilerStep or repeated label to split into steps)"
    return f"over {steps} {'ProfilerStep' if source == 'ProfilerStep' else 'annotated'} step(s)"


def _step_time(source: str) -> str:
    return "step time" if source else "the trace"


def host_syncs_insight(f: HostSyncs) -> Insight:
    parts = "; ".join(f"{src}: {n}× ({fmt_us(blocked)} blocked, GPU then idle {fmt_us(idle)})"
                      for src, n, blocked, idle in f.by_source[:3])
    item = f" {f.item_calls} of them are .item() calls that copy a scalar to the host." if f.item_calls else ""
    per_step = f" (median {f.per_step_median:g}, max {f.per_step_max} per step)" if f.step_source else ""
    return Insight(
        severity=f.severity,
        title="Blocking host syncs leave the GPU idle",
        evidence=(f"{f.count} blocking sync(s) {_per_step(f.steps, f.step_source)}{per_step} held the host "
                  f"{fmt_us(f.blocked_us)}; after each, the GPU sat idle until the host launched again: "
                  f"{fmt_us(f.idle_after_us)} in all (median {fmt_us(f.idle_after_median_us)}), {_pct(f.idle_pct)} "
                  f"of {fmt_us(f.window_us)} of {_step_time(f.step_source)}. By source — {parts}.{item}"),
        suggestion=("Keep values on the GPU inside the loop: accumulate losses/metrics as tensors and call .item() "
                    "or .cpu() once every N steps or at the end; drop torch.cuda.synchronize() from the loop (use "
                    "CUDA events for timing). Each sync empties the GPU's queue, so whatever the host does next — "
                    "launches, Python — runs while the GPU waits."),
        learn_more=TUNING_SYNC,
    )


def host_gaps_insight(f: HostGaps) -> Insight:
    idle = (f" The GPU was idle {fmt_us(f.gpu_idle_us)} of that time, {_pct(f.gpu_idle_pct)} of "
            f"{_step_time(f.step_source)}." if f.gpu_idle_us is not None and f.gpu_idle_pct is not None else "")
    per_step = f"median {fmt_us(f.uncovered_median_us)} per step, " if f.step_source else ""
    return Insight(
        severity=f.severity,
        title="Host work outside any op between steps",
        evidence=(f"{fmt_us(f.uncovered_us)} of host time {_per_step(f.steps, f.step_source)} passed with no op "
                  f"or annotation open on any CPU thread, in {f.stretches} stretch(es) of ≥ "
                  f"{fmt_us(HOST_GAP_MIN_STRETCH_US)} (longest {fmt_us(f.longest_us)}; {per_step}"
                  f"{_pct(f.uncovered_pct)} of {fmt_us(f.period_us)}): pure Python, data loading or logging that "
                  f"the operator table cannot show.{idle}"),
        suggestion=("Find it with with_stack=True (python_function rows) or py-spy; move it off the critical path "
                    "(DataLoader workers with pin_memory, logging every N steps), or keep the GPU queued ahead of "
                    "it by removing syncs so the host work overlaps kernels."),
        learn_more=HTA_IDLE,
    )


def _rate(nbytes: float | None, gbps: float | None) -> str:
    return f"{fmt_bytes(nbytes)} at {gbps:.1f} GB/s" if nbytes is not None and gbps is not None else "bytes unknown"


def pageable_copies_insight(f: PageableCopies) -> Insight:
    pinned = (f" {f.pinned_count} pinned copy(ies): {fmt_us(f.pinned_us)}, {_rate(f.pinned_bytes, f.pinned_gbps)}."
              if f.pinned_count else " No copy used pinned memory.")
    bytes_note = ("" if f.bytes_source else " (this trace's memcpy sizes are not read: record_shapes=True, or "
                  "a loader that keeps Kineto's 'bytes' arg, gives GB/s)")
    return Insight(
        severity=f.severity,
        title="Copies from pageable host memory",
        evidence=(f"{f.count} {'/'.join(f.directions)} memcpy(s) to or from pageable memory took "
                  f"{fmt_us(f.pageable_us)}, {_pct(f.pageable_busy_pct)} of {fmt_us(f.gpu_busy_us)} of GPU busy "
                  f"time: {_rate(f.pageable_bytes, f.pageable_gbps)}{bytes_note}.{pinned} The host waited "
                  f"{fmt_us(f.host_blocked_us)} inside their copy calls: a pageable copy is synchronous even with "
                  f"non_blocking=True."),
        suggestion=("Allocate host tensors in pinned memory — tensor.pin_memory(), or DataLoader(pin_memory=True) — "
                    "and copy with .to('cuda', non_blocking=True) on a side stream, so the copy runs at full link "
                    "speed and overlaps compute; reuse the pinned buffer across steps."),
        learn_more=PIN_MEMORY_GUIDE,
    )


def graph_replays_insight(f: GraphReplays) -> Insight:
    per_step = f" ({f.replays_per_step:.1f} per step)" if f.replays_per_step is not None else ""
    return Insight(
        severity=f.severity,
        title="CUDA graph replays",
        evidence=(f"{f.replays} cudaGraphLaunch replay(s){per_step} ran {f.activities} GPU activities: "
                  f"{f.kernels_per_replay_median:g} per replay (min {f.kernels_per_replay_min}, max "
                  f"{f.kernels_per_replay_max}), {_pct(f.graph_kernel_pct)} of the kernels and "
                  f"{_pct(f.graph_busy_pct)} of GPU busy time. Launch delay per replay (first kernel − "
                  f"cudaGraphLaunch): median {fmt_us(f.launch_delay_median_us)}, max "
                  f"{fmt_us(f.launch_delay_max_us)}; one launch call costs the host "
                  f"{fmt_us(f.launch_call_median_us)}; a replay spans {fmt_us(f.replay_span_median_us)} on the GPU."),
        suggestion=("Read launch cost per replay, not per kernel: the kernels inside a graph were never launched one "
                    "by one, so their start minus the one cudaGraphLaunch is queueing inside the replay. Idle time "
                    "between replays is host work between them (Python, cudagraph-tree bookkeeping, input copies)."),
        learn_more=CUDA_GRAPHS,
    )


def collectives_insight(f: Collectives) -> Insight:
    who = (f"Rank {f.rank} of {f.world_size}" if f.rank is not None and f.world_size else "This process")
    backend = f" ({f.backend})" if f.backend else ""
    calls = ", ".join(f"{n} ×{c}" for n, c in f.calls[:4]) or "none on the host"
    overlap = (f"; {_pct(f.overlap_pct)} of it overlapped compute kernels on the same GPU"
               if f.overlap_pct is not None else "")
    gpu = (f"{f.comm_kernels} NCCL kernel(s) and the copies comm ops launched" if f.comm_kernels
           else "no NCCL kernel; the copies comm ops launched (gloo stages CUDA tensors through the host)")
    return Insight(
        severity=f.severity,
        title="Collective communication",
        evidence=(f"{who}{backend}: {gpu} took {fmt_us(f.comm_gpu_us)}, {_pct(f.comm_busy_pct)} of GPU busy "
                  f"time{overlap}. Host comm "
                  f"ranges cover {fmt_us(f.host_comm_us)}, {_pct(f.host_comm_pct)} of step time. Calls: {calls}."),
        suggestion=("Overlap communication with compute: DDP buckets gradients (bucket_cap_mb) so all-reduce starts "
                    "during backward; use no_sync() for gradient accumulation; with gloo on GPUs the reduction runs "
                    "on the CPU — use NCCL for CUDA tensors. Compare ranks' traces to find a straggler."),
        learn_more=HTA_OVERLAP,
    )


def empty_capture_insight(f: EmptyCapture) -> Insight:
    steps = ", ".join(f.profiler_steps) if f.profiler_steps else "no ProfilerStep"
    cats = ", ".join(f"{n} {c}" for c, n in f.categories)
    return Insight(
        severity=f.severity,
        title="The capture window recorded no ops",
        evidence=(f"The trace holds {f.ops} op(s){': ' + ', '.join(f.op_names) if f.op_names else ''}, "
                  f"{f.gpu_activities} GPU activities and {f.runtime_calls} CUDA runtime calls over "
                  f"{fmt_us(f.span_us)}; it recorded {steps} and {f.overhead_events} profiler overhead event(s) "
                  f"(by category: {cats}). No step ran inside the schedule's active window: the profile "
                  f"ended before it, or as it opened."),
        suggestion=("Call prof.step() once per iteration and run at least wait + warmup + active iterations inside "
                    "the profile (or export from on_trace_ready); the GPU activity is missing because nothing ran, "
                    "not because of CUPTI."),
        learn_more=PROFILER_SCHEDULE,
    )


def profiler_inflation_insight(f: ProfilerInflation) -> Insight:
    said = []
    if f.with_stack:
        said.append(f"with_stack recorded {f.python_events:,} python_function events ({f.python_per_op:.1f} per op); "
                    f"{_pct(f.python_only_pct)} of the Python thread's time is in frames while no op runs")
    if f.profile_memory:
        said.append(f"profile_memory recorded {f.memory_events:,} allocation events" if f.memory_events
                    else "profile_memory was on")
    return Insight(
        severity=f.severity,
        title="Profiler options inflate host times",
        evidence=("; ".join(said) + ". Each op's CPU time includes the cost of recording its stack / allocations "
                  "(on the H200 corpus with_stack made small host-bound steps 1.3–1.4× longer), and python_function "
                  "frames are call stacks, not ops: counting them as ops double-counts host time."),
        suggestion=("Read host (CPU) times from a profile without with_stack and profile_memory; keep those options "
                    "for finding where an op is called or who allocates. Device (kernel) times are not affected."),
        learn_more=PROFILER_RECIPE,
    )

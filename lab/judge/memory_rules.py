"""Memory findings from profile_memory's records (``TraceContext.memory``, the analysis's
``MemoryAnalysis``, and ``TraceContext.oom``, its "[OutOfMemory]" records).

An allocation refused stops the run: its saving is the whole window (scope "once"). The rest
cost memory, not time a fix would give back, so they are notes (scope "note", no saving): memory
that grows step after step, reserved far above allocated, allocator churn (its time, where the
GPU waited for it, is ``allocator_calls``'s), and what ran at the peak.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lab.analysis.memory.analyze import SMALL_ALLOCATION_BYTES, DeviceMemory, MemoryAnalysis
from lab.explain.explanation import Explanation
from lab.judge.context import TraceContext
from lab.judge.finding import Finding
from lab.units import fmt_mem_bytes, fmt_us_fixed

__all__ = ["CHURN_MIN_SMALL_PER_STEP", "FRAGMENTATION_ABS_GAP_BYTES", "FRAGMENTATION_MIN_GAP_BYTES",
           "FRAGMENTATION_RATIO", "LEAK_MIN_STEPS", "MEMORY_RULES", "MEMORY_RULE_NAMES", "allocator_churn",
           "memory_growth", "out_of_memory", "peak_owner", "reserved_far_above_allocated"]

# A training or inference loop in its steady state ends every step with the same tensors alive
# (weights, gradients, optimizer state): on every profile_memory trace of the corpus the level at
# each step's end is identical to the byte (H200 transformer step: 1,251,686,400 B at all 4 step
# ends; the seed: 100,671,488 B at all 3). One rise can be the first iteration's one-time
# allocations (AdamW's exp_avg / exp_avg_sq at the first step(), .grad at the first backward);
# a rise at every step of at least three is a trend: something keeps references (a loss kept as a
# tensor in a list, a cache that grows, a graph retained with retain_graph=True).
LEAK_MIN_STEPS = 3
# The caching allocator keeps what it reserved; the corpus's training steps hold 1.08–1.10× their
# peak allocation (transformer 3.30 / 3.07 GiB, Llama 354 / 323 MiB, ResNet-50 498 / 452 MiB): size
# rounding and the 2 MiB / 20 MiB segments. Reserved 1.5× the peak means a third of what the
# process holds never held a tensor even at the peak: blocks split into sizes nothing reuses
# (fragmentation) or an earlier, larger working set. Below 512 MiB of gap it matters little on a
# GPU of tens of GB, and small programs always show a few segments of rounding.
FRAGMENTATION_RATIO = 1.5
FRAGMENTATION_MIN_GAP_BYTES = 512 << 20
# A ratio alone misses a big job's fragmentation: 5.25 GiB reserved over 3.60 GiB allocated is
# 1.46×, yet 1.65 GiB never held a tensor. A gap of at least 1 GiB (4× the corpus's largest
# rounding gap: the H200 transformer's 0.23 GiB) counts whatever the ratio when the allocator
# kept reserving after frees — new segments for requests its cache held enough free bytes for
# (``DeviceMemory.fragmented_growth_bytes``; 0 B on every profile_memory trace of the corpus), so
# the gap is blocks it could not reuse, not an earlier larger working set.
FRAGMENTATION_ABS_GAP_BYTES = 1 << 30
# Allocations of ≤ 1 MiB (the caching allocator's small pool) per step: the corpus's training
# steps make 197 (Llama, 342 in all) to 455 (the H200 transformer, 1,055 in all). Thousands per
# step are mostly the temporaries of unfused elementwise ops, each a dispatcher + allocator round
# trip on the host, which fusion (torch.compile) or in-place ops remove.
CHURN_MIN_SMALL_PER_STEP = 1_000

CUDA_MEMORY_DOCS = "https://pytorch.org/docs/stable/torch_cuda_memory.html"
ALLOC_CONF_DOCS = "https://pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf"
COMPILE_TUTORIAL = "https://pytorch.org/tutorials/intermediate/torch_compile_tutorial.html"


def _who_allocated(device: str, what: str) -> str:
    """Where to see which tensors ``what``: a CUDA allocator snapshot names them on a GPU; on the
    CPU there is none (torch.cuda.memory records CUDA allocations only), so the profiler's own
    per-op memory columns and memory timeline are the tool there."""
    if device != "cpu":
        return f"a snapshot from torch.cuda.memory._record_memory_history() names the tensors {what}."
    return (f"on the CPU no allocator snapshot exists: the Table's memory columns (profile_memory with "
            f"record_shapes and with_stack) and prof.export_memory_timeline() show which ops' tensors {what}.")


def _memory(ctx: TraceContext) -> MemoryAnalysis | None:
    return ctx.memory


def _step_rows(memory: MemoryAnalysis, device: str):
    steps = memory.steps
    return steps[steps["device"] == device]


def _note(rule: str, title: str, ex: Explanation, **fields) -> Finding:
    return Finding(rule, "allocator", title, saving_us=0.0, base_us=ex.attribution.step_us, scope="note",
                   **fields)


def out_of_memory(ex: Explanation, ctx: TraceContext) -> Finding | None:
    """An "[OutOfMemory]" record: what was asked, what the device held, and what was running. The
    run stopped there: the whole window is what a fix gives back."""
    if not ctx.oom:
        return None
    first = ctx.oom[0]
    where = [f"inside {first.op}"] if first.op else []
    where += [f"in record_function '{first.annotation}'"] if first.annotation else []
    where += [f"during step {first.step + 1}"] if first.step >= 0 else []
    more = f" ({len(ctx.oom)} refusals in the trace; the first is shown)" if len(ctx.oom) > 1 else ""
    # Asked far more than was ever reserved: a size bug (a wrong shape or dtype), not a close call.
    far = first.requested_bytes > 4 * max(first.reserved_bytes, 1)
    window = float(ex.attribution.steps["wall_us"].sum())
    return Finding(
        "out_of_memory", "allocator", "Out of memory: an allocation was refused",
        premise="an \"[OutOfMemory]\" record in the trace: the caching allocator refused a request and the run "
                "stopped there",
        evidence=(f"{first.device}: a request for {fmt_mem_bytes(first.requested_bytes)} was refused at "
                  f"{fmt_us_fixed(first.ts_us)}{(' ' + ', '.join(where)) if where else ''}, with "
                  f"{fmt_mem_bytes(first.allocated_bytes)} allocated and {fmt_mem_bytes(first.reserved_bytes)} "
                  f"reserved{more}"),
        suggestion=(("The request is many times what the process ever held: check the shape and dtype of the "
                     "tensor made there before anything else. " if far else "")
                    + "Then lower what is alive at that moment (batch size, activations kept for backward with "
                      "torch.utils.checkpoint, fp32 tensors that could be bf16)"
                    + ("; with reserved far above allocated, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; "
                       if first.device != "cpu" else "; ") + _who_allocated(first.device, "alive then")),
        saving_us=window, base_us=window, scope="once", learn_more=CUDA_MEMORY_DOCS)


def memory_growth(ex: Explanation, ctx: TraceContext) -> Finding | None:
    """A note: allocated memory at each step's end higher than at the step before, at every step."""
    memory = _memory(ctx)
    if memory is None or memory.steps.empty:
        return None
    for dev in memory.devices:
        rows = _step_rows(memory, dev.device)
        ends = rows["end_allocated_bytes"].to_numpy(dtype=np.int64)
        if len(ends) < LEAK_MIN_STEPS or not (np.diff(ends) > 0).all():
            continue
        per_step = int(ends[-1] - ends[0]) / (len(ends) - 1)
        return _note(
            "memory_growth", "Memory grows step after step: a leak candidate", ex,
            premise=f"the allocated level at each step's end rises at every one of ≥ {LEAK_MIN_STEPS} steps "
                    "(a steady loop ends every step with the same tensors alive)",
            evidence=(f"On {dev.device} the allocated memory at the end of each of the {len(ends)} steps rose every "
                      f"step, from {fmt_mem_bytes(ends[0])} to {fmt_mem_bytes(ends[-1])} (+{fmt_mem_bytes(per_step)} "
                      f"per step); the peak rose from {fmt_mem_bytes(int(rows['peak_allocated_bytes'].iloc[0]))} "
                      f"to {fmt_mem_bytes(int(rows['peak_allocated_bytes'].iloc[-1]))}"),
            suggestion=("Look for tensors kept across steps: a loss or metric stored as a tensor (append loss.item(), "
                        "not loss), outputs kept in a list, a cache that never evicts, retain_graph=True; "
                        + _who_allocated(dev.device, "stay")),
            learn_more=CUDA_MEMORY_DOCS)
    return None


def reserved_far_above_allocated(ex: Explanation, ctx: TraceContext) -> Finding | None:
    """A note: the caching allocator holds much more than the peak of live tensors (fragmentation)."""
    memory = _memory(ctx)
    if memory is None:
        return None
    for dev in memory.devices:
        peak = dev.peak.allocated_bytes
        gap = dev.max_reserved_bytes - peak
        if dev.device == "cpu" or peak <= 0 or gap < FRAGMENTATION_MIN_GAP_BYTES:
            continue
        by_ratio = dev.max_reserved_bytes >= FRAGMENTATION_RATIO * peak
        by_gap = gap >= FRAGMENTATION_ABS_GAP_BYTES and dev.fragmented_growth_bytes > 0
        if not (by_ratio or by_gap):
            continue
        growth = (f". The allocator reserved {fmt_mem_bytes(dev.fragmented_growth_bytes)} more after frees, for "
                  f"requests its cache already held enough free bytes for" if dev.fragmented_growth_bytes else "")
        return _note(
            "reserved_far_above_allocated", "Reserved memory far above allocated: fragmentation", ex,
            premise=f"a GPU's reserved bytes ≥ {FRAGMENTATION_RATIO:g}× its peak of live tensors with a gap of "
                    f"≥ {fmt_mem_bytes(FRAGMENTATION_MIN_GAP_BYTES)}, or a gap of ≥ "
                    f"{fmt_mem_bytes(FRAGMENTATION_ABS_GAP_BYTES)} grown after frees",
            evidence=(f"On {dev.device} the allocator reserved up to {fmt_mem_bytes(dev.max_reserved_bytes)} "
                      f"while live tensors peaked at {fmt_mem_bytes(peak)} ({dev.max_reserved_bytes / peak:.2f}×): "
                      f"{fmt_mem_bytes(gap)} held but never used at once{growth}"),
            suggestion=("Run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so segments grow instead of "
                        "splitting; keep tensor sizes steady across steps (pad variable sequence lengths to a few "
                        "buckets); avoid torch.cuda.empty_cache() in the loop."),
            learn_more=ALLOC_CONF_DOCS)
    return None


def allocator_churn(ex: Explanation, ctx: TraceContext) -> Finding | None:
    """A note: thousands of small allocations every step."""
    memory = _memory(ctx)
    if memory is None or memory.steps.empty:
        return None
    for dev in memory.devices:
        rows = _step_rows(memory, dev.device)
        small = float(np.median(rows["small_allocations"].to_numpy())) if len(rows) else 0.0
        if small < CHURN_MIN_SMALL_PER_STEP:
            continue
        total = float(np.median(rows["allocations"].to_numpy()))
        churned = fmt_mem_bytes(float(np.median(rows["allocated_bytes"])))
        return _note(
            "allocator_churn", "Allocator churn: many small allocations per step", ex,
            premise=f"a step makes ≥ {CHURN_MIN_SMALL_PER_STEP:,} allocations of ≤ "
                    f"{fmt_mem_bytes(SMALL_ALLOCATION_BYTES)} (median over the steps)",
            evidence=(f"On {dev.device} a step makes {small:,.0f} allocations of ≤ "
                      f"{fmt_mem_bytes(SMALL_ALLOCATION_BYTES)} (median over {len(rows)} steps; {total:,.0f} "
                      f"allocations in all), {churned} allocated per step"),
            suggestion=("Fuse the small elementwise ops that make these temporaries (torch.compile), use in-place or "
                        "out= variants in hot loops, and keep shapes fixed so cached blocks are reused."),
            learn_more=COMPILE_TUTORIAL)
    return None


def _where(dev: DeviceMemory) -> str:
    peak = dev.peak
    parts = []
    if peak.op:
        parts.append(f"inside {peak.op}")
    if peak.annotation:
        parts.append(f"in record_function '{peak.annotation}'")
    if peak.step >= 0:
        parts.append(f"during step {peak.step + 1}")
    return (" " + ", ".join(parts)) if parts else " outside any op"


def peak_owner(ex: Explanation, ctx: TraceContext) -> Finding | None:
    """A note: where the highest allocation level of the main device was reached, and what ran then."""
    memory = _memory(ctx)
    if memory is None:
        return None
    dev = memory.main
    peak = dev.peak
    before = dev.start_allocated_bytes
    reserved = f" ({fmt_mem_bytes(peak.reserved_bytes)} reserved)" if peak.reserved_bytes else ""
    # A GPU allocator's totals are absolute; the CPU's, as the profiler reports them, start at 0.
    baseline = (f"; {fmt_mem_bytes(before)} were already allocated when the profile began (weights, optimizer "
                f"state, inputs), so the profiled work added {fmt_mem_bytes(peak.allocated_bytes - before)} on top"
                if dev.device != "cpu" else "")
    return _note(
        "peak_owner", "Memory peak and what was running", ex,
        premise="the trace has profile_memory's allocator records",
        evidence=(f"{dev.device} peaked at {fmt_mem_bytes(peak.allocated_bytes)} allocated{reserved} at "
                  f"{fmt_us_fixed(peak.ts_us)}{_where(dev)}{baseline}"),
        suggestion=("To lower the peak, shrink what is alive at that moment: activations kept for backward "
                    "(torch.utils.checkpoint), the batch size, fp32 tensors that could be bf16; the Memory view shows "
                    "the curve, and " + _who_allocated(dev.device, "alive then")),
        learn_more=CUDA_MEMORY_DOCS)


MEMORY_RULES: tuple[Callable[[Explanation, TraceContext], Finding | None], ...] = (
    out_of_memory, memory_growth, reserved_far_above_allocated, allocator_churn, peak_owner,
)
# The rules' names: the Memory view lists the findings these made.
MEMORY_RULE_NAMES = tuple(rule.__name__ for rule in MEMORY_RULES)

"""The rules: each a pure function of an ``Explanation`` returning a ``Finding`` or None.

Every rule checks a premise before it fires and says it in the finding: the symptom alone
(a DataLoader in the trace, fp32 GEMMs, many kernels) is never enough. The saving is a
what-if on the attribution, in the way HTA's critical path analysis asks it: a host cause is
time the GPU sat idle waiting for it, so removing it shortens the step by that much; GPU work
below its roof saves the difference to the roof.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from lab.explain.classes import WORK_CLASSES
from lab.explain.explanation import Explanation
from lab.explain.unrecorded import AFTER_COPY_US, LONG_HOST_GAP_US, NEXT_TO_INPUT_US
from lab.judge.finding import MATERIAL_PCT, Finding
from lab.judge.slow_step import slow_step
from lab.units import fmt_us

__all__ = ["AT_ROOF_PCT", "BELOW_ROOF_PCT", "PINNED_COPY_GBS", "RULES", "SLOW_HOST_OP_US", "TINY_KERNEL_US"]

# A kernel under 20 µs is within a few launch latencies (~5 µs each, plus Python and dispatch):
# a loop of such kernels is launch-bound. The lab's 64³ GEMM runs 1.9 µs, a 256² add ~2 µs.
TINY_KERNEL_US = 20.0
# An op whose host side takes ≥ 100 µs a call is doing work of its own there: dispatching an
# aten op costs ~5–20 µs on the H200 host (the lab's samples: aten::mm 15–30 µs with its launch).
SLOW_HOST_OP_US = 100.0
# Attention score matrices from this length on (shorter ones fit on chip either way).
ATTENTION_MIN_LEN = 128
# A fused attention kernel's share of the dense peak, forward and backward together: cuDNN SDPA
# on the H200 ran a 8×16×2048×64 bf16 causal layer at 74 % (forward) and 25 % (backward) of its
# roof (tests/data/explain attention_sdpa), about half overall.
SDPA_REACHABLE_PCT = 50.0
# The backward pass of fused attention does 2.5× the forward's FLOPs (it recomputes the scores).
SDPA_BACKWARD_FLOPS = 2.5
# Ops under 60 % of their roof have room: tuned kernels reach 76–85 % of the bf16 roof
# (4096³ on the H200: 788–817 of 989 TFLOP/s) and ~90 % of HBM (an 8192² add: 4.3 of 4.8 TB/s).
BELOW_ROOF_PCT = 60.0
# … and the fix is taken to reach these shares of it (the same measured figures).
GEMM_REACHABLE_PCT = 80.0
MEMORY_REACHABLE_PCT = 90.0
# Work at ≥ 70 % of its roof has little left to gain: only doing less of it helps.
AT_ROOF_PCT = 70.0
# A pinned host→device copy on the H200 host: the lab's own sample (copy_pinned, 201 MB in
# 3.67 ms) moved 54.8 GB/s; a pageable one 7.2 GB/s (copy_pageable).
PINNED_COPY_GBS = 54.8


# What launch_bound's host times include that an unprofiled run does not.
HOST_TIMES_CAVEAT = ("Kernel durations come from the GPU's clock and hold without the profiler; the host's times "
                     "do not: the profiler adds its own cost to every op it records and CUPTI to every launch call, "
                     "so the GPU's wait for the host reads larger profiled than in an unprofiled run (compare the "
                     "Summary's per-iteration times with and without the profiler).")


def _literal(text: str):
    try:
        return ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return None


def _step(ex: Explanation) -> float:
    return ex.attribution.step_us


def _of_step(ex: Explanation) -> str:
    """"of the 2.94 ms step", or "of the 9.74 ms window" where the trace has no steps (the
    attribution's one period is then the whole trace)."""
    return f"of the {fmt_us(_step(ex))} {'window' if ex.attribution.source == 'window' else 'step'}"


def _cause_us(ex: Explanation, key: str) -> float:
    return float(ex.attribution.median_us()[key])


def _material(us: float, base: float) -> bool:
    return base > 0 and 100.0 * us / base >= MATERIAL_PCT


def _cause_finding(ex: Explanation, key: str, rule: str, title: str, *, premise: str, what: str,
                   suggestion: str, learn_more: str = "") -> Finding | None:
    """A finding whose saving is one host cause's median time per step (the GPU idle waiting for
    it): fires when that is ≥ MATERIAL_PCT of the step."""
    us, step = _cause_us(ex, key), _step(ex)
    if not _material(us, step):
        return None
    return Finding(rule, key, title, premise=f"{premise} ≥ {MATERIAL_PCT:.0f} % of the step",
                   evidence=f"{fmt_us(us)} {_of_step(ex)} {what}", suggestion=suggestion,
                   saving_us=us, base_us=step, learn_more=learn_more)


def input_pipeline(ex: Explanation) -> Finding | None:
    gpu = ex.attribution.has_gpu
    total = float(ex.attribution.total_us()["input"])
    unrecorded = ex.attribution.input_unrecorded_us
    around = (f"; {100.0 * unrecorded / total:.0f} % of it in no recorded event right before or after the "
              "DataLoader's __next__ (iter(loader) starting its workers, or an iterator shutting them down)"
              if total > 0 and _material(unrecorded, total) else "")
    return _cause_finding(
        ex, "input", "input_pipeline", "Input pipeline starves the GPU" if gpu else "Input pipeline holds up the step",
        premise=("the GPU sits idle while the step's thread waits in the DataLoader / DataPipe" if gpu else
                 "the step's thread waits in the DataLoader / DataPipe instead of computing")
                + f" (or is in no recorded event within {NEXT_TO_INPUT_US:.0f} µs of its __next__, in the step)",
        what="(median) waiting for the next batch" + (", GPU idle" if gpu else "") + around,
        suggestion=("Make the DataLoader's iterator once, not every step: each iter(loader) starts its workers "
                    "anew (persistent_workers=True keeps them across epochs). " if around else "")
                   + "Load batches in parallel with the " + ("GPU" if gpu else "step") + ": DataLoader(num_workers=N, "
                   + ("pin_memory=True, " if gpu else "") + "persistent_workers=True, prefetch_factor=2+); move "
                   "decoding/augmentation off the step's thread.",
        learn_more="https://pytorch.org/docs/stable/data.html#multi-process-data-loading")


def python_overhead(ex: Explanation) -> Finding | None:
    """A CPU trace's launch-bound: no GPU waits, but the step's time between its ops is the
    interpreter's (short stretches in no op; a long one is host time nothing recorded explains)."""
    if ex.attribution.has_gpu:
        return None  # on a GPU trace the GPU's wait for the host is launch_bound's
    return _cause_finding(
        ex, "python", "python_overhead", "Python between ops holds the step",
        premise="the step's thread runs Python between its ops (stretches under "
                f"{LONG_HOST_GAP_US / 1e3:.0f} ms in no op)",
        what="in Python between ops",
        suggestion="Fewer, larger ops: vectorise the Python loop over tensors (one op on a batch instead of one per "
                   "item), build tensors once instead of from Python lists each step, or let torch.compile trace "
                   "the loop away.",
        learn_more="https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html")


def compilation(ex: Explanation) -> Finding | None:
    steps = ex.attribution.steps
    per = steps["compile_us"].to_numpy()
    total, window = float(per.sum()), float(steps["wall_us"].sum())
    if not _material(total, window):
        return None
    compiling = int((per > 0).sum())
    again = compiling > 1 and ex.attribution.source != "window"
    what = (f"torch.compile compiled in {compiling} steps (recompiles)" if again
            else "torch.compile compiled inside the profiled window")
    fix = ("Recompiles: mark the changing dimension dynamic (torch._dynamo.mark_dynamic) or pad inputs to a few "
           "shapes; TORCH_LOGS=recompiles says why each one happened." if again else
           "Warm up before profiling: call the compiled function once (per input shape) before the profiler's "
           "window, or use schedule(wait=1, warmup=1, active=N) so the first call falls outside it.")
    return Finding(
        "compilation", "compile", "Compilation inside the window" if not again else "Recompiles",
        premise=f"Dynamo/Inductor compile events hold ≥ {MATERIAL_PCT:.0f} % of the window",
        evidence=f"{what}: {fmt_us(total)} of the {fmt_us(window)} window",
        suggestion=fix, saving_us=total, base_us=window, scope="once",
        learn_more="https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html")


def sync_waits(ex: Explanation) -> Finding | None:
    us, step = _cause_us(ex, "sync"), _step(ex)
    if not ex.attribution.has_gpu or not _material(us, step):
        return None
    sources = ", ".join(f"{name} {fmt_us(t)}" for name, t in ex.attribution.sync_sources[:3])
    return Finding(
        "sync_waits", "sync", "The GPU drains at each synchronisation",
        premise="the GPU idles after a host synchronize while the host catches up, "
                f"≥ {MATERIAL_PCT:.0f} % of the step",
        evidence=f"{fmt_us(us)} {_of_step(ex)}; by caller (whole window): {sources}",
        suggestion="Keep values on the GPU inside the loop (accumulate a loss tensor, .item() once after it); "
                   "avoid .item(), .cpu(), .nonzero() and torch.cuda.synchronize() per step.",
        saving_us=us, base_us=step,
        learn_more="https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#avoid-unnecessary-cpu-gpu-synchronization")


def optimizer_loop(ex: Explanation) -> Finding | None:
    us, step = _cause_us(ex, "optimizer"), _step(ex)
    facts = ex.launches
    if not _material(us, step) or facts.optimizer_kernels == 0:
        return None
    if facts.optimizer_multi_tensor >= facts.optimizer_kernels / 2:
        return None  # already foreach / fused: the premise (a per-parameter loop) does not hold
    n_steps = max(len(ex.attribution.steps), 1)
    return Finding(
        "optimizer_loop", "optimizer", "The optimizer steps one parameter at a time",
        premise="the optimizer step's host time holds the GPU idle and most of its kernels are per-parameter "
                "(no foreach / fused kernels)",
        evidence=f"{fmt_us(us)} {_of_step(ex)} inside the optimizer, GPU idle; "
                 f"{facts.optimizer_kernels // n_steps:,} kernels per step, "
                 f"{facts.optimizer_multi_tensor:,} of them multi-tensor",
        suggestion="Use the foreach or fused implementation: torch.optim.Adam(params, foreach=True) or "
                   "fused=True (one launch per group of tensors instead of several per parameter).",
        saving_us=us, base_us=step, learn_more="https://pytorch.org/docs/stable/optim.html#algorithms")


def _slow_host_ops(ex: Explanation) -> list[tuple[str, float, float]]:
    """Every op whose host side, per call, is far above dispatch cost: (name, µs per step, calls
    per step), medians over the steps, most time first."""
    return [(name, us, calls) for name, us, calls in ex.attribution.dispatch_sources
            if calls and us / calls >= SLOW_HOST_OP_US]


def slow_host_op(ex: Explanation) -> Finding | None:
    found = _slow_host_ops(ex)
    step = _step(ex)
    us = float(sum(t for _, t, _ in found))
    if not found or not _material(us, step):
        return None
    name, first_us, calls = found[0]
    named = [n for n, _, _ in found[:3]]
    title = (f"{name} is slow on the host" if len(found) == 1 else
             f"{', '.join(named)}{' and more' if len(found) > 3 else ''} are slow on the host")
    each = "; ".join(f"{n}: {fmt_us(t / c)} per call × {c:g}" for n, t, c in found[:3])
    return Finding(
        "slow_host_op", "dispatch", title,
        premise=f"ops that spend ≥ {SLOW_HOST_OP_US:.0f} µs per call on the host with the GPU idle (an op's host "
                "side is usually 5–20 µs)",
        evidence=f"{fmt_us(us)} of the {fmt_us(step)} step with the GPU idle in {len(found)} such op(s) "
                 f"({each}; medians over the steps)",
        suggestion="Find what each op does on the host (with_stack=True, or the op's children in the Timeline): "
                   "math on CPU tensors (an op that launches no kernel runs on the host: create its tensors on "
                   "the device, or compute the result once before the loop), a library building a plan for each "
                   "new shape (cuDNN attention with a growing length: pick another SDPA backend or pad to a few "
                   "lengths), a CPU fallback, a compiled region's guards, or a copy to the host.",
        saving_us=us, base_us=step)


def launch_bound(ex: Explanation) -> Finding | None:
    med = ex.attribution.median_us()
    slow = float(sum(t for _, t, _ in _slow_host_ops(ex)))  # slow_host_op's, not launch overhead
    us, step = float(med["launch"] + med["dispatch"] + med["python"]) - slow, _step(ex)
    tiny = ex.launches.median_kernel_us
    if not ex.attribution.has_gpu or not _material(us, step) or not (tiny < TINY_KERNEL_US):
        return None
    return Finding(
        "launch_bound", "launch", "Launch-bound: the GPU waits for the host between tiny kernels",
        premise=f"GPU idle while the host launches, dispatches or runs Python ≥ {MATERIAL_PCT:.0f} % of the step, "
                f"and the median kernel is under {TINY_KERNEL_US:.0f} µs",
        evidence=f"{fmt_us(us)} {_of_step(ex)} (launch {fmt_us(float(med['launch']))}, dispatch "
                 f"{fmt_us(float(med['dispatch']) - slow)}, Python {fmt_us(float(med['python']))}); median kernel "
                 f"{fmt_us(tiny)} over {ex.launches.gpu_activities:,} GPU activities",
        suggestion=_launch_advice(ex),
        saving_us=us, base_us=step, learn_more="https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs",
        caveat=HOST_TIMES_CAVEAT)


def _launch_advice(ex: Explanation) -> str:
    """Fewer, larger launches; a CUDA graph only where the step can be captured: a step that
    synchronizes (``.item()``, ``.cpu()``, ``nonzero``) cannot be, so the syncs go first."""
    if ex.attribution.sync_sources:
        callers = ", ".join(name for name, _ in ex.attribution.sync_sources[:2])
        return ("Launch fewer, larger kernels: fuse with torch.compile, or batch the work. A CUDA graph cannot "
                f"capture this step while it synchronizes ({callers}): keep those values on the GPU first, "
                "then capture the step (torch.cuda.graphs, or torch.compile(mode='reduce-overhead')).")
    return ("Launch fewer, larger kernels: capture the step in a CUDA graph (torch.cuda.graphs, or "
            "torch.compile(mode='reduce-overhead')), fuse with torch.compile, or batch the work.")


def pageable_copies(ex: Explanation) -> Finding | None:
    facts = ex.launches
    step = _step(ex)
    n_steps = max(len(ex.attribution.steps), 1)
    per_step = facts.pageable_copy_us / n_steps
    if not _material(per_step, step) or facts.pageable_copy_bytes <= 0:
        return None
    pinned_us = facts.pageable_copy_bytes / n_steps / (PINNED_COPY_GBS * 1e3)
    rate = facts.pageable_copy_bytes / facts.pageable_copy_us / 1e3
    # A pageable copy blocks the host for its whole length; pinned with non_blocking=True it runs
    # beside the host's work. The step becomes the longer of the host's other work and the GPU's
    # work with the copies at the pinned rate.
    med = ex.attribution.median_us()
    gpu_other = float(sum(med[c.key] for c in WORK_CLASSES)) - per_step
    after = max(step - per_step, max(gpu_other, 0.0) + pinned_us)
    return Finding(
        "pageable_copies", "copy", "Copies from pageable host memory",
        premise=f"host↔device copies from pageable memory take ≥ {MATERIAL_PCT:.0f} % of the step",
        evidence=f"{fmt_us(per_step)} {_of_step(ex)} at {rate:,.1f} GB/s; pinned memory moved "
                 f"{PINNED_COPY_GBS:g} GB/s on the same host",
        suggestion="Pin the host buffer (tensor.pin_memory(), DataLoader(pin_memory=True)) and copy with "
                   "non_blocking=True so the copy overlaps compute.",
        saving_us=max(step - after, 0.0), base_us=step,
        learn_more="https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html")


def _roof_rows(ex: Explanation, *, classes: tuple[str, ...], dtype: str | None = None):
    r = ex.roofs
    if not len(r) or ex.peak is None:
        return r.iloc[0:0]
    keep = r["op_class"].isin(classes) & np.isfinite(r["pct_of_roof"].to_numpy(float))
    if dtype is not None:
        keep &= r["dtype"] == dtype
    return r[keep]


def below_roof(ex: Explanation) -> Finding | None:
    # GEMMs are gemm_below_roof's (lab/judge/gemm_rules.py): judged per kernel at their own intensity.
    rows = _roof_rows(ex, classes=("attention", "normalization", "softmax", "elementwise", "reduction", "copy"))
    rows = rows[(rows["pct_of_roof"] < BELOW_ROOF_PCT) & rows["bound"].isin(["compute-bound", "memory-bound"])]
    step, n_steps = _step(ex), max(len(ex.attribution.steps), 1)
    if not len(rows) or ex.peak is None:
        return None
    reach = np.where(rows["bound"] == "compute-bound", GEMM_REACHABLE_PCT, MEMORY_REACHABLE_PCT)
    gain = rows["gpu_us"].to_numpy(float) * (1 - rows["pct_of_roof"].to_numpy(float) / reach)
    us = float(np.clip(gain, 0, None).sum()) / n_steps
    if not _material(us, step):
        return None
    top = rows.assign(gain=gain).sort_values("gain", ascending=False).head(3)
    listed = "; ".join(f"{r.name.rsplit('::', 1)[-1]} {r.bound.split('-')[0]}-bound at {r.pct_of_roof:.0f} % of roof"
                       f" ({fmt_us(r.gpu_us / n_steps)}/step)" for r in top.itertuples())
    return Finding(
        "below_roof", "roof", "Ops below their roof",
        premise=f"ops that are compute- or memory-bound (not latency) reach under {BELOW_ROOF_PCT:.0f} % of their "
                f"roof and the gap is ≥ {MATERIAL_PCT:.0f} % of the step",
        evidence=listed,
        suggestion="Fuse memory-bound chains (torch.compile), use the fused kernels (F.layer_norm, "
                   "F.scaled_dot_product_attention, fused softmax), keep tensors contiguous, and use shapes that "
                   "are multiples of 64 for GEMMs.",
        saving_us=us, base_us=step)


def _scores_shape(dims_text: str) -> tuple[int, int, int] | None:
    """(batch×heads, L, S) of a softmax input that is an attention score matrix, else None."""
    dims = _literal(dims_text)
    if not isinstance(dims, list) or not dims or not isinstance(dims[0], list) or len(dims[0]) < 3:
        return None
    first = dims[0]
    if not all(isinstance(x, int) for x in first) or min(first[-2:]) < ATTENTION_MIN_LEN:
        return None
    return int(np.prod(first[:-2])), first[-2], first[-1]


def _has_scores(dims_text: str, ls: tuple[int, int]) -> bool:
    dims = _literal(dims_text)
    return isinstance(dims, list) and any(isinstance(d, list) and len(d) >= 2 and tuple(d[-2:]) == ls for d in dims)


def attention_written_out(ex: Explanation) -> Finding | None:
    """Attention as matmul → softmax → matmul materialises the L×S score matrix and reads and
    writes it once per op of the chain; a fused kernel (SDPA) keeps it on chip."""
    r, peak = ex.roofs, ex.peak
    if not len(r) or peak is None or (r["op_class"] == "attention").any():
        return None
    soft = r[(r["op_class"] == "softmax") & ~r["name"].str.contains("backward")]
    shapes = [s for s in (_scores_shape(d) for d in soft["input_dims"]) if s is not None]
    if not shapes:
        return None
    bh, length, keys = shapes[0]
    chain = r[[_has_scores(d, (length, keys)) for d in r["input_dims"]]]
    head_dim = next((d[1][-1] for d in map(_literal, r.loc[r["op_class"] == "gemm", "input_dims"])
                     if isinstance(d, list) and len(d) >= 2 and isinstance(d[0], list) and isinstance(d[1], list)
                     and len(d[0]) >= 2 and tuple(d[0][-2:]) == (length, keys) and len(d[1]) >= 2), None)
    dtype = next((d for d in r.loc[r["op_class"] == "gemm", "dtype"] if d), "")
    rate = peak.peak_tflops(dtype) if dtype else None
    n_steps, step = max(len(ex.attribution.steps), 1), _step(ex)
    if head_dim is None or not rate:
        return None
    training = r["name"].str.contains("softmax_backward").any()
    flops = 4.0 * bh * length * keys * head_dim * (1 + SDPA_BACKWARD_FLOPS if training else 1)
    fused_us = flops / (SDPA_REACHABLE_PCT / 100 * rate * 1e6)
    chain_us = float(chain["gpu_us"].sum()) / n_steps
    if not _material(chain_us - fused_us, step):
        return None
    return Finding(
        "attention_written_out", "attention", "Attention written out: the score matrix is materialised",
        premise=f"a softmax over a {length}×{keys} score matrix between GEMMs, no fused attention op, and the "
                f"chain's GPU time ≥ {MATERIAL_PCT:.0f} % of the step above a fused kernel's",
        evidence=f"{len(chain)} ops touch the {bh}×{length}×{keys} scores: {fmt_us(chain_us)} per step; fused "
                 f"attention would need about {fmt_us(fused_us)} ({'forward and backward, ' if training else ''}"
                 f"at {SDPA_REACHABLE_PCT:.0f} % of {rate:g} TFLOP/s {dtype})",
        suggestion="Use torch.nn.functional.scaled_dot_product_attention (flash / cuDNN / memory-efficient "
                   "kernels keep the scores on chip; is_causal=True for a causal mask).",
        saving_us=chain_us - fused_us, base_us=step,
        learn_more="https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html")


# Host time nothing recorded explains is put on the copy off the GPU it follows when at least this
# share of it does: then the cause is the host's work on what it copied, not an unknown.
AFTER_COPY_SHARE_PCT = 50.0


def host_unrecorded(ex: Explanation) -> Finding | None:
    after = ex.attribution.unrecorded_after
    total = sum(us for _, us, _ in after)
    copied = sum(us for _, us, cp in after if cp)
    by_copy = total > 0 and 100.0 * copied / total >= AFTER_COPY_SHARE_PCT
    where = ""
    if after and total > 0:
        name, us, cp = next(a for a in after if a[2]) if by_copy else after[0]
        where = (f"; {100.0 * (copied if by_copy else us) / total:.0f} % of it begins right after "
                 + (f"a copy off the GPU ({name})" if by_copy else name))
    finding = _cause_finding(
        ex, "unrecorded", "host_unrecorded",
        "The host works on tensors copied off the GPU" if by_copy else "Host time no recorded event explains",
        premise=("the GPU idles" if ex.attribution.has_gpu else "the step waits") + " while the step's thread is in "
                f"no recorded op, annotation or call for ≥ {LONG_HOST_GAP_US:,.0f} µs at a time (shorter gaps are "
                "Python between ops; with the GPU busy meanwhile the time costs nothing)"
                + (f", ≥ {AFTER_COPY_SHARE_PCT:.0f} % of it beginning within {AFTER_COPY_US:.0f} µs of an op that "
                   "copied device → host," if by_copy else "") + " for",
        what="with nothing recorded on the step's thread" + where,
        suggestion=("After the copy the host computes on the copied data outside torch (a metric in NumPy, "
                    "torch.save, logging values): keep that work on the GPU as tensor ops, do it every N steps, "
                    "or hand it to a background thread (copy into pinned memory with non_blocking=True first)."
                    if by_copy else
                    "Something outside torch runs here (time.sleep, file or network I/O, logging, NumPy, the "
                    "GIL held by another thread): record with with_stack=True or wrap it in record_function."))
    copies = ex.attribution.unrecorded_copies_us / max(len(ex.attribution.steps), 1)
    if finding is None or not by_copy or copies <= 0:
        return finding
    # The copy goes with the work it feeds: kept on the GPU, or done every N steps, neither runs.
    return replace(finding, saving_us=min(finding.saving_us + copies, finding.base_us),
                   caveat="Linked by time, not by data: the stretch begins within "
                          f"{AFTER_COPY_US:.0f} µs of the copy's end. with_stack=True shows what runs there.",
                   evidence=f"{finding.evidence}; the copies it works on take {fmt_us(copies)} a step more, "
                            "and go with it")


def allocator_calls(ex: Explanation) -> Finding | None:
    if not ex.attribution.has_gpu:
        return None  # no GPU activity: nothing waits for the allocator (an allocation-only program)
    return _cause_finding(
        ex, "allocator", "allocator_calls", "The GPU waits for device memory allocation",
        premise="the GPU sits idle while the step's thread is in cudaMalloc / cudaFree (the caching allocator "
                "missed, or was emptied)",
        what="in cudaMalloc / cudaFree, GPU idle",
        suggestion="Let PyTorch's caching allocator reuse its blocks: drop torch.cuda.empty_cache() from the loop, "
                   "keep tensor shapes stable between steps (pad or bucket them), and try "
                   "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation.",
        learn_more="https://pytorch.org/docs/stable/notes/cuda.html#memory-management")


def profiler_cost(ex: Explanation) -> Finding | None:
    return _cause_finding(
        ex, "profiler", "profiler_cost", "The profiler's own work is in the step",
        premise=("the profiler's own events (cat 'overhead') hold the GPU idle: the step's thread is in them while "
                 "no kernel, copy or memset runs; overhead under running GPU work costs the step nothing"
                 if ex.attribution.has_gpu else "the profiler's own events (cat 'overhead') hold the step's thread"),
        what="in the profiler's own work",
        suggestion="Not the program's time: it goes away unprofiled. Record fewer options (with_stack, "
                   "profile_memory) or more steps per cycle to shrink it.")


def at_roof(ex: Explanation) -> Finding | None:
    """GPU-bound work already near its roof: nothing a kernel change would recover."""
    med = ex.attribution.median_us()
    step = _step(ex)
    work = float(sum(med[c] for c in med.index if c in ex.roofs["op_class"].unique())) if len(ex.roofs) else 0.0
    rows = _roof_rows(ex, classes=tuple(ex.roofs["op_class"].unique()) if len(ex.roofs) else ())
    if not len(rows) or step <= 0 or work < 0.8 * step:
        return None
    near = float(rows.loc[rows["pct_of_roof"] >= AT_ROOF_PCT, "gpu_us"].sum())
    share = 100.0 * near / float(ex.roofs["gpu_us"].sum())
    if share < 50.0:
        return None
    return Finding(
        "at_roof", "roof", "GPU-bound at the roof",
        premise=f"GPU work fills ≥ 80 % of the step and most of it runs at ≥ {AT_ROOF_PCT:.0f} % of its roof",
        evidence=f"{share:.0f} % of the GPU time is in ops at ≥ {AT_ROOF_PCT:.0f} % of their roof",
        suggestion="Only less work helps: a lower precision (bf16, FP8), fewer FLOPs or bytes (fusion, smaller "
                   "activations), or more GPUs.",
        saving_us=0.0, base_us=step)


RULES: tuple[Callable[[Explanation], Finding | None], ...] = (
    input_pipeline, compilation, slow_step, sync_waits, optimizer_loop, slow_host_op, launch_bound, pageable_copies,
    attention_written_out,
    below_roof, allocator_calls, python_overhead, host_unrecorded, profiler_cost, at_roof,
)

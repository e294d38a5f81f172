"""Rules that read the trace's events beside its explanation: a bias add the GEMM could have fused
(a saving), and two notes that explain a figure the page shows (the profiler's own lane, an
annotation's GPU row over 100 %). Each is ``rule(explanation, context) -> Finding | None`` like
``context.CONTEXT_RULES``, reading ``context.trace`` and ``context.analysis``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import numpy as np

from lab.analysis.columns import gpu_activity_rows, mask_in, mask_where, texts
from lab.analysis.gemm.kinds import is_gemm_kernel
from lab.explain.explanation import Explanation
from lab.judge.context import TraceContext
from lab.judge.finding import NOTE, Finding
from lab.units import fmt_us

__all__ = ["ADD_OPS", "TRACE_RULES", "annotation_over_100_pct", "profiler_overhead_event", "steps_overlapping",
           "unfused_bias_add"]

ADD_OPS = ("aten::add", "aten::add_", "aten::bias_add")
PROFILER_RECIPE = "https://pytorch.org/tutorials/recipes/recipes/profiler_recipe.html"
COMPILE_TUTORIAL = "https://pytorch.org/tutorials/intermediate/torch_compile_tutorial.html"


def _n_steps(ex: Explanation) -> int:
    return max(len(ex.attribution.steps), 1)


def _bias_adds(ctx: TraceContext) -> tuple[np.ndarray, np.ndarray] | None:
    """The add kernels that directly follow a GEMM kernel on the same stream and add a bias, as
    (event rows, whether each add's shapes were recorded); None where there are none."""
    trace, analysis = ctx.trace, ctx.analysis
    if trace is None or analysis is None:
        return None
    ev = trace.events
    rows = gpu_activity_rows(trace)
    if len(rows) < 2:
        return None
    gemm_kernels = set(analysis.gemm["kernel"]) if len(analysis.gemm) else set()
    rows = rows[mask_in(ev["cat"], ("kernel",))[rows]]  # memsets between a GEMM and its add do not break it
    if len(rows) < 2:
        return None
    dev, stream = ev["device"].to_numpy(), ev["stream"].to_numpy()
    rows = rows[np.lexsort((ev["ts_us"].to_numpy()[rows], stream[rows], dev[rows]))]
    owner = analysis.links.owner[rows]
    add_owner = np.zeros(len(rows), dtype=bool)
    has_owner = owner >= 0
    add_owner[has_owner] = mask_in(ev["name"], ADD_OPS)[owner[has_owner]]
    same_stream = (dev[rows][1:] == dev[rows][:-1]) & (stream[rows][1:] == stream[rows][:-1])
    prev_is_gemm = mask_where(ev["name"], is_gemm_kernel, rows=rows[:-1]) | np.isin(texts(ev["name"], rows[:-1]),
                                                                                list(gemm_kernels))
    hits = add_owner.copy()
    hits[0] = False
    hits[1:] &= same_stream & prev_is_gemm
    if not hits.any():
        return None
    is_bias, known = _adds_a_bias(ev, owner[hits])
    if not is_bias.any():
        return None
    return rows[hits][is_bias], known[is_bias]


def _adds_a_bias(ev, add_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each add op adds a bias vector (an input of shape [N] where the first input ends
    in N, as ``torch.add(x @ w, b)``), by its recorded Input Dims. A residual add of two
    activations (a transformer's ``h + attn(h)``) follows a GEMM too but is no bias: on the H200
    Llama corpus trace 8 such adds were called "bias add" before. Without recorded shapes the add
    cannot be told apart: it counts, and ``known`` is False for it."""
    dims = texts(ev["input_dims"], add_rows).astype(str)
    verdict: dict[str, bool] = {}
    known: dict[str, bool] = {}
    for text in set(dims):
        try:
            parsed = ast.literal_eval(text) if text else None
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            parsed = None
        shapes: list = parsed if isinstance(parsed, list) and parsed else []
        known[text] = bool(shapes)
        if not shapes:
            verdict[text] = True  # nothing recorded: cannot tell
            continue
        first = shapes[0] if isinstance(shapes[0], list) else []
        last = first[-1] if first else None  # a 0-d first input ([]) is no GEMM output
        verdict[text] = last is not None and any(
            isinstance(s, list) and len(s) == 1 and s[0] == last for s in shapes[1:])
    return (np.array([verdict[text] for text in dims], dtype=bool),
            np.array([known[text] for text in dims], dtype=bool))


def unfused_bias_add(ex: Explanation, ctx: TraceContext) -> Finding | None:
    """A separate bias-add kernel right after its GEMM. Fused into the GEMM's epilogue (addmm,
    nn.Linear, torch.compile) the add's kernel goes away: the saving is its time per step."""
    found = _bias_adds(ctx)
    if found is None or ctx.trace is None:
        return None
    rows, known = found
    add_us = float(ctx.trace.events["dur_us"].to_numpy()[rows].sum())
    step = ex.attribution.step_us
    caveat = "" if known.any() else ("The trace has no recorded shapes, so these may be residual adds of two "
                                     "activations rather than a bias: record_shapes=True tells them apart.")
    return Finding(
        "unfused_bias_add", "elementwise", "Bias add runs as a separate kernel after the GEMM",
        premise="an add kernel directly follows a GEMM kernel on the same stream and its op adds a vector of the "
                "GEMM output's last dimension (a bias), per the recorded input shapes",
        evidence=f"{len(rows)} add kernel(s) ({fmt_us(add_us)} in the window, {fmt_us(add_us / _n_steps(ex))} per "
                 "step) each follow a GEMM kernel on the same stream; each re-reads and re-writes the whole GEMM "
                 "output",
        suggestion="Fuse the bias into the GEMM: torch.addmm(b, x, w) (or nn.Linear / F.linear) runs the add in "
                   "cuBLAS's epilogue, and torch.compile picks that fused GEMM too (its kernel name carries 'bias' "
                   "and the add kernel disappears).",
        saving_us=add_us / _n_steps(ex), base_us=step, learn_more=COMPILE_TUTORIAL, caveat=caveat)


def steps_overlapping(step_start: np.ndarray, step_end: np.ndarray, start: np.ndarray,
                      end: np.ndarray) -> np.ndarray:
    """Sorted indices of the steps that overlap any [start, end) interval. Steps follow one another
    (sorted, not overlapping), so each interval's first candidate is found by binary search:
    O((steps + intervals) log steps), not steps × intervals."""
    order = np.argsort(step_start, kind="stable")
    s_start, s_end = step_start[order], step_end[order]
    first = np.searchsorted(s_end, start, side="right")  # first step ending after the interval starts
    last = np.searchsorted(s_start, end, side="left")  # steps starting before the interval ends
    hits = [np.arange(a, b) for a, b in zip(first, last) if a < b]
    return np.unique(order[np.concatenate(hits)]) if hits else np.array([], dtype=np.int64)


def profiler_overhead_event(ex: Explanation, ctx: TraceContext) -> Finding | None:
    """The profiler's own events (cat "overhead", e.g. Activity Buffer Request) on their own lane:
    a note on what that lane is. What they cost the step is ``rules.profiler_cost``'s."""
    if ctx.trace is None:
        return None
    ev = ctx.trace.events
    rows = np.flatnonzero(mask_in(ev["cat"], ("overhead",)))
    if not len(rows):
        return None
    dur = ev["dur_us"].to_numpy()[rows]
    start = ev["ts_us"].to_numpy()[rows]
    names = sorted(set(texts(ev["name"], rows)))
    steps = ctx.analysis.steps if ctx.analysis is not None else None
    overlap = ""
    if steps is not None and len(steps):
        touched = steps_overlapping(steps["start_us"].to_numpy(), steps["end_us"].to_numpy(), start, start + dur)
        if len(touched):
            overlap = f"; it overlaps step {', '.join(str(int(i)) for i in touched[:5])}"
    return Finding(
        "profiler_overhead_event", "profiler", "Profiler overhead in the timeline",
        premise="the trace holds the profiler's own events (cat 'overhead'): Kineto/CUPTI work, not the program's",
        evidence=f"{len(rows)} profiler event(s) ({', '.join(names)}) take {fmt_us(float(dur.sum()))} on their own "
                 f"lane{overlap}. This is Kineto/CUPTI allocating its activity buffers, not your code",
        suggestion="Ignore this lane when reading the timeline; with torch.profiler.schedule's warmup steps the "
                   "buffer requests happen before the active steps you measure.",
        saving_us=0.0, base_us=ex.attribution.step_us, scope=NOTE, learn_more=PROFILER_RECIPE)


def annotation_over_100_pct(ex: Explanation, ctx: TraceContext) -> Finding | None:
    """Why key_averages shows a record_function's GPU row above 100 % "Self CUDA %": a note."""
    if ctx.trace is None or ctx.analysis is None:
        return None
    ev = ctx.trace.events
    rows = np.flatnonzero(mask_in(ev["cat"], ("gpu_user_annotation",)))
    total = ctx.analysis.utilization.activity_us
    if not len(rows) or total <= 0:
        return None
    uniq, inverse = np.unique(texts(ev["name"], rows), return_inverse=True)
    sums = np.bincount(inverse, weights=ev["dur_us"].to_numpy()[rows])
    best = int(np.argmax(sums))
    pct = 100.0 * sums[best] / total
    if pct <= 100.0:
        return None
    return Finding(
        "annotation_over_100_pct", "other_work", "The annotation's GPU row exceeds 100 % in key_averages",
        premise="a record_function's GPU span (gpu_user_annotation) is longer than all kernel, memcpy and memset "
                "time, the total key_averages divides by",
        evidence=f"record_function '{uniq[best]}' spans {fmt_us(float(sums[best]))} on the GPU, {pct:.0f} % of the "
                 f"{fmt_us(total)} of kernel/memcpy/memset time that the table uses as its total",
        suggestion="Read that row as 'wall time from the label's first to last GPU work', gaps included, not as "
                   "GPU work: annotations are left out of the total. Use the kernel rows for GPU time.",
        saving_us=0.0, base_us=ex.attribution.step_us, scope=NOTE, learn_more=PROFILER_RECIPE)


TRACE_RULES: tuple[Callable[[Explanation, TraceContext], Finding | None], ...] = (
    unfused_bias_add, profiler_overhead_event, annotation_over_100_pct,
)

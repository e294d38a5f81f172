"""Insights: small rules that read a trace's analysis and say what to look at and what to do.

Each rule is a plain function ``rule(trace, analysis) -> Insight | None``. Thresholds are
named module constants with the reason (and a source where one exists) beside them, in the
style of Holistic Trace Analysis. A rule's title is constant, so comparisons can match an
insight across traces by title; the numbers go into ``evidence``.
"""

from __future__ import annotations

import ast

import numpy as np

from lab.analysis.bundle import Analysis, analyze
from lab.analysis.columns import mask_in, mask_where, texts
from lab.analysis.diagnoses.findings import DIAGNOSIS_RULES, findings_of, named_cause
from lab.analysis.gemm.insights import (  # noqa: F401  (re-exported: the GEMM rules and their thresholds)
    GEMM_COLD_BELOW_MEDIAN,
    GEMM_FEW_INSTANCES,
    GEMM_LOW_PCT_OF_PEAK,
    GEMM_MIN_KERNEL_US,
    GEMM_RULES,
    TF32_MIN_COMPUTE_MAJOR,
    TF32_SWITCH,
    fp32_without_tf32,
    gemm_below_peak,
)
from lab.analysis.gemm.kinds import is_gemm_kernel
from lab.analysis.gpu import covered_us
from lab.analysis.insights.launches import LAUNCH_RULES, cupti_missing, nothing_launched  # noqa: F401 (rules)
from lab.analysis.insights.record import SEVERITIES, Insight
from lab.analysis.memory.insights import MEMORY_RULES
from lab.analysis.operators import host_work_us
from lab.trace.load import Trace
from lab.units import fmt_us_fixed
from lab.vocab import COMPILE_PATTERN, GPU_ACTIVITY_CATS, SYNC_NAMES

# --- thresholds ------------------------------------------------------------------------------
# Host work this many times the GPU work means the GPU idles most of the time, however fast its
# kernels are ("overhead-bound" in Horace He's "Making Deep Learning Go Brrrr"); the classic
# small-matmul case is ~100× (2.3 ms of CPU for 23 µs of GPU on a 64×64 matmul).
OVERHEAD_BOUND_RATIO = 5.0
OVERHEAD_CRITICAL_RATIO = 50.0
# A first step this many times slower than the median of the later ones is a cold start
# (CUDA context, cuBLAS handle and workspace, CUPTI buffers, allocator growth). 3× leaves
# room for the normal step-to-step jitter of a few tens of percent.
COLD_STEP_RATIO = 3.0
COLD_STEP_MIN_STEPS = 3  # a median of "later" steps needs at least two of them
# The same ratio applied to the gap between the step label's start and its first op (e.g.
# 228 µs against 5 µs), once that gap exceeds the later ones by at least this much: smaller
# differences are timer and scheduling noise.
COLD_GAP_MIN_EXTRA_US = 50.0
# Synchronize calls shorter than this in total are noise; longer ones are worth explaining.
SYNC_MIN_TOTAL_US = 100.0
# If the GPU was busy less than this share of the time the host sat in synchronize, the host
# was waiting on a GPU that had little to do (launch latency, a tiny kernel, .item()).
SYNC_IDLE_BUSY_PCT = 50.0
# Kernels shorter than ~10 µs are about as long as their own launch (5–10 µs of
# cudaLaunchKernel on the host), so the host cannot keep the GPU fed: launch-bound
# (PyTorch performance tuning guide; HTA's kernel launch statistics flag short kernels too).
TINY_KERNEL_US = 10.0
TINY_KERNEL_MIN_COUNT = 20  # fewer kernels than this is not a pattern
LAUNCH_BOUND_IDLE_PCT = 50.0  # GPU idle share of its active window that makes it matter
# An unfused add worth a warning: at least this share of GPU time spent in the separate add.
UNFUSED_ADD_WARN_PCT = 5.0
ADD_OPS = ("aten::add", "aten::add_", "aten::bias_add")

# --- where to read more ----------------------------------------------------------------------
PROFILER_RECIPE = "https://pytorch.org/tutorials/recipes/recipes/profiler_recipe.html"
PROFILER_SCHEDULE = "https://pytorch.org/docs/stable/profiler.html#torch.profiler.schedule"
TUNING_GUIDE = "https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html"
BRRR = "https://horace.io/brrr_intro.html"
COMPILE_TUTORIAL = "https://pytorch.org/tutorials/intermediate/torch_compile_tutorial.html"


# An op this short (median self time per call) is mostly fixed costs, the profiler's own record of
# it among them: torch.profiler's cost per recorded op is fixed, so it weighs most on short ops
# (the Summary's profiled vs unprofiled per-iteration times show its size on a run): a caveat.
PROFILED_OP_SHORT_US = 10.0


# --- rules -----------------------------------------------------------------------------------


def overhead_bound(trace: Trace, analysis: Analysis) -> Insight | None:
    """Host (CPU) work far larger than the GPU work it produces — unless a diagnosis already
    names the cause (syncs, host work between ops, copies, communication, CUDA graphs, an empty
    window): "give the GPU more work per launch" would be the wrong advice then."""
    if named_cause(analysis.findings) is not None:
        return None
    gpu_us = analysis.utilization.activity_us
    cpu_us = host_work_us(analysis.operators)
    if gpu_us <= 0 or cpu_us < OVERHEAD_BOUND_RATIO * gpu_us:
        return None
    if _compiling_us(analysis.operators) >= cpu_us:
        return None  # the host was compiling (torch.compile inside the window): a one-off, not per-launch work
    ratio = cpu_us / gpu_us
    return Insight(
        severity="critical" if ratio >= OVERHEAD_CRITICAL_RATIO else "warning",
        title="Overhead-bound: the CPU does far more work than the GPU",
        evidence=(f"Ops spent {fmt_us_fixed(cpu_us)} of self CPU time (synchronize waits excluded) for "
                  f"{fmt_us_fixed(gpu_us)} of GPU activity: {ratio:.1f}× more host time than device time; "
                  f"the GPU was busy {analysis.utilization.active_busy_pct:.0f} % of its active window."),
        suggestion=("Give the GPU more work per launch: larger batches or shapes, fewer and bigger ops "
                    "(torch.compile fuses them), or CUDA graphs to replay many launches with one call."),
        learn_more=BRRR,
        caveat=_short_ops_caveat(analysis),
    )


def _compiling_us(operators) -> float:
    """The longest torch.compile compile event's total time (the outermost holds the rest)."""
    compiling = operators["name"].astype(str).str.contains(COMPILE_PATTERN)
    return float(operators.loc[compiling, "total_us"].max()) if compiling.any() else 0.0


def _short_ops_caveat(analysis: Analysis) -> str:
    """The profiler's own cost per recorded op, said where the ops are short enough for it to count."""
    ops = analysis.operators
    ops = ops[(ops["cat"] == "cpu_op") & (ops["count"] > 0)]
    if ops.empty:
        return ""
    per_call = float((ops["self_us"] / ops["count"]).median())
    if per_call >= PROFILED_OP_SHORT_US:
        return ""
    return (f"Host times are measured with the profiler on, and it adds its own cost to every op it records: "
            f"with a median op of {fmt_us_fixed(per_call)} self time that cost is a large part of each, so an "
            "unprofiled run's host time (and this ratio) is lower. Compare the per-iteration times with and "
            "without the profiler (Summary) before you act on the ratio.")


def cold_first_step(trace: Trace, analysis: Analysis) -> Insight | None:
    """The first profiled step pays one-time costs the later ones do not."""
    steps = analysis.steps
    if len(steps) < COLD_STEP_MIN_STEPS:
        return None
    first = steps.iloc[0]
    later_us = float(np.median(steps["cpu_us"].to_numpy()[1:]))
    slow_step = later_us > 0 and first["cpu_us"] >= COLD_STEP_RATIO * later_us
    gaps = steps["first_child_gap_us"].to_numpy(dtype=float)
    gap_text, slow_gap = "", False
    if np.isfinite(gaps[0]) and np.isfinite(gaps[1:]).any():
        later_gap = float(np.nanmedian(gaps[1:]))
        slow_gap = (gaps[0] >= COLD_STEP_RATIO * later_gap and gaps[0] - later_gap >= COLD_GAP_MIN_EXTRA_US)
        gap_text = (f" Its label started {fmt_us_fixed(gaps[0])} before its first op, against a median "
                    f"{fmt_us_fixed(later_gap)} later.")
    # A schedule that skipped steps (the first recorded one is ProfilerStep#N, N ≥ 1) already
    # kept the profiler's start-up out: only a slow step itself (not a late first op) counts then,
    # and "use schedule(wait, warmup)" would be advice the trace already followed.
    skipped = _steps_skipped(first)
    if not (slow_step or (slow_gap and not skipped)):
        return None
    overhead = _profiler_overhead_in(trace, float(first["start_us"]), float(first["end_us"]))
    overhead_text = (f" The profiler's own '{overhead[0]}' ({fmt_us_fixed(overhead[1])}) overlaps it."
                     if overhead else "")
    label = "ProfilerStep" if first["source"] == "ProfilerStep" else f"'{first['name']}'"
    advice = ("Run a few un-profiled warm-up iterations first, or use "
              "torch.profiler.schedule(wait=1, warmup=1, active=N) so start-up costs (CUDA context, "
              "cuBLAS workspace, CUPTI buffers) land outside the active steps; judge steady-state steps only.")
    if skipped:
        advice = (f"The schedule already skipped {skipped} step(s), so the profiler's own start-up is outside "
                  "this one: what remains is the program's first use of something (a new shape, an allocator "
                  "growing, a lazy import). Run un-profiled iterations of the same code before profiling, and "
                  "read this step's longest op to see what it is.")
    return Insight(
        severity="warning",
        title="Cold first step: one-time start-up costs inside the measurement",
        evidence=(f"The first {label} step took {fmt_us_fixed(float(first['cpu_us']))} of CPU time, "
                  f"{first['cpu_us'] / later_us:.1f}× the median {fmt_us_fixed(later_us)} of the "
                  f"{len(steps) - 1} later steps.{gap_text}{overhead_text}"),
        suggestion=advice,
        learn_more=PROFILER_SCHEDULE,
        caveat=("One cold step, measured once: its ratio changes from run to run with what ran before in the "
                "process (a second run in the same process is already warm) and with the profiler's own "
                "start-up work landing in it. Read it as 'the first step pays start-up', not as a fixed ×."),
    )


def _steps_skipped(first) -> int:
    """How many steps the profiler's schedule skipped before the first recorded one (0: none or unknown)."""
    name = str(first["name"])
    if first["source"] != "ProfilerStep" or "#" not in name:
        return 0
    tail = name.rsplit("#", 1)[1]
    return int(tail) if tail.isdigit() else 0


def long_synchronize(trace: Trace, analysis: Analysis) -> Insight | None:
    """The host waited in synchronize calls while the GPU had little to do (a sync inside the
    steps that empties the GPU's queue is the host-sync diagnosis's, which says more)."""
    if findings_of(trace, analysis).syncs is not None:
        return None
    ev = trace.events
    rows = np.flatnonzero(mask_in(ev["name"], SYNC_NAMES) & mask_in(ev["lane_kind"], ("cpu",)))
    if not len(rows):
        return None
    start = ev["ts_us"].to_numpy()[rows]
    end = start + ev["dur_us"].to_numpy()[rows]
    waited = float((end - start).sum())
    if waited < SYNC_MIN_TOTAL_US:
        return None
    busy = analysis.utilization.busy_intervals
    busy_in = float(covered_us(busy["start_us"].to_numpy(), busy["end_us"].to_numpy(), start, end).sum())
    busy_pct = 100.0 * busy_in / waited
    if busy_pct >= SYNC_IDLE_BUSY_PCT:
        return None
    longest = int(np.argmax(end - start))
    longest_name = texts(ev["name"], rows[longest:longest + 1])[0]
    return Insight(
        severity="warning",
        title="Long synchronize while the GPU had little work",
        evidence=(f"{len(rows)} synchronize call(s) kept the host waiting {fmt_us_fixed(waited)} "
                  f"(longest: {longest_name}, {fmt_us_fixed(float(end[longest] - start[longest]))}), "
                  f"but the GPU was busy only {busy_pct:.0f} % of that time."),
        suggestion=("Remove synchronizations you do not need (.item(), .cpu(), print of a CUDA tensor, "
                    "torch.cuda.synchronize() in the loop); sync once at the end of the measured region."),
        learn_more=TUNING_GUIDE,
    )


def many_tiny_kernels(trace: Trace, analysis: Analysis) -> Insight | None:
    """Launch-bound: many very short kernels and a mostly idle GPU."""
    ev = trace.events
    is_kernel = mask_in(ev["cat"], ("kernel",))
    count = int(is_kernel.sum())
    if count < TINY_KERNEL_MIN_COUNT:
        return None
    median_us = float(np.median(ev["dur_us"].to_numpy()[is_kernel]))
    idle_pct = 100.0 - analysis.utilization.active_busy_pct
    if median_us >= TINY_KERNEL_US or idle_pct < LAUNCH_BOUND_IDLE_PCT:
        return None
    launch = analysis.launches.launch_median_us
    launch_text = f" against a median launch call of {fmt_us_fixed(launch)} on the host" if launch == launch else ""
    return Insight(
        severity="warning",
        title="Many tiny kernels: launch-bound",
        evidence=(f"{count} kernels with a median duration of {fmt_us_fixed(median_us)}{launch_text}; "
                  f"the GPU sat idle {idle_pct:.0f} % of its active window."),
        suggestion=("Fuse small ops (torch.compile), batch work into fewer larger kernels, or capture the "
                    "step in a CUDA graph (torch.compile(mode='reduce-overhead')) to cut launch cost."),
        learn_more=TUNING_GUIDE,
        caveat=("Kernel durations come from the GPU's clock and hold without the profiler; the host's launch "
                "calls do not: CUPTI adds to each one, so the idle share between kernels reads larger under "
                "the profiler than in an unprofiled run."),
    )


def unfused_bias_add(trace: Trace, analysis: Analysis) -> Insight | None:
    """A separate add kernel right after a GEMM, which addmm / torch.compile would fuse."""
    ev = trace.events
    rows = np.flatnonzero(mask_in(ev["cat"], GPU_ACTIVITY_CATS))
    if len(rows) < 2:
        return None
    links = analysis.links
    is_gemm_name = mask_where(ev["name"], is_gemm_kernel)
    gemm_kernels = set(analysis.gemm["kernel"]) if len(analysis.gemm) else set()
    is_kernel = mask_in(ev["cat"], ("kernel",))
    rows = rows[is_kernel[rows]]  # memsets between a GEMM and its add do not break the pattern
    order = np.lexsort((ev["ts_us"].to_numpy()[rows], ev["stream"].to_numpy()[rows], ev["device"].to_numpy()[rows]))
    rows = rows[order]
    names = texts(ev["name"], rows)
    owner = links.owner[rows]
    add_owner = np.zeros(len(rows), dtype=bool)
    has_owner = owner >= 0
    add_owner[has_owner] = mask_in(ev["name"], ADD_OPS)[owner[has_owner]]
    prev_gemm = np.zeros(len(rows), dtype=bool)
    same_stream = ((ev["device"].to_numpy()[rows][1:] == ev["device"].to_numpy()[rows][:-1])
                   & (ev["stream"].to_numpy()[rows][1:] == ev["stream"].to_numpy()[rows][:-1]))
    prev_is_gemm = is_gemm_name[rows[:-1]] | np.isin(names[:-1], list(gemm_kernels))
    prev_gemm[1:] = same_stream & prev_is_gemm
    hits = add_owner & prev_gemm
    shapes_known = np.zeros(len(rows), dtype=bool)
    if hits.any():
        is_bias, known = _adds_a_bias(ev, owner[hits])
        shapes_known[hits] = known
        hits[hits] = is_bias
    if not hits.any():
        return None
    add_us = float(ev["dur_us"].to_numpy()[rows[hits]].sum())
    share = 100.0 * add_us / analysis.utilization.activity_us if analysis.utilization.activity_us else 0.0
    sure = bool(shapes_known[hits].any())
    caveat = "" if sure else (" The trace has no recorded shapes, so these may be residual adds of two "
                              "activations rather than a bias: record_shapes=True tells them apart.")
    return Insight(
        severity="warning" if share >= UNFUSED_ADD_WARN_PCT and sure else "info",
        title="Bias add runs as a separate kernel after the GEMM",
        evidence=(f"{int(hits.sum())} add kernel(s) ({fmt_us_fixed(add_us)}, {share:.1f} % of GPU time) each "
                  f"follow a GEMM kernel on the same stream; each re-reads and re-writes the whole GEMM output."
                  f"{caveat}"),
        suggestion=("Fuse the bias into the GEMM: torch.addmm(b, x, w) (or nn.Linear / F.linear) runs the add "
                    "in cuBLAS's epilogue, and torch.compile picks that fused GEMM too (its kernel name carries "
                    "'bias' and the add kernel disappears)."),
        learn_more=COMPILE_TUTORIAL,
    )


def _adds_a_bias(ev, add_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each add op adds a bias vector (an input of shape [N] where the first input ends
    in N, as the seed's ``torch.add(x @ w, b)``), by its recorded Input Dims. A residual add of
    two activations (a transformer's ``h + attn(h)``) follows a GEMM too but is no bias: on the
    H200 Llama corpus trace 8 such adds were called "bias add" before. Without recorded shapes
    the add cannot be told apart: it counts, and ``known`` is False for it."""
    dims = texts(ev["input_dims"], add_rows).astype(str)
    verdict: dict[str, bool] = {}
    known: dict[str, bool] = {}
    for text in set(dims):
        try:
            parsed = ast.literal_eval(text) if text else None
        except (ValueError, SyntaxError):
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


def _steps_overlapping(step_start: np.ndarray, step_end: np.ndarray, start: np.ndarray,
                       end: np.ndarray) -> np.ndarray:
    """Sorted indices of the steps that overlap any [start, end) interval.

    Steps follow one another (sorted, not overlapping), so each interval's first candidate is
    found by binary search: O((steps + intervals) log steps), not steps × intervals — a
    repeated or long trace can hold thousands of each.
    """
    order = np.argsort(step_start, kind="stable")
    s_start, s_end = step_start[order], step_end[order]
    first = np.searchsorted(s_end, start, side="right")  # first step ending after the interval starts
    last = np.searchsorted(s_start, end, side="left")  # steps starting before the interval ends
    hits = [np.arange(a, b) for a, b in zip(first, last) if a < b]
    return np.unique(order[np.concatenate(hits)]) if hits else np.array([], dtype=np.int64)


def profiler_overhead_event(trace: Trace, analysis: Analysis) -> Insight | None:
    """The profiler's own work (cat "overhead", e.g. Activity Buffer Request) is in the timeline."""
    ev = trace.events
    rows = np.flatnonzero(mask_in(ev["cat"], ("overhead",)))
    if not len(rows):
        return None
    dur = ev["dur_us"].to_numpy()[rows]
    names = sorted(set(texts(ev["name"], rows)))
    start = ev["ts_us"].to_numpy()[rows]
    steps = analysis.steps
    overlap_text = ""
    if len(steps):
        touched = _steps_overlapping(steps["start_us"].to_numpy(), steps["end_us"].to_numpy(), start, start + dur)
        if len(touched):
            overlap_text = f"; it overlaps step {', '.join(str(int(i)) for i in touched[:5])}"
    return Insight(
        severity="info",
        title="Profiler overhead in the timeline",
        evidence=(f"{len(rows)} profiler event(s) ({', '.join(names)}) take {fmt_us_fixed(float(dur.sum()))} on their "
                  f"own lane{overlap_text}. This is Kineto/CUPTI allocating its activity buffers, not your code."),
        suggestion=("Ignore this lane when reading the timeline; with torch.profiler.schedule's warmup steps the "
                    "buffer requests happen before the active steps you measure."),
        learn_more=PROFILER_RECIPE,
    )


def annotation_over_100_pct(trace: Trace, analysis: Analysis) -> Insight | None:
    """Why key_averages shows a record_function's GPU row above 100 % "Self CUDA %"."""
    ev = trace.events
    rows = np.flatnonzero(mask_in(ev["cat"], ("gpu_user_annotation",)))
    total = analysis.utilization.activity_us
    if not len(rows) or total <= 0:
        return None
    names = texts(ev["name"], rows)
    dur = ev["dur_us"].to_numpy()[rows]
    uniq, inverse = np.unique(names, return_inverse=True)
    sums = np.bincount(inverse, weights=dur)
    best = int(np.argmax(sums))
    pct = 100.0 * sums[best] / total
    if pct <= 100.0:
        return None
    return Insight(
        severity="info",
        title="The annotation's GPU row exceeds 100 % in key_averages",
        evidence=(f"record_function '{uniq[best]}' spans {fmt_us_fixed(float(sums[best]))} on the GPU "
                  f"(gpu_user_annotation), {pct:.0f} % of the {fmt_us_fixed(total)} of kernel/memcpy/memset time "
                  f"that the table uses as its total."),
        suggestion=("Read that row as 'wall time from the label's first to last GPU work', gaps included, not as "
                    "GPU work: annotations are left out of the total. Use the kernel rows (or this lab's kernel "
                    "table) for GPU time."),
        learn_more=PROFILER_RECIPE,
    )


RULES = (
    *LAUNCH_RULES,  # no GPU activity: lost (launch calls) or none sent (lab/analysis/launches.py)
    *DIAGNOSIS_RULES,
    overhead_bound,
    many_tiny_kernels,
    long_synchronize,
    cold_first_step,
    unfused_bias_add,
    *GEMM_RULES,  # FP32 without TF32, below the roof, without a rate (lab/analysis/gemm/insights.py)
    annotation_over_100_pct,
    profiler_overhead_event,
    *MEMORY_RULES,  # profile_memory: growth, fragmentation, churn, the peak (lab/analysis/memory/insights.py)
)


def _profiler_overhead_in(trace: Trace, start_us: float, end_us: float) -> tuple[str, float] | None:
    """The longest profiler overhead event overlapping [start_us, end_us], as (name, dur_us)."""
    ev = trace.events
    rows = np.flatnonzero(mask_in(ev["cat"], ("overhead",)))
    if not len(rows):
        return None
    s = ev["ts_us"].to_numpy()[rows]
    d = ev["dur_us"].to_numpy()[rows]
    hit = (s < end_us) & (s + d > start_us)
    if not hit.any():
        return None
    best = rows[hit][int(np.argmax(d[hit]))]
    return str(texts(ev["name"], np.array([best]))[0]), float(ev["dur_us"].to_numpy()[best])


def find_insights(trace: Trace, analysis: Analysis | None = None, *, rules=RULES) -> list[Insight]:
    """Every rule that fires, critical first (rule order within a severity)."""
    analysis = analysis or analyze(trace)
    found = [insight for rule in rules if (insight := rule(trace, analysis)) is not None]
    return sorted(found, key=lambda insight: SEVERITIES.index(insight.severity))

"""The Summary view's content: a handful of headline numbers, each with how it was measured.

A pure function of the run (when there is one), the trace's analysis and its judgement, so the
page only lays the metrics out; the findings themselves are ``Judgement.findings``, one list.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from lab.analysis.bundle import Analysis, AnalysisTables
from lab.analysis.gemm.analyze import NO_SHAPE_NOTE, device_name
from lab.analysis.steps import per_iteration_us
from lab.core.config import OPTIONS
from lab.core.result import RunResult
from lab.core.workloads import WORKLOADS
from lab.explain import Explanation
from lab.judge import MATERIAL_PCT, Judgement, judge_trace
from lab.trace.facts import TraceFacts
from lab.trace.load import Trace
from lab.units import fmt_pct, fmt_signed_pct, fmt_tflops, fmt_us


@dataclass(frozen=True)
class Metric:
    label: str
    value: str
    help: str = ""
    delta: str | None = None  # shown under the value, e.g. "+12 % profiler overhead"


@dataclass(frozen=True)
class Summary:
    device: str
    config: str  # one line describing what ran ("" for an uploaded trace)
    metrics: tuple[Metric, ...]
    verdict: str  # the judged verdict (lab.judge.Judgement.verdict): the finding with the largest saving


def summarize(trace: Trace | TraceFacts, analysis: AnalysisTables, *, run: RunResult | None = None,
              timing: dict | None = None, explanation: Explanation | None = None,
              judgement: Judgement | None = None) -> Summary:
    """``timing`` is a sample manifest's {"profiled_median_us", "unprofiled_median_us"} when no run.
    With the trace's ``explanation``, a card shows only where it matters to this trace: the GEMM
    card only when GEMMs hold at least ``MATERIAL_PCT`` of the step. The verdict is ``judgement``'s
    (judged here from the trace when not given: a whole ``Trace`` and ``Analysis`` then, not
    their facts and tables)."""
    metrics: list[Metric] = []
    metrics += _timing_metrics(run, timing) or _trace_timing_metrics(analysis)
    metrics += _throughput_metrics(run, analysis, gemm_matters=_gemm_matters(explanation))
    util = analysis.utilization
    if trace.has_gpu:
        metrics.append(Metric(
            "GPU busy", fmt_pct(util.active_busy_pct),
            "Union of kernel/memcpy/memset time over the GPU's active window (first to last GPU activity). "
            f"Over the whole trace span: {fmt_pct(util.busy_pct)}."))
        metrics.append(Metric(
            "Launch delay (median)", fmt_us(analysis.launches.delay_median_us),
            "GPU start − CPU launch start, over every launch→kernel pair (flows)."))
    metrics.append(Metric("Events", f"{trace.event_count:,}",
                          f"Complete events in the trace; span {fmt_us(util.trace_span_us)}."))
    return Summary(
        device=_device_text(trace, run),
        config=_config_text(run),
        metrics=tuple(metrics),
        verdict=(judgement if judgement is not None else _judged(trace, analysis, explanation)).verdict,
    )


def _judged(trace: Trace | TraceFacts, analysis: AnalysisTables, explanation: Explanation | None) -> Judgement:
    if not isinstance(trace, Trace) or not isinstance(analysis, Analysis):
        raise ValueError("a trace's facts and tables alone cannot be judged: pass its judgement")
    return judge_trace(trace, analysis, explanation)


def _timing_metrics(run: RunResult | None, timing: dict | None) -> list[Metric]:
    if run is not None:
        t = run.timing
        plain, profiled, overhead = t.unprofiled_median_us, t.profiled_median_us, t.overhead_pct
    elif timing:
        plain = float(timing.get("unprofiled_median_us") or "nan")
        profiled = float(timing.get("profiled_median_us") or "nan")
        overhead = 100.0 * (profiled - plain) / plain if plain and profiled else float("nan")
    else:
        return []
    method = run.timing.method if run is not None else (timing or {}).get("method", "as recorded")
    noise = overhead_noise_pct(run.timing) if run is not None else float("nan")
    out = [
        Metric("Per iteration, no profiler", fmt_us(plain),
               f"Median of the same step timed without the profiler ({method})."),
        Metric("Per iteration, profiled", fmt_us(profiled),
               f"Median of the recorded (active) steps, timed the same way ({method}). " + _noise_help(noise),
               delta=_overhead_text(overhead, noise)),
    ]
    if run is not None and run.timing.compile_s is not None:
        out.append(Metric("torch.compile time", f"{run.timing.compile_s:.2f} s",
                          "First call of the compiled step, measured apart and kept out of the profile."))
    return out


def overhead_noise_pct(timing) -> float:
    """How far the overhead figure moves with run-to-run noise alone: the half-ranges of the
    profiled and the unprofiled iterations, added in quadrature, over the unprofiled median (%).
    Identical 1024³ CPU runs gave badges from −0 % to +30 %: this says so on the badge."""
    base = timing.unprofiled_median_us
    if base <= 0 or len(timing.unprofiled_us) < 2 or len(timing.profiled_us) < 2:
        return float("nan")
    half = [(max(xs) - min(xs)) / 2 for xs in (timing.unprofiled_us, timing.profiled_us)]
    return 100.0 * math.hypot(*half) / base


def _overhead_text(overhead: float, noise: float) -> str | None:
    if math.isnan(overhead):
        return None
    if math.isnan(noise):
        return f"{fmt_signed_pct(overhead)} overhead, noise unknown"
    if abs(overhead) <= noise:
        return f"{fmt_signed_pct(overhead)} overhead, within ±{noise:.0f} % noise"
    return f"{fmt_signed_pct(overhead)} overhead, ±{noise:.0f} % noise"


def _noise_help(noise: float) -> str:
    if math.isnan(noise):
        return "The overhead is one recording's: run again to see how much it moves."
    return (f"The overhead compares two medians of a few iterations each; their spread alone moves it by about "
            f"±{noise:.0f} % here (half-ranges, in quadrature), so a few % either way is noise, not the profiler.")


def _trace_timing_metrics(analysis: AnalysisTables) -> list[Metric]:
    """Per-iteration time from the trace's own steps, for a recording without timings (an
    upload, the seed samples): the profiled time only, as nothing ran without the profiler."""
    per_iter = per_iteration_us(analysis.steps)
    if math.isnan(per_iter):
        return []
    steps = analysis.steps
    source = str(steps["source"].iloc[0])
    what = "ProfilerStep spans" if source == "ProfilerStep" else f"repeated '{steps['name'].iloc[0]}' annotations"
    return [Metric("Per iteration, profiled", fmt_us(per_iter),
                   f"From the trace: the median over its {len(steps)} steps ({what}) of each step's time, from "
                   "the previous step's completion to its own (the GPU work it launched included): the step time "
                   "every view shows. The recording has no timing without the profiler.")]


def _gemm_matters(explanation: Explanation | None) -> bool:
    if explanation is None:
        return True
    step = explanation.attribution.step_us
    return step > 0 and 100.0 * float(explanation.attribution.median_us()["gemm"]) / step >= MATERIAL_PCT


def _throughput_metrics(run: RunResult | None, analysis: AnalysisTables, *, gemm_matters: bool = True) -> list[Metric]:
    out = []
    if run is not None and (tflops := run.step_tflops) is not None:  # a CPU run's roofline point too
        c = run.config
        peak = run.device.peak.tflops.get(c.dtype) if run.device.peak else None
        out.append(Metric(
            "Step throughput", fmt_tflops(tflops),
            "Useful FLOPs of one step (2·M·K·N per GEMM) over its time without the profiler.",
            delta=f"{100 * tflops / peak:.0f} % of {peak:g} TFLOP/s peak" if peak else None))
    out += _gemm_metrics(analysis) if gemm_matters else []
    return out


def _gemm_metrics(analysis: AnalysisTables) -> list[Metric]:
    """A typical GEMM instance's rate against its dtype's peak (TOPS for int8), or, for GEMM
    kernels without a recorded shape, what to record instead of a rate."""
    best = analysis.gemm_typical  # the one the roofline and the insights quote too
    if best is None:
        unrated = [n for n in analysis.gemm_notes if n.startswith(NO_SHAPE_NOTE)]
        return [Metric("GEMM kernel", "no rate", "; ".join(unrated) + ".")] if unrated else []
    pct, unit, peak = best["pct_of_peak"], str(best["rate_unit"]), best["peak_tflops"]
    work = "operations" if unit == "TOPS" else "FLOP"
    return [Metric(
        "GEMM kernel", fmt_tflops(float(best["tflops"]), unit),
        f"2·M·K·N = {best['flops']:.3g} {work} over the kernel's {fmt_us(float(best['kernel_us']))} "
        f"({int(best['m'])}×{int(best['k'])}×{int(best['n'])} {best['dtype']}, {best['op'] or 'no op'}, "
        f"{best['bound'] or 'bound unknown'}).",
        delta=None if math.isnan(pct) else f"{pct:.0f} % of {peak:,.0f} {unit} {best['dtype']} peak")]


def _device_text(trace: Trace | TraceFacts, run: RunResult | None) -> str:
    if run is not None:
        d = run.device
        extra = f", torch {d.torch_version}" + (f", CUDA {d.cuda_version}" if d.cuda_version else "")
        return d.label + extra
    name = device_name(trace)
    return name or ("GPU trace" if trace.has_gpu else "CPU-only trace")


def _config_text(run: RunResult | None) -> str:
    """One line of what ran; the schedule and the profiler options come from RunConfig's Options."""
    if run is None:
        return ""
    c = run.config
    schedule = " ".join(f"{o.name}={getattr(c, o.name)}" for o in OPTIONS.values()
                        if o.group == "schedule" and o.inline)
    parts = [f"{WORKLOADS[c.workload].title}", f"{c.shape_text}", c.dtype, f"schedule {schedule}",
             f"{c.warmup_iters} warm-up iterations" if c.warmup_iters else "cold (no warm-up)"]
    if c.compile:
        parts.append("torch.compile")
    options = [name for name, on in c.profiler_args().items() if on]
    if options:
        parts.append(", ".join(options))
    return " · ".join(parts)


# Compare's totals as a reader names them (the metric keys are the analysis's field names).
TOTAL_LABELS = {
    "trace_span_us": "Trace span",
    "gpu_busy_us": "GPU busy time",
    "gpu_active_span_us": "GPU active span",
    "gpu_active_busy_pct": "GPU busy (active window)",
    "kernel_time_us": "Kernel time",
    "kernel_count": "Kernels",
    "memcpy_time_us": "Memcpy time",
    "memset_time_us": "Memset time",
    "cpu_op_time_us": "CPU op time",
    "launch_delay_median_us": "Launch delay (median)",
    "step_median_us": "Step (median)",
}
# The numbers first, the meaning last: at 800 px a long meaning pushed A and B out of view.
TOTAL_COLUMNS = ("total", "A", "B", "B − A", "B / A", "meaning")


def _number_text(metric: str, value: float) -> str:
    """One total in its unit: a count whole, a share in %, a time in µs/ms/s at 3 significant
    digits (fmt_us); "—" for a figure the trace does not have (a CPU run's launch delay)."""
    if value is None or math.isnan(value):
        return "—"
    if metric.endswith("_count"):
        return f"{value:,.0f}"
    if metric.endswith("_pct"):
        return fmt_pct(value)
    return fmt_us(value)


def _signed_text(metric: str, value: float) -> str:
    """A difference with its sign, and none on a zero: "+1.23 ms", "−4.0 %", "0.0 µs" (never "−0")."""
    if value is None or math.isnan(value):
        return "—"
    text = _number_text(metric, abs(value))
    if not any(ch in "123456789" for ch in text):
        return text
    return ("+" if value > 0 else "−") + text


def comparison_totals(totals: pd.DataFrame, meanings: dict[str, str]) -> pd.DataFrame:
    """The Compare view's totals as text a reader takes in: each metric by name with its meaning,
    A, B, B − A and B / A in the metric's unit, "—" where a trace has no such figure; only the
    metrics that either trace has (two CPU traces have no GPU figures: all-zero rows only add noise)."""
    a = pd.to_numeric(totals["a"], errors="coerce")
    b = pd.to_numeric(totals["b"], errors="coerce")
    keep = (a.fillna(0.0) != 0) | (b.fillna(0.0) != 0)
    rows = []
    for metric, va, vb, ratio in zip(totals["metric"][keep], a[keep], b[keep], totals["ratio"][keep]):
        delta = vb - va if not (math.isnan(va) or math.isnan(vb)) else float("nan")
        rows.append((TOTAL_LABELS.get(metric, metric), _number_text(metric, va), _number_text(metric, vb),
                     _signed_text(metric, delta), "—" if ratio is None or math.isnan(ratio) else f"{ratio:.3g}×",
                     meanings.get(metric, "")))
    return pd.DataFrame(rows, columns=list(TOTAL_COLUMNS))

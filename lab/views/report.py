"""A trace's analysis as a JSON-ready report and as a short text summary; a comparison likewise.

``build_report`` is a pure function of the trace (and of an analysis already computed, if
given); ``format_report`` turns its dict into text; ``comparison_to_dict`` and
``format_comparison`` do the same for a ``Comparison``. Plain data only: ``lab/cli.py`` reads
the traces, prints and picks the exit status.
"""

from __future__ import annotations

import math

import numpy as np

from lab.analysis import Analysis, Comparison, analyze, compare_analyses, device_name
from lab.analysis.operators import host_work_us
from lab.explain import Explanation, explain
from lab.judge import Judgement, judge_trace
from lab.measure import measure
from lab.stats import median as _median
from lab.trace.facts import category_counts
from lab.trace.load import Trace
from lab.units import fmt_pct, fmt_tflops, fmt_us
from lab.views.explained import explanation_dict, explanation_text
from lab.vocab import PROFILER_STEP_NAME

__all__ = ["TOP_ROWS", "build_report", "compare_traces", "comparison_to_dict", "format_comparison", "format_report"]

TOP_ROWS = 10  # rows of top_kernels / top_ops in a report


def _plain(value):
    """numpy scalars → Python numbers, NaN/inf → None, recursively: json.dumps-safe."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def _records(frame, columns, limit=None) -> list[dict]:
    frame = frame[list(columns)]
    if limit is not None:
        frame = frame.head(limit)
    return [dict(zip(columns, row)) for row in frame.itertuples(index=False, name=None)]


def build_report(trace: Trace, *, analysis: Analysis | None = None, explanation: Explanation | None = None,
                 judgement: Judgement | None = None, top: int = TOP_ROWS) -> dict:
    """JSON-ready summary of one trace (numbers in µs, shares in %; missing values are None). The
    findings are ``explained.findings``: the judged ones, largest saving first."""
    analysis = analysis or analyze(trace)
    if explanation is None:
        explanation = explain(measure(trace, analysis=analysis))
    judgement = judgement if judgement is not None else judge_trace(trace, analysis, explanation)
    ev = trace.events
    by_category = _by_category(trace)
    util = analysis.utilization
    launches = analysis.launches
    steps = analysis.steps
    report = {
        "trace_name": trace.meta.trace_name,
        "device": device_name(trace) or None,
        "peak": analysis.peak.model if analysis.peak else None,
        "events": int(len(ev)),
        "flows": int(len(trace.flows)),
        "by_category": by_category,
        "gpu": {
            "kernel_time_us": by_category.get("kernel", {}).get("dur_us", 0.0),
            "memcpy_time_us": by_category.get("gpu_memcpy", {}).get("dur_us", 0.0),
            "memset_time_us": by_category.get("gpu_memset", {}).get("dur_us", 0.0),
            "kernel_count": by_category.get("kernel", {}).get("count", 0),
            "busy_us": util.busy_us,
            "span_us": util.trace_span_us,
            "busy_pct": util.busy_pct,
            "active_span_us": util.active_span_us,
            "active_busy_pct": util.active_busy_pct,
        },
        "top_kernels": _records(analysis.kernels, ("name", "cat", "count", "total_us", "mean_us", "share_pct"), top),
        "top_ops": _records(analysis.operators,
                            ("name", "cat", "count", "self_us", "total_us", "self_share_pct", "device_us"), top),
        "launch_delay_us": {"median": launches.delay_median_us, "p90": launches.delay_p90_us,
                            "max": launches.delay_max_us},
        "launch_call_us": {"median": launches.launch_median_us, "total": launches.launch_total_us},
        "steps": {
            "count": int(len(steps)),
            "source": steps["source"].iloc[0] if len(steps) else None,
            # ProfilerStep#N steps go by the name key_averages gives them all.
            "name": (PROFILER_STEP_NAME if str(steps["source"].iloc[0]) == "ProfilerStep"
                     else steps["name"].iloc[0]) if len(steps) else None,
            "first_cpu_us": float(steps["cpu_us"].iloc[0]) if len(steps) else None,
            "median_cpu_us": float(steps["cpu_us"].median()) if len(steps) else None,
            "median_gpu_busy_pct": float(steps["gpu_busy_pct"].median()) if len(steps) else None,
        },
        "gemm": _gemm_rows(analysis.gemm),
        "gemm_notes": list(analysis.gemm_notes),
        "verdict": _verdict(analysis, judgement),
        "memory": _memory(analysis),
        "explained": explanation_dict(explanation, judgement, top=top),
    }
    return _plain(report)


def _verdict(analysis: Analysis, judgement: Judgement) -> dict:
    """The judged verdict: ``kind`` is the rule of the finding it names ("none": it says where the
    time went), ``cause`` that finding (``Finding.as_dict``; empty without one), beside the
    GPU-busy, host-work and launch-delay figures it is read with."""
    found = judgement.named
    return {"kind": found.rule if found is not None else "none", "explanation": judgement.verdict,
            "gpu_busy_pct": analysis.utilization.active_busy_pct, "cpu_self_us": host_work_us(analysis.operators),
            "launch_delay_median_us": analysis.launches.delay_median_us,
            "cause": found.as_dict() if found is not None else {}}


def _memory(analysis: Analysis) -> list[dict] | None:
    """profile_memory: one entry per device (peak, what ran at it, reserved); None without records."""
    if analysis.memory is None:
        return None
    return [{"device": d.device, "peak_allocated_bytes": d.peak.allocated_bytes, "peak_at_us": d.peak.ts_us,
             "peak_op": d.peak.op or None, "peak_annotation": d.peak.annotation or None,
             "peak_step": d.peak.step if d.peak.step >= 0 else None, "max_reserved_bytes": d.max_reserved_bytes,
             "allocations": d.allocations, "frees": d.frees} for d in analysis.memory.devices]


def _gemm_rows(gemm) -> list[dict]:
    """One entry per (kernel, shape, dtype) of the GEMM table, with the medians of its instances."""
    rows_out: list[dict] = []
    if not len(gemm):
        return rows_out
    grouped = gemm.assign(shape=gemm["m"].astype(str) + "×" + gemm["k"].astype(str) + "×" + gemm["n"].astype(str))
    for (kernel, _, dtype), rows in grouped.groupby(["kernel", "shape", "dtype"], sort=False, dropna=False):
        rows_out.append({
            "kernel": kernel, "op": rows["op"].iloc[0], "count": len(rows),
            "m": rows["m"].iloc[0], "k": rows["k"].iloc[0], "n": rows["n"].iloc[0], "dtype": dtype,
            "shape_source": rows["shape_source"].iloc[0],
            "kernel_median_us": _median(rows["kernel_us"]),
            "tflops_median": _median(rows["tflops"]),
            "pct_of_peak_median": _median(rows["pct_of_peak"]),
            "peak_tflops": _median(rows["peak_tflops"]),
            "rate_unit": rows["rate_unit"].iloc[0],
            "bound": rows["bound"].iloc[0],
        })
    return rows_out


def _by_category(trace: Trace) -> dict:
    """{cat: {count, dur_us}} over all complete events, by category name (the Trace view's table)."""
    rows = sorted(category_counts(trace).itertuples(index=False), key=lambda row: str(row.category))
    return {str(row.category): {"count": int(row.events), "dur_us": float(row.total_us)} for row in rows}


def format_report(report: dict) -> str:
    """A human summary of ``build_report``'s dict, a screenful of text."""
    gpu = report["gpu"]
    lines = [f"Trace: {report.get('trace_name') or '(unnamed)'}"
             + (f" — {report['device']}" if report.get("device") else ""),
             f"{report['events']:,} events, {report['flows']:,} launch→GPU links", "",
             explanation_text(report["explained"]), ""]
    if gpu["kernel_count"] or gpu["busy_us"]:
        lines += [
            "GPU",
            f"  kernels {fmt_us(gpu['kernel_time_us'])} ({gpu['kernel_count']}), memcpy "
            f"{fmt_us(gpu['memcpy_time_us'])}, memset {fmt_us(gpu['memset_time_us'])}",
            f"  busy {fmt_us(gpu['busy_us'])} = {fmt_pct(gpu['busy_pct'])} of the trace's {fmt_us(gpu['span_us'])}, "
            f"{fmt_pct(gpu['active_busy_pct'])} of its active {fmt_us(gpu['active_span_us'])}",
            f"  launch delay median {fmt_us(report['launch_delay_us']['median'])}, "
            f"p90 {fmt_us(report['launch_delay_us']['p90'])}", ""]
    steps = report["steps"]
    if steps["count"]:
        lines += [f"Steps: {steps['count']} × '{steps['name']}' ({steps['source']}), first "
                  f"{fmt_us(steps['first_cpu_us'])}, median {fmt_us(steps['median_cpu_us'])} CPU", ""]
    if report["top_kernels"]:
        lines.append("Top GPU activity")
        for row in report["top_kernels"][:5]:
            lines.append(f"  {fmt_us(row['total_us']):>10}  {fmt_pct(row['share_pct']):>8}  ×{row['count']:<5} "
                         f"{_short(row['name'])}")
        lines.append("")
    if report["top_ops"]:
        lines.append("Top CPU ops (self time)")
        for row in report["top_ops"][:5]:
            lines.append(f"  {fmt_us(row['self_us']):>10}  {fmt_pct(row['self_share_pct']):>8}  ×{row['count']:<5} "
                         f"{_short(row['name'])}")
        lines.append("")
    lines += _gemm_lines(report)
    return "\n".join(lines).rstrip("\n")


def _gemm_lines(report: dict) -> list[str]:
    """One line per GEMM (kernel, shape, dtype) with a rate, then what was left out, then a blank."""
    lines = []
    for row in report["gemm"]:
        if row["tflops_median"] is not None:
            unit = row.get("rate_unit") or "TFLOP/s"
            lines.append(f"GEMM {row['m']:.0f}×{row['k']:.0f}×{row['n']:.0f} {row['dtype']}: "
                         f"{fmt_tflops(row['tflops_median'], unit)}, {fmt_pct(row['pct_of_peak_median'])} of "
                         f"the {row['dtype']} peak ({row['bound'] or 'peak unknown'}) — {_short(row['kernel'], 50)}")
    lines += [f"Note: {note}" for note in report.get("gemm_notes", [])]
    return lines + [""] if lines or report["gemm"] else lines


def _short(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def compare_traces(a: Trace, b: Trace, *, label_a: str = "A", label_b: str = "B") -> Comparison:
    """Compare trace ``b`` with the baseline ``a``, each analysed and judged once. Traces alone
    carry no run config, so GEMM shapes come from the traces only; a caller that has analyses and
    judgements already (the page, the CLI's reads) uses ``compare_analyses``."""
    analysis_a, analysis_b = analyze(a), analyze(b)
    return compare_analyses(analysis_a, analysis_b, findings_a=judge_trace(a, analysis_a).findings,
                            findings_b=judge_trace(b, analysis_b).findings, label_a=label_a, label_b=label_b)


def comparison_to_dict(comparison: Comparison, *, top: int = 15) -> dict:
    """JSON-ready form of a ``Comparison`` (the ``top`` largest changes per table)."""
    cols = ("name", "cat", "status", "a_count", "b_count", "a_us", "b_us", "delta_us", "ratio")
    return _plain({
        "label_a": comparison.label_a,
        "label_b": comparison.label_b,
        "totals": _records(comparison.totals, ("metric", "a", "b", "delta", "ratio")),
        "operators": _records(comparison.operators, cols, top),
        "kernels": _records(comparison.kernels, cols, top),
        "findings_gone": list(comparison.findings_gone),
        "findings_new": list(comparison.findings_new),
        "findings_kept": list(comparison.findings_kept),
    })


def format_comparison(data: dict) -> str:
    a, b = data["label_a"], data["label_b"]
    lines = [f"{b} compared with {a} (delta = {b} − {a})", "", "Totals"]
    for row in data["totals"]:
        is_pct = row["metric"].endswith("_pct")
        is_count = row["metric"].endswith("_count")
        show = (lambda v: fmt_pct(v)) if is_pct else ((lambda v: "—" if v is None else f"{v:.0f}") if is_count
                                                       else fmt_us)
        ratio = "" if row["ratio"] is None else f"  ×{row['ratio']:.2f}"
        lines.append(f"  {row['metric']:<24} {show(row['a']):>10} → {show(row['b']):>10}{ratio}")
    for title, key in (("GPU activity", "kernels"), ("CPU ops (self time)", "operators")):
        lines += ["", f"{title}, largest changes"]
        for row in data[key][:8]:
            lines.append(f"  {row['status']:<4} {fmt_us(row['a_us']):>10} → {fmt_us(row['b_us']):>10}  "
                         f"{_short(row['name'], 60)}")
    lines += ["", "Findings"]
    lines += [f"  gone: {t}" for t in data["findings_gone"]]
    lines += [f"  new:  {t}" for t in data["findings_new"]]
    lines += [f"  kept: {t}" for t in data["findings_kept"]]
    return "\n".join(lines)

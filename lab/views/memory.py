"""The Memory view as data, its Altair chart, and the CLI's ``memory`` text and CSV.

``build_memory_view`` turns ``lab.analysis.memory.analyze`` (the peaks, the per-step figures, the
level-of-detail curve) into what the page draws for one window: the allocated / reserved curves
per device, the peaks with what ran at them, the steps as bands. The chart uses the timeline's
time axis (µs since the trace's first event, the same window), so a peak here is found at the
same x in the Timeline view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from lab.analysis.memory.analyze import (
    DEFAULT_MAX_POINTS,
    DEFAULT_WIDTH_PX,
    MEMORY_STEP_COLUMNS,
    MemoryAnalysis,
    MemorySeries,
    device_names,
    memory_analysis,
    memory_series,
)
from lab.judge.memory_rules import MEMORY_RULE_NAMES
from lab.trace import Trace
from lab.units import fmt_mem_bytes, fmt_us_fixed

if TYPE_CHECKING:  # pragma: no cover
    import altair as alt

__all__ = [
    "MEMORY_CSV_COLUMNS", "NO_MEMORY", "MemoryView", "build_memory_view", "device_table", "memory_chart",
    "memory_findings", "memory_ops", "memory_rows", "memory_text", "step_table",
]  # fmt: skip

MEMORY_CSV_COLUMNS = MEMORY_STEP_COLUMNS  # step -1: the whole trace
NO_MEMORY = ("This trace has no [memory] events: record it with profile_memory=True "
             "(torch.profiler.profile(profile_memory=True), the form's profile_memory box, or "
             "python -m lab profile --profile-memory) to see allocations over time.")
PEAK_LABEL_MIN_SHARE = 0.05  # peaks under 5 % of the highest one get a marker but no label
PEAK_LABEL_HEADROOM = 1.18  # the y axis ends 18 % above the highest point: room for one line of label
_UNITS = ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))
# Series colours: a device's allocated curve strong, its reserved curve light (Tableau pairs).
_PALETTE = ("#4c78a8", "#9ecae9", "#f58518", "#ffbf79", "#54a24b", "#88d27a", "#b279a2", "#d6a5c9")


@dataclass(frozen=True)
class MemoryView:
    """What the Memory chart draws for one window."""

    series: MemorySeries  # the curves (≤ max_points points)
    peaks: pd.DataFrame  # device, ts_us, bytes, text: one row per device whose peak is in the window
    steps: pd.DataFrame  # step, start_us, end_us: the step bands overlapping the window
    unit: tuple[int, str]  # bytes per unit and its name, from the largest value shown
    window: tuple[float, float]

    @property
    def points(self) -> int:
        """Data points sent to the browser: curve points, peak marks and step bands."""
        return len(self.series.points) + len(self.peaks) + len(self.steps)


def _peak_text(memory: MemoryAnalysis, device: str) -> str:
    dev = memory.device(device)
    if dev is None:
        return ""
    peak = dev.peak
    where = [w for w in (peak.op, f"'{peak.annotation}'" if peak.annotation else "",
                         f"step {peak.step + 1}" if peak.step >= 0 else "") if w]
    return f"peak {fmt_mem_bytes(peak.allocated_bytes)}" + (f" · {' · '.join(where)}" if where else "")


def build_memory_view(trace: Trace, memory: MemoryAnalysis | None = None, *, start_us: float | None = None,
                      end_us: float | None = None, max_points: int = DEFAULT_MAX_POINTS,
                      width_px: int = DEFAULT_WIDTH_PX) -> MemoryView | None:
    """The Memory chart's data for the window (default: the whole trace); None without records."""
    memory = memory if memory is not None else memory_analysis(trace)
    if memory is None:
        return None
    series = memory_series(trace, start_us=start_us, end_us=end_us, max_points=max_points, width_px=width_px)
    w0, w1 = series.window
    peaks = pd.DataFrame([
        {"device": d.device, "ts_us": d.peak.ts_us, "bytes": d.peak.allocated_bytes,
         "text": _peak_text(memory, d.device)}
        for d in memory.devices if w0 <= d.peak.ts_us <= w1
    ], columns=["device", "ts_us", "bytes", "text"])
    first = memory.steps.drop_duplicates("step") if len(memory.steps) else memory.steps
    steps = first.loc[(first["end_us"] >= w0) & (first["start_us"] <= w1), ["step", "start_us", "end_us"]]
    largest = max([int(series.points["bytes"].max()) if len(series.points) else 0, 1])
    unit = next(u for u in _UNITS if largest >= u[0])
    return MemoryView(series, peaks.reset_index(drop=True), steps.reset_index(drop=True), unit, (w0, w1))


def memory_chart(view: MemoryView) -> alt.LayerChart:
    """Allocated and reserved bytes per device as step lines over the timeline's time axis; the
    peaks marked and labelled; the steps as light bands; x zoom/pan as on the timeline."""
    import altair as alt  # on first draw: the CLI never pays its import

    scale, unit = view.unit
    pts = view.series.points.copy()
    pts["series"] = pts["device"].astype(str) + " " + pts["kind"].astype(str)
    pts["value"] = pts["bytes"].to_numpy(dtype=np.float64) / scale
    pts["shown"] = [fmt_mem_bytes(b) for b in pts["bytes"]]
    names = list(dict.fromkeys(pts["series"]))
    x_scale = alt.Scale(domain=list(view.window), nice=False, zero=False)
    x = alt.X("ts_us:Q", scale=x_scale, title="time (µs since trace start)")
    color = alt.Color("series:N", scale=alt.Scale(domain=names, range=list(_PALETTE[:len(names)]) or ["#4c78a8"]),
                      legend=alt.Legend(title=None, orient="bottom"))
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    # Headroom above the highest curve, so the peak's label stays inside the plot.
    top = float(pts["value"].max()) * PEAK_LABEL_HEADROOM if len(pts) else 1.0
    y_scale = alt.Scale(domain=[0, top or 1.0], nice=False)
    y = alt.Y("value:Q", title=f"memory ({unit})", scale=y_scale)
    lines = (alt.Chart(pts).mark_line(interpolate="step-after", strokeWidth=1.5)
             .encode(x=x, y=y, color=color,
                     tooltip=[alt.Tooltip("series:N"), alt.Tooltip("shown:N", title="bytes"),
                              alt.Tooltip("ts_us:Q", title="time (µs)", format=",.3f")])
             .add_params(zoom))
    layers: list = []
    if len(view.steps):
        steps = view.steps.assign(label=[f"step {int(s) + 1}" for s in view.steps["step"]],
                                  shade=[int(s) % 2 for s in view.steps["step"]])
        layers.append(alt.Chart(steps).mark_rect(opacity=0.06, color="#555555")
                      .encode(x=alt.X("start_us:Q", scale=x_scale), x2="end_us:Q",
                              opacity=alt.Opacity("shade:N", scale=alt.Scale(range=[0.03, 0.09]), legend=None),
                              tooltip=[alt.Tooltip("label:N", title="step")]))
    layers.append(lines)
    if len(view.peaks):
        peaks = view.peaks.assign(value=view.peaks["bytes"].to_numpy(dtype=np.float64) / scale)
        base = alt.Chart(peaks).encode(x=alt.X("ts_us:Q", scale=x_scale), y=alt.Y("value:Q", scale=y_scale),
                                       tooltip=[alt.Tooltip("device:N"), alt.Tooltip("text:N", title="peak")])
        layers.append(base.mark_point(shape="triangle-down", size=90, filled=True, color="#e45756"))
        # Labels for the peaks that matter at this scale (a CPU's few bytes beside a GPU's GiB would
        # only clutter); every peak keeps its marker and tooltip.
        labelled = peaks[peaks["value"] >= PEAK_LABEL_MIN_SHARE * float(peaks["value"].max())]
        # A peak in the window's right half is labelled to its left: written rightwards it ran past
        # the plot's edge ("peak 3" of "peak 3.07 GiB · …").
        middle = (view.window[0] + view.window[1]) / 2
        sides: tuple[tuple[Any, Literal["left", "right"], int], ...] = (
            (labelled["ts_us"] <= middle, "left", 6), (labelled["ts_us"] > middle, "right", -6))
        for side, align, dx in sides:
            if side.any():
                layers.append(alt.Chart(labelled[side]).mark_text(align=align, dx=dx, dy=-8, fontSize=11,
                                                                  color="#333333")
                              .encode(x=alt.X("ts_us:Q", scale=x_scale), y=alt.Y("value:Q", scale=y_scale),
                                      text="text:N"))
    return alt.layer(*layers).properties(width="container", height=260)


# --------------------------------------------------------------------------- page tables


def device_table(memory: MemoryAnalysis, unit: tuple[int, str]) -> pd.DataFrame:
    """One row per device: the peak and where it was reached, reserved, counts (bytes in ``unit``)."""
    scale, name = unit
    return pd.DataFrame([{
        "device": d.device, f"peak allocated ({name})": d.peak.allocated_bytes / scale,
        "peak at (µs)": d.peak.ts_us, "op at the peak": d.peak.op, "label at the peak": d.peak.annotation,
        f"max reserved ({name})": d.max_reserved_bytes / scale,
        f"before the first record ({name})": d.start_allocated_bytes / scale,
        "allocations": d.allocations, "frees": d.frees, "of ≤ 1 MiB": d.small_allocations,
    } for d in memory.devices])


def step_table(memory: MemoryAnalysis, unit: tuple[int, str]) -> pd.DataFrame:
    """Per (device, step): the peak, the level at the step's end, counts (bytes in ``unit``)."""
    scale, name = unit
    s = memory.steps
    return pd.DataFrame({
        "device": s["device"], "step": s["step"] + 1,
        f"peak allocated ({name})": s["peak_allocated_bytes"] / scale,
        f"allocated at the end ({name})": s["end_allocated_bytes"] / scale,
        "allocations": s["allocations"], "of ≤ 1 MiB": s["small_allocations"],
        f"allocated in the step ({name})": s["allocated_bytes"] / scale,
    })


def memory_findings(findings) -> list:
    """The memory rules' findings among a trace's judged findings (``Judgement.findings``), in their order."""
    return sorted((f for f in findings if f.rule in MEMORY_RULE_NAMES), key=lambda f: MEMORY_RULE_NAMES.index(f.rule))


def memory_ops(key_averages: pd.DataFrame, unit: tuple[int, str], *, limit: int = 10) -> pd.DataFrame:
    """The CPU-side key_averages rows that allocate the most (self device memory, then self CPU
    memory, by size), torch's four memory columns in ``unit``."""
    scale, name = unit
    ka = key_averages[(key_averages["device_type"] == "cpu")]
    columns = ("self_device_memory_bytes", "device_memory_bytes", "self_cpu_memory_bytes", "cpu_memory_bytes")
    ka = ka[(ka[list(columns)] != 0).any(axis=1)]
    by_cpu, by_device = ka["self_cpu_memory_bytes"].abs().to_numpy(), ka["self_device_memory_bytes"].abs().to_numpy()
    order = np.lexsort((-by_cpu, -by_device))
    top = ka.iloc[order[:limit]]
    out = {"name": top["name"], "count": top["count"]}
    for column, label in zip(columns, ("self device", "device total", "self CPU", "CPU total"), strict=True):
        out[f"{label} ({name})"] = top[column] / scale
    return pd.DataFrame(out).reset_index(drop=True)


# --------------------------------------------------------------------------- CLI


def memory_rows(trace: Trace, memory: MemoryAnalysis) -> pd.DataFrame:
    """``MEMORY_CSV_COLUMNS``: per device one whole-trace row (step -1), then one per step."""
    whole = []
    for d in memory.devices:
        whole.append({"device": d.device, "step": -1, "start_us": 0.0, "end_us": float(trace.meta.span_us),
                      "peak_allocated_bytes": d.peak.allocated_bytes, "end_allocated_bytes": d.end_allocated_bytes,
                      "allocations": d.allocations, "frees": d.frees, "small_allocations": d.small_allocations,
                      "allocated_bytes": _sum_bytes(trace, d.device, 1),
                      "freed_bytes": _sum_bytes(trace, d.device, -1)})
    frame = pd.concat([pd.DataFrame(whole, columns=list(MEMORY_CSV_COLUMNS)), memory.steps], ignore_index=True)
    order = {d.device: i for i, d in enumerate(memory.devices)}
    key = frame["device"].map(order).to_numpy() * (len(frame) + 2) + frame["step"].to_numpy() + 1
    return frame.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)


def _sum_bytes(trace: Trace, device: str, sign: int) -> int:
    m = trace.memory
    b = m["bytes"].to_numpy()[device_names(m) == device]
    return int(b[b * sign > 0].sum() * sign)


def memory_text(trace: Trace, memory: MemoryAnalysis, findings: list) -> str:
    """What ``python -m lab memory`` prints: devices, the steps, the memory findings (``memory_findings``)."""
    lines = []
    for d in memory.devices:
        p = d.peak
        where = ", ".join(w for w in (p.op and f"inside {p.op}", p.annotation and f"label '{p.annotation}'",
                                      f"step {p.step + 1}" if p.step >= 0 else "") if w) or "outside any op"
        lines += [f"{d.device}: {d.records:,} records ({d.allocations:,} allocations, {d.frees:,} frees, "
                  f"{d.small_allocations:,} of ≤ 1 MiB)",
                  f"  peak allocated {fmt_mem_bytes(p.allocated_bytes)} at {fmt_us_fixed(p.ts_us)} ({where})",
                  f"  reserved up to {fmt_mem_bytes(d.max_reserved_bytes)}; allocated "
                  f"{fmt_mem_bytes(d.start_allocated_bytes)} before the first record, "
                  f"{fmt_mem_bytes(d.end_allocated_bytes)} after the last"]
    if len(memory.steps):
        lines += ["", f"{'device':<8} {'step':>4} {'peak':>12} {'at end':>12} {'allocs':>7} {'small':>7}"]
        for r in memory.steps.itertuples(index=False):
            lines.append(f"{r.device:<8} {r.step + 1:>4} {fmt_mem_bytes(r.peak_allocated_bytes):>12} "
                         f"{fmt_mem_bytes(r.end_allocated_bytes):>12} {r.allocations:>7,} {r.small_allocations:>7,}")
    else:
        lines += ["", "no steps found (no ProfilerStep#N nor a repeated record_function label): no per-step figures"]
    for f in findings:
        kind = "note" if f.scope == "note" else f.severity
        lines += ["", f"[{kind}] {f.title}", f"  {f.evidence}", f"  try: {f.suggestion}"]
    return "\n".join(lines) + "\n"

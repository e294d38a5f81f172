"""Where the time went and what would save it, as data: the Summary's stacked bar per step, its
findings, the Table's per-op roof columns, and the CLI's text and JSON of the same."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lab.analysis.steps import profiler_step_number
from lab.explain import CAUSE_COLUMNS, CAUSES, HOST_CAUSES, Explanation
from lab.judge import Judgement
from lab.units import fmt_us

if TYPE_CHECKING:  # pragma: no cover
    import altair as alt

__all__ = ["MAX_BAR_STEPS", "attribution_chart", "attribution_frame", "default_table_sort", "explanation_dict",
           "explanation_text", "fits_legend", "roof_table", "saving_words", "step_labels"]

# The stacked bar draws at most this many steps (the slowest are always among them): a trace of
# thousands of steps would otherwise send thousands × causes marks (Altair slows past ~10k).
MAX_BAR_STEPS = 200
# The plot's height, and the legend beside it, not under it: Streamlit fits the whole chart (axes
# and legend included) into its height, so a legend of 9 causes in rows under the bars left the
# plot 20 px tall at 1280 px and nothing at 800 px (screenshots of two uploads).
BAR_CHART_PX = 240
# The longest cause label, "device memory allocation (cudaMalloc / cudaFree)", is about 300 px.
LEGEND_LABEL_PX = 320
# The legend beside the bars grows one row per cause; the chart is as tall as its legend needs.
# Measured in Chromium under Streamlit's theme (an upload of input_bound, 14 causes, at 800 px): a
# row is 18 px, and the legend's title and the axes' own room take 64 px more than the rows'.
LEGEND_ROW_PX = 18
LEGEND_EXTRA_PX = 64


def attribution_frame(explanation: Explanation) -> pd.DataFrame:
    """Long form for the stacked bar: one row per (step, cause) with time in it."""
    steps = explanation.attribution.steps
    if len(steps) > MAX_BAR_STEPS:
        keep = np.unique(np.concatenate([np.linspace(0, len(steps) - 1, MAX_BAR_STEPS - 10).astype(int),
                                         np.argsort(-steps["wall_us"].to_numpy())[:10]]))
        steps = steps.iloc[keep]
    labels = step_labels(steps["step"], steps["name"])
    rows = []
    for c, col in zip(CAUSES, CAUSE_COLUMNS):
        for step, name, label, us, wall in zip(steps["step"], steps["name"], labels, steps[col], steps["wall_us"]):
            if us > 0:
                rows.append({"step": int(step), "step_name": str(name), "label": label, "cause": c.label,
                             "us": float(us), "pct": 100.0 * float(us) / float(wall) if wall > 0 else 0.0})
    return pd.DataFrame(rows, columns=["step", "step_name", "label", "cause", "us", "pct"])


def saving_words(scope: str, saving_us: float, saving_pct: float, *, once: str = "once") -> str:
    """What a finding's fix would save, in words: per step or ``once``, or nothing to recover (a
    note's words are its reader's)."""
    if saving_us <= 0:
        return "nothing to recover"
    return f"saves {fmt_us(saving_us)} {'per step' if scope == 'per step' else once} ({saving_pct:.0f} %)"


def step_labels(index, names) -> list[str]:
    """The bar's label of each step: N of "ProfilerStep#N" — the number the verdict and the
    Timeline name — where every step has one, else its position (0, 1, …)."""
    numbers = [profiler_step_number(str(n)) for n in names]
    if None in numbers or len(set(numbers)) < len(numbers):
        return [str(int(i)) for i in index]
    return [str(n) for n in numbers]


def attribution_chart(explanation: Explanation) -> alt.Chart:
    """A bar per step stacked by cause, in the causes' colours (altair imported on the first draw:
    the CLI never draws, and its import is ~0.2 s)."""
    import altair as alt

    data = attribution_frame(explanation)
    used = [c for c in CAUSES if c.label in set(data["cause"])]
    in_step_order = list(dict.fromkeys(data.sort_values("step", kind="stable")["label"]))
    color = alt.Color("cause:N", title="Cause", sort=[c.label for c in used],
                      scale=alt.Scale(domain=[c.label for c in used], range=[c.color for c in used]),
                      legend=alt.Legend(orient="right", labelLimit=LEGEND_LABEL_PX))
    return alt.Chart(data).mark_bar().encode(
        x=alt.X("label:N", title="ProfilerStep#N" if (data["label"] != data["step"].astype(str)).any() else "Step",
                sort=in_step_order, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("us:Q", title="Time (µs)", stack="zero"),
        color=color,
        order=alt.Order("cause_order:Q"),
        tooltip=[alt.Tooltip("step_name:N", title="Step"), alt.Tooltip("cause:N", title="Cause"),
                 alt.Tooltip("us:Q", title="µs", format=",.1f"), alt.Tooltip("pct:Q", title="% of step", format=".1f")],
    ).transform_calculate(
        cause_order=f"indexof({[c.label for c in used]!r}, datum.cause)"
    ).properties(height=fits_legend(BAR_CHART_PX, len(used)))


def fits_legend(height_px: int, entries: int) -> int:
    """A chart's height, raised to hold a legend of ``entries`` rows beside it (Streamlit clips
    what runs below the chart)."""
    return max(height_px, LEGEND_ROW_PX * entries + LEGEND_EXTRA_PX)


def default_table_sort(judgement: Judgement | None, sort_keys: list[str]) -> str:
    """The Table's first sort: by what the verdict blames. A host cause (the input pipeline,
    compilation, Python, the optimizer's loop) is found by CPU total, where a device-time sort
    hides it; anything else by the first key (device total on a GPU trace)."""
    finding = judgement.verdict_finding if judgement is not None else None
    host_led = finding is not None and finding.cause in {c.key for c in HOST_CAUSES}
    return "CPU total" if host_led and "CPU total" in sort_keys else sort_keys[0]


def roof_table(explanation: Explanation) -> pd.DataFrame:
    """The Table's per-op roofline columns, in words with units."""
    r = explanation.roofs
    return pd.DataFrame({
        "Name": r["name"], "Input shapes": r["input_dims"], "Class": r["op_class"], "Dtype": r["dtype"],
        "Calls": r["calls"], "GPU time (µs)": r["gpu_us"], "Per call (µs)": r["us_per_call"],
        "TFLOP/s": r["tflops"], "GB/s": r["gbs"], "% of roof": r["pct_of_roof"], "Bound": r["bound"],
        "Note": r["note"],
    })


def explanation_dict(explanation: Explanation, judgement: Judgement, *, top: int = 10) -> dict:
    """JSON-ready: the attribution (median per step, and per step), outliers, findings, roofs."""
    a = explanation.attribution
    med = a.median_us()
    step = a.step_us
    return {
        "verdict": judgement.verdict,
        "step_us": step,
        "steps_source": a.source,
        "steps": int(len(a.steps)),
        "unknown": list(a.unknown),
        "by_cause_median": {c.key: {"label": c.label, "us": float(med[c.key]),
                                    "pct": 100.0 * float(med[c.key]) / step if step > 0 else 0.0}
                            for c in CAUSES if med[c.key] > 0},
        "per_step": a.steps.to_dict(orient="records"),
        "outliers": [{"step": o.name, "wall_us": o.wall_us, "median_us": o.median_us,
                      "extra_by_cause": dict(o.extra_by_cause)} for o in explanation.outliers],
        "findings": [f.as_dict() for f in judgement.findings],
        "roofs": explanation.roofs.head(top).to_dict(orient="records"),
    }


def explanation_text(data: dict) -> str:
    """The CLI's "where the time went" and "findings" sections."""
    step = data["step_us"]
    source = {"ProfilerStep": "ProfilerStep#N", "annotation": "a repeated record_function",
              "window": "no steps: the whole trace"}.get(data["steps_source"], data["steps_source"])
    lines = [f"Verdict: {data['verdict']}", "",
             f"Where the time went: median step {fmt_us(step)} over {data['steps']} step(s) ({source})"]
    for item in sorted(data["by_cause_median"].values(), key=lambda v: -v["us"]):
        lines.append(f"  {fmt_us(item['us']):>10}  {item['pct']:5.1f} %  {item['label']}")
    lines += [f"  ({u})" for u in data["unknown"]]
    lines += ["", "Findings (largest saving first, notes last)"]
    for f in data["findings"]:
        lines.append(f"  [note] {f['title']}" if f["scope"] == "note" else
                     f"  [{f['severity']}] {f['title']}: {saving_words(f['scope'], f['saving_us'], f['saving_pct'])}")
        lines.append(f"      premise: {f['premise']}")
        lines.append(f"      evidence: {f['evidence']}")
        lines.append(f"      try: {f['suggestion']}")
        if f.get("caveat"):
            lines.append(f"      what would change it: {f['caveat']}")
        if f.get("learn_more"):
            lines.append(f"      more: {f['learn_more']}")
    if not data["findings"]:
        lines.append("  none: nothing stands out")
    return "\n".join(lines)

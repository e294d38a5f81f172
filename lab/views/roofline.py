"""The teaching views as Altair charts: the room's roofline, a question's answers, and the
reveal's timeline window with the events that prove the answer picked out.

Data comes from ``lab.teach`` (``roofline_data``, a room's answer counts, a question's
``Where``); nothing here computes an answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import pandas as pd

from lab.trace.load import Trace
from lab.views.timeline import TimelineData, build_timeline, outline_layer, timeline_chart

__all__ = ["HIGHLIGHT", "REGION_COLORS", "answers_chart", "answers_frame", "reveal_timeline", "roofline_chart"]

REGION_COLORS = {"latency-bound": "#bab0ac", "memory-bound": "#72b7b2", "compute-bound": "#f58518"}
# The reveal's window: wide enough to read one step's lanes, the rest of the page stays in view.
REVEAL_WIDTH_PX = 900
HIGHLIGHT = "#d62728"


def roofline_chart(data: Mapping[str, pd.DataFrame], title: str) -> alt.LayerChart:
    """Log–log: memory- and compute-bound regions either side of the ridge, the overhead band under
    a tenth of the roof, the roof itself, and one point per run (tooltip: who, shape, region)."""
    domain = data["domain"]
    x_scale = alt.Scale(type="log", domain=[float(domain["x"].min()), float(domain["x"].max())], nice=False)
    y_scale = alt.Scale(type="log", domain=[float(domain["y"].min()), float(domain["y"].max())], nice=False)
    colors = alt.Scale(domain=list(REGION_COLORS), range=list(REGION_COLORS.values()))
    x = alt.X("intensity_flops_per_byte:Q", scale=x_scale, title="arithmetic intensity (FLOP/byte)")
    y = alt.Y("tflops:Q", scale=y_scale, title="achieved TFLOP/s")
    regions = alt.Chart(data["regions"]).mark_rect(opacity=0.12).encode(
        x=alt.X("x:Q", scale=x_scale), x2="x2:Q", y=alt.Y("y:Q", scale=y_scale), y2="y2:Q",
        color=alt.Color("region:N", scale=colors, legend=alt.Legend(title="region", orient="bottom", symbolOpacity=1)))
    names = alt.Chart(data["regions"].assign(cx=(data["regions"]["x"] * data["regions"]["x2"]) ** 0.5)).mark_text(
        baseline="top", dy=6, fontSize=13, fontWeight="bold", color="#555555").encode(
        x=alt.X("cx:Q", scale=x_scale), y=alt.Y("y2:Q", scale=y_scale), text="region:N")
    overhead = alt.Chart(data["roof"].assign(floor=float(domain["y"].min()))).mark_area(
        opacity=0.25, color=REGION_COLORS["latency-bound"]).encode(
        x=alt.X("intensity_flops_per_byte:Q", scale=x_scale), y=alt.Y("floor:Q", scale=y_scale),
        y2="overhead_tflops:Q")
    roof = alt.Chart(data["roof"]).mark_line(color="#333333", strokeWidth=2).encode(
        x=alt.X("intensity_flops_per_byte:Q", scale=x_scale), y=alt.Y("roof_tflops:Q", scale=y_scale))
    points = alt.Chart(data["points"]).mark_circle(size=110, opacity=0.9, stroke="#222222").encode(
        x=x, y=y, color=alt.Color("region:N", scale=colors),
        tooltip=[alt.Tooltip("who:N"), alt.Tooltip("shape:N"), alt.Tooltip("dtype:N"), alt.Tooltip("device:N"),
                 alt.Tooltip("intensity_flops_per_byte:Q", format=",.1f", title="FLOP/byte"),
                 alt.Tooltip("tflops:Q", format=",.4f", title="TFLOP/s"), alt.Tooltip("region:N")])
    # One label per shape and dtype, over its fastest point: a room runs each seat's shape many
    # times, and 20 runs' labels stacked into one unreadable smear (the 20-session room test).
    keys = [c for c in ("shape", "dtype") if c in data["points"].columns]
    labelled = data["points"].sort_values("tflops", ascending=False).drop_duplicates(keys) if keys else data["points"]
    labels = alt.Chart(labelled).mark_text(dy=-12, fontSize=11).encode(x=x, y=y, text="shape:N")
    layers = (regions, names, overhead, roof, points, labels)
    return alt.layer(*layers).properties(width="container", height=380, title=title)


def answers_frame(choices: Sequence[str], predicted: Mapping[str, int], measured: Mapping[str, int]) -> pd.DataFrame:
    """One row per choice and kind ("predicted", "measured"), in the question's order of choices."""
    rows = [{"choice": c, "kind": kind, "count": int(counts.get(c, 0)), "order": i}
            for i, c in enumerate(choices) for kind, counts in (("predicted", predicted), ("measured", measured))]
    return pd.DataFrame(rows)


def answers_chart(frame: pd.DataFrame, title: str) -> alt.Chart:
    """The room's predictions per choice as bars, the measured answers beside them."""
    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("count:Q", title="people", axis=alt.Axis(tickMinStep=1)),
        y=alt.Y("choice:N", sort=alt.SortField("order"), title=None),
        yOffset=alt.YOffset("kind:N", sort=["predicted", "measured"]),
        color=alt.Color("kind:N", scale=alt.Scale(domain=["predicted", "measured"], range=["#4c78a8", "#54a24b"]),
                        legend=alt.Legend(title=None, orient="bottom")),
        tooltip=["choice:N", "kind:N", "count:Q"],
    ).properties(width="container", height=alt.Step(16, **{"for": "offset"}), title=title)


def reveal_timeline(trace: Trace, window_us: tuple[float, float],
                    names: Sequence[str]) -> tuple[TimelineData, alt.LayerChart]:
    """The Timeline view's chart of ``window_us``, the events named outlined in red on top."""
    data = build_timeline(trace, start_us=window_us[0], end_us=window_us[1], width_px=REVEAL_WIDTH_PX)
    chart = timeline_chart(data)
    marks = data.marks
    picked = marks[marks["name"].astype(str).isin(list(names))]
    outline = outline_layer(data, picked, color=HIGHLIGHT, stroke_px=2.5, title="the evidence")
    return data, alt.layer(*chart.layer, outline).properties(width="container", height=chart.height,
                                                            autosize=chart.autosize)

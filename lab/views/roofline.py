"""The teaching views as Altair charts: the room's roofline, a question's answers, and the
reveal's timeline window with the events that prove the answer picked out.

Data comes from ``lab.teach`` (``roofline_data``, a room's answer counts, a question's
``Where``); nothing here computes an answer.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from lab.trace.load import Trace
from lab.views.roofline_labels import LABEL_FONT_PX, NAME_FONT_PX, ROOFLINE_HEIGHT_PX, place_labels
from lab.views.timeline import TimelineData, build_timeline, outline_layer, timeline_chart

if TYPE_CHECKING:  # pragma: no cover
    import altair as alt

__all__ = ["HIGHLIGHT", "RATE_UNITS", "REGION_COLORS", "REVEAL_WIDTH_PX", "TITLE_LINE_CHARS", "answers_chart",
           "answers_frame", "log_ticks", "rate_unit", "reveal_chart", "reveal_timeline", "roofline_chart",
           "title_lines"]

REGION_COLORS = {"latency-bound": "#bab0ac", "memory-bound": "#72b7b2", "compute-bound": "#f58518"}
# The reveal's window: wide enough to read one step's lanes, the rest of the page stays in view.
REVEAL_WIDTH_PX = 900
HIGHLIGHT = "#d62728"
# The roofline's y axis in the largest unit the roof reaches 1 in: a CPU's roof is ~0.1 TFLOP/s and
# its log axis in TFLOP/s read "0.0001", "0.0003", …; in GFLOP/s the same ticks are 0.1 … 100.
RATE_UNITS = ((1.0, "TFLOP/s"), (1e3, "GFLOP/s"), (1e6, "MFLOP/s"))  # (per TFLOP/s, unit)
# A log axis is labelled at its powers of ten when it holds at least this many, else at 1-2-5.
MIN_POWER_TICKS = 3
TICK_FORMAT = ",~g"  # 0.1, 1, 10, 1,000: no trailing zeros, no exponent


def rate_unit(peak_tflops: float) -> tuple[float, str]:
    """(factor from TFLOP/s, unit name) for a chart whose roof peaks at ``peak_tflops``."""
    for factor, unit in RATE_UNITS:
        if peak_tflops * factor >= 1:
            return factor, unit
    return RATE_UNITS[-1]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values of a log axis over [lo, hi]: its powers of ten, or 1-2-5 steps when it holds
    fewer than ``MIN_POWER_TICKS`` of them (rounded to 12 significant digits, so that a tick
    reads "0.2", not "0.20000000000000001")."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))

    def inside(steps: tuple[int, ...]) -> list[float]:
        ticks = [float(f"{m * 10.0 ** e:.12g}") for e in range(first, last + 1) for m in steps]
        return [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]

    powers = inside((1,))
    return powers if len(powers) >= MIN_POWER_TICKS else inside((1, 2, 5))


def roofline_chart(data: Mapping[str, pd.DataFrame], title: str, *, notes: Sequence[str] = ()) -> alt.LayerChart:
    """Log–log: memory- and compute-bound regions either side of the ridge, the overhead band under
    a tenth of the roof, the roof itself, and one point per run (tooltip: who, shape, region). Rates
    in the unit the roof reaches 1 in (``rate_unit``), ticks at powers of ten; ``notes`` (the roof
    raised to a run: ``Roofline.raised``) are said under the title, a line each."""
    import altair as alt  # on first draw: the CLI never pays its import

    domain = data["domain"]
    factor, unit = rate_unit(float(data["roof"]["roof_tflops"].max()))
    x_lo, x_hi = float(domain["x"].min()), float(domain["x"].max())
    y_lo, y_hi = float(domain["y"].min()) * factor, float(domain["y"].max()) * factor
    x_scale = alt.Scale(type="log", domain=[x_lo, x_hi], nice=False)
    y_scale = alt.Scale(type="log", domain=[y_lo, y_hi], nice=False)
    colors = alt.Scale(domain=list(REGION_COLORS), range=list(REGION_COLORS.values()))
    x = alt.X("intensity_flops_per_byte:Q", scale=x_scale, title="arithmetic intensity (FLOP/byte)",
              axis=alt.Axis(values=log_ticks(x_lo, x_hi), format=TICK_FORMAT))
    y = alt.Y("rate:Q", scale=y_scale, title=f"achieved {unit}",
              axis=alt.Axis(values=log_ticks(y_lo, y_hi), format=TICK_FORMAT))
    rates = data["regions"].assign(y=data["regions"]["y"] * factor, y2=data["regions"]["y2"] * factor)
    regions = alt.Chart(rates).mark_rect(opacity=0.12).encode(
        x=alt.X("x:Q", scale=x_scale), x2="x2:Q", y=alt.Y("y:Q", scale=y_scale), y2="y2:Q",
        color=alt.Color("region:N", scale=colors, legend=alt.Legend(title="region", orient="bottom", symbolOpacity=1,
                                                                     direction="vertical")))
    # The region names along the plot's bottom edge, clear of the points' labels (roofline_labels).
    named = data["regions"].assign(cx=(data["regions"]["x"] * data["regions"]["x2"]) ** 0.5,
                                   y=float(domain["y"].min()))
    names = alt.Chart(named.assign(y=y_lo)).mark_text(baseline="bottom", dy=-4, fontSize=NAME_FONT_PX,
                                                      fontWeight="bold", color="#555555").encode(
        x=alt.X("cx:Q", scale=x_scale), y=alt.Y("y:Q", scale=y_scale), text="region:N")
    line = data["roof"].assign(roof_rate=data["roof"]["roof_tflops"] * factor,
                               overhead_rate=data["roof"]["overhead_tflops"] * factor, floor=y_lo)
    overhead = alt.Chart(line).mark_area(opacity=0.25, color=REGION_COLORS["latency-bound"]).encode(
        x=alt.X("intensity_flops_per_byte:Q", scale=x_scale), y=alt.Y("floor:Q", scale=y_scale),
        y2="overhead_rate:Q")
    roof = alt.Chart(line).mark_line(color="#333333", strokeWidth=2).encode(
        x=alt.X("intensity_flops_per_byte:Q", scale=x_scale), y=alt.Y("roof_rate:Q", scale=y_scale))
    runs = data["points"].assign(rate=data["points"]["tflops"] * factor)
    points = alt.Chart(runs).mark_circle(size=110, opacity=0.9, stroke="#222222").encode(
        x=x, y=y, color=alt.Color("region:N", scale=colors),
        tooltip=[alt.Tooltip("who:N"), alt.Tooltip("shape:N"), alt.Tooltip("dtype:N"), alt.Tooltip("device:N"),
                 alt.Tooltip("intensity_flops_per_byte:Q", format=",.1f", title="FLOP/byte"),
                 alt.Tooltip("rate:Q", format=",.3~r", title=unit), alt.Tooltip("region:N")])
    # One label per shape and dtype, over its fastest point: a room runs each seat's shape many
    # times, and 20 runs' labels stacked into one unreadable smear (the 20-session room test);
    # each placed where it covers no other label, point or region name (roofline_labels).
    keys = [c for c in ("shape", "dtype") if c in runs.columns]
    fastest = runs.sort_values("tflops", ascending=False)
    placed = place_labels(fastest.drop_duplicates(keys) if keys else fastest, named, domain)
    labels = [alt.Chart(group).mark_text(align=align, dx=dx, dy=dy, baseline="middle", fontSize=LABEL_FONT_PX).encode(
        x=x, y=y, text="shape:N") for (align, dx, dy), group in placed.groupby(["align", "dx", "dy"], sort=False)]
    layers = (regions, names, overhead, roof, points, *labels)
    # fit-x: the width is the container's, the height the plot's own (what roofline_labels assumes;
    # "fit" shrank the plot to ~180 px to make room for the axes and the legend).
    subtitle = [line for note in notes for line in title_lines(note)]
    heading = alt.TitleParams(title_lines(title), subtitle=subtitle or alt.Undefined, anchor="start")
    return alt.layer(*layers).properties(width="container", height=ROOFLINE_HEIGHT_PX, title=heading,
                                         autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))


def answers_frame(choices: Sequence[str], predicted: Mapping[str, int], measured: Mapping[str, int]) -> pd.DataFrame:
    """One row per choice and kind ("predicted", "measured"), in the question's order of choices."""
    rows = [{"choice": c, "kind": kind, "count": int(counts.get(c, 0)), "order": i}
            for i, c in enumerate(choices) for kind, counts in (("predicted", predicted), ("measured", measured))]
    return pd.DataFrame(rows)


# A chart title's line: Vega never wraps a title, and at an 800 px window with the sidebar open a
# room chart is ~468 px wide, about 60 characters of its 13 px bold title: a question's text
# (~80 characters) ran past the chart's edge. Titles are broken into lines of at most this many.
TITLE_LINE_CHARS = 52


def title_lines(text: str) -> list[str]:
    """``text`` in lines of at most ``TITLE_LINE_CHARS`` characters, broken between words (a
    list title is drawn a line each)."""
    return textwrap.wrap(text, TITLE_LINE_CHARS) or [text]


def answers_chart(frame: pd.DataFrame, title: str) -> alt.Chart:
    """The room's predictions per choice as bars, the measured answers beside them; the title (a
    question) in lines that fit the chart (``title_lines``)."""
    import altair as alt  # on first draw: the CLI never pays its import

    return alt.Chart(frame).mark_bar().encode(
        x=alt.X("count:Q", title="people", axis=alt.Axis(tickMinStep=1)),
        y=alt.Y("choice:N", sort=alt.SortField("order"), title=None),
        yOffset=alt.YOffset("kind:N", sort=["predicted", "measured"]),
        color=alt.Color("kind:N", scale=alt.Scale(domain=["predicted", "measured"], range=["#4c78a8", "#54a24b"]),
                        legend=alt.Legend(title=None, orient="bottom")),
        tooltip=["choice:N", "kind:N", "count:Q"],
    ).properties(width="container", height=alt.Step(16, **{"for": "offset"}),
                 title=alt.TitleParams(title_lines(title), anchor="start"))


def reveal_timeline(trace: Trace, window_us: tuple[float, float],
                    names: Sequence[str]) -> tuple[TimelineData, alt.LayerChart]:
    """The Timeline view's chart of ``window_us``, the events named outlined in red on top."""
    data = build_timeline(trace, start_us=window_us[0], end_us=window_us[1], width_px=REVEAL_WIDTH_PX)
    return data, reveal_chart(data, names)


def reveal_chart(data: TimelineData, names: Sequence[str]) -> alt.LayerChart:
    """``data`` (a window at ``REVEAL_WIDTH_PX``) charted, the events named outlined in red on top."""
    import altair as alt  # on first draw: the CLI never pays its import

    chart = timeline_chart(data)
    marks = data.marks
    picked = marks[marks["name"].astype(str).isin(list(names))]
    outline = outline_layer(data, picked, color=HIGHLIGHT, stroke_px=2.5, title="the evidence")
    return alt.layer(*chart.layer, outline).properties(width="container", height=chart.height,
                                                       autosize=chart.autosize)

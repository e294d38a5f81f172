"""``TimelineData`` → a layered Altair chart: one bar per mark, rules for launch → GPU links."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pandas as pd

from lab.views.timeline_data import TimelineData
from lab.views.timeline_lod import CAT_COLORS
from lab.views.timeline_rows import BAR_FILL

if TYPE_CHECKING:  # pragma: no cover
    import altair as alt

__all__ = ["LANE_LABEL_MIN_PX", "LANE_LABEL_PX", "LEGEND_COLUMNS", "MAX_PLOT_HEIGHT_PX", "MIN_OPACITY",
           "MIN_ROW_STEP_PX", "ROW_STEP_PX", "TOOLTIP_NAME_CHARS", "lane_label", "outline_layer", "timeline_chart"]

# Tooltip names are cut: some kernel names are ~400 characters of template arguments.
TOOLTIP_NAME_CHARS = 160
# Row height of one depth inside a lane, in pixels: 12 px by default, thinner when lanes ×
# depths would make the chart taller than ~MAX_PLOT_HEIGHT_PX (deep Python stacks), never
# under MIN_ROW_STEP_PX (still a visible, hoverable bar).
ROW_STEP_PX = 12
MIN_ROW_STEP_PX = 3
MAX_PLOT_HEIGHT_PX = 480
# Legend entries per line: "gpu_user_annotation" is ~150 px, and at an 800 px window with the
# sidebar open the chart is ~468 px wide: with 4 columns "user_annotation", "gpu_user_annotation"
# and "cpu_op" ended past the chart's right edge (measured in Chromium,
# tests/test_browser_overflow.py); two columns fit.
LEGEND_COLUMNS = 2
# Lane labels are cut past this width: "CPU thread 497 (pt_autograd_0)" is ~190 px, and at an
# 800 px viewport the plot keeps ~500 px beside them.
LANE_LABEL_PX = 200
# A lane label's line (11 px text): the thinnest lane gets at least this height, so that every
# label has room and none overlaps its neighbour. (Vega-Lite hides overlapping labels by default
# on a numeric axis, every other one: the 64-rank job's stacked timeline labelled 3 of its 6
# lanes.) Deep lanes still shrink their rows toward MIN_ROW_STEP_PX.
LANE_LABEL_MIN_PX = 12
# The faintest a bar is drawn (busy share 0): still visible and hoverable on white.
MIN_OPACITY = 0.15

# A bar's tooltip rows, then a link's: (field, title, number format or None), for alt.Tooltip.
_BAR_TOOLTIPS: tuple[tuple[str, str, str | None], ...] = (
    ("name:N", "name", None),
    ("cat:N", "category", None),
    ("merged_count:Q", "events", ","),
    ("dur_us:Q", "duration (µs)", ",.3f"),
    ("busy_frac:Q", "busy share of the bar", ".0%"),
    ("start_us:Q", "start (µs)", ",.3f"),
    ("input_dims:N", "input shapes", None),
    ("grid:N", "grid", None),
    ("block:N", "block", None),
    ("registers_per_thread:Q", "registers/thread", None),
    ("shared_memory_bytes:Q", "shared memory (B)", ","),
    ("occupancy_pct:Q", "est. occupancy %", None),
)
_LINK_TOOLTIPS: tuple[tuple[str, str, str | None], ...] = (
    ("launch_name:N", "launch", None),
    ("gpu_name:N", "GPU work", None),
    ("delay_us:Q", "launch → GPU start (µs)", ",.3f"),
)


def timeline_chart(data: TimelineData) -> alt.LayerChart:
    """Layered Altair chart: lane bands, one bar per mark, rules for launch → GPU links, x zoom/pan.

    Lanes are bands of rows (CPU threads first, then GPU streams); nested events stack inside
    their lane, one row per depth; every bar fills the middle ``BAR_FILL`` of its row, the lane
    label sits at the lane's middle and a link joins the middles of its two bars' rows. A bar's
    opacity is its busy share (``busy_frac``). The height follows the rows (a fixed height would
    squash them) and the width follows the container.
    """
    import altair as alt  # on first draw: the CLI never pays its import

    marks = data.marks.copy()
    marks["name"] = [_short_name(n) for n in marks["name"]]
    present = set(marks["kind"])
    kinds = [k for k in CAT_COLORS if k in present] or ["kernel"]
    n_rows = max(sum(n for _, _, n in data.lane_rows), 1)
    x_scale = alt.Scale(domain=list(data.window), nice=False, zero=False)
    y_scale = alt.Scale(domain=[0, n_rows], reverse=True, nice=False, zero=False)
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    pad = (1.0 - BAR_FILL) / 2
    bars = (
        alt.Chart(marks)
        .transform_calculate(y_top=f"datum.row + {pad}", y_bottom=f"datum.row + {1.0 - pad}")
        .mark_rect(cornerRadius=1)
        .encode(
            x=alt.X("start_us:Q", scale=x_scale, title="time (µs since trace start)"),
            x2="draw_end_us:Q",
            # The lane axis on every layer: Vega-Lite merges the layers' axes, and a layer left
            # with the default (labelOverlap on) hid every other lane's label in the browser.
            y=alt.Y("y_top:Q", scale=y_scale, axis=_lane_axis(data)),
            y2="y_bottom:Q",
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=kinds, range=[CAT_COLORS[k] for k in kinds]),
                legend=alt.Legend(title="category", orient="bottom", columns=LEGEND_COLUMNS),
            ),
            opacity=alt.Opacity("busy_frac:Q", scale=alt.Scale(domain=[0.0, 1.0], range=[MIN_OPACITY, 1.0]),
                                legend=None),
            tooltip=_tooltips(alt, _BAR_TOOLTIPS),
        )
        .add_params(zoom)
    )
    layers = [_lane_bands(data, y_scale), bars]  # the first layer's axis is the chart's
    if len(data.links):
        layers.append(_link_rules(data, x_scale, y_scale))
    step = min(ROW_STEP_PX, max(MIN_ROW_STEP_PX, MAX_PLOT_HEIGHT_PX // n_rows))
    thinnest = min((n for _, _, n in data.lane_rows if n > 0), default=1)
    step = max(step, min(ROW_STEP_PX, -(-LANE_LABEL_MIN_PX // thinnest)))  # room for every lane's label
    # fit-x: the width follows the container and the height is the rows' own. Without it
    # Streamlit asks for "fit", which makes the height the whole chart's (legend and axis
    # included): 9 rows × 12 px minus a 100 px legend left no rows at all (measured in 1.67).
    return alt.layer(*layers).properties(width="container", height=n_rows * step,
                                         autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))


def outline_layer(data: TimelineData, marks: pd.DataFrame, *, color: str, stroke_px: float,
                  title: str) -> alt.Chart:
    """Unfilled outlines over some of ``data.marks`` (their rows and spans), on the chart's scales:
    a layer to add to ``timeline_chart(data)``'s."""
    import altair as alt  # on first draw: the CLI never pays its import

    n_rows = max(sum(n for _, _, n in data.lane_rows), 1)
    pad = (1.0 - BAR_FILL) / 2
    return (
        alt.Chart(marks.loc[:, ["row", "start_us", "draw_end_us", "name"]])
        .transform_calculate(y_top=f"datum.row + {pad}", y_bottom=f"datum.row + {1.0 - pad}")
        .mark_rect(filled=False, stroke=color, strokeWidth=stroke_px)
        .encode(
            x=alt.X("start_us:Q", scale=alt.Scale(domain=list(data.window), nice=False, zero=False)),
            x2="draw_end_us:Q",
            y=alt.Y("y_top:Q", scale=alt.Scale(domain=[0, n_rows], reverse=True, nice=False, zero=False),
                    axis=_lane_axis(data)),
            y2="y_bottom:Q",
            tooltip=[alt.Tooltip("name:N", title=title)],
        )
    )


def lane_label(data: TimelineData, lane: str) -> str:
    """A lane's label on the chart: its name, and what it is when it is the profiler's own."""
    return f"{lane} · profiler's own" if lane in data.profiler_lanes else lane


def _lane_axis(data: TimelineData) -> alt.Axis:
    """Lane names at each lane's middle row (the axis is the rows' numeric scale)."""
    import altair as alt  # on first draw: the CLI never pays its import

    middles = [first + n / 2 for _, first, n in data.lane_rows]
    labels = [lane_label(data, lane) for lane, _, _ in data.lane_rows]
    expr = f"{json.dumps(labels)}[indexof({json.dumps(middles)}, datum.value)]"
    return alt.Axis(title=None, values=middles, labelExpr=expr, labelLimit=LANE_LABEL_PX, grid=False, ticks=False,
                    domain=False, labelOverlap=False)


def _lane_bands(data: TimelineData, y_scale: alt.Scale) -> alt.Chart:
    """Every other lane shaded across the whole width, so a lane's rows read as one band."""
    import altair as alt  # on first draw: the CLI never pays its import

    bands = pd.DataFrame([{"lane": lane, "top": first, "bottom": first + n}
                          for i, (lane, first, n) in enumerate(data.lane_rows) if i % 2 == 1],
                         columns=["lane", "top", "bottom"])
    return (
        alt.Chart(bands)
        .mark_rect(color="#000000", opacity=0.04)
        .encode(y=alt.Y("top:Q", scale=y_scale, axis=_lane_axis(data)), y2="bottom:Q")
    )


def _link_rules(data: TimelineData, x_scale: alt.Scale, y_scale: alt.Scale) -> alt.Chart:
    """One rule per launch → GPU link, from the launch call's start to the GPU activity's start,
    each end in the middle of its bar's row."""
    import altair as alt  # on first draw: the CLI never pays its import

    return (
        alt.Chart(data.links)
        .mark_rule(color="#333333", strokeWidth=0.8, opacity=0.5)
        .encode(
            x=alt.X("launch_x_us:Q", scale=x_scale),
            x2="gpu_x_us:Q",
            y=alt.Y("launch_y:Q", scale=y_scale, axis=_lane_axis(data)),
            y2="gpu_y:Q",
            tooltip=_tooltips(alt, _LINK_TOOLTIPS),
        )
    )


def _short_name(name: str) -> str:
    name = str(name)
    return name if len(name) <= TOOLTIP_NAME_CHARS else name[: TOOLTIP_NAME_CHARS - 1] + "…"


def _tooltips(alt, rows: tuple[tuple[str, str, str | None], ...]) -> list:
    """``alt.Tooltip``s of ``rows`` (altair is imported by the chart's caller, on first draw)."""
    return [alt.Tooltip(field, title=title) if fmt is None else alt.Tooltip(field, title=title, format=fmt)
            for field, title, fmt in rows]

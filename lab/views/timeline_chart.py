"""``TimelineData`` → a layered Altair chart: one bar per mark, rules for launch → GPU links."""

from __future__ import annotations

from typing import TYPE_CHECKING

import altair as alt

from lab.views.timeline_lod import CAT_COLORS

if TYPE_CHECKING:  # the data class lives with build_timeline, which imports this module
    from lab.views.timeline import TimelineData

__all__ = ["LEGEND_COLUMNS", "MAX_PLOT_HEIGHT_PX", "MIN_ROW_STEP_PX", "ROW_STEP_PX", "TOOLTIP_NAME_CHARS",
           "timeline_chart"]

# Tooltip names are cut: some kernel names are ~400 characters of template arguments.
TOOLTIP_NAME_CHARS = 160
# Row height of one depth inside a lane, in pixels: 12 px by default, thinner when lanes ×
# depths would make the chart taller than ~MAX_PLOT_HEIGHT_PX (deep Python stacks), never
# under MIN_ROW_STEP_PX (still a visible, hoverable bar).
ROW_STEP_PX = 12
MIN_ROW_STEP_PX = 3
MAX_PLOT_HEIGHT_PX = 480
# Legend entries per line: "gpu_user_annotation" is ~150 px, and Streamlit's centred layout
# gives ~700 px; more columns get clipped on the right.
LEGEND_COLUMNS = 4

_BAR_TOOLTIPS = (
    alt.Tooltip("name:N", title="name"),
    alt.Tooltip("cat:N", title="category"),
    alt.Tooltip("merged_count:Q", title="events", format=","),
    alt.Tooltip("dur_us:Q", title="duration (µs)", format=",.3f"),
    alt.Tooltip("start_us:Q", title="start (µs)", format=",.3f"),
    alt.Tooltip("input_dims:N", title="input shapes"),
    alt.Tooltip("grid:N", title="grid"),
    alt.Tooltip("block:N", title="block"),
    alt.Tooltip("registers_per_thread:Q", title="registers/thread"),
    alt.Tooltip("shared_memory_bytes:Q", title="shared memory (B)", format=","),
    alt.Tooltip("occupancy_pct:Q", title="est. occupancy %"),
)
_LINK_TOOLTIPS = (
    alt.Tooltip("launch_name:N", title="launch"),
    alt.Tooltip("gpu_name:N", title="GPU work"),
    alt.Tooltip("delay_us:Q", title="launch → GPU start (µs)", format=",.3f"),
)


def timeline_chart(data: TimelineData) -> alt.LayerChart:
    """Layered Altair chart: one bar per mark, rules for launch → GPU links, x zoom/pan.

    Lanes are rows (CPU threads first, then GPU streams); nested events stack inside their lane,
    one sub-row per depth. The height follows the rows (a fixed height would squash them) and
    the width follows the container.
    """
    marks = data.marks.copy()
    marks["name"] = [_short_name(n) for n in marks["name"]]
    lanes = list(data.lanes)
    present = set(marks["kind"])
    kinds = [k for k in CAT_COLORS if k in present] or ["kernel"]
    x_scale = alt.Scale(domain=list(data.window), nice=False, zero=False)
    lane_scale = alt.Scale(domain=lanes)
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    bars = (
        alt.Chart(marks)
        .mark_bar(cornerRadius=1)
        .encode(
            x=alt.X("start_us:Q", scale=x_scale, title="time (µs since trace start)"),
            x2="draw_end_us:Q",
            y=alt.Y("lane:N", sort=lanes, scale=lane_scale, axis=alt.Axis(title=None, labelLimit=260)),
            yOffset=alt.YOffset("depth:O", sort="ascending"),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=kinds, range=[CAT_COLORS[k] for k in kinds]),
                legend=alt.Legend(title="category", orient="bottom", columns=LEGEND_COLUMNS),
            ),
            tooltip=list(_BAR_TOOLTIPS),
        )
        .add_params(zoom)
    )
    layers = [bars]
    if len(data.links):
        layers.append(_link_rules(data, x_scale, lane_scale, lanes))
    rows = max(len(lanes), 1) * max(marks["depth"].nunique(), 1)
    step = min(ROW_STEP_PX, max(MIN_ROW_STEP_PX, MAX_PLOT_HEIGHT_PX // rows))
    return alt.layer(*layers).properties(width="container", height=alt.Step(step, **{"for": "offset"}))


def _link_rules(data: TimelineData, x_scale: alt.Scale, lane_scale: alt.Scale, lanes: list[str]) -> alt.Chart:
    """One rule per launch → GPU link, from the launch call's start to the GPU activity's start."""
    return (
        alt.Chart(data.links)
        .mark_rule(color="#333333", strokeWidth=0.8, opacity=0.4)
        .encode(
            x=alt.X("launch_x_us:Q", scale=x_scale),
            x2="gpu_x_us:Q",
            y=alt.Y("launch_lane:N", sort=lanes, scale=lane_scale),
            y2="gpu_lane:N",
            tooltip=list(_LINK_TOOLTIPS),
        )
    )


def _short_name(name: str) -> str:
    name = str(name)
    return name if len(name) <= TOOLTIP_NAME_CHARS else name[: TOOLTIP_NAME_CHARS - 1] + "…"

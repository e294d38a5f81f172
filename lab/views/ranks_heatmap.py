"""The Ranks view at scale: a per-rank heat map (one row a rank, one column a step) and the picks.

At 64 ranks and more, stacked timelines are unreadable (64 × a timeline's lanes); the heat map
shows each rank's step time, compute, communication and idle per step (``RanksAnalysis.per_step``,
from each rank's summary: ``lab.analysis.ranks.summary``), one panel each with its own colour
scale, so the rank whose row is darker than the rest stands out. 64 ranks × 10 steps × 4
panels is 2,560 marks, far under Altair's ~10k. ``default_picks`` chooses the ranks whose
timelines are stacked: the straggler and the lowest rank, as few as make a comparison.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pandas as pd

from lab.analysis.ranks.analyze import RanksAnalysis

if TYPE_CHECKING:  # pragma: no cover
    import altair as alt

__all__ = ["HEAT_PANELS", "MAX_STACKED_RANKS", "default_picks", "heatmap_chart", "heatmap_frame", "picked"]

# (column of per_step, the panel's title)
HEAT_PANELS = (("step_us", "step"), ("compute_us", "compute"), ("comm_us", "communication"), ("idle_us", "idle"))
MAX_STACKED_RANKS = 4  # ranks whose timelines are stacked at once: each is read in full
ROW_PX = 9  # a rank's row: 64 ranks make a 576 px panel
PANEL_PX = 150  # a panel's width: four and one rank axis fit the main column at 1280 px (~760 px)


def heatmap_frame(ranks: RanksAnalysis) -> pd.DataFrame:
    """Long form: rank, step, what (the panel), ms — one row per (rank, step, panel)."""
    steps = ranks.per_step
    if steps is None or not len(steps):
        return pd.DataFrame(columns=["rank", "step", "what", "ms"])
    parts = [pd.DataFrame({"rank": steps["rank"], "step": steps["step"], "what": title, "ms": steps[col] / 1e3})
             for col, title in HEAT_PANELS]
    return pd.concat(parts, ignore_index=True)


def heatmap_chart(ranks: RanksAnalysis) -> alt.HConcatChart:
    """Four heat maps side by side (step, compute, communication, idle), each with its own scale."""
    import altair as alt  # on first draw: the CLI never pays its import

    frame = heatmap_frame(ranks)
    height = max(ROW_PX * len(ranks.ranks), 60)
    straggler = ranks.straggler.rank if ranks.straggler is not None else None
    panels = []
    for k, (_, title) in enumerate(HEAT_PANELS):
        data = frame[frame["what"] == title]
        # The rank axis on the first panel only: the rows line up across panels, and four axes
        # made the chart ~970 px wide, past the page's main column at 1280 px.
        rank_axis = alt.Axis() if k == 0 else None
        base = alt.Chart(data, title=f"{title} (ms)").encode(
            x=alt.X("step:O", title="step"),
            y=alt.Y("rank:O", title="rank" if k == 0 else None, sort="ascending", axis=rank_axis))
        rect = base.mark_rect().encode(
            color=alt.Color("ms:Q", scale=alt.Scale(scheme="oranges"), legend=alt.Legend(orient="bottom",
                                                                                         title=None)),
            tooltip=[alt.Tooltip("rank:O"), alt.Tooltip("step:O"), alt.Tooltip("ms:Q", format=",.2f", title=title)])
        layers = [rect]
        if straggler is not None:
            mark = data[data["rank"] == straggler]
            layers.append(alt.Chart(mark).mark_rect(fill=None, stroke="#1f2933", strokeWidth=1.5).encode(
                x="step:O", y=alt.Y("rank:O", sort="ascending", axis=rank_axis)))
        panels.append(alt.layer(*layers).properties(width=PANEL_PX, height=height))
    return alt.hconcat(*panels).resolve_scale(color="independent")


def default_picks(ranks: RanksAnalysis) -> list[int]:
    """The ranks stacked first: the lowest and the straggler (or the two lowest)."""
    ids = list(ranks.rank_ids)
    picks = [ids[0]]
    if ranks.straggler is not None and ranks.straggler.rank not in picks:
        picks.append(ranks.straggler.rank)
    elif len(ids) > 1:
        picks.append(ids[1])
    return picks


def picked(ranks: RanksAnalysis, ids) -> RanksAnalysis:
    """The job restricted to the ranks ``ids`` (by rank), for their stacked timeline."""
    keep = [i for i, r in enumerate(ranks.ranks) if r.rank in set(ids)]
    return replace(ranks, ranks=tuple(ranks.ranks[i] for i in keep), infos=tuple(ranks.infos[i] for i in keep),
                   offsets_us=tuple(ranks.offsets_us[i] for i in keep))

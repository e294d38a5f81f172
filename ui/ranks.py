"""The Ranks view: one torch.distributed job's ranks side by side (a group of uploaded traces).

Lays out what ``lab`` prepared when the group was opened (``ui.upload``: ``analyze_ranks``,
kept on the subject) and the stacked timeline of the window picked (``build_ranks_timeline``).
Every rank's parsed trace is in the reader pool's store, under this session's token.
"""

from __future__ import annotations

import streamlit as st

from lab import views as lv
from lab.read import ReaderPool
from ui import messages, state
from ui.state import Subject
from ui.views import insight_card

__all__ = ["ranks_view"]

_TABLE_FORMATS = {"overlap_pct": "%.1f", "launch_delay_us": "%.1f"}


def _straggler_text(ranks) -> str:
    s = ranks.straggler
    if s is None:
        return "No straggler: the ranks made no collective calls to match."
    where = ", ".join(f"{what} {'+' if d >= 0 else '−'}{lv.fmt_us(abs(d))}" for what, d in s.deltas_us)
    return (f"Straggler: rank {s.rank} starts its collectives last, by {lv.fmt_us(s.late_median_us)} (median over "
            f"{s.matched_calls} matched {s.call_name}). Per step against the other ranks' median: {where}.")


def ranks_view(subject: Subject, readers: ReaderPool) -> None:
    ranks = subject.ranks_analysis
    if ranks is None:
        st.info("This trace is a single rank: upload several traces of one job (or a .zip of them) together.")
        return
    parsed = [readers.uploads.get(state.owner(), digest) for _, digest in subject.ranks]
    if any(p is None for p in parsed):
        messages.error(f"{subject.title} is no longer held by this server: it keeps "
                       f"{readers.plan.held_uploads_mb} MB of parsed uploads for everyone and let some of these "
                       "go; upload the files again")
        return
    traces = [p.trace for p in parsed if p is not None]
    backend = f" over {ranks.backend}" if ranks.backend else ""
    st.markdown(f"**{len(ranks.ranks)} ranks of a world of {ranks.world_size}{backend}** · communication: "
                f"{ranks.ranks[0].comm_source}")
    for warning in ranks.warnings:
        st.warning(warning, icon=":material/warning:")
    table = lv.rank_table(ranks)
    st.dataframe(table, hide_index=True, width="stretch", key=f"ranks_table_{subject.digest}",
                 column_config={c: st.column_config.NumberColumn(format=_TABLE_FORMATS.get(c, "%.3f"))
                                for c in table.columns if c.endswith(("_ms", "_us", "_pct"))})
    st.caption("Per rank, over its profiled steps: times are unions of intervals (each instant once). Compute and "
               "comm are the work the steps launched, wherever it ran (NCCL kernels often end after the CPU step); "
               "comm in window, overlap and idle are clipped to the steps' window. Overlap is communication time "
               "during which compute ran (HTA's comp/comm overlap); idle is the window minus busy time (GPU "
               "activity, or compute and communication on a CPU-only rank).")
    st.text(_straggler_text(ranks))
    span = max(lv.ranks_span_us(traces, ranks), 1.0)
    window = st.slider("Time window (µs on the job's clock: since the earliest rank's first event)", 0.0, span,
                       (0.0, span), key=f"ranks_window_{subject.digest}", format="%.0f")
    data = lv.build_ranks_timeline(traces, ranks, start_us=window[0], end_us=window[1])
    st.altair_chart(lv.timeline_chart(data), width="stretch", key=f"ranks_chart_{subject.digest}")
    offsets = ", ".join(f"rank {r.rank} +{lv.fmt_us(o)}" for r, o in zip(ranks.ranks, ranks.offsets_us, strict=True))
    st.caption(f"The ranks' timelines on one clock (baseTimeNanoseconds; first events at {offsets}): "
               f"{data.mark_count:,} marks for {data.total_events:,} events in this window, the single "
               "timeline's budget in total." + (f" {data.note}" if data.note else ""))
    for insight in subject.ranks_insights:  # computed with the ranks, in a reader
        insight_card(insight)

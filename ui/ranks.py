"""The Ranks view: one torch.distributed job's ranks side by side (a group of uploaded traces).

Lays out what ``lab`` prepared when the group was opened (``ui.upload``: ``analyze_ranks``,
kept on the subject) and the stacked timeline of the window picked, drawn by the readers that
keep the ranks' traces (``lab.views.queries.ranks_window``). Every rank's outline is in the
reader pool's store, under this session's token; its parsed trace in a reader.
"""

from __future__ import annotations

import streamlit as st

from lab import views as lv
from lab.read import ReaderPool, ReadFailed
from ui import messages, state
from ui.cache import rank_key, view_job
from ui.state import Subject
from ui.views import finding_card

__all__ = ["ranks_view"]


def _straggler_text(ranks, findings) -> str:
    s = ranks.straggler
    if s is None:
        return "No straggler: the ranks made no collective calls to match."
    where = ", ".join(f"{what} {'+' if d >= 0 else '−'}{lv.fmt_us(abs(d))}" for what, d in s.deltas_us)
    why = lv.job_summary(ranks, findings).straggler.removeprefix("Straggler: ")
    return (f"Straggler: rank {s.rank} starts its collectives last, by {lv.fmt_us(s.late_median_us)} (median over "
            f"{s.matched_calls} matched {s.call_name}). Why: {why} Per step against the other ranks' median: {where}.")


def _number_formats(table) -> dict:
    """Two decimals for ms and µs, one for percentages; integers and text as they are."""
    return {c: st.column_config.NumberColumn(format="%.1f" if "%" in c or "µs" in c else "%.2f")
            for c in table.columns if table[c].dtype.kind == "f"}


def _rank_traces(subject: Subject, readers: ReaderPool, ids: list[int]):
    """The picked ranks' outlines and keys (by rank): held uploads, or a directory job's files read
    now (kept in the pool's store under this session, like an upload, and in the reader that read
    them); None if one is gone."""
    ranks = subject.ranks_analysis
    assert ranks is not None
    out = []
    for i, row in enumerate(ranks.ranks):
        if row.rank not in ids:
            continue
        _, digest = subject.ranks[i]
        outline = readers.uploads.get(state.owner(), digest)
        if outline is None and subject.rank_paths:
            with st.spinner(f"Reading rank {row.rank} in full…"):
                try:
                    outline = readers.read_outline(path=subject.rank_paths[i], label=row.name, keep=rank_key(digest))
                except ReadFailed as exc:
                    messages.error(f"rank {row.rank} cannot be read: {exc}")
                    return None
            readers.uploads.put(state.owner(), digest, outline)
        if outline is None:
            messages.error(f"{subject.title} is no longer held by this server: it keeps "
                           f"{readers.plan.held_uploads_mb} MB of parsed uploads for everyone and let some of these "
                           "go; upload the files again")
            return None
        out.append((outline, rank_key(digest)))
    return out


def ranks_view(subject: Subject, readers: ReaderPool, jobs) -> None:
    ranks = subject.ranks_analysis
    if ranks is None:
        st.info("This trace is a single rank: upload several traces of one job (or a .zip of them) together.")
        return
    backend = f" over {ranks.backend}" if ranks.backend else ""
    st.markdown(f"**{len(ranks.ranks)} ranks of a world of {ranks.world_size}{backend}** · communication: "
                f"{ranks.ranks[0].comm_source}")
    for warning in ranks.warnings:
        st.warning(warning, icon=":material/warning:")
    st.text(_straggler_text(ranks, subject.ranks_findings))
    table = lv.rank_table(ranks)
    st.dataframe(table, hide_index=True, width="stretch", key=f"ranks_table_{subject.digest}",
                 column_config=_number_formats(table))
    st.caption("Per rank, per profiled step (its total over its steps ÷ its steps; click a column to sort): times "
               "are unions of intervals (each instant once). Compute and communication are the work the steps "
               "launched, wherever it ran (NCCL kernels often end after the CPU step); communication in window, "
               "overlap and idle are clipped to the steps' window. Waiting for the last rank and transfer split "
               "the matched collectives: from the rank's own start until the last rank arrives, then to its end. "
               "Overlap is communication time during which compute ran (HTA's comp/comm overlap); idle is the "
               "window minus busy time (GPU activity, or compute and communication on a CPU-only rank).")
    causes = lv.rank_causes_table(ranks)
    if len(causes):
        st.markdown("**Where each rank's step went** (median step, every ms attributed to one cause)")
        st.dataframe(causes, hide_index=True, width="stretch", key=f"ranks_causes_{subject.digest}",
                     column_config=_number_formats(causes))
        st.caption("The Summary's attribution per rank: compute by op class, communication (waiting in a collective "
                   "included), synchronisation, the input pipeline, host work (dispatch, launches, Python — a slow "
                   "loader inside record_function shows here), the profiler, and time nothing recorded. A straggler's "
                   "extra host work is its cause; the others' extra communication is their wait for it.")
    collectives = lv.collective_table(ranks)
    if len(collectives):
        st.dataframe(collectives, hide_index=True, width="stretch", key=f"ranks_collectives_{subject.digest}",
                     column_config=_number_formats(collectives))
        st.caption("One row a collective, matched across ranks by sequence number where the trace has one, else by "
                   "order within its process group. Start skew: the last rank's start − the first's. Transfer: from "
                   "the last arrival to the end (median over ranks). algbw = size ÷ transfer; busbw = algbw × NCCL's "
                   "factor (all_reduce 2(n−1)/n; all_gather, reduce_scatter, all_to_all (n−1)/n; broadcast, reduce "
                   "1: nccl-tests' PERFORMANCE.md).")
    if ranks.per_step is not None and len(ranks.ranks) > 2:
        st.altair_chart(lv.heatmap_chart(ranks), width="content", key=f"ranks_heat_{subject.digest}")
        st.caption("One row a rank, one column a step; each panel has its own scale (darker = more). The straggler's "
                   "row is outlined.")
    _stacked(subject, ranks, readers, jobs)
    if subject.ranks_findings:
        st.markdown("**Findings across the ranks, largest saving first**")
    for finding in subject.ranks_findings:  # judged with the ranks, in a reader
        finding_card(finding)


def _stacked(subject: Subject, ranks, readers: ReaderPool, jobs) -> None:
    """The stacked timeline of the ranks picked (all of a small job; the lowest and the straggler of a large one)."""
    ids = list(ranks.rank_ids)
    default = ids if len(ids) <= lv.MAX_STACKED_RANKS else lv.default_picks(ranks)
    chosen = st.multiselect(f"Ranks on the stacked timeline (up to {lv.MAX_STACKED_RANKS})", ids, default=default,
                            max_selections=lv.MAX_STACKED_RANKS, key=f"ranks_pick_{subject.digest}")
    if not chosen:
        return
    found = _rank_traces(subject, readers, chosen)
    if found is None:
        return
    sub = lv.picked(ranks, chosen)
    span = max(lv.ranks_span_us([outline.trace for outline, _ in found], sub), 1.0)
    window = st.slider("Time window (µs on the job's clock: since the earliest rank's first event)", 0.0, span,
                       (0.0, span), key=f"ranks_window_{subject.digest}_{'-'.join(map(str, sub.rank_ids))}",
                       format="%.0f")
    # Drawn by the readers that keep the ranks' traces: only the window's marks come back.
    data = jobs(view_job(lv.ranks_window, rank_ids=tuple(r.rank for r in sub.ranks), offsets_us=tuple(sub.offsets_us),
                         start_us=window[0], end_us=window[1]), [subject], keys=[key for _, key in found])
    if data is None:
        return
    st.altair_chart(lv.timeline_chart(data), width="stretch", key=f"ranks_chart_{subject.digest}")
    offsets = ", ".join(f"rank {r.rank} +{lv.fmt_us(o)}" for r, o in zip(sub.ranks, sub.offsets_us, strict=True))
    st.caption(f"The ranks' timelines on one clock (baseTimeNanoseconds; first events at {offsets}): "
               f"{data.mark_count:,} marks for {data.total_events:,} events in this window, the single "
               "timeline's budget in total." + (f" {data.note}" if data.note else ""))

"""Several traces of one torch.distributed job, read side by side: a row per rank, the straggler.

``analyze_ranks(traces, names)`` checks that the traces are one job's ranks (``job``),
measures each rank's time (``comm``: what counts as communication, compute, overlap and
idle is defined there) and finds the straggler: the rank whose collective calls start last.

The straggler: the i-th collective call (``c10d::*``, else NCCL kernels) of every rank is the
same collective, since every rank of a job issues them in one order. On the job's one clock
(``baseTimeNanoseconds`` + the event's ``ts``) each call's lateness is its start minus the
earliest rank's start of that call; the straggler is the rank with the largest median
lateness, and "where its extra time goes" is its per-step compute, communication and idle time
against the median of the other ranks, and the ops whose time grew most; its cause
(``cause.straggler_cause``: the labelled range, else the op, that outgrew the others' median per
step) and the waits it costs the others (``collectives.match_collectives``: each collective's
skew, waits, transfer, size and bandwidths, by Seq or by order per process group). Whether the
ranks ran the same work (``cause.same_work``) is the compute-imbalance rule's premise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from lab.analysis.ranks.cause import Cause, same_work, straggler_cause
from lab.analysis.ranks.collectives import match_collectives
from lab.analysis.ranks.job import RankInfo, RanksError, check_infos, job_offsets_us
from lab.analysis.ranks.summary import RankSummary, rank_summary
from lab.trace import Trace

__all__ = [
    "RANK_COLUMNS", "TOP_OP_DELTAS", "RankRow", "RanksAnalysis", "RanksError", "Straggler", "analyze_ranks",
    "rank_frame",
]  # fmt: skip

TOP_OP_DELTAS = 3  # ops named in "where its extra time goes"

RANK_COLUMNS = (
    "rank", "name", "steps", "step_us", "window_us", "gpu_busy_us", "compute_us", "comm_us", "comm_source",
    "compute_in_window_us", "comm_in_window_us", "overlap_us", "overlap_pct", "idle_us", "launch_delay_us",
    "collective_calls", "comm_wait_us", "comm_transfer_us",
)


@dataclass(frozen=True, kw_only=True)
class RankRow:
    """One rank, over its profiled steps. Times are unions of intervals (µs): compute and
    communication by launch (what the steps started, wherever it ran: ``ranks_comm``), the
    ``*_in_window_us`` figures, overlap, busy and idle clipped to the steps' window."""

    rank: int
    name: str
    steps: int
    step_us: float  # median step (NaN without steps)
    window_us: float
    gpu_busy_us: float  # 0 on a CPU-only rank
    compute_us: float  # launched in the steps
    comm_us: float  # launched in the steps
    comm_source: str
    compute_in_window_us: float  # inside the window
    comm_in_window_us: float
    overlap_us: float  # communication time during which compute ran
    overlap_pct: float | None  # of comm_us; None without communication
    idle_us: float  # window − busy
    launch_delay_us: float  # median launch → GPU start (NaN without launches)
    collective_calls: int
    # Over the collectives matched across ranks that start in its window (``collectives``): the
    # time it waited for the last rank to arrive, and the time from that arrival to its end.
    comm_wait_us: float = float("nan")
    comm_transfer_us: float = float("nan")


@dataclass(frozen=True, kw_only=True)
class Straggler:
    """The rank whose collective calls start last, by how much, and where its time went."""

    rank: int
    late_median_us: float  # median over the matched calls of (its start − the earliest rank's start)
    matched_calls: int
    call_name: str
    # (what, its per-step µs − the other ranks' median per-step µs), largest first
    deltas_us: tuple[tuple[str, float], ...]
    op_deltas_us: tuple[tuple[str, float], ...]  # ops' total time (self CPU + device) − the others' median
    cause: Cause | None = None  # what it does longer than the others, per step (``cause.straggler_cause``)
    wait_us: float = float("nan")  # its wait at the matched collectives, per step
    others_wait_us: float = float("nan")  # the other ranks' median wait, per step


@dataclass(frozen=True, kw_only=True)
class RanksAnalysis:
    ranks: tuple[RankRow, ...]  # by rank
    infos: tuple[RankInfo, ...]  # by rank
    world_size: int
    backend: str
    offsets_us: tuple[float, ...]  # each rank's first event on the job's clock, after the earliest rank's
    straggler: Straggler | None
    warnings: tuple[str, ...] = ()
    calls_differ: bool = False  # ranks made different numbers of collective calls
    # One row per (rank, step): rank, step, start_us (job clock), ranks.summary.HEAT_COLUMNS: the heat map.
    per_step: pd.DataFrame | None = None
    span_us: float = 0.0  # the job's span on its clock: the last rank's last event end
    # One row per collective matched across ranks (collectives.COLLECTIVE_COLUMNS), and per
    # (collective, rank) its wait and transfer (collectives.WAIT_COLUMNS); None: none matched.
    collectives: pd.DataFrame | None = None
    waits: pd.DataFrame | None = None
    same_work: bool | None = None  # every rank ran the same ops (by shape) and kernels; None: not compared
    work_note: str = ""  # the sentence that says so, or where they differ
    # Per rank (index), the median µs per step by cause (columns: lab.explain's cause keys); None: not attributed.
    causes: pd.DataFrame | None = None

    @property
    def rank_ids(self) -> tuple[int, ...]:
        return tuple(r.rank for r in self.ranks)


def rank_frame(analysis: RanksAnalysis) -> pd.DataFrame:
    """The per-rank table: ``RANK_COLUMNS``, one row per rank."""
    return pd.DataFrame([{c: getattr(r, c) for c in RANK_COLUMNS} for r in analysis.ranks], columns=list(RANK_COLUMNS))


def _row(info: RankInfo, summary: RankSummary) -> RankRow:
    return RankRow(rank=info.rank, name=info.name, **summary.row)


def _per_step(row: RankRow, value: float) -> float:
    return value / row.steps if row.steps else value


def _straggler(rows: list[RankRow], times: list[RankSummary], offsets: list[float]) -> Straggler | None:
    n = min(len(t.call_starts_us) for t in times)
    if n == 0:
        return None
    starts = np.array([t.call_starts_us[:n] + off for t, off in zip(times, offsets, strict=True)])
    late = np.median(starts - starts.min(axis=0), axis=1)
    k = int(np.argmax(late))
    if late[k] <= 0:
        return None
    me, others = rows[k], [r for i, r in enumerate(rows) if i != k]
    deltas = []
    for label, field in (("compute", "compute_us"), ("communication", "comm_us"), ("idle", "idle_us")):
        mine = _per_step(me, getattr(me, field))
        deltas.append((label, mine - float(np.median([_per_step(r, getattr(r, field)) for r in others]))))
    op_deltas: tuple[tuple[str, float], ...] = ()
    totals = [t.op_totals_us for t in times]
    if all(len(t) for t in totals):
        table = pd.concat(totals, axis=1).fillna(0.0)
        diff = table.iloc[:, k] - table.drop(columns=table.columns[k]).median(axis=1)
        top = diff[diff > 0].sort_values(ascending=False).head(TOP_OP_DELTAS)
        op_deltas = tuple((str(name), float(v)) for name, v in top.items())
    others_wait = [_per_step(r, r.comm_wait_us) for r in others if np.isfinite(r.comm_wait_us)]
    return Straggler(rank=me.rank, late_median_us=float(late[k]), matched_calls=n, call_name=times[k].call_name,
                     deltas_us=tuple(sorted(deltas, key=lambda d: -d[1])), op_deltas_us=op_deltas,
                     cause=_cause(rows, times, k, float(late[k])), wait_us=_per_step(me, me.comm_wait_us),
                     others_wait_us=float(np.median(others_wait)) if others_wait else float("nan"))


def _per_step_map(row: RankRow, names, values) -> dict[str, float]:
    scale = 1.0 / row.steps if row.steps else 1.0
    return {str(n): float(v) * scale for n, v in zip(names, values, strict=True)}


def _cause(rows: list[RankRow], times: list[RankSummary], k: int, late_us: float) -> Cause | None:
    """Rank ``k``'s labelled range (else op) that outgrew the other ranks' median, per step."""
    others = [i for i in range(len(rows)) if i != k]
    mine = times[k].ranges
    if len(mine):
        found = straggler_cause(
            _per_step_map(rows[k], mine["name"], mine["total_us"]),
            [_per_step_map(rows[i], times[i].ranges["name"], times[i].ranges["total_us"])
             if len(times[i].ranges) else {} for i in others],
            late_us=late_us, precedes=dict(zip(mine["name"].astype(str), mine["precedes"].astype(str), strict=True)))
        if found is not None:
            return found
    return straggler_cause(
        _per_step_map(rows[k], times[k].op_totals_us.index, times[k].op_totals_us.to_numpy()),
        [_per_step_map(rows[i], times[i].op_totals_us.index, times[i].op_totals_us.to_numpy()) for i in others],
        late_us=late_us, kind="op")


def _with_collectives(rows: list[RankRow], times: list[RankSummary],
                      offsets: list[float]) -> tuple[list[RankRow], pd.DataFrame | None, pd.DataFrame | None]:
    """The rows with their waits and transfers at the collectives matched across ranks."""
    frames = [t.collectives for t in times]
    if not any(len(f) for f in frames):
        return rows, None, None
    table, waits = match_collectives(frames, [r.rank for r in rows], offsets)
    if not len(table):
        return rows, None, None
    sums = waits[waits["in_window"].astype(bool)].groupby("rank")[["wait_us", "transfer_us"]].sum()
    wait, transfer = sums["wait_us"].to_dict(), sums["transfer_us"].to_dict()
    out = [replace(r, comm_wait_us=float(wait.get(r.rank, 0.0)), comm_transfer_us=float(transfer.get(r.rank, 0.0)))
           for r in rows]
    return out, table, waits


def analyze_ranks(traces: Sequence[Trace], names: Sequence[str], *, analyses: Sequence | None = None,
                  causes: Sequence[pd.Series] | None = None) -> RanksAnalysis:
    """The ranks of one job side by side; ``RanksError`` (with the fix) if they are not one job.

    ``analyses`` (each trace's ``Analysis``, same order) adds the ops to the straggler's account;
    ``causes`` (each rank's median µs per step by cause) the per-rank attribution.
    Each rank is summarised (``ranks.summary.rank_summary``, what a reader does for a job read
    from a directory) and the summaries combined (``combine_ranks``).
    """
    if len(traces) != len(names):
        raise ValueError(f"{len(traces)} traces but {len(names)} names")
    given = analyses if analyses is not None else [None] * len(traces)
    summaries = [rank_summary(t, n, a) for t, n, a in zip(traces, names, given, strict=True)]
    if causes is not None:  # each rank's attribution (lab.explain), computed by the caller above this layer
        summaries = [replace(s, causes=c) for s, c in zip(summaries, causes, strict=True)]
    return combine_ranks(summaries)


def combine_ranks(summaries: Sequence[RankSummary]) -> RanksAnalysis:
    """The job from its ranks' summaries (in any order); ``RanksError`` if they are not one job."""
    for s in summaries:
        if s.info is None:
            raise RanksError(s.refusal or f"{s.name} names no rank")
    given = [replace(s.info, index=i) for i, s in enumerate(summaries) if s.info is not None]
    infos, warnings = check_infos(given)
    order = sorted(range(len(summaries)), key=lambda i: infos[i].rank)
    infos = [infos[i] for i in order]
    times = [summaries[i] for i in order]
    rows = [_row(i, s) for i, s in zip(infos, times, strict=True)]
    offsets = job_offsets_us(infos)
    counts = {len(t.call_starts_us) for t in times}
    if len(counts) > 1:
        warnings.append("the ranks made different numbers of collective calls ("
                        + ", ".join(f"rank {r.rank}: {r.collective_calls}" for r in rows)
                        + "): their profiles cover different steps; the straggler is read from the first "
                        f"{min(counts)} calls.")
    worlds = {i.world_size for i in infos if i.world_size is not None}
    backends = {i.backend for i in infos if i.backend}
    rows, collectives, waits = _with_collectives(rows, times, offsets)
    work_same, work_note = same_work([t.work for t in times], [r.rank for r in rows])
    per_step = pd.concat([s.steps.assign(rank=i.rank, start_us=s.steps["start_us"] + off - i.start_ts_us)
                          for s, i, off in zip(times, infos, offsets, strict=True)], ignore_index=True)
    return RanksAnalysis(
        ranks=tuple(rows), infos=tuple(infos), world_size=worlds.pop() if worlds else max(i.rank for i in infos) + 1,
        backend=backends.pop() if backends else "", offsets_us=tuple(offsets),
        straggler=_straggler(rows, times, offsets), warnings=tuple(warnings), calls_differ=len(counts) > 1,
        per_step=per_step, span_us=max(off + s.span_us for s, off in zip(times, offsets, strict=True)),
        collectives=collectives, waits=waits, same_work=work_same, work_note=work_note,
        causes=(pd.DataFrame({i.rank: s.causes for s, i in zip(times, infos, strict=True)}).T
                if all(len(s.causes) for s in times) else None),
    )

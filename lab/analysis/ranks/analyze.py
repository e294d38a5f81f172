"""Several traces of one torch.distributed job, read side by side: a row per rank, the straggler.

``analyze_ranks(traces, names)`` checks that the traces are one job's ranks (``job``),
measures each rank's time (``comm``: what counts as communication, compute, overlap and
idle is defined there) and finds the straggler: the rank whose collective calls start last.

The straggler: the i-th collective call (``c10d::*``, else NCCL kernels) of every rank is the
same collective, since every rank of a job issues them in one order. On the job's one clock
(``baseTimeNanoseconds`` + the event's ``ts``) each call's lateness is its start minus the
earliest rank's start of that call; the straggler is the rank with the largest median
lateness, and "where its extra time goes" is its per-step compute, communication and idle time
against the median of the other ranks, and the ops whose time grew most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.diagnoses.common import pct
from lab.analysis.ranks.comm import RankTimes, rank_times
from lab.analysis.ranks.job import RankInfo, RanksError, check_job, job_offsets_us
from lab.trace import Trace
from lab.vocab import ANNOTATION_CATS

PROFILER_OVERHEAD_CAT = "overhead"  # Kineto's category for the profiler's own work

__all__ = [
    "RANK_COLUMNS", "TOP_OP_DELTAS", "RankRow", "RanksAnalysis", "RanksError", "Straggler", "analyze_ranks",
    "rank_frame",
]  # fmt: skip

TOP_OP_DELTAS = 3  # ops named in "where its extra time goes"

RANK_COLUMNS = (
    "rank", "name", "steps", "step_us", "window_us", "gpu_busy_us", "compute_us", "comm_us", "comm_source",
    "compute_in_window_us", "comm_in_window_us", "overlap_us", "overlap_pct", "idle_us", "launch_delay_us",
    "collective_calls",
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

    @property
    def rank_ids(self) -> tuple[int, ...]:
        return tuple(r.rank for r in self.ranks)


def rank_frame(analysis: RanksAnalysis) -> pd.DataFrame:
    """The per-rank table: ``RANK_COLUMNS``, one row per rank."""
    return pd.DataFrame([{c: getattr(r, c) for c in RANK_COLUMNS} for r in analysis.ranks], columns=list(RANK_COLUMNS))


def _row(info: RankInfo, trace: Trace, t: RankTimes) -> RankRow:
    w0, w1 = t.window
    comm = t.covered(t.comm)  # overlap is about the window: its share is of the window's communication
    flows = trace.flows
    delays = flows["delay_us"].to_numpy(dtype=float) if len(flows) else np.array([])
    return RankRow(
        rank=info.rank, name=info.name, steps=t.steps, step_us=t.step_median_us, window_us=w1 - w0,
        gpu_busy_us=t.covered(t.busy) if t.has_gpu else 0.0, compute_us=t.length(t.compute_launched),
        comm_us=t.length(t.comm_launched), comm_source=t.comm_source, compute_in_window_us=t.covered(t.compute),
        comm_in_window_us=comm, overlap_us=t.overlap_us, overlap_pct=pct(t.overlap_us, comm) if comm > 0 else None,
        idle_us=(w1 - w0) - t.covered(t.busy),
        launch_delay_us=float(np.median(delays)) if len(delays) else float("nan"),
        collective_calls=len(t.call_starts_us),
    )


def _per_step(row: RankRow, value: float) -> float:
    return value / row.steps if row.steps else value


def _op_totals(analysis) -> pd.Series:
    ops = analysis.operators
    # Labels around ops are not work of their own; the profiler's own events (cat "overhead",
    # e.g. "Activity Buffer Request") are not the job's: a rank that flushed its buffers is not slower.
    ops = ops[~ops["cat"].astype(str).isin((*ANNOTATION_CATS, PROFILER_OVERHEAD_CAT))]
    return (ops["self_us"].fillna(0) + ops["self_device_us"].fillna(0)).groupby(ops["name"].astype(str)).sum()


def _straggler(rows: list[RankRow], times: list[RankTimes], offsets: list[float], analyses) -> Straggler | None:
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
    if analyses is not None:
        totals = [_op_totals(a) for a in analyses]
        table = pd.concat(totals, axis=1).fillna(0.0)
        diff = table.iloc[:, k] - table.drop(columns=table.columns[k]).median(axis=1)
        top = diff[diff > 0].sort_values(ascending=False).head(TOP_OP_DELTAS)
        op_deltas = tuple((str(name), float(v)) for name, v in top.items())
    return Straggler(rank=me.rank, late_median_us=float(late[k]), matched_calls=n, call_name=times[k].call_name,
                     deltas_us=tuple(sorted(deltas, key=lambda d: -d[1])), op_deltas_us=op_deltas)


def analyze_ranks(traces: Sequence[Trace], names: Sequence[str], *, analyses: Sequence | None = None) -> RanksAnalysis:
    """The ranks of one job side by side; ``RanksError`` (with the fix) if they are not one job.

    ``analyses`` (each trace's ``Analysis``, same order) adds the ops to the straggler's account.
    """
    infos, warnings = check_job(traces, names)
    order = sorted(range(len(traces)), key=lambda i: infos[i].rank)
    infos = [infos[i] for i in order]
    traces = [traces[i] for i in order]
    analyses = [analyses[i] for i in order] if analyses is not None else None
    times = [rank_times(t, spans=a.findings.steps if a is not None else None)
             for t, a in zip(traces, analyses or [None] * len(traces), strict=True)]
    rows = [_row(i, t, tm) for i, t, tm in zip(infos, traces, times, strict=True)]
    offsets = job_offsets_us(infos)
    counts = {len(t.call_starts_us) for t in times}
    if len(counts) > 1:
        warnings.append("the ranks made different numbers of collective calls ("
                        + ", ".join(f"rank {r.rank}: {r.collective_calls}" for r in rows)
                        + "): their profiles cover different steps; the straggler is read from the first "
                        f"{min(counts)} calls.")
    worlds = {i.world_size for i in infos if i.world_size is not None}
    backends = {i.backend for i in infos if i.backend}
    return RanksAnalysis(
        ranks=tuple(rows), infos=tuple(infos), world_size=worlds.pop() if worlds else max(i.rank for i in infos) + 1,
        backend=backends.pop() if backends else "", offsets_us=tuple(offsets),
        straggler=_straggler(rows, times, offsets, analyses), warnings=tuple(warnings), calls_differ=len(counts) > 1,
    )

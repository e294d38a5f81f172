"""One rank of a job as the job's views need it, computed where the trace is read.

``rank_summary(trace, name, analysis)`` runs in a reader (or a Ray task) next to the parsed
trace and returns only what ``analyze_ranks`` combines across ranks: the rank's place in its job
(``RankInfo``, or the refusal when the trace names no rank), its row of the per-rank table, its
collective calls' starts (for the straggler), its collectives with their metadata
(``collectives.rank_collectives``), its labelled ranges and work counts (``cause``), its ops'
totals, and a row per step for the heat map (step time, compute, communication and idle inside
each step: unions of intervals, ``ranks.comm``'s definitions). A few KB to a few hundred KB a
rank, where the parsed trace is hundreds of MB: the server's memory holds a 64-rank job's
summaries plus the ranks opened in full, not every rank's frames. ``combine_ranks`` is the
server's half: the checks of ``ranks.job``, the rows by rank, the straggler.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lab.analysis.diagnoses.common import pct
from lab.analysis.diagnoses.steps import step_spans
from lab.analysis.intervals import covered_us
from lab.analysis.ranks.cause import rank_ranges, rank_work
from lab.analysis.ranks.collectives import rank_collectives
from lab.analysis.ranks.comm import rank_times
from lab.analysis.ranks.job import RankInfo, RanksError, rank_info
from lab.trace import Trace
from lab.vocab import ANNOTATION_CATS

__all__ = ["HEAT_COLUMNS", "RankSummary", "rank_summary"]

PROFILER_OVERHEAD_CAT = "overhead"  # Kineto's category for the profiler's own work

# The heat map's values per (rank, step), µs: inside each step's period (the window's figures).
HEAT_COLUMNS = ("step_us", "compute_us", "comm_us", "idle_us")


@dataclass(frozen=True, kw_only=True)
class RankSummary:
    """What the job's views need of one rank (see the module doc)."""

    name: str
    info: RankInfo | None  # None: the trace names no rank (``refusal`` says so)
    refusal: str | None
    row: dict  # RankRow's fields but rank and name
    call_starts_us: np.ndarray  # collective calls' starts on the rank's own clock
    call_name: str
    op_totals_us: pd.Series  # op name → self CPU + self device µs (annotations left out)
    span_us: float  # the trace's span (its last event end after its first event)
    steps: pd.DataFrame  # one row per step: step, start_us (own clock), HEAT_COLUMNS
    # collectives.RANK_COLLECTIVE_COLUMNS + in_window: its collectives, matched across ranks on the server
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame)
    ranges: pd.DataFrame = field(default_factory=pd.DataFrame)  # cause.RANGE_COLUMNS: its labelled ranges
    work: pd.Series = field(default_factory=lambda: pd.Series(dtype="int64"))  # cause.rank_work
    result_bytes: int = 0  # set by the reader pool: what holding it costs
    # Median µs per step by cause (lab.explain's attribution), set where the rank is read; empty if not.
    causes: pd.Series = field(default_factory=lambda: pd.Series(dtype=float))


def _op_totals(analysis) -> pd.Series:
    ops = analysis.operators
    # Labels around ops are not work of their own; the profiler's own events (cat "overhead",
    # e.g. "Activity Buffer Request") are not the job's: a rank that flushed its buffers is not slower.
    ops = ops[~ops["cat"].astype(str).isin((*ANNOTATION_CATS, PROFILER_OVERHEAD_CAT))]
    return (ops["self_us"].fillna(0) + ops["self_device_us"].fillna(0)).groupby(ops["name"].astype(str)).sum()


def _per_step(trace: Trace, times, spans) -> pd.DataFrame:
    spans = spans if spans is not None else step_spans(trace)
    if not len(spans):
        w0, w1 = times.window
        start, end = np.array([w0]), np.array([w1])
    else:
        start, end = np.asarray(spans.start_us, dtype=float), np.asarray(spans.period_end_us, dtype=float)
    busy = covered_us(times.busy[0], times.busy[1], start, end)
    return pd.DataFrame({"step": np.arange(len(start)), "start_us": start, "step_us": end - start,
                         "compute_us": covered_us(times.compute[0], times.compute[1], start, end),
                         "comm_us": covered_us(times.comm[0], times.comm[1], start, end),
                         "idle_us": (end - start) - busy})


def rank_summary(trace: Trace, name: str, analysis=None) -> RankSummary:
    """One rank's summary (runs in the reader); a trace without a rank gets its refusal, not an error."""
    try:
        info: RankInfo | None = rank_info(trace, name)
        refusal = None
    except RanksError as exc:
        info, refusal = None, str(exc)
    spans = analysis.findings.steps if analysis is not None else step_spans(trace)
    t = rank_times(trace, spans=spans)
    w0, w1 = t.window
    comm = t.covered(t.comm)  # overlap is about the window: its share is of the window's communication
    flows = trace.flows
    delays = flows["delay_us"].to_numpy(dtype=float) if len(flows) else np.array([])
    # compute_us / comm_us: what the steps launched, wherever it ran; the window's figures beside them
    row = dict(
        steps=t.steps, step_us=t.step_median_us, window_us=w1 - w0,
        gpu_busy_us=t.covered(t.busy) if t.has_gpu else 0.0, compute_us=t.length(t.compute_launched),
        comm_us=t.length(t.comm_launched), comm_source=t.comm_source, compute_in_window_us=t.covered(t.compute),
        comm_in_window_us=comm, overlap_us=t.overlap_us, overlap_pct=pct(t.overlap_us, comm) if comm > 0 else None,
        idle_us=(w1 - w0) - t.covered(t.busy),
        launch_delay_us=float(np.median(delays)) if len(delays) else float("nan"),
        collective_calls=len(t.call_starts_us),
    )
    collectives = rank_collectives(trace)
    collectives["in_window"] = (collectives["start_us"] >= w0) & (collectives["start_us"] < w1)
    return RankSummary(name=name, info=info, refusal=refusal, row=row, call_starts_us=t.call_starts_us,
                       call_name=t.call_name,
                       op_totals_us=_op_totals(analysis) if analysis is not None else pd.Series(dtype=float),
                       span_us=float(trace.meta.span_us), steps=_per_step(trace, t, spans), collectives=collectives,
                       ranges=rank_ranges(trace, spans, collectives["start_us"].to_numpy()),
                       work=rank_work(trace, spans))

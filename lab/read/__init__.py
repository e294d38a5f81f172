"""Reading traces apart from the server: a bounded pool of reader processes.

``ReaderPool`` (``pool``) is the facade: ``submit``/``read`` a trace's bytes or a path and get
a ``Parsed`` (the ``Trace``, its ``Analysis``, explanation and judgement) or a ``ReadFailed``
whose message is for the visitor; the page's reads (``read_outline``) get only the trace's
``Outline``, the ``Parsed`` kept in the reader and asked for what the views draw
(``Job(kind=JobKind.VIEW)``). Rooms: ``protocol`` (states, status records, the init record and
the read request, ``Outline``), ``limits`` (the host's reader plan, size estimates, the memory
and time messages), ``queue`` (the readers as a client of ``lab.pool``: tickets, the two lanes,
their words), ``reader`` (the reader process's side), ``store`` (read uploads under one byte
budget), ``kept`` (parsed traces kept in the reader that read them, by key, and what reads them
again), ``here`` (the same read in the caller's own process: the CLI's default), ``jobs`` (the
multi-trace computations a reader runs: ranks, compare, lesson signals and answers, by-shape
tables, the TensorBoard tab's views, the views' queries). The machinery of the pool is ``lab.pool``'s.
"""

from lab.read.here import ReadHere
from lab.read.job_summaries import read_rank_summaries, submit_rank_summaries
from lab.read.jobs import ByShape, Job, JobInput, JobKind, RanksResult
from lab.read.kept import TraceRef, kept_key
from lab.read.limits import ReaderPlan, json_size_hint, memory_refusal, reader_plan, timeout_refusal
from lab.read.pool import ReaderPool
from lab.read.protocol import (
    Lane,
    Outline,
    Parsed,
    PoolHealth,
    ReaderHealth,
    ReaderState,
    ReadFailed,
    ReadFailureKind,
    ReadState,
    ReadStatus,
)
from lab.read.queue import ReadTicket
from lab.read.store import ResultStore

__all__ = [
    "ByShape", "Job", "JobInput", "JobKind", "Lane", "Outline", "Parsed", "PoolHealth", "RanksResult", "ReadFailed",
    "ReadFailureKind", "ReadHere", "ReadState", "ReadStatus", "ReadTicket", "ReaderHealth", "ReaderPlan", "ReaderPool",
    "ReaderState", "ResultStore", "TraceRef", "json_size_hint", "kept_key", "memory_refusal", "read_rank_summaries",
    "reader_plan", "submit_rank_summaries", "timeout_refusal",
]  # fmt: skip

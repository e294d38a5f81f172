"""What the reader pool, its reader processes and its callers say to each other, as data.

The states and the messages on a reader's pipe are the pool's (``lab.pool.protocol``); what is
the readers' own is their init record (their limits), the jobs they run and the plain data in
the messages:

    server → reader:  InitReader (once), then per ticket Task(job=ReadRequest) [+ the trace as
                      one raw frame — or none: the trace is in a spool file in shared memory
                      (``lab.read.spool``) — or the traces of a multi-trace job as pickle-5 frames] … or Stop
    reader → server:  Ready(info=ReaderLimits) (once), then per ticket Progress …, and Done [+
                      the pickled result and its buffers as raw frames] or Failure(kind=ReadFailureKind)

The trace's bytes travel as raw frames (``send_bytes``), not inside a pickle, so neither side
copies them twice; the server never receives the JSON, only ``Parsed`` — or, for the page, only
its ``Outline``: a read with ``ReadRequest.outline`` leaves the ``Parsed`` in the reader (under
``keep``) and sends back what the page draws from without the event-level frames; the views that
need those are jobs answered there (``lab.read.jobs``). Nothing here imports pandas: ``Parsed``
and ``Outline`` name their field types as strings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lab.core.config import RunConfig
from lab.core.devices import DevicePeak
from lab.core.settings import HostSettings
from lab.pool import ChildState, Name, PoolFailed

if TYPE_CHECKING:  # pragma: no cover
    from lab.analysis import Analysis, AnalysisTables
    from lab.explain import Explanation
    from lab.judge import Finding, Judgement
    from lab.trace import Trace, TraceFacts

__all__ = [
    "InitReader", "Lane", "Outline", "Parsed", "PoolHealth", "ReadFailed", "ReadFailureKind", "ReadRequest",
    "ReadState", "ReadStatus", "ReaderHealth", "ReaderLimits", "ReaderState",
]  # fmt: skip

ReaderState = ChildState


class ReadState(Name):
    QUEUED = "queued"
    READING = "reading"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Lane(Name):
    """Small reads (≤ ``limits.SMALL_READ_JSON_BYTES``) may use every reader; large ones all but one."""

    SMALL = "small"
    LARGE = "large"


class ReadFailureKind(Name):
    TRACE = "trace"  # not a trace the lab can read (TraceError): the message says why
    ANALYSIS = "analysis"  # it parsed, an analysis failed on it
    MEMORY = "memory"  # over the reader's memory limit
    TIMEOUT = "timeout"  # over the host's read_timeout_s
    CRASH = "crash"  # the reader died
    CANCELLED = "cancelled"  # cancelled, or abandoned by a closed tab
    SHUTDOWN = "shutdown"  # the pool stopped
    TOO_BIG_TO_KEEP = "too big to keep"  # parsed, but larger than the server keeps for uploads


class ReadFailed(PoolFailed):
    """A read produced no ``Parsed``. ``str(error)`` is for the visitor; ``kind`` says why."""

    kinds = ReadFailureKind
    default_kind = ReadFailureKind.TRACE


@dataclass(frozen=True)
class Parsed:
    """What the views need of one trace: its ``Trace`` (DataFrames), ``Analysis``, and its
    explanation and judgement."""

    trace: Trace
    analysis: Analysis
    result_bytes: int = 0  # its pickled size as it came from the reader: what holding it costs
    # Where each step's time went and the ops against their roofs (lab.explain), and the findings
    # ranked by what fixing each would save, with the verdict (lab.judge).
    explanation: Explanation | None = None
    judgement: Judgement | None = None

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The judged findings, largest saving first (none without a judgement)."""
        return self.judgement.findings if self.judgement is not None else ()


@dataclass(frozen=True, kw_only=True)
class Outline:
    """What the page draws from, of a trace a reader keeps: a ``Parsed`` without its event-level
    frames (``Trace.events`` and the other per-event tables, ``Analysis.links``), which stay in
    that reader under ``key``. The Timeline, the Memory chart, the reveals, the replay's choices,
    compare's timelines and the ranks' stacked timeline ask it for what they draw (``lab.read.jobs``)."""

    key: str  # what the reader keeps the whole ``Parsed`` under (``lab.read.kept.kept_key``)
    trace: TraceFacts  # the trace's metadata, counts and flags, its profiler lanes and categories
    analysis: AnalysisTables
    explanation: Explanation | None = None
    judgement: Judgement | None = None
    result_bytes: int = 0  # its pickled size as it came from the reader: what holding it costs

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The judged findings, largest saving first (none without a judgement)."""
        return self.judgement.findings if self.judgement is not None else ()


# --------------------------------------------------------------------------- what callers see


@dataclass(frozen=True)
class ReadStatus:
    id: int
    state: str  # a ReadState
    stage: str | None  # while reading: "inflating", "parsing", "analysing", "sending"
    queue_position: int | None  # 1 = next of its lane; None unless queued
    elapsed_s: float  # since submission
    reader: int | None
    lane: str  # a Lane
    message: str | None = None  # why it failed


@dataclass(frozen=True)
class ReaderHealth:
    index: int
    state: str  # a ReaderState
    pid: int | None
    alive: bool
    rss_bytes: int | None  # resident memory now (None: not running)
    reads_served: int
    restarts: int
    reading: str | None  # the label of the read it holds


@dataclass(frozen=True)
class PoolHealth:
    readers_alive: int
    readers_total: int
    readers: tuple[ReaderHealth, ...]
    memory_limit_mb: int  # per reader
    waiting: int  # reads queued, both lanes
    waiting_large: int
    reads_served: int
    reads_failed: int
    held_uploads: int  # parsed uploads the server keeps for their sessions
    held_bytes: int
    held_limit_bytes: int
    last_error: str | None
    rereads: int = 0  # traces a reader read again for a job, since start: it kept them no longer


# --------------------------------------------------------------------------- server → reader


@dataclass(frozen=True, kw_only=True)
class InitReader:
    memory_mb: int  # address space the reader may add to its start-up size (RLIMIT_AS)
    nice: int  # added to the reader's CPU niceness
    keep_bytes: int = 0  # what its kept parsed traces may hold (lab.read.kept.KeptTraces); 0 keeps none
    # The page's job code (``Job.code``) the reader calls once with the warm-up trace's runs,
    # pickled by reference: its imports and first calls are paid before the first visitor's.
    warm_code: tuple[Callable[..., Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class ReadRequest:
    """Read one trace (``Task.job``): from ``path``, or from the raw frame that follows the task."""

    settings: HostSettings  # the trace limits (decompressed size, events) of the caller
    path: str | None = None  # a file the reader opens itself (the CLI), or the server's spool file
    spooled: bool = False  # ``path`` is a spool file (lab.read.spool): the reader maps it, copying nothing
    config: RunConfig | None = None  # a run's config and device peak feed the GEMM analysis
    peak: DevicePeak | None = None
    json_hint: int = 0  # the server's estimate of the JSON's size (limits.json_size_hint), for messages
    # One rank of a job: send back only its ``RankSummary`` (lab.analysis.ranks.summary),
    # named by this file name, instead of the ``Parsed`` (the job's views need no rank's frames).
    rank_of_job: str | None = None
    # Leave the ``Parsed`` in the reader under this key (lab.read.kept): later jobs send the key.
    keep: str | None = None
    # Send back only its ``Outline`` (needs ``keep``): the frames stay in the reader.
    outline: bool = False


# --------------------------------------------------------------------------- reader → server


@dataclass(frozen=True, kw_only=True)
class ReaderLimits:
    """``Ready.info`` of a reader."""

    base_address_space: int  # bytes mapped after imports and a warm-up read
    limit_bytes: int  # RLIMIT_AS as set (0 = could not be set)

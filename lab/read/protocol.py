"""What the reader pool, its reader processes and its callers say to each other, as data.

States are enums whose members are their own strings (as in ``lab.run.protocol``); each
message on a reader's pipe is a small frozen dataclass, matched by type:

    server → reader:  InitReader (once), then per read ReadRequest [+ the trace as one raw
                      frame when ``inline``] … or StopReader
    reader → server:  ReaderReady (once), then per read ReadProgress …, and ReadDone [+ the
                      pickled ``Parsed`` and its buffers as raw frames] or ReadFailure

The trace's bytes travel as raw frames (``send_bytes``), not inside a pickle, so neither side
copies them twice; the server never receives the JSON, only ``Parsed``. Nothing here imports
pandas: ``Parsed`` names its field types as strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from lab.core.config import RunConfig
from lab.core.devices import DevicePeak
from lab.core.settings import HostSettings

if TYPE_CHECKING:  # pragma: no cover
    from lab.analysis import Analysis, Insight
    from lab.trace import Trace

__all__ = [
    "InitReader", "Lane", "Parsed", "PoolHealth", "ReadDone", "ReadFailed", "ReadFailure", "ReadFailureKind",
    "ReadProgress", "ReadRequest", "ReadState", "ReadStatus", "ReaderHealth", "ReaderReady", "ReaderState",
    "StopReader",
]  # fmt: skip


class _Name(str, Enum):
    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)


class ReadState(_Name):
    QUEUED = "queued"
    READING = "reading"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ReaderState(_Name):
    NOT_STARTED = "not started"
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    RESTARTING = "restarting"
    STOPPED = "stopped"


class Lane(_Name):
    """Small reads (≤ ``limits.SMALL_READ_JSON_BYTES``) may use every reader; large ones all but one."""

    SMALL = "small"
    LARGE = "large"


class ReadFailureKind(_Name):
    TRACE = "trace"  # not a trace the lab can read (TraceError): the message says why
    ANALYSIS = "analysis"  # it parsed, an analysis failed on it
    MEMORY = "memory"  # over the reader's memory limit
    TIMEOUT = "timeout"  # over the host's read_timeout_s
    CRASH = "crash"  # the reader died
    CANCELLED = "cancelled"  # cancelled, or abandoned by a closed tab
    SHUTDOWN = "shutdown"  # the pool stopped
    TOO_BIG_TO_KEEP = "too big to keep"  # parsed, but larger than the server keeps for uploads


class ReadFailed(RuntimeError):
    """A read produced no ``Parsed``. ``str(error)`` is for the visitor; ``kind`` says why."""

    def __init__(self, message: str, *, kind: str = ReadFailureKind.TRACE):
        super().__init__(message)
        self.message = message
        self.kind = ReadFailureKind(kind)


@dataclass(frozen=True)
class Parsed:
    """What the views need of one trace: its ``Trace`` (DataFrames), ``Analysis`` and insights."""

    trace: Trace
    analysis: Analysis
    insights: list[Insight]
    result_bytes: int = 0  # its pickled size as it came from the reader: what holding it costs


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


# --------------------------------------------------------------------------- server → reader


@dataclass(frozen=True, kw_only=True)
class InitReader:
    memory_mb: int  # address space the reader may add to its start-up size (RLIMIT_AS)
    nice: int  # added to the reader's CPU niceness


@dataclass(frozen=True, kw_only=True)
class ReadRequest:
    read_id: int
    settings: HostSettings  # the trace limits (decompressed size, events) of the caller
    path: str | None = None  # a file the reader opens itself (the CLI)
    inline: bool = False  # the trace's bytes follow as one raw frame
    config: RunConfig | None = None  # a run's config and device peak feed the GEMM analysis
    peak: DevicePeak | None = None
    json_hint: int = 0  # the server's estimate of the JSON's size (limits.json_size_hint), for messages


@dataclass(frozen=True)
class StopReader:
    """Exit when idle."""


# --------------------------------------------------------------------------- reader → server


@dataclass(frozen=True, kw_only=True)
class ReaderReady:
    pid: int
    base_address_space: int  # bytes mapped after imports and a warm-up read
    limit_bytes: int  # RLIMIT_AS as set (0 = could not be set)
    error: str | None = None  # what went wrong while starting (the host sees it in Server status)
    usable: bool = True  # False: the imports or the warm-up read failed, nothing can be read


@dataclass(frozen=True, kw_only=True)
class ReadProgress:
    read_id: int
    stage: str
    json_bytes: int = 0  # known once inflated


@dataclass(frozen=True, kw_only=True)
class ReadDone:
    read_id: int
    json_bytes: int
    # The raw frames that follow: the pickled Parsed (protocol 5), then its out-of-band buffers.
    frame_bytes: tuple[int, ...]
    seconds: float
    peak_rss_bytes: int


@dataclass(frozen=True, kw_only=True)
class ReadFailure:
    read_id: int
    kind: ReadFailureKind
    message: str
    json_bytes: int = 0
    fatal: bool = False  # the reader exits after sending this: the pool starts a fresh one

"""What the service and its workers say to each other and to callers, as data.

States are enums (``str`` subclasses, so ``status.state == "queued"`` and f-strings read as
before); each message on a worker's pipe is a small frozen dataclass, matched by type:

    server → worker:  InitWorker (once), then RunRequest … or StopWorker
    worker → server:  WorkerReady (once), then per run StageChanged …, RunDone or RunFailure

Everything here pickles (the pipe is a ``multiprocessing.connection.Connection``) and imports
neither torch nor pandas.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from lab.core.config import RunConfig
from lab.core.devices import DeviceInfo
from lab.core.settings import HostSettings

if TYPE_CHECKING:  # pragma: no cover
    from lab.core.result import RunResult

__all__ = [
    "TICKET_STATES", "FailureKind", "InitWorker", "RunDone", "RunFailed", "RunFailure", "RunRequest",
    "ServiceBusy", "ServiceHealth", "StageChanged", "StandbyState", "StopWorker", "TicketState", "TicketStatus",
    "WorkerHealth", "WorkerReady", "WorkerState",
]  # fmt: skip


class _Name(str, Enum):
    """An enum whose members are their own strings: str(), format() and == read the value."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)


class TicketState(_Name):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


TICKET_STATES = tuple(s.value for s in TicketState)


class WorkerState(_Name):
    NOT_STARTED = "not started"
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    RESTARTING = "restarting"
    STOPPED = "stopped"


class StandbyState(_Name):
    """A worker's warm spare (lab.run.standby)."""

    NONE = "none"  # off, between spares, or not started yet
    STARTING = "warming up"
    READY = "ready"
    LOW_MEMORY = "skipped: low memory"


class FailureKind(_Name):
    """Why a run produced no result (``RunFailed.kind``)."""

    CONFIG = "config"  # the run was refused: change the config
    RUN = "run"  # the run failed, e.g. out of memory
    CRASH = "crash"  # the worker died
    TIMEOUT = "timeout"  # over the host's run_timeout_s
    CANCELLED = "cancelled"  # cancelled, or abandoned by a closed tab
    SHUTDOWN = "shutdown"  # the service stopped


class ServiceBusy(RuntimeError):
    """The queue is full; the caller should try again shortly."""


class RunFailed(RuntimeError):
    """A run did not produce a result. ``str(error)`` is a message for the user.

    ``kind`` (a ``FailureKind``) says why: "config" (the run was refused; change the config),
    "run" (the run failed, e.g. out of memory), "crash" (the worker died), "timeout" (over the
    host's limit), "cancelled" (cancelled or abandoned), "shutdown" (the service stopped).
    """

    def __init__(self, message: str, *, kind: str = FailureKind.RUN, error_type: str | None = None):
        super().__init__(message)
        self.message = message
        self.kind = FailureKind(kind)
        self.error_type = error_type


# --------------------------------------------------------------------------- what callers see


@dataclass(frozen=True)
class TicketStatus:
    id: int
    state: str  # a TicketState
    stage: str | None  # the runner's current stage while running ("profiling", ...)
    queue_position: int | None  # 1 = next to run; None unless queued
    elapsed_s: float  # since submission
    # Seconds until the result is expected: queued → median run × (runs ahead per worker + 1);
    # running → median run − time running (≥ 0). None before any run has finished.
    estimate_s: float | None
    worker: int | None  # index of the worker running (or that ran) it
    device: str | None  # that worker's device, e.g. "cuda:0" or "cpu"
    reused: bool = False
    message: str | None = None  # why it failed or was cancelled
    # The run's own time from lab.run.estimate (None before a worker measured its device).
    run_estimate_s: float | None = None
    replaced: int = 0  # the session's earlier runs this submission replaced (cancelled)
    node: str | None = None  # the host of that worker when it is not this server (the Ray backend)
    device_name: str | None = None  # the device model the run asked for ("NVIDIA H200"); None = any


@dataclass(frozen=True)
class WorkerHealth:
    index: int
    device: str
    state: str  # a WorkerState
    pid: int | None
    alive: bool
    runs_served: int
    restarts: int
    device_info: DeviceInfo | None
    node: str | None = None  # the Ray node it runs on; None for a local worker process
    rss_bytes: int | None = None  # the worker's resident memory now
    standby: str = "off"  # its warm spare: a StandbyState, or "off" (host setting standby=0)
    standby_pid: int | None = None
    standby_rss_bytes: int | None = None
    promotions: int = 0  # times its spare replaced it (a cancelled, crashed or overdue run)


@dataclass(frozen=True)
class ServiceHealth:
    workers_alive: int
    workers_total: int
    workers: tuple[WorkerHealth, ...]
    queue_length: int
    runs_served: int
    runs_failed: int
    last_error: str | None
    uptime_s: float
    backend: str = "local"  # HostSettings.backend: worker processes here, or Ray actors


# --------------------------------------------------------------------------- server → worker


@dataclass(frozen=True, kw_only=True)
class InitWorker:
    device: str  # "cpu" or "cuda:N" as the server numbers GPUs (the worker sees only cuda:0)
    physical_index: int  # the GPU's index to report (-1 on CPU)
    settings: HostSettings


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    run_id: int
    config: RunConfig


@dataclass(frozen=True)
class StopWorker:
    """Exit when idle (the worker reads messages only between runs)."""


# --------------------------------------------------------------------------- worker → server


@dataclass(frozen=True, kw_only=True)
class WorkerReady:
    info: DeviceInfo | None  # None when the warm-up failed
    error: str | None = None  # why the warm-up (or the torch import) failed


@dataclass(frozen=True, kw_only=True)
class StageChanged:
    run_id: int
    stage: str  # one of lab.vocab.STAGES


@dataclass(frozen=True, kw_only=True)
class RunDone:
    run_id: int
    result: RunResult


@dataclass(frozen=True, kw_only=True)
class RunFailure:
    run_id: int
    kind: FailureKind
    error_type: str  # the exception's class name, e.g. "ConfigError"
    message: str  # for the user
    fatal: bool  # the worker exits after sending this: the server starts a fresh one

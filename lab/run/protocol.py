"""What the service and its workers say to each other and to callers, as data.

The states and the messages on a worker's pipe are the pool's (``lab.pool.protocol``); what is
the workers' own is their init record and the plain data inside the messages:

    server → worker:  InitWorker (once: device, pinning, host settings), then Task(job=RunConfig) … or Stop
    worker → server:  Ready(info=DeviceInfo) (once), then per run Progress(stage) …, and
                      Done(value=RunResult) or Failure(kind=FailureKind, error_type=…)

Everything here pickles and imports neither torch nor pandas.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.core.devices import DeviceInfo
from lab.core.settings import HostSettings
from lab.pool import ChildState, Name, PoolFailed, StandbyState, TicketState

__all__ = [
    "TICKET_STATES", "FailureKind", "InitWorker", "RunFailed", "ServiceBusy", "ServiceHealth", "StandbyState",
    "TicketState", "TicketStatus", "WorkerHealth", "WorkerState",
]  # fmt: skip

WorkerState = ChildState
TICKET_STATES = tuple(s.value for s in TicketState)


class FailureKind(Name):
    """Why a run produced no result (``RunFailed.kind``)."""

    CONFIG = "config"  # the run was refused: change the config
    RUN = "run"  # the run failed, e.g. out of memory
    CRASH = "crash"  # the worker died
    TIMEOUT = "timeout"  # over the host's run_timeout_s
    CANCELLED = "cancelled"  # cancelled, or abandoned by a closed tab
    SHUTDOWN = "shutdown"  # the service stopped
    MEMORY = "memory"  # the server had no memory left to take the result


class ServiceBusy(RuntimeError):
    """The queue is full; the caller should try again shortly."""


class RunFailed(PoolFailed):
    """A run did not produce a result. ``str(error)`` is a message for the user.

    ``kind`` (a ``FailureKind``) says why: "config" (the run was refused; change the config),
    "run" (the run failed, e.g. out of memory), "crash" (the worker died), "timeout" (over the
    host's limit), "cancelled" (cancelled or abandoned), "shutdown" (the service stopped).
    """

    kinds = FailureKind
    default_kind = FailureKind.RUN

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

"""The pool's states and the one set of message records its children and the server exchange.

States are enums whose members are their own strings (``state == "queued"`` and f-strings read
as the value). Each message on a child's pipe is a small frozen dataclass, matched by type:

    server → child:  the client's init record (once: its limits), then per ticket ``Task`` [+
                     ``Task.frame_bytes`` raw frames] … or ``Stop``
    child → server:  ``Ready`` (once), then per ticket ``Progress`` …, and ``Done`` [+
                     ``Done.frame_bytes`` raw frames] or ``Failure``

What a client runs (``Task.job``), how it describes a child once warm (``Ready.info``) and what
comes back (``Done.value``, or the pickled object in the frames) are the client's own plain data.
Nothing here imports pandas, torch or another package of the lab.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = [
    "ChildState", "Done", "Failure", "Name", "PoolFailed", "Progress", "Ready", "StandbyState", "Stop", "Task",
    "TicketState",
]  # fmt: skip


class Name(str, Enum):
    """An enum whose members are their own strings: str(), format() and == read the value."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)


class TicketState(Name):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ChildState(Name):
    NOT_STARTED = "not started"
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    RESTARTING = "restarting"
    STOPPED = "stopped"


class StandbyState(Name):
    """A child's warm spare (lab.pool.standby)."""

    NONE = "none"  # off, between spares, or not started yet
    STARTING = "warming up"
    READY = "ready"
    LOW_MEMORY = "skipped: low memory"


class PoolFailed(RuntimeError):
    """A ticket produced no result. ``str(error)`` is for the user; ``kind`` (a client's enum of
    failure kinds, which has at least "cancelled", "shutdown", "crash" and "timeout") says why."""

    kinds: type[Name]  # the client's enum of failure kinds
    default_kind = "crash"  # the kind when none is given

    def __init__(self, message: str, *, kind: str | None = None, error_type: str | None = None):
        super().__init__(message)
        self.message = message
        self.kind = self.kinds(kind or self.default_kind)
        self.error_type = error_type  # the exception's class name in the child, e.g. "ConfigError"


# --------------------------------------------------------------------------- server → child


@dataclass(frozen=True, kw_only=True)
class Task:
    ticket_id: int
    job: Any  # the client's request, plain data
    # The raw frames that follow: one blob (a trace's bytes), or with ``packed`` a pickle
    # (protocol 5) and its out-of-band buffers (the traces a multi-trace job reads).
    frame_bytes: tuple[int, ...] = ()
    packed: bool = False


@dataclass(frozen=True)
class Stop:
    """Exit when idle (a child reads messages only between tasks)."""


# --------------------------------------------------------------------------- child → server


@dataclass(frozen=True, kw_only=True)
class Ready:
    info: Any = None  # what the child measured or set up (a worker's DeviceInfo, a reader's limits)
    error: str | None = None  # what went wrong while starting (the host sees it in Server status)
    usable: bool = True  # False: nothing can be served (the imports or the warm-up failed)
    pid: int | None = None


@dataclass(frozen=True, kw_only=True)
class Progress:
    ticket_id: int
    stage: str
    input_bytes: int = 0  # the task's input size once the child knows it (a trace's JSON)


@dataclass(frozen=True, kw_only=True)
class Done:
    ticket_id: int
    value: Any = None  # the result, inside this message; or None when it follows as frames
    # The raw frames that follow: a pickle (protocol 5), then its out-of-band buffers.
    frame_bytes: tuple[int, ...] = ()
    input_bytes: int = 0
    seconds: float = 0.0
    peak_rss_bytes: int = 0


@dataclass(frozen=True, kw_only=True)
class Failure:
    ticket_id: int
    kind: str  # a client's failure kind
    message: str  # for the user
    error_type: str | None = None  # the exception's class name, e.g. "ConfigError"
    input_bytes: int = 0
    fatal: bool = False  # the child exits after sending this: the pool starts a fresh one

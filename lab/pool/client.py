"""What a client of the pool says about itself: what it runs, its limits and its words.

The pool (queue, supervisors, spares) is the same for profile workers (``lab.run``) and trace
readers (``lab.read``); each is a ``PoolClient``: how a child starts (its code, its
environment), the init record it gets, the ``Task`` a ticket becomes, its time limits, and the
words its failures are told in. Everything else is the pool's.
"""

from __future__ import annotations

import subprocess
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from lab.pool.protocol import Done, PoolFailed, Ready, Stop

if TYPE_CHECKING:  # pragma: no cover
    from lab.pool.queue import ChildRecord, Ticket

__all__ = ["PoolClient"]


class PoolClient:
    """The hooks the pool calls; subclasses fill in the words and the child's side."""

    noun = "task"  # "run", "read": in counters' and errors' text
    pool_name = "pool"  # the facade's class, for "this ProfileService was shut down"
    failed: type[PoolFailed] = PoolFailed  # the exception callers see
    start_timeout_s = 120.0  # a child not ready after this is replaced
    # When no child could start: fail the waiting tickets now (True) or let them wait for one.
    fail_waiting_on_start_failure = False
    stop_message: Any = Stop()
    cancelled_text = "the task was cancelled"
    withdrawn_text = "the task was withdrawn before it started"
    shutdown_text = "the pool is shutting down"
    again_text = "try again"  # after "(page closed?); " in the message of an abandoned ticket
    no_child_text = "no child process could start on this host just now"
    no_memory_text = "the server has no memory left to take this result; try again in a while"

    # ------------------------------------------------------------------ the child

    def spawn(self, child: ChildRecord) -> tuple[subprocess.Popen, Connection]:
        raise NotImplementedError

    def init_message(self, child: ChildRecord) -> Any:
        raise NotImplementedError

    def on_ready(self, child: ChildRecord, ready: Ready, *, promoted: bool) -> None:
        """(queue lock held) Keep what ``ready`` says of the child (its device, its limits)."""

    # ------------------------------------------------------------------ tickets

    def job(self, ticket: Ticket) -> Any:
        """What ``Task.job`` carries for ``ticket`` (its frames follow the task)."""
        return ticket.job

    def describe(self, ticket: Ticket) -> str:
        return str(ticket.id)

    def timeout_s(self) -> float:
        raise NotImplementedError

    def on_done(self, ticket: Ticket, done: Done, value: Any) -> Any:
        """The value to settle ``ticket`` with (frames already unpickled into ``value``)."""
        return value

    def crashed(self, ticket: Ticket, child: ChildRecord, exitcode: int | None) -> PoolFailed:
        raise NotImplementedError

    def overdue(self) -> PoolFailed:
        raise NotImplementedError

    def error(self, message: str, kind: str, error_type: str | None = None) -> PoolFailed:
        """The client's exception for a ``Failure`` (or one the pool decides on)."""
        return self.failed(message, kind=kind)

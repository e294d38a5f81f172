"""The pool's shared state: tickets, the queue with its lanes, child records and counters.

One lock (``PoolQueue.lock``) guards all of it; ``PoolQueue.changed`` is notified whenever the
queue, a child's state or the stop flag changes. Callers and the per-child supervisor threads
both go through the queue; a ``Ticket`` changes state only through its own methods, which the
queue calls with the lock held.

The order children take tickets in: lanes first (a lane of lower ``priority`` goes first; a lane
with ``slots`` occupies at most that many children at once, so a reader stays free for small
reads), then start-time fair queueing by session: a session's next ticket is served one round
after its last one, and never before the round being served now; so sessions take turns (round
robin) and anonymous tickets (session None) are served in arrival order.
"""

from __future__ import annotations

import itertools
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from lab.pool.client import PoolClient
from lab.pool.protocol import ChildState, PoolFailed, StandbyState, TicketState
from lab.pool.spawn import exit_text

__all__ = ["ABANDONED_TICKET_S", "DEFAULT_LANE", "IDLE_WAIT_S", "ChildRecord", "LaneRule", "PoolQueue", "Ticket"]

# A queued ticket nobody has polled for this long belongs to a closed browser tab; it is
# dropped when it reaches the head of the queue instead of occupying a child. Pages poll every
# second or so while they wait (reads every 0.2 s), so two minutes is generous.
ABANDONED_TICKET_S = 120.0
# How long an idle supervisor waits on the queue before it checks its child and the stop flag.
IDLE_WAIT_S = 1.0
DEFAULT_LANE = "default"


@dataclass(frozen=True)
class LaneRule:
    priority: int = 0  # lower goes first
    slots: int | None = None  # children this lane may occupy at once (None: all)


class Ticket:
    """A caller's handle on one submitted task. Cheap to poll from any thread.

    Callers use ``poll``, ``result``, ``cancel``, ``withdraw`` and ``done``; the ``mark_*`` and
    ``settle`` methods belong to the queue, which calls them with its lock held.
    """

    def __init__(self, queue: PoolQueue, ticket_id: int, job: Any, *, session: str | None = None,
                 lane: str = DEFAULT_LANE, frames: list | None = None, packed: bool = False):
        self._queue = queue
        self.id = ticket_id
        self.job = job  # what the child runs (the client's plain data)
        self.session = session  # who submitted it: fair turns, one outstanding submission per session
        self.lane = lane
        self.frames = frames  # raw frames for the child, until they are sent (then None)
        self.packed = packed
        # Fair-queue order: served lowest (tag, seq) first within a lane; a replacement may
        # inherit the replaced ticket's pair, so it keeps that place in line.
        self.tag = 0
        self.seq = ticket_id
        now = time.monotonic()
        # All fields below are guarded by the queue's lock.
        self.state = TicketState.QUEUED
        self.stage: str | None = None
        self.input_bytes = 0
        self.child: int | None = None
        self.submitted_at = now
        self.started_at: float | None = None
        self.last_seen = now
        self._value: Any = None
        self._error: PoolFailed | None = None
        self._finished = threading.Event()

    # ------------------------------------------------------------------ callers

    def poll(self):
        return self._queue.status(self)

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the result. Raises the client's failure if it failed or was cancelled, and
        ``TimeoutError`` if ``timeout`` seconds pass first (the ticket goes on)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._finished.is_set():
            self._queue.touch(self)  # a caller waiting here is not an abandoned tab
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"{self._queue.client.noun} {self.id} is not finished after {timeout:g} s; "
                                   f"it is still {self.state}")
            self._finished.wait(ABANDONED_TICKET_S / 4 if remaining is None else min(remaining, ABANDONED_TICKET_S / 4))
        if self._error is not None:
            raise self._error
        return self._value

    def cancel(self) -> bool:
        """Cancel: a queued ticket leaves the queue; a running one's child is killed (and
        replaced). Returns False if the ticket had already finished."""
        return self._queue.cancel(self)

    def withdraw(self) -> bool:
        """Take the ticket out of the queue if it is still waiting; a running one goes on."""
        return self._queue.withdraw(self)

    def done(self) -> bool:
        """Whether the ticket has settled (done, failed or cancelled); never blocks."""
        return self._finished.is_set()

    @property
    def error(self) -> PoolFailed | None:
        return self._error

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id}, state={str(self.state)!r}, lane={self.lane!r})"

    # ------------------------------------------------------------------ the queue (lock held)

    def mark_running(self, child: ChildRecord) -> None:
        self.state, self.stage, self.child = TicketState.RUNNING, "dispatched", child.index
        self.started_at = time.monotonic()

    def mark_queued(self) -> None:
        """Back to waiting: its child died before the task started."""
        self.state, self.stage, self.child = TicketState.QUEUED, None, None

    def settle(self, *, value: Any = None, error: PoolFailed | None = None, state: TicketState | None = None) -> None:
        """Record the outcome. A ticket settles once; later outcomes are dropped; frames not yet sent go."""
        if self._finished.is_set():
            return
        self.frames = None
        self._value, self._error = value, error
        self.state = state or (TicketState.DONE if error is None else TicketState.FAILED)
        self._finished.set()

    def running_for(self, now: float) -> float:
        return now - (self.started_at or now)


class ChildRecord:
    """Server-side record of one child process; fields guarded by the queue's lock except
    ``process`` and ``conn``, which only its supervisor thread replaces."""

    kind = "child"

    def __init__(self, index: int):
        self.index = index
        self.state = ChildState.NOT_STARTED
        self.process: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.pid: int | None = None
        self.ever_ready = False
        self.served = 0
        self.restarts = 0
        self.ticket: Ticket | None = None
        self.thread: threading.Thread | None = None
        self.node: str | None = None  # where it runs when that is not this server (a Ray node)
        # The warm spare (lab.pool.standby): (process, pipe, its Ready once warm), its state,
        # how often it replaced this child, and the thread that keeps it.
        self.standby: tuple[subprocess.Popen, Connection, Any] | None = None
        self.standby_state = StandbyState.NONE
        self.promotions = 0
        self.standby_thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return not self.died()

    def died(self) -> bool:
        """Whether its process is gone (Popen.poll is safe from any thread)."""
        return self.process is None or self.process.poll() is not None

    @property
    def label(self) -> str:
        return f"{self.kind} {self.index}"

    def exit_reason(self) -> str:
        """How its process ended, for messages (call once ``process.poll()`` is not None)."""
        return exit_text(None if self.process is None else self.process.returncode)


class PoolQueue:
    """Tickets waiting and running, the children's records and the pool's counters."""

    def __init__(self, client: PoolClient, children: list, *, abandon_after_s: float = ABANDONED_TICKET_S,
                 lanes: dict[str, LaneRule] | None = None):
        self.client = client
        self.children = children
        self.abandon_after_s = abandon_after_s
        self.lanes = lanes or {DEFAULT_LANE: LaneRule()}
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # queue, child state or stop changed
        self.pending: deque[Ticket] = deque()
        self.stopping = False
        self.served = 0
        self.failed = 0
        self.last_error: str | None = None
        self._ids = itertools.count(1)
        # Fair queue (see _next_tag): the tag of the round being served, each session's last tag.
        self._round = 0
        self._last_tag: dict[object, int] = {}
        # Submitted tickets not yet settled, for the one-per-session rule (pruned on submit).
        self._live_refs: list[Ticket] = []

    # ------------------------------------------------------------------ callers (lock held)

    def next_id(self) -> int:
        return next(self._ids)

    def check_open(self) -> None:
        if self.stopping:
            raise RuntimeError(f"this {self.client.pool_name} was shut down; create a new one")

    def enqueue(self, ticket: Ticket, place: tuple[int, int] | None = None) -> None:
        """(lock held) Queue ``ticket``: at ``place`` (a replaced ticket's (tag, seq)) or its session's next turn."""
        if place is not None:
            ticket.tag, ticket.seq = place
        else:
            ticket.tag = self._next_tag(ticket.session)
        self.pending.append(ticket)
        self._live_refs.append(ticket)
        self.changed.notify_all()

    @property
    def live(self) -> list[Ticket]:
        self._live_refs = [t for t in self._live_refs if not t.done()]
        return self._live_refs

    def outstanding(self, session: str | None) -> list[Ticket]:
        """(lock held) The session's tickets still waiting or running (none for an anonymous caller)."""
        if session is None:
            return []
        return [t for t in self.live if t.session == session]

    def _next_tag(self, session: str | None) -> int:
        key = session if session is not None else object()
        tag = max(self._round, self._last_tag.get(key, 0)) + 1
        self._last_tag = {k: t for k, t in self._last_tag.items() if t > self._round}
        if session is not None:
            self._last_tag[key] = tag
        return tag

    def serve_order(self) -> list[Ticket]:
        """(lock held) The waiting tickets in the order children will take them."""
        return sorted(self.pending, key=lambda t: (self.lanes[t.lane].priority, t.tag, t.seq))

    def position(self, ticket: Ticket) -> int:
        """(lock held) 1 = next of its lane."""
        order = [t for t in self.serve_order() if t.lane == ticket.lane]
        return order.index(ticket) + 1 if ticket in order else 1  # else: being dispatched

    def touch(self, ticket: Ticket) -> None:
        with self.lock:
            ticket.last_seen = time.monotonic()

    def status(self, ticket: Ticket):
        with self.lock:
            now = time.monotonic()
            ticket.last_seen = now
            position = self.position(ticket) if ticket.state == TicketState.QUEUED else None
            return self.describe_status(ticket, now, position)

    def describe_status(self, ticket: Ticket, now: float, position: int | None):
        """(lock held) The client's status record of ``ticket``."""
        raise NotImplementedError

    def cancel(self, ticket: Ticket) -> bool:
        with self.lock:
            return self.cancel_locked(ticket, self.client.cancelled_text)

    def withdraw(self, ticket: Ticket) -> bool:
        with self.lock:
            if ticket.state != TicketState.QUEUED:
                return False
            return self.cancel_locked(ticket, self.client.withdrawn_text)

    def cancel_locked(self, ticket: Ticket, why: str) -> bool:
        """(lock held) A queued ticket leaves the queue; a running one settles now and its
        supervisor, which checks every tick, kills the child and starts a fresh one (nothing
        of its result is received)."""
        if ticket.state == TicketState.QUEUED:
            try:
                self.pending.remove(ticket)
            except ValueError:
                pass
        elif ticket.state != TicketState.RUNNING:
            return False
        ticket.settle(error=self.client.error(why, "cancelled"), state=TicketState.CANCELLED)
        self.changed.notify_all()
        return True

    def stop(self) -> bool:
        """Set the stop flag and cancel every queued ticket; False if it was already set."""
        with self.lock:
            if self.stopping:
                return False
            self.stopping = True
            while self.pending:
                self.pending.popleft().settle(error=self.client.error(self.client.shutdown_text, "shutdown"),
                                              state=TicketState.CANCELLED)
            self.changed.notify_all()
            return True

    # ------------------------------------------------------------------ supervisors

    def next_ticket(self, child: ChildRecord) -> Ticket | None:
        """Wait for the next live queued ticket ``child`` may take and mark it running; None when
        the pool stops or the idle child died (e.g. the OOM killer): it gets replaced now, not
        when the next user clicks."""
        with self.lock:
            child.state, child.ticket = ChildState.IDLE, None
            self.changed.notify_all()
            while not self.stopping:
                if child.died():
                    self.last_error = f"{child.label} died while idle ({child.exit_reason()}); restarting it"
                    return None
                self._drop_abandoned(time.monotonic())
                ticket = self._pick(child)
                if ticket is not None:
                    self.pending.remove(ticket)
                    self._round = max(self._round, ticket.tag)
                    ticket.mark_running(child)
                    child.state, child.ticket = ChildState.BUSY, ticket
                    return ticket
                self.changed.wait(IDLE_WAIT_S)
            return None

    def _pick(self, child: ChildRecord) -> Ticket | None:
        busy: dict[str, int] = {}
        for c in self.children:
            if c.ticket is not None:
                busy[c.ticket.lane] = busy.get(c.ticket.lane, 0) + 1
        for ticket in self.serve_order():
            slots = self.lanes[ticket.lane].slots
            if (slots is None or busy.get(ticket.lane, 0) < slots) and self.serves(child, ticket):
                return ticket
        return None

    def serves(self, child: ChildRecord, ticket: Ticket) -> bool:
        """(lock held) Whether ``child`` may take ``ticket`` (a device model asked for, say)."""
        return True

    def requeue(self, ticket: Ticket) -> None:
        """Put a ticket whose task never started back at the front of its turn."""
        with self.lock:
            if not ticket.done():
                ticket.mark_queued()
                self.pending.appendleft(ticket)
                self.changed.notify_all()

    def progress(self, ticket: Ticket, stage: str, input_bytes: int = 0) -> None:
        with self.lock:
            ticket.stage = stage
            ticket.input_bytes = input_bytes or ticket.input_bytes

    def record_done(self, child: ChildRecord, ticket: Ticket, value: Any, duration_s: float) -> None:
        with self.lock:
            self.served += 1
            child.served += 1
            self.on_done(ticket, value, duration_s)
            ticket.settle(value=value)  # a no-op if cancelled meanwhile
            self.changed.notify_all()

    def on_done(self, ticket: Ticket, value: Any, duration_s: float) -> None:
        """(lock held) What a client keeps of a result (durations for estimates, a reuse cache)."""

    def record_failure(self, ticket: Ticket, error: PoolFailed) -> None:
        with self.lock:
            self.failed += 1
            self.last_error = f"{self.client.noun} {ticket.id} ({self.client.describe(ticket)}): {error.message}"
            ticket.settle(error=error)
            self.changed.notify_all()

    def note_error(self, text: str) -> None:
        with self.lock:
            self.last_error = text

    def start_failed(self, child: ChildRecord, why: str) -> None:
        """A child did not start: note why; if the client says so and no child is up to take
        them, fail the waiting tickets now with the user's words (each would otherwise wait for
        a child that may never come; the child keeps being restarted behind them)."""
        with self.lock:
            self.last_error = why
            if not self.client.fail_waiting_on_start_failure:
                return
            if any(c is not child and c.state in (ChildState.IDLE, ChildState.BUSY) for c in self.children):
                return
            while self.pending:
                self.failed += 1
                self.pending.popleft().settle(error=self.client.error(self.client.no_child_text, "crash"))
            self.changed.notify_all()

    def _drop_abandoned(self, now: float) -> None:
        """(lock held) Drop queued tickets nobody has polled for ``abandon_after_s``."""
        for ticket in [t for t in self.pending if now - t.last_seen > self.abandon_after_s]:
            self.pending.remove(ticket)
            ticket.settle(state=TicketState.CANCELLED, error=self.client.error(
                f"the {self.client.noun} was dropped from the queue: nobody checked on it for "
                f"{self.abandon_after_s:g} s (page closed?); {self.client.again_text}", "cancelled"))

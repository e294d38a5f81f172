"""The pool's shared state: read tickets, the two-lane FIFO, reader records and counters.

One lock (``ReadQueue.lock``) guards all of it; ``ReadQueue.changed`` is notified whenever the
queue, a reader's state or the stop flag changes. Small reads (samples, runs, most uploads) go
before large ones and may use every reader; large reads wait in arrival order for one of
``plan.large_slots`` readers, so one reader stays free for small reads and a page never waits
behind someone's 500 MB trace. A ticket changes state only through the queue.
"""

from __future__ import annotations

import itertools
import subprocess
import threading
import time
from collections import deque
from multiprocessing.connection import Connection

from lab.read.limits import ReaderPlan
from lab.read.protocol import Lane, Parsed, ReaderState, ReadFailed, ReadFailureKind, ReadState, ReadStatus

__all__ = ["ABANDONED_READ_S", "IDLE_WAIT_S", "ReadQueue", "ReadTicket", "ReaderRecord"]

# A queued read nobody has polled for this long belongs to a closed tab; it is dropped when a
# reader would take it. The page polls every 0.2 s while it waits: two minutes is generous.
ABANDONED_READ_S = 120.0
# How long an idle supervisor waits on the queue before it checks its reader and the stop flag.
IDLE_WAIT_S = 1.0


class ReadTicket:
    """A caller's handle on one read. ``poll``, ``result``, ``cancel`` and ``done`` are for
    callers; the rest belongs to the queue and its supervisors (queue lock held)."""

    def __init__(self, queue: ReadQueue, read_id: int, *, request: dict, data, lane: Lane, label: str):
        self._queue = queue
        self.id = read_id
        self.request = request  # ReadRequest fields but read_id/inline
        self.data = data  # the trace's bytes until they are sent to a reader (then None)
        self.lane = lane
        self.label = label
        now = time.monotonic()
        self.state = ReadState.QUEUED
        self.stage: str | None = None
        self.json_bytes = 0
        self.reader: int | None = None
        self.submitted_at = now
        self.last_seen = now
        self._parsed: Parsed | None = None
        self._error: ReadFailed | None = None
        self._finished = threading.Event()

    def poll(self) -> ReadStatus:
        return self._queue.status(self)

    def result(self, timeout: float | None = None) -> Parsed:
        """Wait for the ``Parsed``; raises ``ReadFailed``, or ``TimeoutError`` after ``timeout`` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._finished.is_set():
            self._queue.touch(self)  # a caller waiting here is not an abandoned tab
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"read {self.id} is not finished after {timeout:g} s")
            self._finished.wait(ABANDONED_READ_S / 4 if remaining is None else min(remaining, ABANDONED_READ_S / 4))
        if self._error is not None:
            raise self._error
        assert self._parsed is not None
        return self._parsed

    def cancel(self) -> bool:
        """Drop a queued read, or the result of a running one; False if it had finished."""
        return self._queue.cancel(self)

    def done(self) -> bool:
        return self._finished.is_set()

    @property
    def error(self) -> ReadFailed | None:
        return self._error

    def settle(self, *, parsed: Parsed | None = None, error: ReadFailed | None = None,
               state: ReadState | None = None) -> None:
        """Record the outcome once (queue lock held); the bytes, if still here, go."""
        if self._finished.is_set():
            return
        self.data = None
        self._parsed, self._error = parsed, error
        self.state = state or (ReadState.DONE if error is None else ReadState.FAILED)
        self._finished.set()

    def __repr__(self) -> str:
        return f"ReadTicket(id={self.id}, state={str(self.state)!r}, lane={str(self.lane)!r})"


class ReaderRecord:
    """Server-side record of one reader process; ``process`` and ``conn`` belong to its supervisor."""

    def __init__(self, index: int):
        self.index = index
        self.state = ReaderState.NOT_STARTED
        self.process: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.pid: int | None = None
        self.ever_ready = False
        self.reads_served = 0
        self.restarts = 0
        self.ticket: ReadTicket | None = None
        self.thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def label(self) -> str:
        return f"reader {self.index}"


class ReadQueue:
    """Reads waiting and running, the readers' records and the pool's counters."""

    def __init__(self, plan: ReaderPlan, readers: list[ReaderRecord], *, abandon_after_s: float):
        self.plan = plan
        self.readers = readers
        self.abandon_after_s = abandon_after_s
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.pending: deque[ReadTicket] = deque()
        self.stopping = False
        self.reads_served = 0
        self.reads_failed = 0
        self.last_error: str | None = None
        self._ids = itertools.count(1)

    # ------------------------------------------------------------------ callers

    def submit(self, *, request: dict, data, lane: Lane, label: str, refusal: str | None = None) -> ReadTicket:
        """Queue a read; with ``refusal`` the ticket fails at once (the trace surely does not fit)."""
        with self.lock:
            if self.stopping:
                raise RuntimeError("this ReaderPool was shut down; create a new one")
            ticket = ReadTicket(self, next(self._ids), request=request, data=data, lane=lane, label=label)
            if refusal is not None:
                self.reads_failed += 1
                ticket.settle(error=ReadFailed(refusal, kind=ReadFailureKind.MEMORY))
                return ticket
            self.pending.append(ticket)
            self.changed.notify_all()
            return ticket

    def touch(self, ticket: ReadTicket) -> None:
        with self.lock:
            ticket.last_seen = time.monotonic()

    def status(self, ticket: ReadTicket) -> ReadStatus:
        with self.lock:
            now = time.monotonic()
            ticket.last_seen = now
            position = None
            if ticket.state == ReadState.QUEUED:
                ahead = itertools.takewhile(lambda t: t is not ticket, self.pending)
                position = 1 + sum(t.lane == ticket.lane for t in ahead)
            error = ticket.error
            return ReadStatus(id=ticket.id, state=ticket.state, stage=ticket.stage, queue_position=position,
                              elapsed_s=now - ticket.submitted_at, reader=ticket.reader, lane=ticket.lane,
                              message=None if error is None else error.message)

    def cancel(self, ticket: ReadTicket) -> bool:
        with self.lock:
            if ticket.state == ReadState.QUEUED:
                try:
                    self.pending.remove(ticket)
                except ValueError:
                    pass
            elif ticket.state != ReadState.READING:
                return False
            ticket.settle(error=ReadFailed("the read was cancelled", kind=ReadFailureKind.CANCELLED),
                          state=ReadState.CANCELLED)
            self.changed.notify_all()
            return True

    def stop(self) -> bool:
        with self.lock:
            if self.stopping:
                return False
            self.stopping = True
            while self.pending:
                self.pending.popleft().settle(error=ReadFailed(
                    "the trace readers are shutting down; reload the page and open it again",
                    kind=ReadFailureKind.SHUTDOWN), state=ReadState.CANCELLED)
            self.changed.notify_all()
            return True

    # ------------------------------------------------------------------ supervisors

    def next_ticket(self, reader: ReaderRecord) -> ReadTicket | None:
        """Wait for a read this reader may take and mark it running; None when the pool stops or
        the idle reader died (it is replaced now, not at the next upload)."""
        with self.lock:
            reader.state, reader.ticket = ReaderState.IDLE, None
            self.changed.notify_all()
            process = reader.process
            assert process is not None, "next_ticket() runs only while the reader's process is up"
            while not self.stopping:
                if process.poll() is not None:
                    self.last_error = f"{reader.label} died while idle (exit code {process.returncode}); restarting it"
                    return None
                self._drop_abandoned(time.monotonic())
                ticket = self._pick()
                if ticket is not None:
                    self.pending.remove(ticket)
                    ticket.state, ticket.stage, ticket.reader = ReadState.READING, "sending", reader.index
                    reader.state, reader.ticket = ReaderState.BUSY, ticket
                    return ticket
                self.changed.wait(IDLE_WAIT_S)
            return None

    def _pick(self) -> ReadTicket | None:
        """The oldest small read, else the oldest large one if a large slot is free (lock held)."""
        small = next((t for t in self.pending if t.lane == Lane.SMALL), None)
        if small is not None:
            return small
        large_busy = sum(r.ticket is not None and r.ticket.lane == Lane.LARGE for r in self.readers)
        if large_busy >= self.plan.large_slots:
            return None
        return next((t for t in self.pending if t.lane == Lane.LARGE), None)

    def requeue(self, ticket: ReadTicket) -> None:
        """Put a read whose reader died before taking it back at the front of the queue."""
        with self.lock:
            if not ticket.done():
                ticket.state, ticket.stage, ticket.reader = ReadState.QUEUED, None, None
                self.pending.appendleft(ticket)
                self.changed.notify_all()

    def progress(self, ticket: ReadTicket, stage: str, json_bytes: int) -> None:
        with self.lock:
            ticket.stage = stage
            ticket.json_bytes = json_bytes or ticket.json_bytes

    def record_done(self, reader: ReaderRecord, ticket: ReadTicket, parsed: Parsed) -> None:
        with self.lock:
            self.reads_served += 1
            reader.reads_served += 1
            ticket.settle(parsed=parsed)  # a no-op if cancelled meanwhile
            self.changed.notify_all()

    def record_failure(self, ticket: ReadTicket, error: ReadFailed) -> None:
        with self.lock:
            self.reads_failed += 1
            self.last_error = f"read {ticket.id} ({ticket.label}): {error.message}"
            ticket.settle(error=error)
            self.changed.notify_all()

    def note_error(self, text: str) -> None:
        with self.lock:
            self.last_error = text

    def start_failed(self, reader: ReaderRecord, why: str) -> None:
        """A reader did not start: note why, and if no reader is up to take them, fail the waiting
        reads now with the visitor's words (each would otherwise wait for a reader that may
        never come; the readers keep being restarted behind them for the next read)."""
        with self.lock:
            self.last_error = why
            if any(r is not reader and r.state in (ReaderState.IDLE, ReaderState.BUSY) for r in self.readers):
                return
            while self.pending:
                self.reads_failed += 1
                self.pending.popleft().settle(error=ReadFailed(
                    "no trace reader could start on this host just now; open the file again in a minute "
                    "(the host's Server status says why)", kind=ReadFailureKind.CRASH))
            self.changed.notify_all()

    def _drop_abandoned(self, now: float) -> None:
        for ticket in [t for t in self.pending if now - t.last_seen > self.abandon_after_s]:
            self.pending.remove(ticket)
            ticket.settle(state=ReadState.CANCELLED, error=ReadFailed(
                f"the read was dropped from the queue: nobody checked on it for {self.abandon_after_s:g} s "
                "(page closed?); open it again", kind=ReadFailureKind.CANCELLED))

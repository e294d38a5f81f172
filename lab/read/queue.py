"""The trace readers as a client of the pool: their tickets, records, lanes and words.

The machinery (the lock, fair turns, cancel, supervisors) is ``lab.pool``'s. What is the
readers' own: two lanes — small reads (samples, runs, most uploads) go before large ones and
may use every reader; large reads wait in arrival order for one of ``plan.large_slots``
readers, so one reader stays free for small reads and a page never waits behind someone's
500 MB trace — a ticket's job (a ``ReadRequest``, or a multi-trace job of ``lab.read.jobs``)
and its label, and ``ReaderClient``: how a reader starts, its limits, its words.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from collections import OrderedDict
from multiprocessing.connection import Connection
from typing import Any

from lab.pool import (
    ChildRecord,
    ChildState,
    Done,
    LaneRule,
    PoolClient,
    PoolQueue,
    Ready,
    Ticket,
    TicketState,
    exit_text,
    start_child,
)
from lab.read.kept import estimate_bytes
from lab.read.limits import READER_NICE, ReaderPlan, memory_refusal, timeout_refusal
from lab.read.protocol import InitReader, Lane, Outline, Parsed, ReadFailed, ReadFailureKind, ReadState, ReadStatus
from lab.read.reader import READER_CODE, READER_FD_ENV, REREAD_STAGE
from lab.read.spool import remove as remove_spool

__all__ = ["READER_START_TIMEOUT_S", "ReadQueue", "ReadTicket", "ReaderClient", "ReaderRecord", "start_reader_process"]

# Imports (pandas, msgspec) and one sample read: ~1.5 s on an idle core; 2 busy cores, far more.
READER_START_TIMEOUT_S = 120.0
# One thread for every numeric library, two malloc arenas, and Arrow on the system allocator:
# fewer reserved mappings, so the address-space limit measures the trace, not allocators'
# reservations (Arrow's mimalloc reserved 1 GiB at the first DataFrame, glibc 64 MiB a thread).
_READER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "MALLOC_ARENA_MAX": "2", "ARROW_DEFAULT_MEMORY_POOL": "system"}
# How long a job waits for the reader that keeps its traces before another reader takes it and
# reads them again: a small trace's re-read (a bundled sample, most runs: 0.1-0.5 s on the 2-core
# box) costs less than waiting longer, and a busy holder is most often done with a page's
# query within it. A reader gone or restarting is not waited for.
AFFINITY_WAIT_S = 2.0
# Keys the queue remembers a holder for (least recently read first out): far more than the
# readers' budgets keep, so a key whose reader still holds it is never forgotten first.
MAX_HOLDERS = 4096
# A ticket's state as a reader's caller reads it ("reading", not the pool's "running").
_READ_STATES = {s: ReadState.READING if s == TicketState.RUNNING else ReadState(s.value) for s in TicketState}


def start_reader_process() -> tuple[subprocess.Popen, Connection]:
    """Start a reader interpreter; (process, the server's end of its socketpair)."""
    return start_child(READER_CODE, READER_FD_ENV, {**os.environ, **_READER_ENV})


class ReadTicket(Ticket):
    """A caller's handle on one read or job (see ``lab.pool.Ticket``)."""

    def __init__(self, queue: ReadQueue, read_id: int, job: Any, *, data=None, lane: Lane, label: str,
                 frames: list | None = None, session: str | None = None, spool: str | None = None,
                 keys: tuple[str, ...] = (), prefer: int | None = None):
        super().__init__(queue, read_id, job, session=session, lane=lane,
                         frames=frames if frames is not None else None if data is None else [data],
                         packed=frames is not None)
        self.label = label
        self.spool = spool  # the trace's spool file (lab.read.spool), removed when the ticket settles
        self.keys = keys  # the kept traces (lab.read.kept) its reader holds once it is done
        self.prefer = prefer  # the pid of the reader that keeps them, which it waits for a while

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the result — a ``Parsed``, an ``Outline`` (a page's read), a ``RankSummary`` or
        a job's — raises ``ReadFailed``, or ``TimeoutError`` after ``timeout`` s."""
        return super().result(timeout)

    def settle(self, *, value: Any = None, error=None, state=None) -> None:
        """As ``Ticket.settle``, and its spool file goes first (a caller woken by the outcome finds
        it gone): every outcome (read, refused, cancelled, timed out, crashed, shut down) settles
        the ticket."""
        spool, self.spool = self.spool, None
        remove_spool(spool)
        super().settle(value=value, error=error, state=state)


class ReaderRecord(ChildRecord):
    """Server-side record of one reader process (see ``lab.pool.ChildRecord``)."""

    kind = "reader"
    limits: Any = None  # its ReaderLimits, once ready

    @property
    def reads_served(self) -> int:
        return self.served


class ReaderClient(PoolClient):
    """How a reader starts, what it is sent and what its failures are called."""

    noun = "read"
    pool_name = "ReaderPool"
    failed = ReadFailed
    start_timeout_s = READER_START_TIMEOUT_S
    fail_waiting_on_start_failure = True  # a read waits seconds, not for a reader that may never come
    cancelled_text = "the read was cancelled"
    withdrawn_text = "the read was withdrawn before it started"
    shutdown_text = "the trace readers are shutting down; reload the page and open it again"
    again_text = "open it again"
    no_memory_text = "the server has no memory left to take this trace's result; try again in a while"
    no_child_text = ("no trace reader could start on this host just now; open the file again in a minute "
                     "(the host's Server status says why)")

    def __init__(self, plan: ReaderPlan, keep_bytes: int = 0, warm_code: tuple = ()):
        self.plan, self.keep_bytes, self.warm_code = plan, keep_bytes, warm_code

    def spawn(self, child):
        return start_reader_process()

    def init_message(self, child) -> InitReader:
        return InitReader(memory_mb=self.plan.memory_mb, nice=READER_NICE, keep_bytes=self.keep_bytes,
                           warm_code=self.warm_code)

    def describe(self, ticket) -> str:
        return ticket.label

    def timeout_s(self) -> float:
        return self.plan.timeout_s

    def on_done(self, ticket, done: Done, value):
        if isinstance(value, Parsed | Outline):  # what holding it costs: its buffers and cells, not
            # its size on the pipe (a small result comes compressed: lab.pool.frames.pack)
            return dataclasses.replace(value, result_bytes=estimate_bytes(value))
        return value

    def crashed(self, ticket, child, exitcode: int | None) -> ReadFailed:
        message = (f"the trace reader stopped ({exit_text(exitcode)}) while reading {ticket.label}; it has been "
                   "restarted — open the file again")
        if exitcode == -9 and ticket.input_bytes:
            # SIGKILL while holding a parsed trace: most likely the kernel's OOM killer, which
            # picks readers first (oom_score_adj).
            message += (f". If the host is short of memory: "
                        f"{memory_refusal(ticket.input_bytes, self.plan.memory_mb)}")
        return ReadFailed(message, kind=ReadFailureKind.CRASH)

    def overdue(self) -> ReadFailed:
        return ReadFailed(timeout_refusal(self.plan.timeout_s), kind=ReadFailureKind.TIMEOUT)

    def error(self, message: str, kind: str, error_type: str | None = None) -> ReadFailed:
        return ReadFailed(message, kind=kind, error_type=error_type)

    def on_ready(self, child, ready: Ready, *, promoted: bool) -> None:
        child.limits = ready.info


class ReadQueue(PoolQueue):
    """The pool's queue with the readers' two lanes."""

    def __init__(self, plan: ReaderPlan, readers: list[ReaderRecord], *, abandon_after_s: float,
                 keep_bytes: int = 0, warm_code: tuple = ()):
        super().__init__(ReaderClient(plan, keep_bytes, warm_code), readers, abandon_after_s=abandon_after_s,
                         lanes={Lane.SMALL: LaneRule(priority=0), Lane.LARGE: LaneRule(1, plan.large_slots)})
        self.plan = plan
        self.holders: OrderedDict[str, int] = OrderedDict()  # kept key → pid of the reader that read it last
        self.rereads = 0  # traces a reader read again for a job: it kept them no longer

    @property
    def readers(self) -> list[ReaderRecord]:
        return self.children

    def submit(self, job: Any, *, data=None, frames: list | None = None, lane: Lane, label: str,
               refusal: str | None = None, session: str | None = None, spool: str | None = None,
               keys: tuple[str, ...] = ()) -> ReadTicket:
        """Queue a read; with ``refusal`` the ticket fails at once (the trace surely does not fit).
        ``spool`` (the trace's spool file) is the ticket's from here, removed if it cannot be queued."""
        with self.lock:
            try:
                self.check_open()
            except BaseException:
                remove_spool(spool)
                raise
            prefer = next((self.holders[k] for k in keys if k in self.holders), None)
            ticket = ReadTicket(self, self.next_id(), job, data=data, frames=frames, lane=lane, label=label,
                                session=session, spool=spool, keys=keys, prefer=prefer)
            if refusal is not None:
                self.failed += 1
                ticket.settle(error=ReadFailed(refusal, kind=ReadFailureKind.MEMORY))
                return ticket
            self.enqueue(ticket)
            return ticket

    def describe_status(self, ticket: ReadTicket, now: float, position: int | None) -> ReadStatus:  # type: ignore[override]
        error = ticket.error
        return ReadStatus(id=ticket.id, state=_READ_STATES[ticket.state], stage=ticket.stage,
                          queue_position=position, elapsed_s=now - ticket.submitted_at, reader=ticket.child,
                          lane=ticket.lane, message=None if error is None else error.message)

    # ------------------------------------------------------------------ kept traces (lock held)

    def serves(self, child: ChildRecord, ticket: ReadTicket) -> bool:  # type: ignore[override]
        """A job goes to the reader that keeps its traces; to another once it waited
        ``AFFINITY_WAIT_S``, or at once when that reader is gone or restarting."""
        prefer = getattr(ticket, "prefer", None)
        if prefer is None or child.pid == prefer:
            return True
        holder_up = any(c.pid == prefer and c.state in (ChildState.IDLE, ChildState.BUSY) for c in self.children)
        return not holder_up or time.monotonic() - ticket.submitted_at >= AFFINITY_WAIT_S

    def progress(self, ticket, stage: str, input_bytes: int = 0) -> None:
        super().progress(ticket, stage, input_bytes)
        if stage == REREAD_STAGE:
            with self.lock:
                self.rereads += 1

    def on_done(self, ticket, value: Any, duration_s: float) -> None:
        """The reader that ran it now holds the ticket's kept traces."""
        if not ticket.keys or ticket.child is None:
            return
        pid = self.children[ticket.child].pid
        for key in ticket.keys:
            self.holders.pop(key, None)
            if pid is not None:
                self.holders[key] = pid
        while len(self.holders) > MAX_HOLDERS:
            self.holders.popitem(last=False)

"""One supervisor thread per reader, in the server: it owns the reader's pipe and process.

It starts the reader (and waits for its warm-up), hands it the next read, relays progress,
enforces ``read_timeout_s``, and replaces a reader that dies, overruns or runs out of memory,
failing only the read it held. A reader that keeps dying while it starts is retried after
1, 2, 4 … seconds. The pickled ``Parsed`` is unpickled here, in the supervisor's thread: the
server's script threads only wait on a ticket.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import threading
import time
from multiprocessing.connection import Connection

from lab.read.limits import READER_NICE, memory_refusal, timeout_refusal
from lab.read.protocol import (
    InitReader,
    ReadDone,
    ReaderReady,
    ReaderState,
    ReadFailed,
    ReadFailure,
    ReadFailureKind,
    ReadProgress,
    ReadRequest,
    StopReader,
)
from lab.read.queue import ReaderRecord, ReadQueue, ReadTicket
from lab.read.reader import READER_CODE, READER_FD_ENV
from lab.run.spawn import REAP_S, exit_text, start_child, stop_child

__all__ = ["READER_START_TIMEOUT_S", "ReaderSupervisor", "start_reader_process"]

# Imports (pandas, msgspec) and one sample read: ~1.5 s on an idle core; 2 busy cores, far more.
READER_START_TIMEOUT_S = 120.0
MAX_RESTART_BACKOFF_S = 30.0
TICK_S = 0.25
# One thread for every numeric library, two malloc arenas, and Arrow on the system allocator:
# fewer reserved mappings, so the address-space limit measures the trace, not allocators'
# reservations (Arrow's mimalloc reserved 1 GiB at the first DataFrame, glibc 64 MiB a thread).
_READER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "MALLOC_ARENA_MAX": "2", "ARROW_DEFAULT_MEMORY_POOL": "system"}


def start_reader_process() -> tuple[subprocess.Popen, Connection]:
    """Start a reader interpreter; (process, the server's end of its socketpair)."""
    return start_child(READER_CODE, READER_FD_ENV, {**os.environ, **_READER_ENV})


class ReaderSupervisor:
    """Keeps one reader alive and serving until the queue stops (``run`` is its thread)."""

    def __init__(self, queue: ReadQueue, reader: ReaderRecord, stop_event: threading.Event):
        self.queue, self.reader, self.stop_event = queue, reader, stop_event

    def run(self) -> None:
        backoff_s = 1.0
        while not self.queue.stopping:
            try:
                launched = self._launch()
            except Exception as error:  # noqa: BLE001 - e.g. spawn refused; keep retrying
                launched = False
                self.queue.start_failed(self.reader, f"{self.reader.label} could not be started: "
                                                     f"{type(error).__name__}: {error}")
            if not launched:
                self._retire(ReaderState.STOPPED if self.queue.stopping else ReaderState.RESTARTING)
                if self.stop_event.wait(backoff_s):
                    break
                backoff_s = min(backoff_s * 2, MAX_RESTART_BACKOFF_S)
                continue
            backoff_s = 1.0
            while (ticket := self.queue.next_ticket(self.reader)) is not None and self._read_one(ticket):
                pass
            self._retire(ReaderState.STOPPED if self.queue.stopping else ReaderState.RESTARTING)
        self._retire(ReaderState.STOPPED)

    def _launch(self) -> bool:
        """Start the reader and wait for ``ReaderReady``; False if it died or hung."""
        reader, queue = self.reader, self.queue
        process, conn = start_reader_process()
        with queue.lock:
            reader.process, reader.conn, reader.pid = process, conn, process.pid
            reader.state = ReaderState.STARTING
        try:
            conn.send(InitReader(memory_mb=queue.plan.memory_mb, nice=READER_NICE))
        except OSError:
            pass  # it died already; reported below
        deadline = time.monotonic() + READER_START_TIMEOUT_S
        while not queue.stopping and process.poll() is None and time.monotonic() < deadline:
            if not conn.poll(TICK_S):
                continue
            try:
                ready = conn.recv()
            except (EOFError, OSError):
                break
            return self._ready(ready) and process.poll() is None
        if not queue.stopping:
            if time.monotonic() < deadline:  # its pipe closed before the deadline: it is exiting
                try:
                    process.wait(timeout=REAP_S)
                except subprocess.TimeoutExpired:
                    pass
            why = "timed out" if process.poll() is None else exit_text(process.returncode)
            queue.start_failed(reader, f"{reader.label} did not start ({why})")
        return False

    def _ready(self, ready: ReaderReady) -> bool:
        if not ready.usable:  # the imports or the warm-up read failed: nothing can be read
            self.queue.start_failed(self.reader, f"{self.reader.label}: {ready.error}")
            return False
        with self.queue.lock:
            if ready.error:
                self.queue.last_error = f"{self.reader.label}: {ready.error}"
            self.reader.ever_ready = True
            self.reader.state = ReaderState.IDLE
            self.queue.changed.notify_all()
            return True

    def _read_one(self, ticket: ReadTicket) -> bool:
        """Send one read and see it through; False when the reader must be replaced."""
        conn, process = self.reader.conn, self.reader.process
        assert conn is not None and process is not None, "a read runs only on a started reader"
        data = ticket.data
        try:
            conn.send(ReadRequest(read_id=ticket.id, inline=data is not None, **ticket.request))
            if data is not None:
                conn.send_bytes(data)
        except (OSError, ValueError):
            self.queue.requeue(ticket)  # it died while idle: the read never started
            return False
        ticket.data = data = None  # the reader has the bytes now; the server lets them go
        deadline = time.monotonic() + self.queue.plan.timeout_s
        while True:
            message = self._next_message(conn)
            if isinstance(message, ReadProgress):
                self.queue.progress(ticket, message.stage, message.json_bytes)
                continue
            if isinstance(message, (ReadDone, ReadFailure)):
                return self._settle(ticket, message, conn)
            failure = self._check(process, ticket, dead=message is EOFError, overdue=time.monotonic() > deadline)
            if failure is not None:
                self.queue.record_failure(ticket, failure)
                return False

    @staticmethod
    def _next_message(conn: Connection):
        """The reader's next message; None after a quiet tick; ``EOFError`` (the class) at EOF."""
        if not conn.poll(TICK_S):
            return None
        try:
            return conn.recv()
        except (EOFError, OSError):
            return EOFError

    def _settle(self, ticket: ReadTicket, message: ReadDone | ReadFailure, conn: Connection) -> bool:
        if isinstance(message, ReadFailure):
            self.queue.record_failure(ticket, ReadFailed(message.message, kind=message.kind))
            return not message.fatal
        try:
            parsed = self._receive(conn, message.frame_bytes)
        except (EOFError, OSError):
            self.queue.record_failure(ticket, self._crashed(ticket))
            return False
        except MemoryError:
            self.queue.record_failure(ticket, ReadFailed(
                "the server has no memory left to take this trace's result; try again in a while",
                kind=ReadFailureKind.MEMORY))
            return False  # the frames may be half read: start a clean reader
        self.queue.record_done(self.reader, ticket, parsed)
        return True

    @staticmethod
    def _receive(conn: Connection, frame_bytes: tuple[int, ...]):
        """The ``Parsed`` from its frames: each buffer lands in a bytearray of its own that the
        unpickled arrays then use as they are (writable, not copied)."""
        head = conn.recv_bytes()
        buffers = []
        for size in frame_bytes[1:]:
            buffer = bytearray(size)
            if size:
                conn.recv_bytes_into(buffer)
            else:
                conn.recv_bytes()
            buffers.append(buffer)
        parsed = pickle.loads(head, buffers=buffers)
        return dataclasses.replace(parsed, result_bytes=sum(frame_bytes))

    def _crashed(self, ticket: ReadTicket) -> ReadFailed:
        process = self.reader.process
        code = process.returncode if process is not None else None
        return ReadFailed(f"the trace reader stopped ({exit_text(code)}) while reading {ticket.label}; it has been "
                          "restarted — open the file again", kind=ReadFailureKind.CRASH)

    def _check(self, process: subprocess.Popen, ticket: ReadTicket, *, dead: bool, overdue: bool) -> ReadFailed | None:
        """Why the read must fail now (reader dead, pool stopping, over time), reader killed; else None."""
        dead = dead or process.poll() is not None
        if dead:
            try:
                process.wait(timeout=REAP_S)
            except subprocess.TimeoutExpired:  # EOF but still alive: make it dead
                process.kill()
                process.wait(timeout=REAP_S)
            if process.returncode == -9 and ticket.json_bytes:
                # SIGKILL while holding a parsed trace: most likely the kernel's OOM killer,
                # which picks readers first (oom_score_adj).
                failed = self._crashed(ticket)
                return ReadFailed(f"{failed.message}. If the host is short of memory: "
                                  f"{memory_refusal(ticket.json_bytes, self.queue.plan.memory_mb)}",
                                  kind=ReadFailureKind.CRASH)
            return self._crashed(ticket)
        if self.queue.stopping:
            process.kill()
            return ReadFailed("the trace readers are shutting down; reload the page and open it again",
                              kind=ReadFailureKind.SHUTDOWN)
        if overdue:
            process.kill()
            process.wait(timeout=REAP_S)
            return ReadFailed(timeout_refusal(self.queue.plan.timeout_s), kind=ReadFailureKind.TIMEOUT)
        return None

    def _retire(self, state: ReaderState) -> None:
        """Stop the reader's process (politely if idle, else kill) and record ``state``."""
        reader, queue = self.reader, self.queue
        with queue.lock:
            polite = reader.state == ReaderState.IDLE
            process, conn = reader.process, reader.conn
            reader.process, reader.conn, reader.pid, reader.ticket = None, None, None, None
            if process is not None and state == ReaderState.RESTARTING:
                reader.restarts += 1
            reader.state = state
            queue.changed.notify_all()
        if process is None or conn is None:
            return
        stop_child(process, conn, StopReader(), polite=polite)

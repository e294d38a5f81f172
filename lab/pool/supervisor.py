"""One supervisor thread per child, in the server: it owns the child's pipe and process.

It starts the child (and waits for its ``Ready``), hands it the next ticket, relays progress,
enforces the client's time limit, kills the child of a ticket cancelled while it runs (nothing
of its result is received, let alone unpickled), and replaces a child that dies, overruns or
was killed, failing only the ticket that was running: with the warm spare its ``Standby``
keeps (``lab.pool.standby``), at once; without one, by a fresh child. A child that keeps dying
while it starts is retried after 1, 2, 4 … seconds, at most ``MAX_RESTART_BACKOFF_S``.

The Ray backend (``lab.run.ray_backend``) plugs in here: its supervisor is this class with
``_launch``, ``_run_one`` and ``_retire`` for an actor instead of a process.
"""

from __future__ import annotations

import subprocess
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from lab.pool.frames import frame_sizes, receive_object, send_frames
from lab.pool.protocol import ChildState, Done, Failure, PoolFailed, Progress, Ready, Task
from lab.pool.queue import ChildRecord, PoolQueue, Ticket
from lab.pool.spawn import REAP_S, exit_text, kill_child, stop_child

__all__ = ["MAX_RESTART_BACKOFF_S", "TICK_S", "Supervisor", "await_ready"]

# Supervisor threads wake at least this often to check deadlines, cancels and stop requests.
TICK_S = 0.25
# A child that keeps dying while it starts is retried after 1, 2, 4 … seconds, at most this.
# One cap for workers and readers (they were 60 s and 30 s, for no stated reason): each retry
# costs one interpreter start (~2 s of a core for a worker's torch import, ~1.5 s for a
# reader), so 30 s keeps a host whose children cannot start under ~7 % of a core, and a host
# that fixed the cause (freed the GPU or the memory) is served again within 30 s, not 60.
MAX_RESTART_BACKOFF_S = 30.0


def await_ready(queue: PoolQueue, process: subprocess.Popen, conn: Connection, timeout_s: float) -> Ready | None:
    """The child's ``Ready``; None if it died, hung past ``timeout_s`` or the pool stops."""
    deadline = time.monotonic() + timeout_s
    while not queue.stopping:
        if conn.poll(TICK_S):
            try:
                return conn.recv()
            except (EOFError, OSError):
                return None
        if process.poll() is not None or time.monotonic() > deadline:
            return None
    return None


class Supervisor:
    """Keeps one child alive and serving until the queue stops (``run`` is its thread)."""

    def __init__(self, queue: PoolQueue, child: ChildRecord, stop_event: threading.Event, standby: Any = None):
        self.queue, self.child, self.stop_event, self.standby = queue, child, stop_event, standby
        self.client = queue.client

    def run(self) -> None:
        backoff_s = 1.0
        while not self.queue.stopping:
            try:
                launched = self._promote() or self._launch()
            except Exception as error:  # noqa: BLE001 - e.g. spawn refused; keep retrying
                launched = False
                self.queue.start_failed(self.child, f"{self.child.label} could not be started: "
                                                    f"{type(error).__name__}: {error}")
            if launched:
                backoff_s = 1.0
                self._serve()
            self._retire(ChildState.STOPPED if self.queue.stopping else ChildState.RESTARTING)
            if not launched:
                if self.stop_event.wait(backoff_s):
                    break
                backoff_s = min(backoff_s * 2, MAX_RESTART_BACKOFF_S)
        self._retire(ChildState.STOPPED)

    # ------------------------------------------------------------------ start-up

    def _launch(self) -> bool:
        """Start the child and wait for its ``Ready``; False if it died, hung or cannot serve."""
        child, queue = self.child, self.queue
        process, conn = self.client.spawn(child)
        with queue.lock:
            child.process, child.conn, child.pid = process, conn, process.pid
            child.state = ChildState.STARTING
        try:
            conn.send(self.client.init_message(child))
        except OSError:
            pass  # it died already; reported below
        ready = await_ready(queue, process, conn, self.client.start_timeout_s)
        if ready is not None:
            return self._ready(ready, promoted=False) and process.poll() is None
        if not queue.stopping:
            try:
                process.wait(timeout=REAP_S)  # its pipe closed or it hung: see how it ended
            except subprocess.TimeoutExpired:
                pass
            why = "timed out" if process.returncode is None else exit_text(process.returncode)
            queue.start_failed(child, f"{child.label} did not start ({why})")
        return False

    def _promote(self) -> bool:
        """Put the warm spare in the child's place (no start-up); False if there is none."""
        spare = self.standby.take() if self.standby is not None else None
        if spare is None:
            return False
        process, conn, ready = spare
        with self.queue.lock:
            self.child.process, self.child.conn, self.child.pid = process, conn, process.pid
        return self._ready(ready, promoted=True)

    def _ready(self, ready: Ready, *, promoted: bool) -> bool:
        child, queue = self.child, self.queue
        if not ready.usable:
            queue.start_failed(child, f"{child.label}: {ready.error}")
            return False
        with queue.lock:
            self.client.on_ready(child, ready, promoted=promoted)
            child.ever_ready = True
            child.state = ChildState.IDLE  # before the supervisor reaches the queue: submit() counts it free
            if ready.error:
                queue.last_error = f"{child.label}: {ready.error}"
            queue.changed.notify_all()
        return True

    # ------------------------------------------------------------------ tickets

    def _serve(self) -> None:
        """Serve tickets on a warm child until it must be replaced or the pool stops."""
        while (ticket := self.queue.next_ticket(self.child)) is not None and self._run_one(ticket):
            pass

    def _run_one(self, ticket: Ticket) -> bool:
        """Send one ticket and see it through; False when the child must be replaced."""
        conn, process = self.child.conn, self.child.process
        assert conn is not None and process is not None, "a ticket runs only on a started child"
        frames = ticket.frames or []
        try:
            conn.send(Task(ticket_id=ticket.id, job=self.client.job(ticket), frame_bytes=frame_sizes(frames),
                           packed=ticket.packed))
            send_frames(conn, frames)
        except (OSError, ValueError):
            self.queue.requeue(ticket)  # it died while idle: the task never started, so it goes back
            return False
        ticket.frames = None  # the child has them now; the server lets them go
        del frames
        started = time.monotonic()
        deadline = started + self.client.timeout_s()
        while True:
            if ticket.done():  # cancelled or replaced while running: free the child now
                kill_child(process)
                return False  # it is replaced (by its spare, if it has one)
            message = self._next_message(conn)
            if isinstance(message, Progress):
                if message.ticket_id == ticket.id:
                    self.queue.progress(ticket, message.stage, message.input_bytes)
                continue
            if isinstance(message, (Done, Failure)):
                return self._settle(ticket, message, conn, time.monotonic() - started)
            failure = self._check(process, ticket, dead=message is EOFError, overdue=time.monotonic() > deadline)
            if failure is not None:
                self.queue.record_failure(ticket, failure)
                return False

    @staticmethod
    def _next_message(conn: Connection):
        """The child's next message; None after a quiet tick; ``EOFError`` (the class) at EOF."""
        if not conn.poll(TICK_S):
            return None
        try:
            return conn.recv()
        except (EOFError, OSError):
            return EOFError

    def _settle(self, ticket: Ticket, message: Done | Failure, conn: Connection, duration_s: float) -> bool:
        """Apply the child's final message for ``ticket``; False when the child must be replaced."""
        if isinstance(message, Failure):
            self.queue.record_failure(ticket, self.client.error(message.message, message.kind, message.error_type))
            return not message.fatal
        value = message.value
        if message.frame_bytes:
            if ticket.done():  # cancelled while the child was sending: its frames are not wanted
                if self.child.process is not None:
                    kill_child(self.child.process)
                return False
            try:
                value = receive_object(conn, message.frame_bytes)
            except (EOFError, OSError):
                self.queue.record_failure(ticket, self._crashed(ticket))
                return False
            except MemoryError:
                self.queue.record_failure(ticket, self.client.error(self.client.no_memory_text, "memory"))
                return False  # the frames may be half read: start a clean child
        self.queue.record_done(self.child, ticket, self.client.on_done(ticket, message, value), duration_s)
        return True

    def _crashed(self, ticket: Ticket) -> PoolFailed:
        process = self.child.process
        return self.client.crashed(ticket, self.child, None if process is None else process.returncode)

    def _check(self, process: subprocess.Popen, ticket: Ticket, *, dead: bool, overdue: bool) -> PoolFailed | None:
        """Why the running ticket must fail now (the child died, the pool stops, the ticket is
        over its limit), with the child killed; None while it may go on."""
        if dead or process.poll() is not None:
            try:
                process.wait(timeout=REAP_S)
            except subprocess.TimeoutExpired:  # EOF but still alive: make it dead
                kill_child(process)
            return self._crashed(ticket)
        if self.queue.stopping:
            process.kill()
            return self.client.error(self.client.shutdown_text, "shutdown")
        if overdue:
            kill_child(process)
            return self.client.overdue()
        return None

    # ------------------------------------------------------------------ stop

    def _retire(self, state: ChildState) -> None:
        """Stop the child's process (politely if idle, else kill) and record ``state``."""
        child, queue = self.child, self.queue
        with queue.lock:
            # Only an idle child reads Stop; one starting up or mid-task is killed at once.
            polite = child.state == ChildState.IDLE
            # Forget the process first so health() never touches one being closed.
            process, conn = child.process, child.conn
            child.process, child.conn, child.pid, child.ticket = None, None, None, None
            if process is not None and state == ChildState.RESTARTING:
                child.restarts += 1
            child.state = state
            queue.changed.notify_all()
        if process is None or conn is None:
            return
        stop_child(process, conn, self.client.stop_message, polite=polite)

"""One supervisor thread per worker, in the server: it owns the worker's pipe and process.

It starts the worker (and waits for its warm-up), hands it the next ticket, relays stage
updates, enforces ``run_timeout_s``, kills the worker of a run cancelled while it runs, and
replaces a worker that dies, overruns or was killed, failing only the ticket that was running:
with the warm spare its ``Standby`` keeps (``lab.run.standby``), at once; without one, by a fresh
worker warmed up again. A worker that keeps dying while it starts is retried after 1, 2, 4 … seconds.
"""

from __future__ import annotations

import subprocess
import threading
import time

from lab.run.protocol import (
    FailureKind,
    InitWorker,
    RunDone,
    RunFailed,
    RunFailure,
    RunRequest,
    StageChanged,
    StopWorker,
    WorkerReady,
    WorkerState,
)
from lab.run.queue import RunQueue, RunTicket, WorkerRecord, describe_config
from lab.run.spawn import REAP_S, SHUTDOWN_GRACE_S, exit_text, start_worker_process, stop_child
from lab.run.standby import WORKER_START_TIMEOUT_S, Standby, await_ready

__all__ = ["MAX_RESTART_BACKOFF_S", "SHUTDOWN_GRACE_S", "WORKER_START_TIMEOUT_S", "Supervisor"]

# A worker that keeps dying while it starts is retried after 1, 2, 4 … seconds, at most this.
MAX_RESTART_BACKOFF_S = 60.0
# Supervisor threads wake at least this often to check deadlines and stop requests.
TICK_S = 0.25


class Supervisor:
    """Keeps one worker alive and serving until the queue stops (``run`` is its thread)."""

    def __init__(self, queue: RunQueue, worker: WorkerRecord, stop_event: threading.Event,
                 standby: Standby | None = None):
        self.queue = queue
        self.worker = worker
        self.stop_event = stop_event
        self.standby = standby

    def run(self) -> None:
        worker, queue = self.worker, self.queue
        backoff_s = 1.0
        while not queue.stopping:
            try:
                launched = self._promote() or self._launch()
            except Exception as error:  # noqa: BLE001 - e.g. spawn refused; keep retrying
                launched = False
                queue.note_error(f"{worker.label} could not be started: {type(error).__name__}: {error}")
            if not launched:
                self._retire(WorkerState.STOPPED if queue.stopping else WorkerState.RESTARTING)
                if self.stop_event.wait(backoff_s):
                    break
                backoff_s = min(backoff_s * 2, MAX_RESTART_BACKOFF_S)
                continue
            backoff_s = 1.0
            self._serve()
            self._retire(WorkerState.STOPPED if queue.stopping else WorkerState.RESTARTING)
        self._retire(WorkerState.STOPPED)

    # ------------------------------------------------------------------ start-up

    def _launch(self) -> bool:
        """Start the worker interpreter and wait for its warm-up; False if it died or hung."""
        worker, queue = self.worker, self.queue
        process, conn = start_worker_process(worker.visible_id)
        with queue.lock:
            worker.process, worker.conn, worker.pid = process, conn, process.pid
            worker.state = WorkerState.STARTING
        try:
            conn.send(InitWorker(device=worker.device, physical_index=worker.physical_index,
                                 settings=queue.settings))
        except OSError:
            pass  # it died already; reported below
        ready = await_ready(queue, process, conn)
        if ready is not None:
            self._ready(ready)
            return process.poll() is None
        if not queue.stopping:
            try:
                process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
            why = "timed out" if process.returncode is None else exit_text(process.returncode)
            queue.note_error(f"{worker.label} did not start ({why})")
        return False

    def _promote(self) -> bool:
        """Put the warm spare in the worker's place (no start-up, no warm-up); False if there is none."""
        spare = self.standby.take() if self.standby is not None else None
        if spare is None:
            return False
        process, conn, ready = spare
        worker, queue = self.worker, self.queue
        with queue.lock:
            worker.process, worker.conn, worker.pid = process, conn, process.pid
        # The rates the worker measured stay: the spare warmed up while a run may have shared the
        # device with it, so its own measurement can read low (same device, same model).
        keep = worker.info is not None and worker.info.rates
        self._ready(ready if not keep else WorkerReady(info=None, error=ready.error))
        return True

    def _ready(self, ready: WorkerReady) -> None:
        worker, queue = self.worker, self.queue
        with queue.lock:
            if ready.info is not None:
                worker.info = ready.info
            worker.ever_ready = True
            worker.state = WorkerState.IDLE  # before the supervisor reaches the queue: submit() counts it free
            if ready.error:
                queue.last_error = f"{worker.label}: {ready.error}"
            queue.changed.notify_all()

    # ------------------------------------------------------------------ runs

    def _serve(self) -> None:
        """Run tickets on a warm worker until it must be replaced or the service stops."""
        while True:
            ticket = self.queue.next_ticket(self.worker)
            if ticket is None:
                return
            if not self._run_one(ticket):
                return

    def _run_one(self, ticket: RunTicket) -> bool:
        """Run one ticket on the worker; False when the worker must be replaced."""
        conn, process = self.worker.conn, self.worker.process
        assert conn is not None and process is not None, "a ticket runs only on a started worker"
        try:
            conn.send(RunRequest(run_id=ticket.id, config=ticket.config))
        except (OSError, ValueError):
            # The worker died while idle; the run never started, so it goes back to the front.
            self.queue.requeue(ticket)
            return False
        started = time.monotonic()
        deadline = started + self.queue.settings.run_timeout_s
        while True:
            if ticket.done():  # cancelled or replaced while running: free the worker now
                process.kill()
                process.wait(timeout=REAP_S)
                return False  # the worker is replaced and warmed up again
            if conn.poll(TICK_S):
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    message = None
                if isinstance(message, StageChanged):
                    self.queue.set_stage(ticket, message.run_id, message.stage)
                    continue
                if message is not None:
                    return self._settle(ticket, message, time.monotonic() - started)
                dead = True  # EOF: the worker's end of the socket closed
            else:
                dead = process.poll() is not None
            failure = self._check_run(process, ticket, dead=dead, overdue=time.monotonic() > deadline)
            if failure is not None:
                self.queue.record_failure(ticket, failure)
                return False

    def _check_run(self, process: subprocess.Popen, ticket: RunTicket, *, dead: bool,
                   overdue: bool) -> RunFailed | None:
        """Why the running ticket must fail now (the worker died, the service stops, the run is
        over its limit), with the worker killed; None while it may go on."""
        if dead:
            try:
                process.wait(timeout=REAP_S)
            except subprocess.TimeoutExpired:  # EOF but still alive: make it dead
                process.kill()
                process.wait(timeout=REAP_S)
            return RunFailed(
                f"the profiling worker crashed ({exit_text(process.returncode)}) while running "
                f"{describe_config(ticket.config)}; it has been restarted — run again", kind=FailureKind.CRASH)
        if self.queue.stopping:
            process.kill()
            return RunFailed("the profiling service is shutting down; reload the page and run again",
                             kind=FailureKind.SHUTDOWN)
        if overdue:
            process.kill()
            process.wait(timeout=REAP_S)
            limit = self.queue.settings.run_timeout_s
            return RunFailed(f"the run exceeded the host's limit of {limit:g} s; the worker was restarted — "
                             "choose a smaller size", kind=FailureKind.TIMEOUT)
        return None

    def _settle(self, ticket: RunTicket, message: RunDone | RunFailure, duration_s: float) -> bool:
        """Apply the worker's final message for ``ticket``; False when the worker is exiting."""
        if isinstance(message, RunDone):
            self.queue.record_done(self.worker, ticket, message.result, duration_s)
            return True
        self.queue.record_failure(ticket, RunFailed(message.message, kind=message.kind,
                                                    error_type=message.error_type))
        return not message.fatal

    # ------------------------------------------------------------------ stop

    def _retire(self, state: WorkerState) -> None:
        """Stop the worker's process (politely if idle, else kill) and record ``state``."""
        worker, queue = self.worker, self.queue
        with queue.lock:
            # Only an idle worker reads StopWorker; one starting up or mid-run is killed at once.
            polite = worker.state == WorkerState.IDLE
            # Forget the process first so health() never touches one being closed.
            process, conn = worker.process, worker.conn
            worker.process, worker.conn, worker.pid = None, None, None
            if process is not None and state == WorkerState.RESTARTING:
                worker.restarts += 1
            worker.state = state
            queue.changed.notify_all()
        if process is None or conn is None:
            return
        stop_child(process, conn, StopWorker(), polite=polite)

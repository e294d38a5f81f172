"""A warm spare for each worker: Cancel (or a crash, or a run over the time limit) frees the
device within a tick, not after a fresh worker's start-up.

Replacing a killed worker costs a fresh interpreter, torch's import and the warm-up profile:
~10–30 s on this repo's shared 2-core box, ~11 s on an H200 (CUPTI's start-up). So each worker's
supervisor has a ``Standby`` beside it: a second worker process, started and warmed up in its
own thread once the worker itself is ready, that waits idle (no CPU) until the supervisor
``take``s it in place of a killed worker; then the next spare is started. Its cost is one more
idle process per device: an idle warm CPU worker holds ~400 MB resident, a GPU one ~1.2 GB and
a CUDA context on its GPU (see ``STANDBY_MIN_AVAILABLE_BYTES``). On the H200, cancel → the next
run running took 0.41 s with the spare (BENCHMARKS.md, *Run-time estimates on an H200*); on this
2-core box 0.37 s, where a fresh worker took 22 s (*Cancel and the warm spare*).

The host turns it off with ``PROFILER_LAB_STANDBY=0``; it is also skipped while the machine has
less than ``STANDBY_MIN_AVAILABLE_BYTES`` available. *Server status* shows each spare.
"""

from __future__ import annotations

import subprocess
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from lab.run.protocol import InitWorker, StandbyState, StopWorker, WorkerReady, WorkerState
from lab.run.queue import RunQueue, WorkerRecord
from lab.run.spawn import exit_text, start_worker_process, stop_child

__all__ = [
    "STANDBY_MEMORY_RECHECK_S", "STANDBY_MIN_AVAILABLE_BYTES", "WORKER_START_TIMEOUT_S", "Standby",
    "available_memory_bytes", "await_ready", "resident_bytes",
]  # fmt: skip

# A spare is started only while the machine has at least this much memory available
# (MemAvailable), and twice what its worker holds: an idle warm CPU worker measured 0.40 GB
# resident here (torch 2.13 CPU, after its warm-up profile), a GPU one 1.21 GB on the H200 host
# (torch 2.11, CUDA libraries; BENCHMARKS.md); 2 GiB leaves room for the spare, a run's tensors
# and the page.
STANDBY_MIN_AVAILABLE_BYTES = 2 * 2**30
# While memory is short, or after a spare failed to start, look again after this long.
STANDBY_MEMORY_RECHECK_S = 30.0
# First profile in a fresh process: ~1.1 s on CPU (imports torch._inductor), ~7 s on an H200
# (CUPTI init), plus the torch import itself. A worker (or spare) not ready after this is replaced.
WORKER_START_TIMEOUT_S = 180.0
_TICK_S = 0.25


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (None where there is none: not Linux)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def resident_bytes(pid: int | None) -> int | None:
    """VmRSS of process ``pid`` (None: gone, or not Linux)."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def await_ready(queue: RunQueue, process: subprocess.Popen, conn: Connection,
                timeout_s: float = WORKER_START_TIMEOUT_S) -> WorkerReady | None:
    """The worker's WorkerReady once its warm-up is done; None if it died, hung or the service stops."""
    deadline = time.monotonic() + timeout_s
    while not queue.stopping:
        if conn.poll(_TICK_S):
            try:
                return conn.recv()
            except (EOFError, OSError):
                return None
        if process.poll() is not None or time.monotonic() > deadline:
            return None
    return None


class Standby:
    """Keeps one warmed-up spare worker for ``worker`` (``run`` is its thread; ``take`` hands it over)."""

    def __init__(self, queue: RunQueue, worker: WorkerRecord, stop_event: threading.Event):
        self.queue = queue
        self.worker = worker
        self.stop_event = stop_event

    # ------------------------------------------------------------------ the supervisor's side

    def take(self) -> tuple[subprocess.Popen, Connection, WorkerReady] | None:
        """The warm spare (process, pipe, its WorkerReady), now the supervisor's; None if there is
        none. A spare still warming up is waited for: it is further along than a fresh start."""
        worker, queue = self.worker, self.queue
        with queue.lock:
            while worker.standby_state == StandbyState.STARTING and not queue.stopping:
                queue.changed.wait(_TICK_S)
            spare = worker.standby
            if spare is None or spare[2] is None or spare[0].poll() is not None:
                return None
            worker.standby, worker.standby_state = None, StandbyState.NONE
            worker.promotions += 1
            queue.changed.notify_all()  # the standby thread starts the next spare
            return spare[0], spare[1], spare[2]

    # ------------------------------------------------------------------ its own thread

    def run(self) -> None:
        backoff_s = 1.0
        while not self._wait_for_a_turn():
            available = available_memory_bytes()
            needed = max(STANDBY_MIN_AVAILABLE_BYTES, 2 * (resident_bytes(self.worker.pid) or 0))
            if available is not None and available < needed:
                self._set_state(StandbyState.LOW_MEMORY)
                if self.stop_event.wait(STANDBY_MEMORY_RECHECK_S):
                    break
                continue
            if self._start_one():
                backoff_s = 1.0
                self._hold()
            elif self.stop_event.wait(backoff_s):
                break
            else:
                backoff_s = min(backoff_s * 2, STANDBY_MEMORY_RECHECK_S)
        self._discard()

    def _wait_for_a_turn(self) -> bool:
        """Wait until a spare is wanted (the worker warmed up once, none held); True: stop."""
        worker, queue = self.worker, self.queue
        with queue.lock:
            while not queue.stopping and (not worker.ever_ready or worker.standby is not None
                                          or worker.state == WorkerState.STARTING):
                queue.changed.wait(1.0)
            return queue.stopping

    def _start_one(self) -> bool:
        """Start a spare and wait for its warm-up; True once it is ready (held in the record)."""
        worker, queue = self.worker, self.queue
        try:
            process, conn = start_worker_process(worker.visible_id)
        except Exception as error:  # noqa: BLE001 - e.g. spawn refused; retried after a pause
            queue.note_error(f"the spare of {worker.label} could not be started: {type(error).__name__}: {error}")
            return False
        with queue.lock:
            worker.standby, worker.standby_state = (process, conn, None), StandbyState.STARTING
            queue.changed.notify_all()
        try:
            conn.send(InitWorker(device=worker.device, physical_index=worker.physical_index, settings=queue.settings))
        except OSError:
            pass  # it died already: await_ready says so
        ready = await_ready(queue, process, conn)
        with queue.lock:
            if ready is not None and ready.info is not None and process.poll() is None:
                worker.standby, worker.standby_state = (process, conn, ready), StandbyState.READY
                queue.changed.notify_all()
                return True
            worker.standby, worker.standby_state = None, StandbyState.NONE
            queue.changed.notify_all()
        if not queue.stopping:
            why = ready.error if ready is not None else exit_text(process.poll()) if process.poll() is not None \
                else "timed out"
            queue.note_error(f"the spare of {worker.label} did not start ({why})")
        stop_child(process, conn, StopWorker(), polite=False)
        return False

    def _hold(self) -> None:
        """Wait while the spare is held and alive; a spare that dies idle is cleared (and replaced)."""
        worker, queue = self.worker, self.queue
        with queue.lock:
            while not queue.stopping and worker.standby is not None:
                process = worker.standby[0]
                if process.poll() is not None:
                    queue.last_error = f"the spare of {worker.label} died while idle ({exit_text(process.returncode)})"
                    spare, worker.standby, worker.standby_state = worker.standby, None, StandbyState.NONE
                    break
                queue.changed.wait(1.0)
            else:
                return
        stop_child(spare[0], spare[1], StopWorker(), polite=False)

    def _set_state(self, state: StandbyState) -> None:
        with self.queue.lock:
            self.worker.standby_state = state

    def _discard(self) -> None:
        """At shutdown: stop the spare this thread holds, if any."""
        with self.queue.lock:
            spare, self.worker.standby = self.worker.standby, None
            self.worker.standby_state = StandbyState.NONE
        if spare is not None:
            stop_child(spare[0], spare[1], StopWorker(), polite=spare[2] is not None)

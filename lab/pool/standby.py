"""A warm spare for a child: Cancel (or a crash, or a task over the time limit) frees the
device within a tick, not after a fresh child's start-up.

Replacing a killed profile worker costs a fresh interpreter, torch's import and the warm-up
profile: ~10–30 s on this repo's shared 2-core box, ~11 s on an H200 (CUPTI's start-up). So a
client that wants it (the workers; ``HostSettings.standby``) has a ``Standby`` beside each
child's supervisor: a second child, started and warmed up in its own thread once the child
itself is ready, that waits idle (no CPU) until the supervisor ``take``s it in place of a
killed child; then the next spare is started. Its cost is one more idle process per child: an
idle warm CPU worker holds ~400 MB resident, a GPU one ~1.2 GB and a CUDA context on its GPU
(see ``STANDBY_MIN_AVAILABLE_BYTES``). On the H200, cancel → the next run running took 0.41 s
with the spare (BENCHMARKS.md, *Run-time estimates on an H200*); on this 2-core box 0.37 s,
where a fresh worker took 22 s (*Cancel and the warm spare*). Readers have none: one starts in
~1.5 s, and a spare per reader would double the memory the readers' limits are sized from.

It is skipped while the machine has less than ``STANDBY_MIN_AVAILABLE_BYTES`` available.
"""

from __future__ import annotations

import subprocess
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from lab.pool.protocol import ChildState, Ready, StandbyState
from lab.pool.queue import ChildRecord, PoolQueue
from lab.pool.spawn import exit_text, stop_child
from lab.pool.supervisor import TICK_S, await_ready

__all__ = [
    "STANDBY_MEMORY_RECHECK_S", "STANDBY_MIN_AVAILABLE_BYTES", "Standby", "available_memory_bytes", "resident_bytes",
]  # fmt: skip

# A spare is started only while the machine has at least this much memory available
# (MemAvailable), and twice what its child holds: an idle warm CPU worker measured 0.40 GB
# resident here (torch 2.13 CPU, after its warm-up profile), a GPU one 1.21 GB on the H200 host
# (torch 2.11, CUDA libraries; BENCHMARKS.md); 2 GiB leaves room for the spare, a run's tensors
# and the page.
STANDBY_MIN_AVAILABLE_BYTES = 2 * 2**30
# While memory is short, or after a spare failed to start, look again after this long.
STANDBY_MEMORY_RECHECK_S = 30.0


def _proc_field(path: str, field: str) -> int | None:
    """A "Name:  N kB" line of a /proc file, in bytes (None where there is none: not Linux, gone)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo."""
    return _proc_field("/proc/meminfo", "MemAvailable:")


def resident_bytes(pid: int | None) -> int | None:
    """VmRSS of process ``pid``."""
    return None if pid is None else _proc_field(f"/proc/{pid}/status", "VmRSS:")


class Standby:
    """Keeps one warmed-up spare for ``child`` (``run`` is its thread; ``take`` hands it over)."""

    def __init__(self, queue: PoolQueue, child: ChildRecord, stop_event: threading.Event):
        self.queue, self.child, self.stop_event = queue, child, stop_event
        self.client = queue.client

    # ------------------------------------------------------------------ the supervisor's side

    def take(self) -> tuple[subprocess.Popen, Connection, Ready] | None:
        """The warm spare (process, pipe, its Ready), now the supervisor's; None if there is
        none. A spare still warming up is waited for: it is further along than a fresh start."""
        child, queue = self.child, self.queue
        with queue.lock:
            while child.standby_state == StandbyState.STARTING and not queue.stopping:
                queue.changed.wait(TICK_S)
            spare = child.standby
            if spare is None or spare[2] is None or spare[0].poll() is not None:
                return None
            child.standby, child.standby_state = None, StandbyState.NONE
            child.promotions += 1
            queue.changed.notify_all()  # the standby thread starts the next spare
            return spare[0], spare[1], spare[2]

    # ------------------------------------------------------------------ its own thread

    def run(self) -> None:
        backoff_s = 1.0
        while not self._wait_for_a_turn():
            available = available_memory_bytes()
            needed = max(STANDBY_MIN_AVAILABLE_BYTES, 2 * (resident_bytes(self.child.pid) or 0))
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
        """Wait until a spare is wanted (the child warmed up once, none held); True: stop."""
        child, queue = self.child, self.queue
        with queue.lock:
            while not queue.stopping and (not child.ever_ready or child.standby is not None
                                          or child.state == ChildState.STARTING):
                queue.changed.wait(1.0)
            return queue.stopping

    def _start_one(self) -> bool:
        """Start a spare and wait for its warm-up; True once it is ready (held in the record)."""
        child, queue = self.child, self.queue
        try:
            process, conn = self.client.spawn(child)
        except Exception as error:  # noqa: BLE001 - e.g. spawn refused; retried after a pause
            queue.note_error(f"the spare of {child.label} could not be started: {type(error).__name__}: {error}")
            return False
        with queue.lock:
            child.standby, child.standby_state = (process, conn, None), StandbyState.STARTING
            queue.changed.notify_all()
        try:
            conn.send(self.client.init_message(child))
        except OSError:
            pass  # it died already: await_ready says so
        ready = await_ready(queue, process, conn, self.client.start_timeout_s)
        with queue.lock:
            if ready is not None and ready.usable and ready.info is not None and process.poll() is None:
                child.standby, child.standby_state = (process, conn, ready), StandbyState.READY
                queue.changed.notify_all()
                return True
            child.standby, child.standby_state = None, StandbyState.NONE
            queue.changed.notify_all()
        if not queue.stopping:
            why = ready.error if ready is not None else exit_text(process.poll()) if process.poll() is not None \
                else "timed out"
            queue.note_error(f"the spare of {child.label} did not start ({why})")
        stop_child(process, conn, self.client.stop_message, polite=False)
        return False

    def _hold(self) -> None:
        """Wait while the spare is held and alive; a spare that dies idle is cleared (and replaced)."""
        child, queue = self.child, self.queue
        with queue.lock:
            while not queue.stopping and child.standby is not None:
                process = child.standby[0]
                if process.poll() is not None:
                    queue.last_error = f"the spare of {child.label} died while idle ({exit_text(process.returncode)})"
                    spare, child.standby, child.standby_state = child.standby, None, StandbyState.NONE
                    break
                queue.changed.wait(1.0)
            else:
                return
        stop_child(spare[0], spare[1], self.client.stop_message, polite=False)

    def _set_state(self, state: StandbyState) -> None:
        with self.queue.lock:
            self.child.standby_state = state

    def _discard(self) -> None:
        """At shutdown: stop the spare this thread holds, if any."""
        with self.queue.lock:
            spare, self.child.standby = self.child.standby, None
            self.child.standby_state = StandbyState.NONE
        if spare is not None:
            stop_child(spare[0], spare[1], self.client.stop_message, polite=spare[2] is not None)

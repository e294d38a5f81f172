"""The pool's lifecycle: start a supervisor thread (and a spare's) per child, wait, shut down.

``ProfileService`` (lab.run) and ``ReaderPool`` (lab.read) each hold one ``ChildPool``; what is
theirs is the client, the children's records and the API their callers see.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections.abc import Callable

from lab.pool.queue import ChildRecord, PoolQueue
from lab.pool.spawn import SHUTDOWN_GRACE_S
from lab.pool.standby import Standby
from lab.pool.supervisor import TICK_S, Supervisor

__all__ = ["ChildPool"]


class ChildPool:
    """Supervisor threads over ``queue``'s children; thread-safe."""

    def __init__(self, queue: PoolQueue, *, spares: bool = False,
                 supervisor: Callable[..., Supervisor] = Supervisor, thread_name: str = "profiler-lab-child"):
        self.queue = queue
        self.spares = spares
        self.supervisor = supervisor
        self.thread_name = thread_name
        self.stop_event = threading.Event()
        self.started_at: float | None = None

    def start(self) -> bool:
        """Start every child's supervisor (and spare); False if they had started already."""
        queue = self.queue
        with queue.lock:
            queue.check_open()
            if self.started_at is not None:
                return False
            self.started_at = time.monotonic()
            for child in queue.children:
                self._start_child(child)
            # Children would exit on their own once the server's end of the socket closes;
            # stopping them at exit is quicker and leaves no task half-done.
            atexit.register(_shutdown_at_exit, weakref.ref(self))
            return True

    def _start_child(self, child: ChildRecord) -> None:
        standby = Standby(self.queue, child, self.stop_event) if self.spares else None
        supervisor = self.supervisor(self.queue, child, self.stop_event, standby)
        child.thread = threading.Thread(target=supervisor.run, daemon=True, name=f"{self.thread_name}-{child.index}")
        child.thread.start()
        if standby is not None:  # it waits for the child's first warm-up, then starts a spare
            child.standby_thread = threading.Thread(target=standby.run, daemon=True,
                                                    name=f"{self.thread_name}-standby-{child.index}")
            child.standby_thread.start()

    @property
    def started(self) -> bool:
        return self.started_at is not None

    def uptime_s(self) -> float:
        return 0.0 if self.started_at is None else time.monotonic() - self.started_at

    def wait_ready(self, timeout: float | None = None, *, all_children: bool = False) -> bool:
        """Block until the first child (or every child) has warmed up; whether it has."""
        deadline = None if timeout is None else time.monotonic() + timeout
        queue = self.queue
        with queue.lock:
            while not queue.stopping:
                ready = [c.ever_ready for c in queue.children]
                if all(ready) if all_children else any(ready):
                    return True
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                queue.changed.wait(TICK_S if remaining is None else min(remaining, TICK_S))
            return False

    def shutdown(self) -> None:
        """Stop every child; queued tickets are cancelled, running ones fail."""
        if not self.queue.stop():
            return
        self.stop_event.set()
        with self.queue.lock:
            threads = [t for c in self.queue.children for t in (c.thread, c.standby_thread) if t is not None]
        for thread in threads:
            thread.join(timeout=SHUTDOWN_GRACE_S + 5)


def _shutdown_at_exit(ref) -> None:
    pool = ref()
    if pool is not None:
        pool.shutdown()

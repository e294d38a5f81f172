"""Read traces for many users at once: a two-lane FIFO in front of a few reader processes.

Why processes: parsing a 509 MB-JSON trace in the server took 1 GB of its memory and 11 s of
a core with the GIL held, and a dozen at once would have the OOM killer end the server and
every session with it. A reader process parses *and* analyses, under an address-space limit
the host sets, at a lower CPU priority, and sends back only ``Parsed`` (DataFrames, analysis,
insights). One that runs out of memory or time, or dies, is replaced; only its read fails.

The chain::

    submit(bytes | path) → ReadTicket (queued, small or large lane) → supervisor thread of a
        free reader → reader process: inflate → parse → analyse → pickle → Parsed → ticket done

Every trace the lab reads goes this way: uploads, the bundled samples, runs' traces, and the
CLI's ``analyze``/``compare`` (a pool of one). ``uploads`` is the bounded store of parsed
uploads (``ResultStore``). No streamlit import: the page keeps one pool per server.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref

from lab.core.config import RunConfig
from lab.core.devices import DevicePeak
from lab.core.settings import HostSettings
from lab.read.limits import (
    MIB,
    SMALL_READ_JSON_BYTES,
    ReaderPlan,
    json_size_hint,
    memory_refusal,
    process_memory,
    reader_plan,
    surely_too_big,
)
from lab.read.protocol import Lane, Parsed, PoolHealth, ReaderHealth
from lab.read.queue import ABANDONED_READ_S, ReaderRecord, ReadQueue, ReadTicket
from lab.read.store import ResultStore
from lab.read.supervisor import READER_START_TIMEOUT_S, TICK_S, ReaderSupervisor
from lab.run.spawn import SHUTDOWN_GRACE_S

__all__ = ["ReaderPool"]


class ReaderPool:
    """``plan.count`` reader processes behind a two-lane FIFO; thread-safe; see the module doc."""

    def __init__(self, *, settings: HostSettings, readers: int | None = None,
                 abandon_after_s: float = ABANDONED_READ_S, small_read_json_bytes: int = SMALL_READ_JSON_BYTES):
        """``readers`` overrides the host's count (the CLI uses one); ``small_read_json_bytes`` is
        where the large lane starts (tests lower it to queue large reads without large files)."""
        if readers is not None:
            settings = settings.replace(reader_count=readers)
        self.settings = settings
        self.small_read_json_bytes = small_read_json_bytes
        self.plan: ReaderPlan = reader_plan(settings)
        self.uploads = ResultStore(self.plan.held_uploads_mb * MIB)
        records = [ReaderRecord(i) for i in range(self.plan.count)]
        self._queue = ReadQueue(self.plan, records, abandon_after_s=abandon_after_s)
        self._stop_event = threading.Event()
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, wait: bool = False, timeout: float = READER_START_TIMEOUT_S) -> ReaderPool:
        """Start every reader (each warms up on its own); with ``wait``, until one is ready."""
        queue = self._queue
        with queue.lock:
            if queue.stopping:
                raise RuntimeError("this ReaderPool was shut down; create a new one")
            if not self._started:
                self._started = True
                for record in queue.readers:
                    supervisor = ReaderSupervisor(queue, record, self._stop_event)
                    record.thread = threading.Thread(target=supervisor.run, daemon=True,
                                                     name=f"profiler-lab-reader-{record.index}")
                    record.thread.start()
                atexit.register(_shutdown_at_exit, weakref.ref(self))
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until one reader has warmed up; whether one has."""
        deadline = None if timeout is None else time.monotonic() + timeout
        queue = self._queue
        with queue.lock:
            while not queue.stopping and not any(r.ever_ready for r in queue.readers):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                queue.changed.wait(TICK_S if remaining is None else min(remaining, TICK_S))
            return any(r.ever_ready for r in queue.readers)

    def shutdown(self) -> None:
        """Stop every reader; queued reads are cancelled, running ones fail."""
        if not self._queue.stop():
            return
        self._stop_event.set()
        with self._queue.lock:
            threads = [r.thread for r in self._queue.readers if r.thread is not None]
        for thread in threads:
            thread.join(timeout=SHUTDOWN_GRACE_S + 5)

    def __enter__(self) -> ReaderPool:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # ------------------------------------------------------------------ reads

    def submit(self, data: bytes | None = None, *, path: str | None = None, settings: HostSettings | None = None,
               config: RunConfig | None = None, peak: DevicePeak | None = None, label: str = "the trace") -> ReadTicket:
        """Queue a read of ``data`` (bytes, sent to the reader) or of the file at ``path`` (opened
        by the reader); returns at once. ``settings`` carries the caller's trace limits (default:
        the pool's); ``config`` and ``peak`` (a run's) feed the GEMM analysis.

        A trace whose size alone shows it cannot fit in a reader (``limits.surely_too_big``) gets a
        ticket that has already failed with the memory message: nobody waits to be told.
        """
        if (data is None) == (path is None):
            raise ValueError("pass the trace's bytes or a path, not both or neither")
        if not self._started:
            self.start()
        hint = json_size_hint(data, path)
        lane = Lane.SMALL if hint <= self.small_read_json_bytes else Lane.LARGE
        refusal = memory_refusal(hint, self.plan.memory_mb) if surely_too_big(hint, self.plan.memory_mb) else None
        request = {"settings": settings or self.settings, "path": None if path is None else str(path),
                   "config": config, "peak": peak, "json_hint": hint}
        return self._queue.submit(request=request, data=data, lane=lane, label=label, refusal=refusal)

    def read(self, data: bytes | None = None, **kwargs) -> Parsed:
        """``submit`` and wait: the ``Parsed``, or ``ReadFailed`` with the visitor's message."""
        ticket = self.submit(data, **kwargs)
        try:
            return ticket.result()
        finally:
            if not ticket.done():  # the caller was interrupted (a rerun): nobody wants it now
                ticket.cancel()

    # ------------------------------------------------------------------ status

    def health(self) -> PoolHealth:
        queue = self._queue
        with queue.lock:
            records = [(r.index, r.state, r.pid, r.alive, r.reads_served, r.restarts,
                        r.ticket.label if r.ticket is not None else None) for r in queue.readers]
            waiting = len(queue.pending)
            waiting_large = sum(t.lane == Lane.LARGE for t in queue.pending)
            served, failed, last_error = queue.reads_served, queue.reads_failed, queue.last_error
        readers = tuple(ReaderHealth(index=i, state=state, pid=pid, alive=alive,
                                     rss_bytes=(process_memory(pid) or (None,))[0] if alive else None,
                                     reads_served=n, restarts=restarts, reading=label)
                        for i, state, pid, alive, n, restarts, label in records)
        held, held_bytes = self.uploads.stats()
        return PoolHealth(readers_alive=sum(r.alive for r in readers), readers_total=len(readers), readers=readers,
                          memory_limit_mb=self.plan.memory_mb, waiting=waiting, waiting_large=waiting_large,
                          reads_served=served, reads_failed=failed, held_uploads=held, held_bytes=held_bytes,
                          held_limit_bytes=self.uploads.budget_bytes, last_error=last_error)


def _shutdown_at_exit(ref) -> None:
    pool = ref()
    if pool is not None:
        pool.shutdown()

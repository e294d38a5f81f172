"""Read traces for many users at once: a two-lane queue in front of a few reader processes.

Why processes: parsing a 509 MB-JSON trace in the server took 1 GB of its memory and 11 s of
a core with the GIL held, and a dozen at once would have the OOM killer end the server and
every session with it. A reader process parses *and* analyses, under an address-space limit
the host sets, at a lower CPU priority, and sends back only ``Parsed`` (DataFrames, analysis,
explanation, judgement) — or, for the page, only its ``Outline`` (``read_outline``): the
``Parsed`` stays in the reader (``lab.read.kept``) and the views ask it for what they draw
(``lab.read.jobs``, ``JobKind.VIEW``). One that runs out of memory or time, or dies, is
replaced; only its read fails.

The chain::

    submit(bytes | path) → ReadTicket (queued, small or large lane) → supervisor thread of a
        free reader → reader process: inflate → parse → analyse → pickle → Parsed (or Outline) → ticket done

Every trace the lab reads goes this way: uploads, the bundled samples, runs' traces, and the
CLI's ``analyze``/``compare`` (a pool of one). ``uploads`` is the bounded store of uploads'
outlines (``ResultStore``). No streamlit import: the page keeps one pool per server.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.core.config import RunConfig
from lab.core.devices import DevicePeak
from lab.core.settings import HostSettings
from lab.pool import ABANDONED_TICKET_S, ChildPool, ChildState, pack
from lab.read.jobs import Job, JobInput
from lab.read.kept import KEEP_SHARE, KEPT_DIR, KeptSources, TraceRef, sweep_kept
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
from lab.read.protocol import Lane, Outline, Parsed, PoolHealth, ReaderHealth, ReadFailed, ReadFailureKind, ReadRequest
from lab.read.queue import READER_START_TIMEOUT_S, ReaderRecord, ReadQueue, ReadTicket
from lab.read.spool import SPOOL_DIR, SPOOL_MIN_BYTES, spool, sweep
from lab.read.store import ResultStore

__all__ = ["ReaderPool"]


class ReaderPool:
    """``plan.count`` reader processes behind a two-lane queue (``lab.pool``); thread-safe; see the module doc."""

    def __init__(self, *, settings: HostSettings, readers: int | None = None,
                 abandon_after_s: float = ABANDONED_TICKET_S, small_read_json_bytes: int = SMALL_READ_JSON_BYTES,
                 spool_dir: Path = SPOOL_DIR, spool_min_bytes: int = SPOOL_MIN_BYTES, keep_bytes: int | None = None,
                 kept_dir: Path = KEPT_DIR, warm_code: tuple[Callable[..., Any], ...] = ()):
        """``readers`` overrides the host's count (the CLI uses one); ``small_read_json_bytes`` is
        where the large lane starts (tests lower it to queue large reads without large files);
        bytes of at least ``spool_min_bytes`` reach their reader as a file in ``spool_dir``
        (``lab.read.spool``), smaller ones as a frame. Each reader keeps parsed traces read with
        ``keep`` in ``keep_bytes`` (default ``kept.KEEP_SHARE`` of its memory limit); the bytes
        they were read from stay in ``kept_dir`` (``kept.KeptSources``, the held-uploads budget).
        ``warm_code``: the page's job code each reader calls once on its warm-up read
        (``protocol.InitReader.warm_code``)."""
        self.spool_dir, self.spool_min_bytes = spool_dir, spool_min_bytes
        if readers is not None:
            settings = settings.replace(reader_count=readers)
        self.settings = settings
        self.small_read_json_bytes = small_read_json_bytes
        self.plan: ReaderPlan = reader_plan(settings)
        self.uploads = ResultStore(self.plan.held_uploads_mb * MIB)
        # An upload's gzip is far smaller than its parsed form (5.5 MB against 35.7 MB for the
        # 114.8 MB trace), so this budget keeps the bytes of every parsed upload the store holds.
        self.sources = KeptSources(self.plan.held_uploads_mb * MIB, kept_dir)
        self.keep_bytes = int(self.plan.memory_mb * MIB * KEEP_SHARE) if keep_bytes is None else keep_bytes
        records = [ReaderRecord(i) for i in range(self.plan.count)]
        self._queue = ReadQueue(self.plan, records, abandon_after_s=abandon_after_s, keep_bytes=self.keep_bytes,
                                 warm_code=warm_code)
        self._pool = ChildPool(self._queue, thread_name="profiler-lab-reader")

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, wait: bool = False, timeout: float = READER_START_TIMEOUT_S) -> ReaderPool:
        """Start every reader (each warms up on its own); with ``wait``, until one is ready. The
        spool files a server that died left behind go first (``lab.read.spool.sweep``)."""
        if not self._pool.started:
            sweep(self.spool_dir)
            sweep_kept(self.sources.folder)
        self._pool.start()
        if wait:
            self.wait_ready(timeout)
        return self

    @property
    def _started(self) -> bool:
        return self._pool.started

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until one reader has warmed up; whether one has."""
        return self._pool.wait_ready(timeout)

    def shutdown(self) -> None:
        """Stop every reader; queued reads are cancelled, running ones fail; the kept bytes go."""
        self._pool.shutdown()
        self.sources.close()

    def __enter__(self) -> ReaderPool:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # ------------------------------------------------------------------ reads

    def submit(self, data: bytes | None = None, *, path: str | None = None, settings: HostSettings | None = None,
               config: RunConfig | None = None, peak: DevicePeak | None = None, label: str = "the trace",
               session: str | None = None, rank_of_job: str | None = None, keep: str | None = None,
               outline: bool = False) -> ReadTicket:
        """Queue a read of ``data`` (bytes, sent to the reader) or of the file at ``path`` (opened
        by the reader); returns at once. ``settings`` carries the caller's trace limits (default:
        the pool's); ``config`` and ``peak`` (a run's) feed the GEMM analysis. Within a lane,
        reads of different ``session``s take turns (one visitor's ten files do not hold back
        another's one); anonymous reads go in arrival order. With ``rank_of_job`` (the file's
        name) the ticket's result is that rank's ``RankSummary``, not a ``Parsed``. With ``keep``
        and ``outline`` it is the trace's ``Outline``: the ``Parsed`` stays in the reader under
        ``keep``, and what the page draws from its frames is asked of it (``lab.read.jobs``).

        A trace whose size alone shows it cannot fit in a reader (``limits.surely_too_big``) gets a
        ticket that has already failed with the memory message: nobody waits to be told.
        """
        if (data is None) == (path is None):
            raise ValueError("pass the trace's bytes or a path, not both or neither")
        if outline and keep is None:
            raise ValueError("an outline needs keep: the reader keeps the trace it leaves out")
        if not self._started:
            self.start()
        hint = json_size_hint(data, path)
        lane = Lane.SMALL if hint <= self.small_read_json_bytes else Lane.LARGE
        refusal = memory_refusal(hint, self.plan.memory_mb) if surely_too_big(hint, self.plan.memory_mb) else None
        settings = settings or self.settings
        if keep is not None and refusal is None:  # the reader reads the kept copy: no spool, no frame
            ref = (self.sources.add_path(keep, str(path), settings=settings, config=config, peak=peak) if data is None
                   else self.sources.add_bytes(keep, data, settings=settings, config=config, peak=peak))
            if ref is not None:
                data, path = None, ref.path
        spooled = None
        if data is not None and refusal is None and len(data) >= self.spool_min_bytes:
            spooled = spool(data, self.spool_dir)  # None: no room there, the bytes go as a frame
        request = ReadRequest(settings=settings,
                              path=spooled if spooled is not None else None if path is None else str(path),
                              spooled=spooled is not None, config=config, peak=peak, json_hint=hint,
                              rank_of_job=rank_of_job, keep=keep, outline=outline)
        return self._queue.submit(request, data=None if spooled is not None else data, lane=lane, label=label,
                                  refusal=refusal, session=session, spool=spooled, keys=(keep,) if keep else ())

    def read(self, data: bytes | None = None, **kwargs) -> Parsed:
        """``submit`` and wait: the ``Parsed``, or ``ReadFailed`` with the visitor's message."""
        ticket = self.submit(data, **kwargs)
        try:
            return ticket.result()
        finally:
            if not ticket.done():  # the caller was interrupted (a rerun): nobody wants it now
                ticket.cancel()

    def read_outline(self, data: bytes | None = None, *, keep: str, **kwargs) -> Outline:
        """``read`` for the page: the trace's ``Outline``, the ``Parsed`` kept in the reader under ``keep``."""
        return self.read(data, keep=keep, outline=True, **kwargs)  # type: ignore[return-value]

    def know(self, key: str, *, data=None, path: str | None = None, settings: HostSettings | None = None,
             config: RunConfig | None = None, peak: DevicePeak | None = None) -> TraceRef | None:
        """Where ``key``'s trace is read again from, remembered (``path``) or written (``data``)
        without reading it now: a page that still holds a trace's bytes (a run's, a sample's) or
        its path (a directory job's rank) hands them back when the server let its copy go."""
        settings = settings or self.settings
        if path is not None:
            return self.sources.add_path(key, path, settings=settings, config=config, peak=peak)
        return self.sources.add_bytes(key, data, settings=settings, config=config, peak=peak)

    def submit_job(self, job: Job, given: JobInput | None = None, *, keys: tuple[str, ...] = (),
                   label: str | None = None, session: str | None = None) -> ReadTicket:
        """Queue a multi-trace job (``lab.read.jobs``) on traces already read; returns at once.
        Its ticket's ``result`` is the job's plain result (or ``ReadFailed``). Jobs take the
        small lane: they are analyses of parsed traces, not parses.

        With ``keys`` (of reads submitted with ``keep``) only the keys and where to read each
        again cross to the reader, routed to the one that keeps them; ``given`` (the traces
        themselves) is sent when a key's bytes are not known here (``refs`` says which)."""
        if not self._started:
            self.start()
        refs = self.refs(keys) if keys else None
        if refs is not None:
            given = JobInput(refs=refs, summaries=given.summaries if given is not None else ())
        if given is None:  # the server let their bytes go (its budget) since the caller looked
            raise ReadFailed("this server no longer holds the trace (it keeps a budget of uploads for everyone and "
                             "let the oldest go); open it again", kind=ReadFailureKind.TRACE)
        return self._queue.submit(job, frames=pack(given), lane=Lane.SMALL, label=label or str(job.kind),
                                  session=session, keys=keys if refs is not None else ())

    def refs(self, keys: tuple[str, ...]) -> tuple[TraceRef, ...] | None:
        """Each key's ``TraceRef`` (how a reader reads it again), or None if one is unknown here."""
        refs = tuple(self.sources.get(k) for k in keys)
        return None if any(r is None for r in refs) else refs  # type: ignore[return-value]

    def run_job(self, job: Job, given: JobInput | None = None, **kwargs):
        """``submit_job`` and wait: the result, or ``ReadFailed``."""
        ticket = self.submit_job(job, given, **kwargs)
        try:
            return ticket.result()
        finally:
            if not ticket.done():  # the caller was interrupted (a rerun): nobody wants it now
                ticket.cancel()

    # ------------------------------------------------------------------ status

    def has_idle_reader(self) -> bool:
        """Whether a read queued now would start at once: a reader is idle and nothing waits.
        An upload's early read (``ui.early_read``) is queued only then, so it never stands in
        line before a read somebody is waiting for."""
        queue = self._queue
        with queue.lock:
            return not queue.pending and any(r.state == ChildState.IDLE for r in queue.readers)

    def health(self) -> PoolHealth:
        queue = self._queue
        with queue.lock:
            records = [(r.index, r.state, r.pid, r.alive, r.reads_served, r.restarts,
                        getattr(r.ticket, "label", None)) for r in queue.readers]
            waiting = len(queue.pending)
            waiting_large = sum(t.lane == Lane.LARGE for t in queue.pending)
            served, failed, last_error, rereads = queue.served, queue.failed, queue.last_error, queue.rereads
        readers = tuple(ReaderHealth(index=i, state=state, pid=pid, alive=alive,
                                     rss_bytes=(process_memory(pid) or (None,))[0] if alive else None,
                                     reads_served=n, restarts=restarts, reading=label)
                        for i, state, pid, alive, n, restarts, label in records)
        held, held_bytes = self.uploads.stats()
        return PoolHealth(readers_alive=sum(r.alive for r in readers), readers_total=len(readers), readers=readers,
                          memory_limit_mb=self.plan.memory_mb, waiting=waiting, waiting_large=waiting_large,
                          reads_served=served, reads_failed=failed, held_uploads=held, held_bytes=held_bytes,
                          held_limit_bytes=self.uploads.budget_bytes, last_error=last_error,
                          rereads=rereads)


"""An upload's read starts when its bytes reach the server, not when the page run reaches the upload box.

Streamlit stores a file_uploader's file when its HTTP PUT arrives; only then does the browser send
the rerun that hands the file to the script, and the script draws the sidebar's forms and the
lesson panels before the upload box queues the read. On the 2-core box that gap was 0.03-0.07 s
when quiet and 0.2-0.5 s at load 5-12 (bench/bench_upload_verdict.py, "Streamlit: rerun with the
file, page top → upload box"), every second of it before a reader started.

``EarlyReads`` wraps the server's ``MemoryUploadedFileManager.add_file`` (once per server): for a
file the upload box would read on its own (.json / .json.gz, within the host's size), and only
while a reader is idle with nothing queued, it digests the bytes and queues their read on a
thread of its own (never the server's event loop). The page run that brings the file claims the
read (``take``) where it would have queued one, after the same checks as always (refusals, the
visitor's uploads per minute); one it does not claim is cancelled, and so is one nobody claims in
``CLAIM_WITHIN_S``. Nothing else changes: the read is the one the upload box would have queued,
with the same settings, and the page waits for it and shows it as before.

Bounds: only for a session the page has shown the upload box to (``admit``: past the host's
sign-in, if any), one early read per session (a newer file replaces it) and at most one per
reader in all, so a client sending files without the page costs the readers no more than an idle
moment, and one that has not signed in nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager

from lab.core import HostSettings
from lab.read import ReaderPool, ReadTicket, kept_key
from ui.state import digest_of

__all__ = ["CLAIM_WITHIN_S", "EARLY_SUFFIXES", "MAX_ADMITTED", "EarlyRead", "EarlyReads"]

# The page run that brings a file follows its PUT within ~0.1 s on a quiet box and ~1 s at load
# 12; a read unclaimed after this is one no page run will ask for (the tab closed mid-upload).
CLAIM_WITHIN_S = 30.0
# What the upload box reads as one trace (".gz" covers ".json.gz"; a .zip is unpacked by the page
# first: not early).
EARLY_SUFFIXES = (".json", ".gz")
# The page run waits this long at most for the digest and queueing begun on the PUT (114.8 MB of
# JSON: ~0.15 s, what the page run would otherwise spend on them itself).
_CLAIM_WAIT_S = 10.0
_ATTR = "_profiler_lab_early_reads"  # on the file manager: the EarlyReads its add_file reports to
# Sessions remembered as admitted, the oldest forgotten first (then it is admitted again by its
# next page run): a workshop room is a few hundred; 4096 ids are ~0.3 MB.
MAX_ADMITTED = 4096

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class EarlyRead:
    """A read queued on an upload's arrival: its bytes' digest (``ui.state.digest_of``) and ticket."""

    digest: str
    ticket: ReadTicket
    size_bytes: int


@dataclass(frozen=True)
class _Entry:
    future: Future  # → EarlyRead | None
    queued_at_s: float  # time.monotonic()


class EarlyReads:
    """The server's early reads, keyed by (browser session id, file id); thread-safe."""

    def __init__(self, readers: ReaderPool, settings: HostSettings, *, claim_within_s: float = CLAIM_WITHIN_S):
        self._readers, self._settings, self._claim_within_s = readers, settings, claim_within_s
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._admitted: OrderedDict[str, None] = OrderedDict()  # sessions shown the upload box
        # One thread: digests and queueing happen one upload at a time, off the event loop.
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="profiler-lab-early-read")

    # ------------------------------------------------------------------ the server side

    def install(self, manager: object) -> bool:
        """Report every file ``manager`` stores to this object; True if installed. Installing
        again (a new EarlyReads after the page's resources were cleared) replaces the old one."""
        if not isinstance(manager, MemoryUploadedFileManager):
            _LOG.warning("uploads are read when the page reaches them: the file manager is %s, not Streamlit's "
                         "MemoryUploadedFileManager", type(manager).__name__)
            return False
        if getattr(manager, _ATTR, None) is None:
            original = manager.add_file

            def add_file(session_id, file):
                original(session_id=session_id, file=file)
                early = getattr(manager, _ATTR, None)
                if early is not None:
                    early.on_file(session_id, file)

            manager.add_file = add_file  # type: ignore[method-assign]
        setattr(manager, _ATTR, self)
        return True

    def on_file(self, session_id: str, file) -> bool:
        """A file (Streamlit's ``UploadedFileRec``) has arrived: queue its read if it is one the
        upload box would read and a reader is idle; True if queued. Runs on the server's event
        loop, so it only looks at the name and size: the digest and the queueing are the worker's."""
        try:
            if not file.name.lower().endswith(EARLY_SUFFIXES) or len(file.data) > self._settings.max_upload_mb * 2**20:
                return False
            with self._lock:
                if session_id not in self._admitted:  # not shown the upload box: not signed in, say
                    return False
            if not self._readers.has_idle_reader():
                return False
            with self._lock:
                self._expire_locked(time.monotonic())
                for key in [k for k in self._entries if k[0] == session_id]:  # one per session: the newest
                    self._drop_locked(key)
                if len(self._entries) >= self._readers.plan.count:
                    return False
                self._entries[(session_id, file.file_id)] = _Entry(
                    self._worker.submit(self._queue, file.name, file.data), time.monotonic())
            return True
        except Exception:  # an upload must never fail because its early read could not start
            _LOG.exception("could not start the early read of %s", getattr(file, "name", "a file"))
            return False

    def _queue(self, name: str, data: bytes) -> EarlyRead:
        digest = digest_of(data)  # the reader keeps what it reads under it, as the page's own read would
        ticket = self._readers.submit(data, settings=self._settings, label=name, keep=kept_key(digest), outline=True)
        return EarlyRead(digest=digest, ticket=ticket, size_bytes=len(data))

    # ------------------------------------------------------------------ the page's side

    def admit(self, session_id: str | None) -> None:
        """This session's page shows the upload box (so it is past the host's sign-in): files it
        sends from now on may be read on arrival."""
        if session_id is None:
            return
        with self._lock:
            self._admitted[session_id] = None
            self._admitted.move_to_end(session_id)
            while len(self._admitted) > MAX_ADMITTED:
                self._admitted.popitem(last=False)

    def take(self, session_id: str, file_id: str, size_bytes: int) -> EarlyRead | None:
        """The early read of this session's file, now the caller's (claim it or ``release`` it),
        or None: there is none, or it could not be queued. Waits for the worker's digest and
        queueing if they are still under way."""
        with self._lock:
            self._expire_locked(time.monotonic())
            entry = self._entries.pop((session_id, file_id), None)
        if entry is None:
            return None
        try:
            early = entry.future.result(timeout=_CLAIM_WAIT_S)
        except FutureTimeout:
            entry.future.add_done_callback(_cancel_when_done)
            return None
        except Exception:
            _LOG.exception("an early read could not be queued")
            return None
        if early.size_bytes != size_bytes:  # not the bytes the page holds (cannot happen with one PUT per file id)
            early.ticket.cancel()
            return None
        return early

    def digest(self, session_id: str | None, file_id: str, size_bytes: int) -> str | None:
        """The digest of this session's file taken on its arrival, or None (no early read of it):
        the page asks for it before it claims the read, and need not digest the bytes again."""
        with self._lock:
            entry = self._entries.get((session_id, file_id)) if session_id is not None else None
        if entry is None:
            return None
        try:
            early = entry.future.result(timeout=_CLAIM_WAIT_S)
        except Exception:  # still under way after the wait, or could not be queued: the page digests
            return None
        return early.digest if early.size_bytes == size_bytes else None

    @staticmethod
    def release(early: EarlyRead | None) -> None:
        """An early read the page does not want (the file is refused, open already, or over the
        visitor's uploads per minute): cancelled."""
        if early is not None:
            early.ticket.cancel()

    def pending(self) -> int:
        """Early reads not yet claimed (what the tests look at)."""
        with self._lock:
            return len(self._entries)

    # ------------------------------------------------------------------ (lock held)

    def _expire_locked(self, now_s: float) -> None:
        for key in [k for k, e in self._entries.items() if now_s - e.queued_at_s > self._claim_within_s]:
            self._drop_locked(key)

    def _drop_locked(self, key: tuple[str, str]) -> None:
        self._entries.pop(key).future.add_done_callback(_cancel_when_done)


def _cancel_when_done(future: Future) -> None:
    try:
        early = future.result()
    except Exception:
        return
    if early is not None:
        early.ticket.cancel()

"""Opening a trace file: size check, one read in the reader pool, and only a readable trace joins.

A file that cannot be read is refused with one message and never enters the "Showing" list,
so the rest of the page keeps showing what it showed. The read runs in a reader process
(``lab.read``), queued behind other visitors' uploads when every reader is busy; the page is
drawn first and waits at its end (``await_upload``), a status line saying where the read is,
so a click meanwhile is answered at once and the wait picks up again on the next page run.
Once opened, the upload's bytes are let go, Streamlit's own copies included: the session keeps
its digest, the pool's store its parsed form. The uploader hands the same file back on every
rerun; refusals are remembered per session by digest so a bad (or bomb) file is read once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import streamlit as st

from lab.access import RateLimiter
from lab.read import ReaderPool, ReadFailed, ReadFailureKind, ReadState, ReadStatus, ReadTicket
from lab.run import HostSettings
from ui import access, messages, state

UPLOADER_KEY = "upload"
_REJECTED = "rejected_uploads"  # session_state: digest (or "file:<id>") → message
# Failures a second try may not repeat: remembered for that upload of the file, not its bytes.
_RETRYABLE = frozenset({ReadFailureKind.CRASH, ReadFailureKind.TIMEOUT, ReadFailureKind.CANCELLED,
                        ReadFailureKind.SHUTDOWN})
_PENDING = "pending_uploads"  # session_state: digest → _Pending (a read in flight)
MAX_REMEMBERED_REFUSALS = 16
POLL_S = 0.2
STAGE_TEXT = {"sending": "handing it to a reader", "parsing": "parsing", "analysing": "analysing"}


@dataclass(frozen=True)
class _Pending:
    name: str
    digest: str
    file_id: str | None
    ticket: ReadTicket


@dataclass(frozen=True)
class Waiting:
    """A read in flight, as this page run shows it: the record and its status line."""

    pending: _Pending
    line: object  # an st.empty() placeholder in the upload box


def upload_box(settings: HostSettings, readers: ReaderPool, *, limiter: RateLimiter) -> Waiting | None:
    """The "open your own trace" expander; a new upload's read is queued and returned, to be
    awaited at the end of the page (``await_upload``)."""
    with st.expander("Open your own trace (.json or .json.gz from torch.profiler)", expanded=False):
        upload = st.file_uploader(
            "Trace file", type=["json", "gz"], key=UPLOADER_KEY, max_upload_size=settings.max_upload_mb,
            help="export_chrome_trace() output or a tensorboard_trace_handler file, up to "
                 f"{settings.max_upload_mb} MB. Read in a separate process, never executed, kept in your "
                 "session only.")
        line = st.empty()
        if upload is None:
            _cancel_pending()
            return None
        if getattr(upload, "getvalue", None) is None:  # an opened upload whose bytes were let go
            return None
        outcome = accept_upload(upload.name, upload.getvalue(), settings, readers, file_id=upload.file_id,
                                limiter=limiter)
        if isinstance(outcome, str):
            messages.error(outcome)
            return None
        return None if outcome is None else Waiting(outcome, line)


def accept_upload(name: str, data: bytes, settings: HostSettings, readers: ReaderPool, *,
                  limiter: RateLimiter, file_id: str | None = None) -> str | _Pending | None:
    """Queue a read of ``data`` unless it is refused at once (the reason, for the user), already
    open (None) or already being read (its pending read). A read past the visitor's uploads per
    minute is refused with the wait and not remembered: the uploader still holds the file, and
    a page run after the wait reads it."""
    limit_bytes = settings.max_upload_mb * 2**20
    if len(data) > limit_bytes:
        return (f"{name} is {len(data) / 2**20:.1f} MB; this host accepts traces up to {settings.max_upload_mb} MB. "
                "Profile fewer steps (a smaller schedule 'active'), or upload the .json.gz instead of the .json.")
    digest = state.digest_of(data)
    rejected: dict[str, str] = st.session_state.setdefault(_REJECTED, {})
    for key in (digest, f"file:{file_id}"):
        if key in rejected:
            return rejected[key]
    if state.has_upload(digest):
        return None
    pending: dict[str, _Pending] = st.session_state.setdefault(_PENDING, {})
    for other in [d for d in pending if d != digest]:  # the uploader now holds another file
        pending.pop(other).ticket.cancel()
    if digest not in pending:
        if (why := access.refusal("upload", settings, limiter)) is not None:
            return why
        ticket = readers.submit(data, settings=settings, label=name)
        pending[digest] = _Pending(name=name, digest=digest, file_id=file_id, ticket=ticket)
    return pending[digest]


def describe_read(status: ReadStatus, name: str) -> str:
    """One status line for an upload's read: its place in the queue, or its stage, and the time so far."""
    if status.state == ReadState.QUEUED:
        pos = status.queue_position
        ahead = "next to be read" if pos == 1 else f"{pos - 1} uploads ahead" if pos else "waiting"
        return f"{name}: waiting for a trace reader — position {pos} ({ahead}) · {status.elapsed_s:.1f} s"
    if status.state == ReadState.READING:
        stage = STAGE_TEXT.get(status.stage or "", status.stage or "reading")
        return f"{name}: {stage} on reader {status.reader} · {status.elapsed_s:.1f} s"
    return f"{name}: {status.state} · {status.elapsed_s:.1f} s"


def await_upload(waiting: Waiting | None, readers: ReaderPool) -> None:
    """At the end of the page: show the read's progress until it settles, then open the upload
    (a rerun) or show why it cannot be opened. A click meanwhile ends this run; the next one
    picks the same read up again."""
    if waiting is None:
        return
    ticket = waiting.pending.ticket
    while not ticket.done():
        waiting.line.text(describe_read(ticket.poll(), waiting.pending.name))
        time.sleep(POLL_S)
    refusal = _settle(waiting.pending, readers)
    if refusal is None:
        st.rerun()
    with waiting.line.container():
        messages.error(refusal)


def _settle(pending: _Pending, readers: ReaderPool) -> str | None:
    """Keep the read's result for this session (None), or remember and return why not.

    The uploader keeps a refused file (and the message shows once per page run) until the
    visitor clears or replaces it. A refusal that the same bytes would earn again is kept by
    digest; one that a retry may not (the reader crashed, ran out of time, the read was
    dropped) only for this upload of the file: uploading it again tries again.
    """
    st.session_state.get(_PENDING, {}).pop(pending.digest, None)
    try:
        readers.uploads.put(state.owner(), pending.digest, pending.ticket.result(timeout=0))
    except ReadFailed as exc:
        key = f"file:{pending.file_id}" if exc.kind in _RETRYABLE else pending.digest
        return _remember_refusal(key, f"{pending.name} cannot be opened: {access.read_failure(exc)}")
    _, dropped = state.add_upload(pending.name, pending.digest)
    for old in dropped:
        readers.uploads.drop(state.owner(), old.digest)
    _release(pending)
    return None


def _remember_refusal(key: str, message: str) -> str:
    rejected: dict[str, str] = st.session_state.setdefault(_REJECTED, {})
    rejected[key] = message
    while len(rejected) > MAX_REMEMBERED_REFUSALS:
        rejected.pop(next(iter(rejected)))
    return message


def _cancel_pending() -> None:
    """The visitor cleared the uploader: nobody waits for its reads any more."""
    for pending in st.session_state.pop(_PENDING, {}).values():
        pending.ticket.cancel()


def _release(pending: _Pending) -> None:
    """Let go of every copy of an opened upload's bytes: Streamlit's file store keeps them until
    the session ends or the visitor removes the file, and the uploader's value holds them too.
    Afterwards the uploader hands back a stand-in (a deleted file), which opens nothing."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        remove = getattr(getattr(ctx, "uploaded_file_mgr", None), "remove_file", None)
        if remove is not None and pending.file_id is not None:
            remove(ctx.session_id, pending.file_id)
    except Exception:  # noqa: BLE001 - another file manager: it keeps its copy, nothing breaks
        pass
    st.session_state.pop(UPLOADER_KEY, None)

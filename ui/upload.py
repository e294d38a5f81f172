"""Opening a trace file: size check, one read in the reader pool, and only a readable trace joins.

A file that cannot be read is refused with one message and never enters the "Showing" list,
so the rest of the page keeps showing what it showed. The read runs in a reader process
(``lab.read``), queued behind other visitors' uploads when every reader is busy; with a reader
idle it began when the file arrived, and the page run claims that read (``ui.early_read``).
The page run that the file came with waits for it before "Showing" (``await_new_upload``), a
status line saying where the read is, and shows the opened trace itself; a click meanwhile ends that run,
and the next one draws the page first and waits at its end (``await_upload``), so the click is
answered at once and the wait picks up again.
Once opened, the upload's bytes are let go, Streamlit's own copies included: the session keeps
its digest, the pool's store its parsed form. The uploader hands the same file back on every
rerun; refusals are remembered per session by digest so a bad (or bomb) file is read once.

Several files at once (or a .zip of them) are one job's ranks: each is read by the pool as a
single upload is, and once all are read ``analyze_ranks`` checks they are one job and the
group opens as one "ranks" subject with its Ranks view; a single file behaves as before.
"""

from __future__ import annotations

import io
import logging
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from lab.access import RateLimiter
from lab.core import HostSettings
from lab.read import (
    Job,
    JobKind,
    ReaderPool,
    ReadFailed,
    ReadFailureKind,
    ReadState,
    ReadStatus,
    ReadTicket,
    kept_key,
)
from ui import access, messages, state
from ui.early_read import EarlyRead, EarlyReads

UPLOADER_KEY = "upload"
_REJECTED = "rejected_uploads"  # session_state: digest (or "file:<id>") → message
# Failures a second try may not repeat: remembered for that upload of the file, not its bytes.
_RETRYABLE = frozenset({ReadFailureKind.CRASH, ReadFailureKind.TIMEOUT, ReadFailureKind.CANCELLED,
                        ReadFailureKind.SHUTDOWN})
_HELD = "_uploader_files"  # session_state: how many files the uploader holds this page run
_PENDING = "pending_uploads"  # session_state: digest → _Pending (a read in flight)
_DIGESTS = "_upload_digests"  # session_state: file_id → digest of its bytes
MAX_REMEMBERED_REFUSALS = 16
_GROUP_PENDING = "pending_rank_groups"  # session_state: group key → _Group (reads in flight)
# Ranks opened together: each one's parsed trace is held for the session (≈ 0.5× its JSON), so a
# group is bounded like the session's uploads; 16 covers two 8-GPU nodes.
MAX_RANK_FILES = 16
TRACE_SUFFIXES = (".json", ".json.gz")  # what a .zip's members may be (*.pt.trace.json[.gz] included)
POLL_S = 0.2
STAGE_TEXT = {"sending": "handing it to a reader", "parsing": "parsing", "analysing": "analysing"}

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Pending:
    name: str
    digest: str
    file_id: str | None
    ticket: ReadTicket
    title: str | None = None  # the "Showing" entry's title (default "Upload: <name>")


@dataclass(frozen=True)
class _Group:
    """Several files read at once, to open together as one job's ranks."""

    key: str  # state.ranks_key of the members' digests
    members: tuple[_Pending, ...]


@dataclass(frozen=True)
class Waiting:
    """A read in flight, as this page run shows it: the record and its status line."""

    pending: _Pending | _Group
    line: DeltaGenerator  # an st.empty() placeholder in the upload box
    # Queued by this page run (the file came with it): awaited before "Showing" and the views
    # (``await_new_upload``), so this same run shows it. A read queued by an earlier run (one
    # a click interrupted) is awaited at the page's end (``await_upload``), the page drawn first.
    queued_now: bool = False


def upload_box(settings: HostSettings, readers: ReaderPool, *, limiter: RateLimiter,
               early: EarlyReads | None = None) -> Waiting | None:
    """The "open your own trace" expander; a new upload's read is queued and returned, to be
    awaited at the end of the page (``await_upload``). Several files (or a .zip of them) are
    one job's ranks: read each, then open them together (``accept_group``). ``early``: the
    server's reads begun when a file arrived (``ui.early_read``), claimed here in place of
    queueing one."""
    if early is not None:
        early.admit(_session_id())  # this session is shown the uploader: its files may be read on arrival
    with st.expander("Open your own trace (.json or .json.gz from torch.profiler)", expanded=False):
        uploads = st.file_uploader(
            "Trace file", type=["json", "gz", "zip"], key=UPLOADER_KEY, max_upload_size=settings.max_upload_mb,
            accept_multiple_files=True,
            help="export_chrome_trace() output or a tensorboard_trace_handler file, up to "
                 f"{settings.max_upload_mb} MB. Several files (or a .zip of them) of one torch.distributed job "
                 "open side by side in a Ranks view. Read in a separate process, never executed, kept in your "
                 "session only.")
        line = st.empty()
        if not uploads:
            _cancel_pending()
            return None
        # An opened upload whose bytes were let go comes back as a stand-in without bytes.
        files = [u for u in uploads if getattr(u, "getvalue", None) is not None]
        st.session_state[_HELD] = len(uploads)
        # A file refused before stays refused, said once, and is set aside: the files added
        # beside it open on their own (it used to make them a group that could never open).
        refused = [(f, why) for f in files if (why := _known_refusal(f, settings, early)) is not None]
        for _, why in refused:
            messages.error(why)
        files = [f for f in files if all(f is not bad for bad, _ in refused)]
        if not files:
            return None
        in_flight = {*st.session_state.get(_PENDING, {}), *st.session_state.get(_GROUP_PENDING, {})}
        if len(files) > 1 or files[0].name.lower().endswith(".zip"):
            outcome: str | _Pending | _Group | None = accept_group(files, settings, readers, limiter=limiter,
                                                                   early=early)
        else:
            upload = files[0]
            _cancel_groups()
            outcome = accept_upload(upload.name, upload.getvalue(), settings, readers, file_id=upload.file_id,
                                    limiter=limiter, early=early)
        if isinstance(outcome, str):
            messages.error(outcome)
            return None
        if outcome is None:
            return None
        key = outcome.digest if isinstance(outcome, _Pending) else outcome.key
        return Waiting(outcome, line, queued_now=key not in in_flight)


def _known_refusal(upload, settings: HostSettings, early: EarlyReads | None = None) -> str | None:
    """Why a file in the uploader was refused already (remembered by its digest or this upload
    of it, or too large), or None: a file that is still to be read, or was read fine."""
    rejected: dict[str, str] = st.session_state.get(_REJECTED, {})
    if (why := rejected.get(f"file:{upload.file_id}")) is not None:
        return why
    if upload.name.lower().endswith(".zip"):
        return None  # its members' refusals are the group's (accept_group)
    data = upload.getvalue()
    if len(data) > settings.max_upload_mb * 2**20:
        return _size_refusal(upload.name, len(data), settings)
    return rejected.get(_digest(data, upload.file_id, early))


def _digest(data: bytes, file_id: str | None, early: EarlyReads | None = None) -> str:
    """``state.digest_of(data)``, once per upload of a file (``file_id``): every page run while
    the uploader holds a file asks for it, twice in the run that reads it (0.1 s each on a
    114.8 MB JSON); a file whose read began on arrival was digested then (``ui.early_read``)."""
    if file_id is None:
        return state.digest_of(data)
    known: dict[str, str] = st.session_state.setdefault(_DIGESTS, {})
    key = f"{file_id}:{len(data)}"  # a .zip's one member comes under the zip's file_id
    if key not in known:
        begun = early.digest(_session_id(), file_id, len(data)) if early is not None else None
        known[key] = begun if begun is not None else state.digest_of(data)
        while len(known) > MAX_RANK_FILES + 1:  # the files the uploader can hold at once
            known.pop(next(iter(known)))
    return known[key]


def _size_refusal(name: str, size_bytes: int, settings: HostSettings) -> str:
    return (f"{name} is {size_bytes / 2**20:.1f} MB; this host accepts traces up to {settings.max_upload_mb} MB. "
            "Profile fewer steps (a smaller schedule 'active'), or upload the .json.gz instead of the .json.")


def accept_upload(name: str, data: bytes, settings: HostSettings, readers: ReaderPool, *,
                  limiter: RateLimiter, file_id: str | None = None,
                  early: EarlyReads | None = None) -> str | _Pending | None:
    """Queue a read of ``data`` unless it is refused at once (the reason, for the user), already
    open (None) or already being read (its pending read). A read past the visitor's uploads per
    minute is refused with the wait and not remembered: the uploader still holds the file, and
    a page run after the wait reads it. A read of these bytes begun on their arrival (``early``)
    is claimed instead of queueing another, and cancelled on every other outcome."""
    limit_bytes = settings.max_upload_mb * 2**20
    if len(data) > limit_bytes:
        return _size_refusal(name, len(data), settings)
    digest = _digest(data, file_id, early)
    claimed = _claim(early, file_id, data)
    try:
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
            ticket, claimed = _ticket(name, data, digest, claimed, settings, readers)
            pending[digest] = _Pending(name=name, digest=digest, file_id=file_id, ticket=ticket)
        return pending[digest]
    finally:
        EarlyReads.release(claimed)


def _session_id() -> str | None:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else None


def _claim(early: EarlyReads | None, file_id: str | None, data: bytes) -> EarlyRead | None:
    """This session's early read of ``file_id``, now this page run's to use or release."""
    if early is None or file_id is None or (session_id := _session_id()) is None:
        return None
    return early.take(session_id, file_id, len(data))


def _ticket(name: str, data: bytes, digest: str, claimed: EarlyRead | None, settings: HostSettings,
            readers: ReaderPool) -> tuple[ReadTicket, EarlyRead | None]:
    """The read of ``data``: the early one if it read these bytes (then nothing is left to
    release), else a new one queued now (and ``claimed`` is left to release)."""
    if claimed is not None and claimed.digest == digest:
        return claimed.ticket, None
    return readers.submit(data, settings=settings, label=name, session=state.owner(), keep=kept_key(digest),
                          outline=True), claimed


def describe_read(status: ReadStatus, name: str) -> str:
    """One status line for an upload's read: its place in the queue, or its stage, and the time
    so far in whole seconds (none in the first second). The line is redrawn only when these
    words change (``_await_settled``): every redraw is a page render in the browser (~50 ms of
    its CPU on the 2-core box), and tenths of a second redrew it every ``POLL_S``."""
    since = f" · {int(status.elapsed_s)} s" if status.elapsed_s >= 1 else ""
    if status.state == ReadState.QUEUED:
        pos = status.queue_position
        ahead = "next to be read" if pos == 1 else f"{pos - 1} uploads ahead" if pos else "waiting"
        return f"{name}: waiting for a trace reader — position {pos} ({ahead}){since}"
    if status.state == ReadState.READING:
        stage = STAGE_TEXT.get(status.stage or "", status.stage or "reading")
        return f"{name}: {stage} on reader {status.reader}{since}"
    return f"{name}: {status.state}{since}"


def await_new_upload(waiting: Waiting | None, readers: ReaderPool) -> Waiting | None:
    """Before "Showing" and the views: a read this page run queued (``Waiting.queued_now``) is
    awaited here, its status line saying where it is, and once read it joins the session and
    this same run shows it, or the line says why it cannot be opened. Returns what is left for
    ``await_upload`` at the page's end: a read an earlier run queued, else None.

    Awaited at the end instead, a new upload cost a second page run from the top once read
    (sidebar, panels, "Showing", the tabs again: 0.1-0.2 s of server time on the 2-core box at
    load 3-5, bench/bench_upload_verdict.py --timeline) and the browser a second redraw. A click
    meanwhile still ends this run at the next status line drawn (within a second: the line's
    words change each whole second); the next run finds the read queued by an earlier one and
    draws the page before waiting.
    """
    if waiting is None or not waiting.queued_now:
        return waiting
    refusal = _await_settled(waiting, readers)
    if refusal is None:
        waiting.line.empty()
    else:
        with waiting.line.container():
            messages.error(refusal)
    return None


def await_upload(waiting: Waiting | None, readers: ReaderPool) -> None:
    """At the end of the page: show the read's progress until it settles, then open the upload
    (a rerun) or show why it cannot be opened. A click meanwhile ends this run; the next one
    picks the same read up again."""
    if waiting is None:
        return
    refusal = _await_settled(waiting, readers)
    if refusal is None:
        st.rerun()
    with waiting.line.container():
        messages.error(refusal)


def _await_settled(waiting: Waiting, readers: ReaderPool) -> str | None:
    """The read's (or group's) progress on its status line until it settles; then it joins the
    session (None) or the reason it cannot (remembered, ``_settle``)."""
    if isinstance(waiting.pending, _Group):
        return await_group(waiting.pending, waiting.line, readers)
    ticket, shown = waiting.pending.ticket, None
    while not ticket.done():
        if (words := describe_read(ticket.poll(), waiting.pending.name)) != shown:
            waiting.line.text(words)
            shown = words
        _wait_settled(ticket)
    return _settle(waiting.pending, readers)


def _wait_settled(ticket: ReadTicket) -> None:
    """Up to ``POLL_S``, woken the moment the read settles: a sleep of ``POLL_S`` left ~0.1 s
    between the result's arrival and the page's rerun on average."""
    try:
        ticket.result(timeout=POLL_S)
    except (TimeoutError, ReadFailed):
        pass


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
    _, dropped = state.add_upload(pending.name, pending.digest, title=pending.title)
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
    _cancel_groups()


def _cancel_groups() -> None:
    for group in st.session_state.pop(_GROUP_PENDING, {}).values():
        for member in group.members:
            member.ticket.cancel()


def _release(pending: _Pending) -> None:
    """Let go of every copy of an opened upload's bytes: Streamlit's file store keeps them until
    the session ends or the visitor removes the file, and the uploader's value holds them too.
    Afterwards the uploader hands back a stand-in (a deleted file), which opens nothing."""
    if pending.file_id is not None:
        forget_uploaded_file(pending.file_id)
    if st.session_state.get(_HELD, 1) <= 1:
        # Alone in the uploader: its value goes too. Beside other files (a refused one) the value
        # stays, or the next page run would see an empty uploader and drop their messages.
        st.session_state.pop(UPLOADER_KEY, None)


def forget_uploaded_file(file_id: str) -> bool:
    """Drop this session's copy of an uploaded file from Streamlit's file store; True if dropped.

    Streamlit 1.67 has no public call for it: ``remove_file`` is what its own ``chat_input`` and
    ``audio_input`` call, on the manager class they check for (``MemoryUploadedFileManager``,
    the one its server and AppTest use). ``tests/test_upload_release.py`` runs this in a real
    Streamlit script run and fails when the bytes stop being freed; another manager is logged,
    not passed over in silence (its copy then lives until the session ends).
    """
    ctx = get_script_run_ctx()
    manager = ctx.uploaded_file_mgr if ctx is not None else None
    if ctx is None or not isinstance(manager, MemoryUploadedFileManager):
        _LOG.warning("an opened upload stays in memory until its session ends: the file manager is %s, "
                     "not Streamlit's MemoryUploadedFileManager", type(manager).__name__)
        return False
    manager.remove_file(session_id=ctx.session_id, file_id=file_id)
    return True


# ------------------------------------------------------------------ several files: one job's ranks


def zip_members(name: str, data: bytes, limit_bytes: int) -> list[tuple[str, bytes]] | str:
    """The traces in a .zip (members ending .json / .json.gz), ``limit_bytes`` inflated in all —
    what one upload may hold, so a zip bomb costs the server no more than an upload; or why not.
    Nothing is parsed here: the members go to the readers as uploads do."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        return f"{name} is not a zip archive; upload the trace files themselves, or a .zip of them."
    infos = [i for i in archive.infolist() if not i.is_dir() and i.filename.lower().endswith(TRACE_SUFFIXES)
             and not i.filename.startswith("__MACOSX/")]
    if not infos:
        return f"{name} holds no .json or .json.gz trace; zip the *.pt.trace.json[.gz] files of one run."
    if len(infos) > MAX_RANK_FILES:
        return f"{name} holds {len(infos)} traces; this page opens up to {MAX_RANK_FILES} ranks at once."
    members, left = [], limit_bytes
    for info in infos:
        try:
            with archive.open(info) as member:
                body = member.read(left + 1)  # a member that inflates past what is left stops here
        except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as exc:
            return f"{info.filename} in {name} cannot be unpacked ({exc}); zip the trace files again, unencrypted."
        if len(body) > left:
            return (f"the traces in {name} inflate past {limit_bytes / 2**20:.0f} MB, what this host accepts per "
                    "upload; zip the .json.gz files (not the .json), or upload them as files.")
        left -= len(body)
        members.append((info.filename, body))  # the path too: "rank0/trace.json" says its rank
    return members


def _group_files(files, limit_bytes: int) -> list[tuple[str, bytes, str | None]] | str:
    out: list[tuple[str, bytes, str | None]] = []
    for f in files:
        if f.name.lower().endswith(".zip"):
            members = zip_members(f.name, f.getvalue(), limit_bytes)
            if isinstance(members, str):
                return members
            out += [(n, b, f.file_id) for n, b in members]
        else:
            out.append((f.name, f.getvalue(), f.file_id))
    if len(out) > MAX_RANK_FILES:
        return f"{len(out)} traces at once; this page opens up to {MAX_RANK_FILES} ranks together."
    return out


def accept_group(files, settings: HostSettings, readers: ReaderPool, *, limiter: RateLimiter,
                 early: EarlyReads | None = None) -> str | _Pending | _Group | None:
    """Several files (or a .zip): each queued for a reader, to open together as one job's ranks
    once all are read; a .zip of one trace opens as that trace. The reason if refused at once,
    None if this group is already open. A group is one upload for the visitor's uploads per
    minute: one action, however many ranks it holds (their number is bounded by MAX_RANK_FILES)."""
    limit_bytes = settings.max_upload_mb * 2**20
    entries = _group_files(files, limit_bytes)
    if isinstance(entries, str):
        return entries
    if len(entries) == 1:
        _cancel_groups()
        name, data, file_id = entries[0]
        return accept_upload(name, data, settings, readers, file_id=file_id, limiter=limiter, early=early)
    for name, data, _ in entries:
        if len(data) > limit_bytes:
            return accept_upload(name, data, settings, readers, limiter=limiter)  # the size refusal, as for one file
    claims = [_claim(early, file_id, data) for _, data, file_id in entries]  # what began on arrival
    try:
        return _accept_entries(entries, claims, settings, readers, limiter=limiter)
    finally:
        for claimed in claims:
            EarlyReads.release(claimed)


def open_job_traces(named: Sequence[tuple[str, bytes]], settings: HostSettings, readers: ReaderPool) -> str | None:
    """A distributed run's rank traces (file name, gzipped JSON) opened as one job, the way an
    uploaded group opens (each read by a reader, then the job): None once it joined the session,
    else why it cannot. The run was counted when submitted, so this is no upload of the visitor's."""
    entries: list[tuple[str, bytes, str | None]] = [(name, data, None) for name, data in named]
    group = _accept_entries(entries, [None] * len(entries), settings, readers, limiter=None)
    if group is None or isinstance(group, str):
        return group
    assert isinstance(group, _Group)
    line = st.empty()
    why = await_group(group, line, readers)
    line.empty()  # the ranks' read progress, now over
    return why


def _accept_entries(entries: list[tuple[str, bytes, str | None]], claims: list[EarlyRead | None],
                    settings: HostSettings, readers: ReaderPool, *,
                    limiter: RateLimiter | None) -> str | _Pending | _Group | None:
    """``accept_group`` for two or more files within the size; a claim it uses is set to None;
    ``limiter`` None: not counted as an upload (a run's own traces)."""
    digests = [c.digest if c is not None else state.digest_of(data) for (_, data, _), c in zip(entries, claims,
                                                                                                 strict=True)]
    key = state.ranks_key(digests)
    rejected: dict[str, str] = st.session_state.setdefault(_REJECTED, {})
    for seen in (key, *(f"file:{file_id}" for _, _, file_id in entries)):
        if seen in rejected:
            return rejected[seen]
    if state.has_ranks(key):
        return None
    for pending in st.session_state.pop(_PENDING, {}).values():  # the uploader now holds other files
        pending.ticket.cancel()
    groups: dict[str, _Group] = st.session_state.setdefault(_GROUP_PENDING, {})
    for other in [k for k in groups if k != key]:
        for member in groups.pop(other).members:
            member.ticket.cancel()
    if key not in groups:
        if limiter is not None and (why := access.refusal("upload", settings, limiter)) is not None:
            return why
        members = []
        for i, ((name, data, file_id), digest) in enumerate(zip(entries, digests, strict=True)):
            ticket, claims[i] = _ticket(name, data, digest, claims[i], settings, readers)
            members.append(_Pending(name=name, digest=digest, file_id=file_id, ticket=ticket))
        groups[key] = _Group(key=key, members=tuple(members))
    return groups[key]


def await_group(group: _Group, line, readers: ReaderPool) -> str | None:
    """``_await_settled`` for a group: every member's progress until all settle, then the job;
    None once it joined the session, else why it cannot."""
    shown = None
    while not all(m.ticket.done() for m in group.members):
        if (words := "\n".join(describe_read(m.ticket.poll(), m.name) for m in group.members)) != shown:
            line.text(words)
            shown = words
        time.sleep(POLL_S)
    return _settle_group(group, readers)


def _settle_group(group: _Group, readers: ReaderPool) -> str | None:
    """Open the group as one job's ranks (None), or remember and return why it cannot be."""
    st.session_state.get(_GROUP_PENDING, {}).pop(group.key, None)
    parsed = []
    for m in group.members:
        try:
            parsed.append(m.ticket.result(timeout=0))
        except ReadFailed as exc:
            # Remembered for the file itself too, so the next page run sets it aside and the
            # other files open without it (upload_box); a .zip's member only for the group.
            message = f"{m.name} cannot be opened: {access.read_failure(exc)}"
            keys = [f"file:{m.file_id}"] if exc.kind in _RETRYABLE else [m.digest, group.key]
            for key in keys:
                _remember_refusal(key, message)
            st.rerun()
    names = [m.name for m in group.members]
    try:  # in the readers that keep the ranks, as they were read: the script thread only waits
        result = readers.run_job(Job(kind=JobKind.RANKS, names=tuple(names)), label=f"{len(names)} ranks",
                                 keys=tuple(kept_key(m.digest) for m in group.members))
    except ReadFailed as exc:
        why = str(exc) if exc.error_type == "RanksError" else access.read_failure(exc)
        return _remember_refusal(group.key, f"These {len(names)} files cannot be opened as one job's ranks: {why}")
    ranks = result.analysis
    try:
        for m, p in zip(group.members, parsed, strict=True):
            readers.uploads.put(state.owner(), m.digest, p)
    except ReadFailed as exc:
        return _remember_refusal(group.key, f"These files cannot be kept: {access.read_failure(exc)}")
    _, dropped = state.add_ranks([(i.name, group.members[i.index].digest) for i in ranks.infos], ranks,
                                 result.findings)
    for old in dropped:
        for _, digest in old.ranks:
            readers.uploads.drop(state.owner(), digest)
    for m in group.members:
        _release(m)
    return None

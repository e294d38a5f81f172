"""Traces on this server: the host's directories (PROFILER_LAB_TRACE_DIR) as tb-plugin listed them.

The listing (``lab.tracedir.list_runs``: runs, workers, spans, newest first) is drawn in a
fragment that re-runs every ``REFRESH_S``, so a file torch writes later shows up without a
reload. A visitor picks a run, a span and a worker from what is listed; the pick is a key of
the listing, resolved again on the server (``lab.tracedir.resolve``: no path from the page is
ever opened). Opening queues path reads on the reader pool (the reader opens the file: no bytes
pass through the browser or this server) and is awaited at the page's end as an upload is
(``ui.upload.await_upload``): one worker opens as a trace, a span's workers as one job's Ranks view.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from datetime import timedelta

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lab.access import RateLimiter
from lab.core import HostSettings
from lab.read import Job, JobInput, JobKind, ReaderPool, ReadFailed, submit_rank_summaries
from lab.tracedir import MetaCache, Run, TraceDirError, file_rows, list_runs, resolve, run_label, span_label
from ui import access, messages, state
from ui.upload import POLL_S, Waiting, _Pending, await_upload, describe_read

__all__ = ["REFRESH_S", "await_dir", "trace_dir_box"]

REFRESH_S = 5  # a new export is listed within this (a user waits for it: 10 s at most)
_OPEN = "_open_dir_pick"  # session_state: ("job" | "trace", run key, span index, worker file key)


@st.cache_resource(show_spinner=False)
def _meta_cache() -> MetaCache:
    """What each listed file holds (rank, world size, steps), read once per (path, mtime, size) per server."""
    return MetaCache()


@dataclass(frozen=True)
class JobWaiting:
    """A span's job in flight, as this page run shows it (a single trace waits as an upload's ``Waiting``)."""

    pending: _DirJob
    line: DeltaGenerator


def trace_dir_box(settings: HostSettings, readers: ReaderPool, *, limiter: RateLimiter,
                  expanded: bool = True) -> Waiting | JobWaiting | None:
    """The "Traces on this server" expander (only when the host set directories); a pick's reads
    are queued and returned, to be awaited at the end of the page. Folded (``expanded=False``)
    once the visitor has something of their own open, so its verdict is not pushed out of view."""
    if not settings.trace_dirs:
        return None
    with st.expander("Traces on this server (the host's trace directories)", expanded=expanded):
        _listing(settings.trace_dirs)
        line = st.empty()
        pick = st.session_state.pop(_OPEN, None)
        if pick is None:
            return None
        outcome = _open(pick, settings, readers, limiter=limiter)
        if isinstance(outcome, str):
            messages.error(outcome)
            return None
        if outcome is None:
            return None
        return JobWaiting(outcome, line) if isinstance(outcome, _DirJob) else Waiting(outcome, line)


@st.fragment(run_every=timedelta(seconds=REFRESH_S))
def _listing(dirs: tuple[str, ...]) -> None:
    runs = list_runs(dirs, _meta_cache())
    if not runs:
        st.info(f"No traces yet in {', '.join(messages.md_escape(_short(d)) for d in dirs)}. "
                "torch.profiler.tensorboard_trace_handler(dir) writes `<worker>.<time_ns>.pt.trace.json[.gz]` "
                f"there; this list looks again every {REFRESH_S} s.")
        return
    by_key = {r.key: r for r in runs}
    run_key = st.selectbox("Run", list(by_key), key="dir_run", format_func=lambda k: run_label(by_key[k]),
                           help="A directory holding traces (tb-plugin's runs), newest first.")
    if run_key is None:
        return
    run = by_key[run_key]
    st.dataframe(file_rows(run), hide_index=True, width="stretch", key="dir_files")
    spans = {s.index: s for s in run.spans}
    index = st.selectbox("Span", list(spans), key=f"dir_span_{run.key}", format_func=lambda i: span_label(spans[i]),
                         help="One export of every worker (the n-th file of each), newest first.")
    if index is None:
        return
    span = spans[index]
    cols = st.columns(2)
    if span.is_job and cols[0].button(f"Open the job ({len(span.files)} workers) in Ranks", key="dir_open_job",
                                      type="primary"):
        _request(("job", run.key, span.index, ""))
    files = {f.key: f for f in span.files}
    worker = cols[1].selectbox("Worker", list(files), key=f"dir_worker_{run.key}_{index}",
                               format_func=lambda k: files[k].worker + (f" (rank {files[k].meta.rank})"
                                                                         if files[k].meta.rank is not None else ""))
    if cols[1].button("Open this trace", key="dir_open_trace") and worker is not None:
        _request(("trace", run.key, span.index, worker))
    st.caption(f"Listed again every {REFRESH_S} s: a trace written meanwhile appears here. Read by the server's "
               "trace readers, from the server's disk.")


def _short(directory: str) -> str:
    return directory.rstrip("/").rpartition("/")[2] or directory


def _request(pick: tuple[str, str, int, str]) -> None:
    st.session_state[_OPEN] = pick
    st.rerun(scope="app")


@dataclass(frozen=True)
class _DirJob:
    """A span's workers read at once, each sending back its rank's summary."""

    title: str
    names: tuple[str, ...]
    paths: tuple[str, ...]
    digests: tuple[str, ...]
    tickets: tuple


def _file_digest(path: str) -> str:
    st_ = os.stat(path)
    return hashlib.blake2b(f"dir:{path}:{st_.st_mtime_ns}:{st_.st_size}".encode(), digest_size=16).hexdigest()


def _find(dirs: tuple[str, ...], run_key: str, span_index: int) -> Run | str:
    run = next((r for r in list_runs(dirs, _meta_cache()) if r.key == run_key), None)
    if run is None or span_index not in {s.index for s in run.spans}:
        return "That run or span is no longer in the trace directory: pick again from the list."
    return run


def _open(pick, settings: HostSettings, readers: ReaderPool, *,
          limiter: RateLimiter) -> str | _Pending | _DirJob | None:
    kind, run_key, span_index, file_key = pick
    run = _find(settings.trace_dirs, run_key, span_index)
    if isinstance(run, str):
        return run
    span = next(s for s in run.spans if s.index == span_index)
    chosen = [f for f in span.files if kind == "job" or f.key == file_key]
    try:
        paths = [str(resolve(settings.trace_dirs, f.root, f.relative)) for f in chosen]
    except TraceDirError as exc:
        return str(exc)
    if not paths:
        return "That worker is not in this span: pick again from the list."
    if (why := access.refusal("upload", settings, limiter)) is not None:
        return why
    if kind == "trace":
        f, path = chosen[0], paths[0]
        return _Pending(name=f.name, digest=_file_digest(path), file_id=None, title=f"Server: {run.name}/{f.name}",
                        ticket=readers.submit(path=path, settings=settings, label=f.name))
    return _DirJob(title=f"Server job: {run.name}, span {span.index} ({len(paths)} ranks)",
                   names=tuple(f.name for f in chosen), paths=tuple(paths),
                   digests=tuple(_file_digest(p) for p in paths),
                   tickets=tuple(submit_rank_summaries(readers, paths, settings=settings)))


def await_dir(waiting: Waiting | JobWaiting | None, readers: ReaderPool) -> None:
    """At the end of the page: a single trace's read as an upload's; a job's until every rank's
    summary is back, then the job (``combine_ranks``) opens in its Ranks view."""
    if waiting is None:
        return
    if isinstance(waiting, Waiting):
        await_upload(waiting, readers)
        return
    job, shown = waiting.pending, None
    while not all(t.done() for t in job.tickets):
        done = sum(t.done() for t in job.tickets)
        busy = [describe_read(t.poll(), n) for t, n in zip(job.tickets, job.names, strict=True) if not t.done()]
        if (words := "\n".join([f"{done} of {len(job.tickets)} ranks read", *busy[:4]])) != shown:
            waiting.line.text(words)  # redrawn only when its words change (describe_read)
            shown = words
        time.sleep(POLL_S)
    refusal = _settle_job(job, readers)
    if refusal is None:
        st.rerun()
    with waiting.line.container():
        messages.error(refusal)


def _settle_job(job: _DirJob, readers: ReaderPool) -> str | None:
    summaries = []
    for name, ticket in zip(job.names, job.tickets, strict=True):
        try:
            summaries.append(ticket.result(timeout=0))
        except ReadFailed as exc:
            return f"{name} cannot be opened: {access.read_failure(exc)}"
    try:  # the job from its summaries, in a reader: the script thread only waits
        result = readers.run_job(Job(kind=JobKind.RANK_SUMMARIES, names=job.names),
                                 JobInput(summaries=tuple(summaries)), label=f"{len(job.names)} ranks")
    except ReadFailed as exc:
        why = str(exc) if exc.error_type == "RanksError" else access.read_failure(exc)
        return f"These {len(job.names)} files cannot be opened as one job's ranks: {why}"
    ranks = result.analysis
    index = {n: i for i, n in enumerate(job.names)}
    order = [index[i.name] for i in ranks.infos]
    state.add_ranks([(job.names[i], job.digests[i]) for i in order], ranks, result.findings,
                    paths=tuple(job.paths[i] for i in order), title=job.title)
    return None

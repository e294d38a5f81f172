"""The outline of the trace behind each subject, and what the views ask of the trace itself:
read and answered by the server's reader pool, never in the server.

Runs' traces and the bundled samples are read through ``ReaderPool.read_outline`` (the small
lane: they never wait behind someone's large upload) into a bounded server-wide cache keyed by
the digest of the trace bytes (plus the run's config, which supplies GEMM shapes), so a visitor
can only reach an entry by holding the same bytes; ``cache_resource`` hands back the same
immutable objects instead of copying DataFrames on every rerun. Uploads are read once, by
``ui.upload``, and their outlines kept in the pool's store under this session's token: their
bytes are gone from the page. Either way the server holds the trace's ``Outline`` (facts,
tables, explanation, verdict); the parsed trace stays in the reader that read it (``lab.read.kept``).
What needs the trace's events (a timeline window, the memory chart, a replay's choices), several
traces (compare, a lesson's signals and answers) or more of one (the by-shape tables, the
TensorBoard tab's views) is a ``lab.read.Job`` sent with the traces' keys and answered there
(``job_result``): the script thread runs no analysis (tests/test_script_thread.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import streamlit as st

from lab.core import HostSettings
from lab.read import Job, JobKind, Outline, ReaderPool, ReadFailed, kept_key
from ui import messages, state
from ui.state import Subject

# Each entry holds one run's or sample's outline (its tables and verdict, ~0.7 MB for the 22.7 MB
# transformer trace); 16 covers a workshop room's distinct runs being viewed at once.
MAX_CACHED_TRACES = 16

# What the views take: the trace's facts, its AnalysisTables, explanation and judgement (a name the views already use).
Loaded = Outline


@st.cache_resource(max_entries=MAX_CACHED_TRACES, show_spinner=False)
def _load(digest: str, config_key: str, _data: bytes, _run, settings: HostSettings, _readers: ReaderPool) -> Outline:
    # The host's settings are part of the key: a trace refused under one limit is re-read under another.
    config = _run.config if _run is not None else None
    peak = _run.device.peak if _run is not None else None
    label = "a run's trace" if _run else "a sample"
    return _readers.read_outline(_data, settings=settings, config=config, peak=peak, label=label,
                                 keep=kept_key(digest, config))  # the reader keeps the trace for the views' jobs


def why_unreadable(exc: Exception) -> str:
    """The visitor's reason for a trace that could not be read (``ReadFailed`` says it already)."""
    if isinstance(exc, ReadFailed):
        return str(exc)
    return f"the lab could not read it ({type(exc).__name__}: {exc})"


def load(subject: Subject, settings: HostSettings, readers: ReaderPool) -> Loaded | None:
    """The subject's trace outline (facts, tables, verdict); shows the reason and returns None if unreadable."""
    if subject.kind in ("upload", "ranks"):  # a group of ranks: its lowest rank's trace
        outline = readers.uploads.get(state.owner(), subject.digest)
        if outline is None and subject.rank_paths:  # a job from a trace directory: its lowest rank, read now
            try:
                with st.spinner("Reading the lowest rank in full…"):
                    outline = readers.read_outline(path=subject.rank_paths[0], label=subject.ranks[0][0],
                                                   keep=subject_key(subject))
            except ReadFailed as exc:
                messages.error(f"{subject.title} cannot be shown: {why_unreadable(exc)}")
                return None
            readers.uploads.put(state.owner(), subject.digest, outline)
        if outline is None:
            messages.error(f"{subject.title} is no longer held by this server: it keeps "
                           f"{readers.plan.held_uploads_mb} MB of uploads for everyone and let the "
                           "oldest go; upload the file again")
        return outline
    config_key = repr(subject.run.config) if subject.run is not None else ""
    try:
        with st.spinner("Reading the trace…"):
            return _load(subject.digest, config_key, subject.trace_bytes, subject.run, settings, readers)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a message
        messages.error(f"{subject.title} cannot be shown: {why_unreadable(exc)}")
        return None


# Each entry holds one job's result (a comparison, a lesson's signals or answers, a by-shape
# table, a trace's TensorBoard views, a timeline window of ≤ 5,000 marks: ~1 MB at most).
MAX_CACHED_JOBS = 32


SPINNER = {JobKind.COMPARE: "Comparing the traces…",
           JobKind.TENSORBOARD: "Computing the TensorBoard views (step time, kernels, modules)…",
           JobKind.VIEW: "Drawing from the trace…"}


def subject_key(subject: Subject) -> str:
    """What a subject's parsed trace depends on: its bytes and, for a run, its config; the key
    its reader keeps it under."""
    return kept_key(subject.digest, subject.run.config if subject.run is not None else None)


def rank_key(digest: str) -> str:
    """The key one rank of a group (an upload, or a directory job's file) is kept under."""
    return kept_key(digest)


@st.cache_resource(max_entries=MAX_CACHED_JOBS, show_spinner=False)
def _job(job: Job, code: str, keys: tuple[str, ...], _with_code: Job, _readers: ReaderPool):
    # Kept by the job without its code (a function, which the cache cannot hash) and the code's name;
    # the keys go to the reader that keeps the traces, which reads one it no longer keeps again.
    return _readers.run_job(_with_code, keys=keys)


def view_job(code: Callable[..., Any], **args) -> Job:
    """A ``JobKind.VIEW`` job: ``code`` (a ``lab.views.queries`` function) with these arguments."""
    return Job(kind=JobKind.VIEW, code=code, args=tuple(sorted(args.items())))


def job_result(job: Job, subjects: Sequence[Subject], readers: ReaderPool, *, keys: Sequence[str] | None = None):
    """The result of a job over the subjects' traces (or the traces kept under ``keys``), run in
    the reader that keeps them and kept per server by their keys; shows the reason and returns
    None if it failed. A reader that no longer keeps a trace reads it again from the server's
    copy of its bytes (``lab.read.kept``); a copy the server let go is written again from the
    bytes a run or sample still has here."""
    keys = tuple(keys) if keys is not None else tuple(subject_key(s) for s in subjects)
    if readers.refs(keys) is None:
        for subject, key in zip(subjects, keys, strict=False):
            if subject.trace_bytes and readers.refs((key,)) is None:
                run = subject.run
                readers.know(key, data=subject.trace_bytes, config=run.config if run else None,
                             peak=run.device.peak if run else None)
    if readers.refs(keys) is None:
        messages.error(f"{', '.join(s.title for s in subjects)}: no longer held by this server (it keeps "
                       f"{readers.plan.held_uploads_mb} MB of uploads for everyone and let the oldest go); "
                       "upload the file again")
        return None
    try:
        with st.spinner(SPINNER.get(job.kind, "Analysing…")):
            code = f"{job.code.__module__}.{job.code.__qualname__}" if job.code is not None else ""
            return _job(replace(job, code=None), code, keys, job, readers)
    except ReadFailed as exc:
        messages.error(f"{', '.join(s.title for s in subjects)}: {why_unreadable(exc)}")
        return None

"""The parsed trace behind each subject: read by the server's reader pool, never in the server.

Runs' traces and the bundled samples are read through ``ReaderPool.read`` (the small lane:
they never wait behind someone's large upload) into a bounded server-wide cache keyed by the
digest of the trace bytes (plus the run's config, which supplies GEMM shapes), so a visitor
can only reach an entry by holding the same bytes; ``cache_resource`` hands back the same
immutable objects instead of copying DataFrames on every rerun. Uploads are read once, by
``ui.upload``, and kept in the pool's store under this session's token: their bytes are gone.
What needs several parsed traces (compare, a lesson's signals and answers) or more of one (the
by-shape tables, the TensorBoard tab's views) is a ``lab.read.Job`` run in a reader too
(``job_result``): the script thread runs no analysis (tests/test_script_thread.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import streamlit as st

from lab.core import HostSettings
from lab.read import Job, JobInput, JobKind, Parsed, ReaderPool, ReadFailed, kept_key
from ui import messages, state
from ui.state import Subject

# Each entry holds one parsed run or sample (≈ 0.5× its JSON size); 16 covers a workshop room's
# distinct runs being viewed at once without holding every trace ever seen.
MAX_CACHED_TRACES = 16

# What the views take: the Trace, its Analysis, explanation and judgement (a name the views already use).
Loaded = Parsed


@st.cache_resource(max_entries=MAX_CACHED_TRACES, show_spinner=False)
def _load(digest: str, config_key: str, _data: bytes, _run, settings: HostSettings, _readers: ReaderPool) -> Parsed:
    # The host's settings are part of the key: a trace refused under one limit is re-read under another.
    config = _run.config if _run is not None else None
    peak = _run.device.peak if _run is not None else None
    label = "a run's trace" if _run else "a sample"
    return _readers.read(_data, settings=settings, config=config, peak=peak, label=label,
                         keep=kept_key(digest, config))  # the reader keeps it for the jobs on it


def why_unreadable(exc: Exception) -> str:
    """The visitor's reason for a trace that could not be read (``ReadFailed`` says it already)."""
    if isinstance(exc, ReadFailed):
        return str(exc)
    return f"the lab could not read it ({type(exc).__name__}: {exc})"


def load(subject: Subject, settings: HostSettings, readers: ReaderPool) -> Loaded | None:
    """The subject's parsed trace (analysis, judgement); shows the reason and returns None if unreadable."""
    if subject.kind in ("upload", "ranks"):  # a group of ranks: its lowest rank's trace
        parsed = readers.uploads.get(state.owner(), subject.digest)
        if parsed is None and subject.rank_paths:  # a job from a trace directory: its lowest rank, read now
            try:
                with st.spinner("Reading the lowest rank in full…"):
                    parsed = readers.read(path=subject.rank_paths[0], label=subject.ranks[0][0],
                                          keep=subject_key(subject))
            except ReadFailed as exc:
                messages.error(f"{subject.title} cannot be shown: {why_unreadable(exc)}")
                return None
            readers.uploads.put(state.owner(), subject.digest, parsed)
        if parsed is None:
            messages.error(f"{subject.title} is no longer held by this server: it keeps "
                           f"{readers.plan.held_uploads_mb} MB of parsed uploads for everyone and let the "
                           "oldest go; upload the file again")
        return parsed
    config_key = repr(subject.run.config) if subject.run is not None else ""
    try:
        with st.spinner("Reading the trace…"):
            return _load(subject.digest, config_key, subject.trace_bytes, subject.run, settings, readers)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a message
        messages.error(f"{subject.title} cannot be shown: {why_unreadable(exc)}")
        return None


# Each entry holds one multi-trace result (a comparison, a lesson's signals or answers, a
# by-shape table, a trace's TensorBoard views): small beside a parsed trace.
MAX_CACHED_JOBS = 32


SPINNER = {JobKind.COMPARE: "Comparing the traces…",
           JobKind.TENSORBOARD: "Computing the TensorBoard views (step time, kernels, modules)…"}


def subject_key(subject: Subject) -> str:
    """What a subject's parsed trace depends on: its bytes and, for a run, its config; the key
    its reader keeps it under."""
    return kept_key(subject.digest, subject.run.config if subject.run is not None else None)


@st.cache_resource(max_entries=MAX_CACHED_JOBS, show_spinner=False)
def _job(job: Job, code: str, keys: tuple[str, ...], _with_code: Job, _given: JobInput, _readers: ReaderPool):
    # Kept by the job without its code (a function, which the cache cannot hash) and the code's name.
    # The keys go to the reader that keeps the traces; the traces themselves only if none does.
    return _readers.run_job(_with_code, _given, keys=keys)


def job_result(job: Job, subjects: Sequence[Subject], loaded: Sequence[Loaded], readers: ReaderPool):
    """The result of a multi-trace job over ``loaded`` (the subjects' parsed traces), run in a
    reader and kept per server by the subjects' keys; shows the reason and returns None if it failed.
    The reader gets the keys and reads a trace it no longer keeps again (``lab.read.kept``);
    ``loaded`` crosses only for a trace whose bytes this server does not keep."""
    given = JobInput(traces=tuple(x.trace for x in loaded), analyses=tuple(x.analysis for x in loaded),
                     findings=tuple(x.findings for x in loaded))
    try:
        with st.spinner(SPINNER.get(job.kind, "Analysing…")):
            code = f"{job.code.__module__}.{job.code.__qualname__}" if job.code is not None else ""
            return _job(replace(job, code=None), code, tuple(subject_key(s) for s in subjects), job, given, readers)
    except ReadFailed as exc:
        messages.error(f"{', '.join(s.title for s in subjects)}: {why_unreadable(exc)}")
        return None

"""Parsing and analysing a trace once per distinct trace, in bounded server-wide caches.

Keyed by the digest of the trace bytes (plus the run's config, which supplies GEMM shapes),
so a visitor can only reach an entry by holding the same bytes. ``cache_resource`` hands back
the same immutable objects instead of copying DataFrames on every rerun.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from lab.analysis import Analysis, Insight, analyze, find_insights
from lab.run import HostSettings
from lab.trace import Trace, TraceError, load_trace
from ui import messages
from ui.state import Subject

# Each entry holds one parsed trace (≈ 3× its JSON size at worst); 16 covers a workshop room's
# distinct runs being viewed at once without holding every trace ever seen.
MAX_CACHED_TRACES = 16


@dataclass(frozen=True)
class Loaded:
    trace: Trace
    analysis: Analysis
    insights: list[Insight]


@st.cache_resource(max_entries=MAX_CACHED_TRACES, show_spinner=False)
def _load(digest: str, config_key: str, _data: bytes, _run, settings: HostSettings) -> Loaded:
    # The host's settings are part of the key: a trace refused under one limit is re-read under another.
    trace = load_trace(_data, settings=settings)
    config = _run.config if _run is not None else None
    peak = _run.device.peak if _run is not None else None
    analysis = analyze(trace, peak=peak, config=config)
    return Loaded(trace, analysis, find_insights(trace, analysis))


def _why_unreadable(exc: Exception) -> str:
    if isinstance(exc, TraceError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "it needs more memory than this server can spare; open a shorter trace (fewer profiled steps)"
    # Not a TraceError: the file parsed but an analysis step failed on it. Say so plainly rather
    # than showing a traceback to a workshop attendee; the host sees the type in the message.
    return f"the lab could not analyse it ({type(exc).__name__}: {exc}); the file may be from an unusual profiler setup"


def check_readable(digest: str, data: bytes, settings: HostSettings) -> str | None:
    """None if ``data`` parses and analyses (the result stays cached for the views), else why not."""
    try:
        with st.spinner("Reading the trace…"):
            _load(digest, "", data, None, settings)
    except Exception as exc:  # noqa: BLE001 - untrusted input: every failure becomes a message
        return _why_unreadable(exc)
    return None


def load(subject: Subject, settings: HostSettings) -> Loaded | None:
    """The subject's trace, analysis and insights; shows the reason and returns None if unreadable."""
    config_key = repr(subject.run.config) if subject.run is not None else ""
    try:
        with st.spinner("Reading the trace…"):
            return _load(subject.digest, config_key, subject.trace_bytes, subject.run, settings)
    except Exception as exc:  # noqa: BLE001 - see check_readable
        messages.error(f"{subject.title} cannot be shown: {_why_unreadable(exc)}")
        return None

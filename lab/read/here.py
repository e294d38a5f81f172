"""Reading a trace in this process: what a reader does, without the reader (the CLI's default).

A reader process (``lab.read.reader``) exists to keep a server that many people share safe from
one trace: a memory limit, a time limit, a lower priority. Someone at the command line owns the
machine, and starting a reader interpreter (~1 s of imports, then the warm-up read) cost more
than reading a small trace. ``ReadHere`` is the part of ``ReaderPool`` the CLI uses — ``read``
a path into a ``Parsed``, ``read_rank`` one rank's ``RankSummary``, ``settings`` — done here,
with the host's trace limits (events, decompressed size) and the same ``ReadFailed`` words as a
reader's. ``parse`` is the one pipeline both run: ``load_trace`` → ``analyze`` → ``explain`` →
``judge``.
No streamlit; the trace and analysis packages are imported when a trace is read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from lab.core.config import RunConfig
from lab.core.devices import DevicePeak
from lab.core.settings import HostSettings
from lab.read.limits import analysis_refusal
from lab.read.protocol import Outline, Parsed, ReadFailed, ReadFailureKind

if TYPE_CHECKING:  # pragma: no cover
    from lab.analysis import RankSummary

__all__ = ["ReadHere", "outline", "parse", "summarize_rank"]


def parse(source, *, settings: HostSettings, config: RunConfig | None = None, peak: DevicePeak | None = None,
          on_stage: Callable[[str], None] | None = None) -> Parsed:
    """``source`` (bytes, a buffer or a path) parsed, analysed, explained and judged: the
    ``Parsed`` a reader sends back. ``on_stage("analysing")`` is called between the two."""
    from lab.explain import explain
    from lab.judge import judge_trace
    from lab.measure import measure
    from lab.trace import load_trace

    trace = load_trace(source, settings=settings)
    del source
    if on_stage is not None:
        on_stage("analysing")
    measures = measure(trace, peak=peak, config=config)
    analysis, explanation = measures.analysis, explain(measures)
    return Parsed(trace=trace, analysis=analysis, explanation=explanation,
                  judgement=judge_trace(trace, analysis, explanation))


def outline(parsed: Parsed, key: str) -> Outline:
    """``parsed`` without its event-level frames, for a page whose reader keeps it under ``key``."""
    from lab.trace import trace_facts

    return Outline(key=key, trace=trace_facts(parsed.trace), analysis=parsed.analysis.tables(),
                   explanation=parsed.explanation, judgement=parsed.judgement)


def summarize_rank(path: str, settings: HostSettings) -> RankSummary:
    """One rank's ``RankSummary`` (named by its file name), read from ``path``: what a reader
    sends back for ``ReadRequest(rank_of_job=…)`` and a Ray task for a rank."""
    from dataclasses import replace

    from lab.analysis import rank_summary
    from lab.explain import attribute
    from lab.measure import measure
    from lab.trace import load_trace

    trace = load_trace(path, settings=settings)
    measures = measure(trace)
    analysis = measures.analysis
    causes = attribute(measures).median_us()
    return replace(rank_summary(trace, os.path.basename(path), analysis), causes=causes)


class ReadHere:
    """Traces read in this process, as a ``ReaderPool`` of one would read them (see the module doc)."""

    def __init__(self, *, settings: HostSettings):
        self.settings = settings

    def __enter__(self) -> ReadHere:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def read(self, data: bytes | None = None, *, path: str | None = None, settings: HostSettings | None = None,
             config: RunConfig | None = None, peak: DevicePeak | None = None, label: str = "the trace") -> Parsed:
        """The ``Parsed`` of ``data`` or of the file at ``path``; ``ReadFailed`` with a reader's
        words if it is not a trace the lab reads, or an analysis failed on it. ``label`` is
        ``ReaderPool.read``'s (for its status lines): nothing here shows it."""
        if (data is None) == (path is None):
            raise ValueError("pass the trace's bytes or a path, not both or neither")
        return _refused_as_read_failed(lambda: parse(data if data is not None else path,
                                                     settings=settings or self.settings, config=config, peak=peak))

    def read_rank(self, path: str, *, settings: HostSettings | None = None) -> RankSummary:
        """One rank's ``RankSummary``; ``ReadFailed`` as ``read``."""
        return _refused_as_read_failed(lambda: summarize_rank(path, settings or self.settings))


def _refused_as_read_failed(read: Callable):
    """``read()``, its failures as a reader reports them: a ``TraceError``'s own message, an
    analysis's failure in ``limits.analysis_refusal``'s words."""
    from lab.trace import TraceError

    try:
        return read()
    except TraceError as exc:
        raise ReadFailed(str(exc), kind=ReadFailureKind.TRACE, error_type=type(exc).__name__) from None
    except Exception as exc:  # noqa: BLE001 - as a reader: it parsed, an analysis failed on it
        raise ReadFailed(analysis_refusal(exc), kind=ReadFailureKind.ANALYSIS, error_type=type(exc).__name__) from exc

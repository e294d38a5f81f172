"""Committed traces read once per test process: a path's ``Trace``, its analysis, explanation and
judgement, each made the way the page makes them and kept for the process.

Many test files read the same corpus traces (the ground truth, the explain and held-out programs,
the lessons' samples). Parsing and judging each again cost the fast tier about a third of its time;
all 177 committed traces held at once take ~290 MB. What these return is shared: a test reads it
and never changes it. A test that edits a trace builds its own (``load_trace`` of edited bytes).
``spans`` decodes a raw trace into the few fields brute-force checks read by time and name.

    from corpus import judgement
    assert judgement(path).verdict ...
"""

from __future__ import annotations

import functools
from pathlib import Path

import msgspec

from lab.analysis import Analysis, analyze
from lab.explain import Explanation, explain
from lab.judge import Judgement, judge_trace
from lab.measure import measure
from lab.trace import Trace, load_trace

__all__ = ["Span", "analysis", "explanation", "judgement", "spans", "trace"]


@functools.cache
def trace(path: Path) -> Trace:
    return load_trace(Path(path).read_bytes())


@functools.cache
def analysis(path: Path) -> Analysis:
    """``analyze`` with its defaults (no run config, the peak read from the trace's device)."""
    return analyze(trace(path))


@functools.cache
def explanation(path: Path) -> Explanation:
    """Made from the analysis's ``Measures``, as ``judge_trace`` makes it."""
    return explain(measure(trace(path), analysis=analysis(path)))


@functools.cache
def judgement(path: Path) -> Judgement:
    return judge_trace(trace(path), analysis(path), explanation(path))


class Span(msgspec.Struct):
    """The fields of a raw trace event that brute-force checks read by time and name; msgspec skips
    every other field (``json.loads`` of the largest traces here took seconds, this a tenth)."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float = 0.0
    dur: float = 0.0
    pid: int | str = 0
    tid: int | str = 0


class _Spans(msgspec.Struct):
    traceEvents: list[Span] = []


def spans(raw_json: bytes) -> list[Span]:
    """Every event of a raw (decompressed) trace, as ``Span``s."""
    return msgspec.json.decode(raw_json, type=_Spans).traceEvents

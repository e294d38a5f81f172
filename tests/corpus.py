"""Committed traces read once per test process: a path's ``Trace``, its analysis, explanation and
judgement, each made the way the page makes them and kept for the process.

Many test files read the same corpus traces (the ground truth, the explain and held-out programs,
the lessons' samples). Parsing and judging each again cost the fast tier about a third of its time;
all 177 committed traces held at once take ~290 MB. What these return is shared: a test reads it
and never changes it. A test that edits a trace builds its own (``load_trace`` of edited bytes).

    from corpus import judgement
    assert judgement(path).verdict ...
"""

from __future__ import annotations

import functools
from pathlib import Path

from lab.analysis import Analysis, analyze
from lab.explain import Explanation, explain
from lab.judge import Judgement, judge_trace
from lab.measure import measure
from lab.trace import Trace, load_trace

__all__ = ["analysis", "explanation", "judgement", "trace"]


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

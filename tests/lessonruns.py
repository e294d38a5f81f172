"""A lesson's runs for tests: the H200 recordings (``h200_runs``) and the raw JSON of a trace."""

from __future__ import annotations

import functools
import gzip
import json

from lab.analysis import Run, analyze
from lab.lessons import LESSONS
from lab.samples import lesson_samples
from lab.trace.load import load_trace


def raw_events(trace_gz: bytes) -> list[dict]:
    data = json.loads(gzip.decompress(trace_gz))
    return [e for e in data["traceEvents"] if e.get("ph") == "X"]


@functools.cache
def h200_runs(lesson_key: str) -> tuple[Run, ...]:
    """The lesson's runs from its H200 recordings in lab/samples/, in the lesson's order."""
    lesson = LESSONS[lesson_key]
    samples = lesson_samples(lesson.runs)
    assert samples, f"{lesson_key} has no H200 recording"
    runs = []
    for run, sample in zip(lesson.runs, samples):
        trace = load_trace(sample.read_bytes())
        t = sample.timing
        timing = (t["profiled_median_us"], t["unprofiled_median_us"]) if t else None
        runs.append(Run(run.name, trace, analyze(trace), timing=timing))
    return tuple(runs)

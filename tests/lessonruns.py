"""A lesson's runs for tests: the H200 recordings (``h200_runs``) and the raw JSON of a trace."""

from __future__ import annotations

import functools
import gzip
import json

import corpus
import pytest

from lab.analysis import Run
from lab.core.workloads import WORKLOADS
from lab.lessons import LESSONS, lesson_configs
from lab.samples import lesson_samples


def raw_events(trace_gz: bytes) -> list[dict]:
    return complete_events(json.loads(gzip.decompress(trace_gz)))


def complete_events(doc: dict) -> list[dict]:
    """The complete ("X") events of a decoded trace document."""
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


@functools.cache
def h200_runs(lesson_key: str) -> tuple[Run, ...]:
    """The lesson's runs from its H200 recordings in lab/samples/, in the lesson's order."""
    lesson = LESSONS[lesson_key]
    samples = lesson_samples(lesson.runs)
    assert samples, f"{lesson_key} has no H200 recording"
    runs = []
    for run, sample in zip(lesson.runs, samples):
        trace = corpus.trace(sample.path)
        t = sample.timing
        timing = (t["profiled_median_us"], t["unprofiled_median_us"]) if t else None
        runs.append(Run(run.name, trace, corpus.analysis(sample.path), timing=timing))
    return tuple(runs)


@functools.cache
def starts_rank_processes(lesson_key: str) -> bool:
    """Whether the lesson's CPU runs are distributed jobs (``Workload.distributed``): each run
    starts its rank processes (``lab.run.ddp``), 12-14 s of the fast tier on this box, so its
    tests are ``subprocess`` ones."""
    lesson = LESSONS[lesson_key]
    return lesson.cpu_refusal is None and any(WORKLOADS[c.workload].distributed
                                              for _, c in lesson_configs(lesson, "cpu"))


def cpu_lesson_param(lesson_key: str, value=None, *, id: str | None = None):
    """``value`` (the key itself by default) as a test parameter, marked ``subprocess`` when the
    lesson's CPU runs start rank processes."""
    marks = [pytest.mark.subprocess] if starts_rank_processes(lesson_key) else []
    return pytest.param(lesson_key if value is None else value, marks=marks, id=id)

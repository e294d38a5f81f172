"""Parsed traces kept in the reader that read them (``lab.read.kept``), with real reader processes.

A read with ``keep`` leaves its ``Parsed`` in the reader; a job then sends keys, not traces. A
reader whose byte budget holds one trace evicts the other and reads it again for the next job,
and a reader killed while the page holds its key is replaced and the next job is answered from a
re-read: in both cases the job's result is the one an in-process ``parse`` gives. A page's read
gets only the trace's ``Outline``, and its view queries (a timeline window) are answered by the
reader that keeps the trace, or from a re-read after that reader died.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import lab.views as lv
from lab.analysis import AnalysisTables
from lab.core import HostSettings
from lab.read import Job, JobInput, JobKind, Outline, ReaderPool, kept_key
from lab.read.here import parse
from lab.read.jobs import run_job
from lab.read.kept import KeptSources, KeptTraces, estimate_bytes
from lab.trace import TraceFacts

DATA = Path(__file__).parent / "data"
A, B = DATA / "matmul_add_1024_fp32.json.gz", DATA / "matmul_add_4096_bf16.json.gz"
START_S = 120  # a reader's imports and warm-up read on 2 busy cores


def same(x, y, where: str = "result") -> None:
    """``x`` and ``y`` equal field by field (DataFrames by value, NaN equal to NaN)."""
    if isinstance(x, pd.DataFrame):
        pd.testing.assert_frame_equal(x, y, obj=where)
    elif isinstance(x, pd.Series):
        pd.testing.assert_series_equal(x, y, obj=where)
    elif isinstance(x, np.ndarray):
        np.testing.assert_array_equal(x, y, err_msg=where)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        assert type(x) is type(y), where
        for f in dataclasses.fields(x):
            same(getattr(x, f.name), getattr(y, f.name), f"{where}.{f.name}")
    elif isinstance(x, list | tuple):
        assert len(x) == len(y), where
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            same(u, v, f"{where}[{i}]")
    elif isinstance(x, dict):
        assert x.keys() == y.keys(), where
        for k in x:
            same(x[k], y[k], f"{where}[{k!r}]")
    elif isinstance(x, float) and math.isnan(x):
        assert isinstance(y, float) and math.isnan(y), where
    else:
        assert x == y, where


def here(kind: JobKind, *paths: Path):
    """The job's result on traces parsed in this process: what the reader must answer."""
    parsed = [parse(str(p), settings=HostSettings()) for p in paths]
    given = JobInput(traces=tuple(p.trace for p in parsed), analyses=tuple(p.analysis for p in parsed),
                     findings=tuple(p.findings for p in parsed))
    return run_job(Job(kind=kind), given)


def key(path: Path) -> str:
    return kept_key(path.name)


def started(pool: ReaderPool) -> ReaderPool:
    pool.start()
    assert pool.wait_ready(START_S), pool.health().last_error
    return pool


# ------------------------------------------------------------------------------ in this process


def test_kept_traces_past_their_budget_let_the_least_recently_used_go():
    a, b = (parse(str(p), settings=HostSettings()) for p in (A, B))
    size_a, size_b = estimate_bytes(a), estimate_bytes(b)
    events_a = len(a.trace.events)
    assert size_a > a.trace.events.memory_usage(deep=False).sum() > 0
    kept = KeptTraces(max(size_a, size_b) + min(size_a, size_b) // 2)  # room for one, not both
    kept.put("a", a)
    assert kept.get("a") is a and kept.held_bytes == size_a
    kept.put("b", b)
    assert "a" not in kept and kept.get("b") is b and kept.evicted == 1 and kept.held_bytes == size_b
    assert len(a.trace.events) == events_a  # eviction drops the reference, nothing else
    small = KeptTraces(min(size_a, size_b) - 1)
    small.put("a", a)
    assert len(small) == 0 and small.held_bytes == 0  # larger than the whole budget: not kept


def test_kept_sources_keep_bytes_in_files_under_their_budget(tmp_path):
    sources = KeptSources(budget_bytes=10, folder=tmp_path)
    first = sources.add_bytes("k1", b"123456", settings=HostSettings())
    assert first is not None and Path(first.path).read_bytes() == b"123456"
    assert sources.add_bytes("k1", b"123456", settings=HostSettings()) == first  # known: not written twice
    second = sources.add_bytes("k2", b"abcdef", settings=HostSettings())
    assert second is not None and sources.get("k1") is None and not Path(first.path).exists()
    assert sources.add_bytes("big", b"x" * 11, settings=HostSettings()) is None
    named = sources.add_path("k3", "/some/trace.json", settings=HostSettings())
    assert sources.get("k3") == named and sources.get("k2") == second  # a caller's path costs no budget
    sources.close()
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ in readers


@pytest.mark.pool
@pytest.mark.timeout(600)
def test_a_reader_with_room_for_one_trace_evicts_and_reads_again_with_results_unchanged(tmp_path):
    a, b = (parse(str(p), settings=HostSettings()) for p in (A, B))
    room = max(estimate_bytes(a), estimate_bytes(b)) + min(estimate_bytes(a), estimate_bytes(b)) // 2
    with started(ReaderPool(settings=HostSettings(reader_count=1), keep_bytes=room, kept_dir=tmp_path)) as pool:
        pool.read(A.read_bytes(), keep=key(A))
        by_shape = pool.run_job(Job(kind=JobKind.BY_SHAPE), keys=(key(A),))
        assert pool.health().rereads == 0  # kept: answered from the reader's own copy
        same(by_shape, here(JobKind.BY_SHAPE, A))
        pool.read(B.read_bytes(), keep=key(B))  # room for one: A goes
        same(pool.run_job(Job(kind=JobKind.TENSORBOARD), keys=(key(A),)), here(JobKind.TENSORBOARD, A))
        assert pool.health().rereads == 1
        same(pool.run_job(Job(kind=JobKind.COMPARE), keys=(key(A), key(B))), here(JobKind.COMPARE, A, B))
        assert pool.health().rereads == 2  # A is kept now, so B went and was read again
        assert pool.health().reads_failed == 0


@pytest.mark.pool
@pytest.mark.timeout(600)
def test_a_reader_killed_while_the_page_holds_its_key_answers_the_next_job_from_a_re_read(tmp_path):
    with started(ReaderPool(settings=HostSettings(reader_count=1), kept_dir=tmp_path)) as pool:
        pool.read(A.read_bytes(), keep=key(A))
        (reader,) = pool.health().readers
        os.kill(reader.pid, signal.SIGKILL)
        deadline = time.monotonic() + START_S
        while (now := pool.health().readers[0]).pid in (reader.pid, None) or now.state != "idle":
            assert time.monotonic() < deadline, pool.health()
            time.sleep(0.05)
        same(pool.run_job(Job(kind=JobKind.BY_SHAPE), keys=(key(A),)), here(JobKind.BY_SHAPE, A))
        health = pool.health()
        assert health.rereads == 1 and health.readers[0].restarts == 1 and health.reads_failed == 0


@pytest.mark.pool
@pytest.mark.timeout(600)
def test_a_job_goes_to_the_reader_that_keeps_its_trace(tmp_path):
    with started(ReaderPool(settings=HostSettings(reader_count=2), kept_dir=tmp_path)) as pool:
        ticket = pool.submit(A.read_bytes(), keep=key(A))
        ticket.result(timeout=START_S)
        holder = ticket.poll().reader
        for _ in range(3):
            job = pool.submit_job(Job(kind=JobKind.BY_SHAPE), keys=(key(A),))
            job.result(timeout=START_S)
            assert job.poll().reader == holder
        assert pool.health().rereads == 0


def timeline_job(start_us: float, end_us: float) -> Job:
    return Job(kind=JobKind.VIEW, code=lv.timeline_window, args=(("end_us", end_us), ("start_us", start_us)))


@pytest.mark.pool
@pytest.mark.timeout(600)
def test_a_page_read_returns_no_event_frames_and_its_queries_read_the_kept_trace(tmp_path):
    whole = parse(str(B), settings=HostSettings())
    with started(ReaderPool(settings=HostSettings(reader_count=1), kept_dir=tmp_path)) as pool:
        out = pool.read_outline(B.read_bytes(), keep=key(B))
        assert isinstance(out, Outline) and out.key == key(B)
        assert type(out.trace) is TraceFacts and type(out.analysis) is AnalysisTables  # no events, no links
        assert out.trace.event_count == len(whole.trace.events) and 0 < out.result_bytes
        span = whole.trace.meta.span_us
        asked = pool.run_job(timeline_job(0.0, span / 2), keys=(key(B),))
        same(asked, lv.build_timeline(whole.trace, start_us=0.0, end_us=span / 2))
        assert pool.health().rereads == 0  # answered from the reader's own copy


@pytest.mark.pool
@pytest.mark.timeout(600)
def test_a_timeline_query_after_its_reader_was_killed_is_answered_from_a_re_read(tmp_path):
    with started(ReaderPool(settings=HostSettings(reader_count=1), kept_dir=tmp_path)) as pool:
        out = pool.read_outline(A.read_bytes(), keep=key(A))
        (reader,) = pool.health().readers
        os.kill(reader.pid, signal.SIGKILL)
        deadline = time.monotonic() + START_S
        while (now := pool.health().readers[0]).pid in (reader.pid, None) or now.state != "idle":
            assert time.monotonic() < deadline, pool.health()
            time.sleep(0.05)
        span = out.trace.meta.span_us
        asked = pool.run_job(timeline_job(span / 3, span), keys=(key(A),))
        whole = parse(str(A), settings=HostSettings())
        same(asked, lv.timeline_window((whole.trace,), (whole.analysis,), (whole.explanation,), start_us=span / 3,
                                       end_us=span))
        health = pool.health()
        assert health.rereads == 1 and health.readers[0].restarts == 1 and health.reads_failed == 0

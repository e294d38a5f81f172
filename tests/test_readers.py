"""The trace readers (``lab.read``) with real reader processes: nothing is mocked.

A reader killed mid-parse fails only its read, with a clear message, and the next read works;
a trace over a reader's memory limit is refused (before parsing when its size shows it, by
RLIMIT_AS when it does not) and the reader replaced; two sessions' reads never mix, in the pool
and in the page; waiting reads keep their order and know their place; the page's status line.
Traces are real: the H200 seed trace, tiled with bench/make_large_trace.py.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from lab.core import HostSettings
from lab.read import Lane, ReaderPool, ReadFailed, ReadFailureKind, ReadState, ResultStore
from lab.read.limits import json_size_hint, reader_plan

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import make_large_trace  # noqa: E402 - bench/ is not a package

SEED = ROOT / "tests" / "data" / "matmul_add_4096_bf16.json.gz"
START_S = 120  # a reader's imports and warm-up read on 2 busy cores
pytestmark = [pytest.mark.apptest, pytest.mark.pool, pytest.mark.timeout(600)]


def tiled(n_events: int, marker: str | None = None) -> bytes:
    """The seed trace tiled to ``n_events`` events as plain JSON; ``marker`` renames its annotations."""
    doc = make_large_trace.load_source(SEED)
    events = make_large_trace.repeated_events(doc, n_events)
    if marker is not None:
        events = [{**e, "name": f"{marker}_{i % 7}"} if e.get("cat") == "user_annotation" else e
                  for i, e in enumerate(events)]
    top = {k: v for k, v in doc.items() if k != "traceEvents"}
    return json.dumps({**top, "traceEvents": events}).encode()


@pytest.fixture(scope="module")
def medium() -> bytes:
    """~23 MB of JSON (100k events): about a second to read, long enough to be caught mid-parse."""
    return tiled(100_000)


def started(pool: ReaderPool) -> ReaderPool:
    pool.start()
    assert pool.wait_ready(START_S), pool.health().last_error
    return pool


def wait_until_reading(ticket) -> None:
    """Until a reader holds the read (parsing or analysing it)."""
    deadline = time.monotonic() + START_S
    while ticket.poll().stage not in ("parsing", "analysing"):
        assert not ticket.done() and time.monotonic() < deadline, ticket.poll()
        time.sleep(0.005)


def annotation_names(parsed) -> set[str]:
    ev = parsed.trace.events
    return set(ev.loc[ev["cat"] == "user_annotation", "name"].astype(str))


# ------------------------------------------------------------------------------ crashes


def test_a_reader_killed_mid_parse_fails_that_read_only_and_the_next_read_works(medium):
    with started(ReaderPool(settings=HostSettings(reader_count=1))) as pool:
        ticket = pool.submit(medium, label="killed.json")
        wait_until_reading(ticket)
        (reader,) = pool.health().readers
        os.kill(reader.pid, signal.SIGKILL)
        with pytest.raises(ReadFailed) as failed:
            ticket.result(timeout=60)
        assert failed.value.kind == ReadFailureKind.CRASH
        assert "the trace reader stopped (exit code -9, SIGKILL) while reading killed.json" in str(failed.value)
        assert "open the file again" in str(failed.value)
        parsed = pool.read(SEED.read_bytes())  # a fresh reader serves the next upload
        assert len(parsed.trace.events) > 100
        health = pool.health()
        assert health.readers[0].restarts == 1 and health.readers[0].pid != reader.pid
        assert health.reads_failed == 1 and health.reads_served == 1
        from ui.controls import reader_text  # Server status, as the host reads it

        text = reader_text(health)
        assert text.startswith("trace readers alive: 1/1 (memory limit ")
        assert "uploads waiting: 0 (0 large)" in text and "traces read: 1 (refused or failed: 1)" in text
        assert re.search(r"^  reader 0: idle, \d+ MB resident, 1 reads, 1 restarts$", text, re.MULTILINE), text
        assert "last reader error: read 1 (killed.json): the trace reader stopped" in text


def test_a_read_cancelled_while_it_runs_frees_its_reader_and_nothing_of_its_result_comes_back(medium):
    """The page cancels reads whenever a visitor swaps files. A read cancelled while a
    reader holds it must not keep that reader busy to the end, nor have its whole result
    unpickled into the server and thrown away: the reader is killed within a tick and replaced
    (as a cancelled run's worker is), and no read is counted as served."""
    import psutil

    with started(ReaderPool(settings=HostSettings(reader_count=1))) as pool:
        ticket = pool.submit(medium, label="swapped.json")
        wait_until_reading(ticket)
        (reader,) = pool.health().readers
        assert ticket.cancel()
        cancelled_at = time.monotonic()
        with pytest.raises(ReadFailed) as failed:
            ticket.result(timeout=0)
        assert failed.value.kind == ReadFailureKind.CANCELLED
        try:  # the reader that held it is gone within a few ticks (it took ~1 s to read this trace)
            psutil.Process(reader.pid).wait(timeout=2)
        except psutil.NoSuchProcess:
            pass
        assert time.monotonic() - cancelled_at < 2.5
        assert not psutil.pid_exists(reader.pid) or psutil.Process(reader.pid).status() == psutil.STATUS_ZOMBIE
        parsed = pool.read(SEED.read_bytes())  # its replacement serves the next one
        assert len(parsed.trace.events) > 100
        health = pool.health()
        assert health.reads_served == 1 and health.readers[0].restarts == 1, health  # the cancelled one never came back


# ------------------------------------------------------------------------------ memory


def test_a_reader_that_cannot_start_fails_the_waiting_read_with_a_message_instead_of_a_wait(monkeypatch):
    """Every reader dies at start (a real interpreter that exits 3): the waiting read fails with
    the visitor's words once the start has failed, and the error is kept for Server status."""
    from lab.pool import start_child
    from lab.read import queue, reader

    monkeypatch.setattr(queue, "start_reader_process",
                        lambda: start_child("import sys; sys.exit(3)", reader.READER_FD_ENV, dict(os.environ)))
    pool = ReaderPool(settings=HostSettings(reader_count=2)).start()
    try:
        ticket = pool.submit(b"{}", label="an upload")
        with pytest.raises(ReadFailed) as failed:
            ticket.result(timeout=START_S)
        assert failed.value.kind == ReadFailureKind.CRASH
        assert "no trace reader could start" in str(failed.value)
        assert "did not start (exit code 3" in (pool.health().last_error or ""), pool.health().last_error
    finally:
        pool.shutdown()


def test_a_trace_whose_size_shows_it_cannot_fit_is_refused_before_any_parse(medium):
    with started(ReaderPool(settings=HostSettings(reader_count=1, reader_memory_mb=16))) as pool:
        ticket = pool.submit(medium, label="big.json")
        assert ticket.done()  # nobody waits in a queue to be told
        with pytest.raises(ReadFailed) as failed:
            ticket.result(timeout=0)
        assert failed.value.kind == ReadFailureKind.MEMORY
        message = str(failed.value)
        assert message.startswith("this trace needs more memory than this host allows per upload: about 4")
        assert "(it allows 16 MB)" in message and "shorter schedule" in message and "Perfetto" in message
        assert pool.health().readers[0].restarts == 0


def test_a_reader_over_its_memory_limit_is_refused_cleanly_and_replaced(medium):
    # A gzip whose last member claims 1 byte: the size hint says "small", so the read is tried
    # and RLIMIT_AS (40 MB above the reader's start-up size) stops it mid-read.
    liar = gzip.compress(medium, compresslevel=1) + gzip.compress(b" ")
    assert json_size_hint(liar) < len(medium)
    with started(ReaderPool(settings=HostSettings(reader_count=1, reader_memory_mb=40))) as pool:
        with pytest.raises(ReadFailed) as failed:
            pool.read(liar, label="liar.json.gz")
        assert failed.value.kind == ReadFailureKind.MEMORY, failed.value
        assert str(failed.value).startswith(
            "this trace needs more memory than this host allows per upload: over the 40 MB it allows; trim it")
        parsed = pool.read(SEED.read_bytes())  # the replaced reader, same limit, reads a normal trace
        assert len(parsed.trace.events) > 100
        assert pool.health().readers[0].restarts == 1


def test_the_reader_plan_comes_from_the_machine_unless_the_host_sets_it():
    plan = reader_plan(HostSettings(), memory_bytes=24 * 2**30, cpus=2)
    assert (plan.count, plan.large_slots) == (2, 1)
    assert plan.memory_mb == 6144  # half of 24 GiB over 2 readers
    assert plan.held_uploads_mb == 6144  # a quarter of it
    big = reader_plan(HostSettings(), memory_bytes=512 * 2**30, cpus=64)
    assert (big.count, big.memory_mb, big.large_slots) == (4, 8192, 3)
    set_by_host = reader_plan(HostSettings(reader_count=3, reader_memory_mb=1000, uploads_held_mb=50),
                              memory_bytes=24 * 2**30, cpus=2)
    assert (set_by_host.count, set_by_host.memory_mb, set_by_host.held_uploads_mb) == (3, 1000, 50)
    assert HostSettings.from_env({"PROFILER_LAB_READER_MEMORY_MB": "2048"}).reader_memory_mb == 2048


# ------------------------------------------------------------------------------ isolation


def test_two_sessions_reads_at_once_never_mix():
    traces = {name: tiled(20_000, marker=name) for name in ("alice", "bob")}
    results: dict[str, object] = {}
    with started(ReaderPool(settings=HostSettings(reader_count=2))) as pool:
        def read(name: str) -> None:
            results[name] = pool.read(traces[name], label=f"{name}.json")

        threads = [threading.Thread(target=read, args=(name,)) for name in traces]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
    assert annotation_names(results["alice"]) == {f"alice_{i}" for i in range(7)}
    assert annotation_names(results["bob"]) == {f"bob_{i}" for i in range(7)}


def test_the_store_gives_each_session_only_its_own_and_stays_in_budget():
    with started(ReaderPool(settings=HostSettings(reader_count=1))) as pool:
        parsed = pool.read_outline(SEED.read_bytes(), keep="seed:")
    store = ResultStore(budget_bytes=int(parsed.result_bytes * 2.5))
    store.put("owner-a", "d1", parsed)
    assert store.get("owner-b", "d1") is None  # the same digest, another session: nothing
    store.put("owner-a", "d2", parsed)
    store.put("owner-b", "d1", parsed)  # over budget: the least recently used result goes
    assert store.get("owner-a", "d1") is None and store.get("owner-b", "d1") is parsed
    assert store.stats() == (2, 2 * parsed.result_bytes) and store.released == 1
    with pytest.raises(ReadFailed, match="larger than all this host keeps for uploads"):
        ResultStore(budget_bytes=10).put("owner-a", "d3", parsed)


def test_two_page_sessions_uploads_never_mix():
    from streamlit.testing.v1 import AppTest

    app = str(ROOT / "app.py")
    sessions = {}
    for name in ("alice", "bob"):
        at = AppTest.from_file(app, default_timeout=300)
        at.run()
        data = gzip.compress(tiled(3_000, marker=name))
        at.file_uploader(key="upload").set_value((f"{name}.json.gz", data, "application/gzip"))
        at.run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        sessions[name] = at
    for name, at in sessions.items():
        (upload,) = at.session_state["uploads"]
        assert upload.title == f"Upload: {name}.json.gz" and upload.trace_bytes == b""  # bytes let go
        assert at.session_state["subject"] == upload.key
        at.session_state["view"] = "Trace"
        at.run()
        assert not at.exception
        shown = "\n".join(str(c.value) for c in at.caption)
        assert "not kept on the server once read" in shown
    assert sessions["alice"].session_state["_owner"] != sessions["bob"].session_state["_owner"]


def _reader_processes() -> list:
    import psutil

    return [c for c in psutil.Process().children(recursive=True) if "lab.read.reader" in " ".join(c.cmdline())]


def _kill_the_reader_that_starts_reading(stop: threading.Event, killed: list) -> None:
    """Kill whichever of this process's readers grows by 15 MB (it is parsing): SIGKILL, mid-read."""
    idle = {p.pid: p.memory_info().rss for p in _reader_processes()}
    while not stop.is_set() and not killed:
        for proc in _reader_processes():
            try:
                if proc.memory_info().rss > idle.get(proc.pid, 10**12) + 15 * 2**20:
                    proc.kill()
                    killed.append(proc.pid)
            except Exception:  # noqa: BLE001 - it exited meanwhile
                pass
        time.sleep(0.01)


def test_a_page_session_whose_reader_dies_gets_one_clear_error_and_the_next_upload_works(medium):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.run()  # the readers have warmed up (the first page read the default sample)
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_the_reader_that_starts_reading, args=(stop, killed))
    killer.start()
    try:
        at.file_uploader(key="upload").set_value(("medium.json.gz", gzip.compress(medium, 1), "application/gzip"))
        at.run()
    finally:
        stop.set()
        killer.join()
    assert killed, "no reader was seen reading"
    assert not at.exception
    (error,) = [e.value.replace("\\", "") for e in at.error]
    assert "medium.json.gz cannot be opened: the trace reader stopped (exit code -9, SIGKILL)" in error
    assert not at.session_state.get("uploads")
    at.file_uploader(key="upload").set_value(("seed.json.gz", SEED.read_bytes(), "application/gzip"))
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [u.title for u in at.session_state["uploads"]] == ["Upload: seed.json.gz"]
    assert at.session_state["subject"] == at.session_state["uploads"][0].key


# ------------------------------------------------------------------------------ queue


def test_waiting_reads_keep_their_order_and_small_reads_pass_them(medium):
    # Every JSON over 1 MiB counts as large here; 2 readers: one for large reads, one kept free.
    with started(ReaderPool(settings=HostSettings(reader_count=2), small_read_json_bytes=2**20)) as pool:
        assert pool.wait_ready(START_S)
        time.sleep(1.0)  # both readers up
        large = [pool.submit(medium, label=f"large_{i}.json") for i in range(3)]
        assert [t.lane for t in large] == [Lane.LARGE] * 3
        deadline = time.monotonic() + START_S
        while large[0].poll().state != ReadState.READING:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert [t.poll().queue_position for t in large[1:]] == [1, 2]
        small = pool.read(SEED.read_bytes(), label="sample")  # the reader kept free takes it at once
        assert len(small.trace.events) > 100
        assert not large[2].done() and large[2].poll().state == ReadState.QUEUED
        assert pool.health().waiting_large >= 1
        finished = []
        for ticket in large:
            ticket.result(timeout=300)
            finished.append(ticket.id)
        assert finished == sorted(finished)
        assert all(t.poll().reader is not None for t in large)


def test_the_page_status_line_says_position_and_stage():
    from lab.read import ReadStatus
    from ui.upload import describe_read

    queued = ReadStatus(id=3, state="queued", stage=None, queue_position=3, elapsed_s=4.04, reader=None, lane="large")
    assert describe_read(queued, "big.json.gz") == (
        "big.json.gz: waiting for a trace reader — position 3 (2 uploads ahead) · 4 s")
    first = ReadStatus(id=3, state="queued", stage=None, queue_position=1, elapsed_s=1.0, reader=None, lane="large")
    assert "position 1 (next to be read)" in describe_read(first, "a")
    reading = ReadStatus(id=3, state="reading", stage="analysing", queue_position=None, elapsed_s=9.5, reader=1,
                         lane="large")
    assert describe_read(reading, "big.json.gz") == "big.json.gz: analysing on reader 1 · 9 s"
    just_begun = ReadStatus(id=3, state="reading", stage="parsing", queue_position=None, elapsed_s=0.4, reader=1,
                            lane="small")
    assert describe_read(just_begun, "a.json") == "a.json: parsing on reader 1"  # no "0 s" in the first second

"""An upload's read begins when Streamlit stores the file (``ui.early_read``), and the page run
that brings the file claims it instead of queueing a second read.

Real reader processes and Streamlit's own file store (the ``MemoryUploadedFileManager`` its
server uses, and AppTest's script run for the page's side); nothing is mocked. What must hold:
the read begun on arrival is the read the page would have queued (same bytes, same result as
``load_trace`` of them), the page takes it over in place of reading twice, every read it does
not take is cancelled, and the upload itself is never changed or failed by any of this.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec
from streamlit.testing.v1 import AppTest

from lab.core import HostSettings
from lab.read import ReaderPool, ReadFailed, kept_key
from lab.trace import category_counts, load_trace
from ui.early_read import EarlyReads
from ui.state import digest_of

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "tests" / "data" / "matmul_add_4096_bf16.json.gz"
START_S = 120  # a reader's imports and warm-up read on 2 busy cores
pytestmark = [pytest.mark.apptest, pytest.mark.pool, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def pool():
    pool = ReaderPool(settings=HostSettings(reader_count=1)).start()
    assert pool.wait_ready(START_S), pool.health().last_error
    yield pool
    pool.shutdown()


def _idle(pool: ReaderPool) -> None:
    deadline = time.monotonic() + START_S
    while not pool.has_idle_reader():
        assert time.monotonic() < deadline, pool.health()
        time.sleep(0.01)


def _file(file_id: str, data: bytes, name: str = "trace.json.gz") -> UploadedFileRec:
    return UploadedFileRec(file_id=file_id, name=name, type="application/gzip", data=data)


def _settled(ticket) -> bool:
    deadline = time.monotonic() + START_S
    while not ticket.done():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return True


def test_a_stored_trace_is_read_at_once_and_claimed_with_its_digest(pool):
    _idle(pool)
    data = SEED.read_bytes()
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    early = EarlyReads(pool, pool.settings)
    assert early.install(manager)
    early.admit("s1")
    manager.add_file(session_id="s1", file=_file("f1", data))
    assert [f.data for f in manager.get_files("s1", ["f1"])] == [data]  # Streamlit still holds the file
    assert early.pending() == 1
    assert early.digest("s1", "f1", len(data)) == digest_of(data)
    claimed = early.take("s1", "f1", len(data))
    assert claimed is not None and claimed.digest == digest_of(data) and early.pending() == 0
    outline = claimed.ticket.result(timeout=START_S)  # the page's read: the outline, the trace kept in its reader
    expected = load_trace(data)
    assert outline.key == kept_key(digest_of(data)) and outline.trace.event_count == len(expected.events)
    pd.testing.assert_frame_equal(outline.trace.categories, category_counts(expected))
    assert early.take("s1", "f1", len(data)) is None  # taken once


def test_what_the_upload_box_would_not_read_as_one_trace_is_left_to_the_page(pool):
    _idle(pool)
    data = SEED.read_bytes()
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    early = EarlyReads(pool, HostSettings(reader_count=1, max_upload_mb=1))
    early.install(manager)
    early.admit("s")
    manager.add_file(session_id="s", file=_file("zip", data, name="ranks.zip"))  # unpacked by the page first
    manager.add_file(session_id="s", file=_file("big", b" " * (2 * 2**20), name="big.json"))  # over the host's MB
    assert early.pending() == 0
    assert len(manager.get_files("s", ["zip", "big"])) == 2  # both stored as ever


def test_no_early_read_while_every_reader_is_busy(pool):
    _idle(pool)
    data = SEED.read_bytes()
    busy = pool.submit(data, label="someone else's")
    deadline = time.monotonic() + START_S
    while pool.has_idle_reader():  # until the reader holds it
        assert time.monotonic() < deadline and not busy.done()
        time.sleep(0.001)
    early = EarlyReads(pool, pool.settings)
    early.admit("s")
    assert early.on_file("s", _file("f", data)) is False
    assert early.pending() == 0
    busy.result(timeout=START_S)


def test_a_session_never_shown_the_upload_box_gets_no_early_read(pool):
    """A host with a passcode: a browser that has not signed in never ran the page past the gate,
    so its PUTs (made by hand) are stored by Streamlit as ever but read by nobody."""
    _idle(pool)
    data = SEED.read_bytes()
    early = EarlyReads(pool, pool.settings)
    assert early.on_file("stranger", _file("f", data)) is False
    early.admit("member")
    assert early.on_file("stranger", _file("f", data)) is False and early.pending() == 0
    assert early.on_file("member", _file("f", data)) is True


def test_a_newer_file_of_the_session_replaces_its_early_read_and_unclaimed_ones_are_cancelled(pool):
    _idle(pool)
    data = SEED.read_bytes()
    early = EarlyReads(pool, pool.settings, claim_within_s=0.5)
    early.admit("s")
    assert early.on_file("s", _file("old", data))
    first = early._entries[("s", "old")].future.result(timeout=START_S)
    _settled(first.ticket)  # read (nobody claimed it); the reader is free again
    assert early.on_file("s", _file("new", data))
    assert early.pending() == 1 and early.take("s", "old", len(data)) is None
    second = early._entries[("s", "new")].future.result(timeout=START_S)
    time.sleep(0.6)
    assert early.take("s", "new", len(data)) is None  # past claim_within_s: dropped
    assert second.ticket.done()  # and its read cancelled at once (or, that quick, already read)


def test_an_early_read_that_cannot_start_never_fails_the_upload(pool):
    class Broken:
        plan = pool.plan

        def has_idle_reader(self):
            raise RuntimeError("the pool is gone")

    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    EarlyReads(Broken(), pool.settings).install(manager)  # type: ignore[arg-type]
    manager.add_file(session_id="s", file=_file("f", b"{}", name="t.json"))
    assert len(manager.get_files("s", ["f"])) == 1


def test_installing_twice_reports_to_the_newest_only(pool):
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    seen: list[str] = []

    class Counting(EarlyReads):
        def on_file(self, session_id, file):
            seen.append(self.tag)
            return False

    a, b = Counting(pool, pool.settings), Counting(pool, pool.settings)
    a.tag, b.tag = "a", "b"
    a.install(manager)
    b.install(manager)
    manager.add_file(session_id="s", file=_file("f", b"{}", name="t.json"))
    assert seen == ["b"]


# ------------------------------------------------------------------ the page claims it


def _page():
    import time

    import streamlit as st
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    from streamlit.runtime.uploaded_file_manager import UploadedFileRec

    from lab.access import RateLimiter
    from lab.core import HostSettings
    from lab.read import ReaderPool
    from ui import access, upload
    from ui.early_read import EarlyReads

    seed = st.session_state["seed"]
    ctx = get_script_run_ctx()
    settings = HostSettings(reader_count=1, uploads_per_min=1)
    pool = ReaderPool(settings=settings).start()
    try:
        assert pool.wait_ready(120)
        while not pool.has_idle_reader():
            time.sleep(0.01)
        early = EarlyReads(pool, settings)
        early.install(ctx.uploaded_file_mgr)
        early.admit(ctx.session_id)  # as upload_box does once the page shows the uploader
        limiter = RateLimiter()
        if st.session_state.get("over_the_limit"):  # this visitor's one upload a minute is spent
            assert access.refusal("upload", settings, limiter) is None
        ctx.uploaded_file_mgr.add_file(ctx.session_id, UploadedFileRec(
            file_id="trace-1", name="trace.json.gz", type="application/gzip", data=seed))
        begun = early._entries[(ctx.session_id, "trace-1")].future.result(timeout=60)
        outcome = upload.accept_upload("trace.json.gz", seed, settings, pool, limiter=limiter, file_id="trace-1",
                                       early=early)
        if isinstance(outcome, str):
            st.session_state["result"] = ("refused", outcome, begun.ticket.done(), early.pending())
        else:
            parsed = outcome.ticket.result(timeout=120)
            st.session_state["result"] = ("read", outcome.ticket is begun.ticket, parsed.trace.event_count,
                                          early.pending())
    finally:
        pool.shutdown()


def _app(**state) -> AppTest:
    at = AppTest.from_function(_page, default_timeout=300)
    at.session_state["seed"] = SEED.read_bytes()
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def test_the_page_run_claims_the_read_begun_on_arrival_instead_of_reading_again():
    at = _app()
    assert not at.exception, at.exception
    kind, same_ticket, n_events, left = at.session_state["result"]
    assert kind == "read"
    assert same_ticket is True  # the read begun on arrival, not a second one
    assert n_events == len(load_trace(SEED.read_bytes()).events)
    assert left == 0


def test_a_refused_upload_cancels_the_read_begun_on_arrival():
    at = _app(over_the_limit=True)
    assert not at.exception, at.exception
    kind, why, begun_done, left = at.session_state["result"]
    assert kind == "refused" and "minute" in why.lower(), why
    assert begun_done is True  # cancelled at once (or, that quick, already read): not left reading
    assert left == 0


def test_a_released_early_read_is_cancelled_at_once(pool):
    _idle(pool)
    early = EarlyReads(pool, pool.settings)
    early.admit("s")
    assert early.on_file("s", _file("f", SEED.read_bytes()))
    claimed = early.take("s", "f", len(SEED.read_bytes()))
    assert claimed is not None and not claimed.ticket.done()  # read on arrival, still under way
    EarlyReads.release(claimed)
    assert claimed.ticket.done()  # settled at once, not left to run
    with pytest.raises(ReadFailed, match="(?i)cancel"):
        claimed.ticket.result(timeout=0)

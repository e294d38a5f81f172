"""A reader killed while the page holds its trace's key: the page's next query is answered from a
re-read, without the visitor noticing.

The page (AppTest, as tests/test_app.py) opens an upload; its reader keeps the parsed trace under
the upload's key (``lab.read.kept``). Every reader of the server's pool is then killed. The
visitor's next click that needs a reader — the Table's "Group by input shape", a job sent as keys —
is answered by the restarted reader, which reads the trace again from the server's copy of its
bytes: the page shows the grouped table, with no error, and the pool counts one re-read. The rows
shown are compared with ``key_averages`` grouped by shape on the same trace parsed here. The
Timeline tab, a view query (``lab.views.queries.timeline_window``), is answered the same way.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

import lab.views as lv  # noqa: E402
from lab.core import HostSettings  # noqa: E402
from lab.read import Job, JobInput, JobKind, ReaderPool  # noqa: E402
from lab.read.here import parse  # noqa: E402
from lab.read.jobs import run_job  # noqa: E402
from tests.test_app import APP, ROOT, TIMEOUT_S, assert_healthy, charts, errors, open_view  # noqa: E402

pytestmark = [pytest.mark.apptest, pytest.mark.pool, pytest.mark.timeout(900)]
# Not a trace another page test groups by shape: the server's job cache must not hold its result.
TRACE = ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz"
RESTART_S = 180  # a new reader's imports and warm-up read on 2 busy cores


@pytest.fixture
def pools(monkeypatch) -> list[ReaderPool]:
    """The pools the page submits reads to while the test runs (the server's, kept across page
    runs by ``st.cache_resource``)."""
    seen: list[ReaderPool] = []
    submit = ReaderPool.submit

    def recorded(self, *args, **kwargs):
        if self not in seen:
            seen.append(self)
        return submit(self, *args, **kwargs)

    monkeypatch.setattr(ReaderPool, "submit", recorded)
    return seen


def kill_every_reader(pool: ReaderPool) -> None:
    """SIGKILL each live reader, then wait until each has been replaced and is idle."""
    before = {r.index: r.pid for r in pool.health().readers if r.alive}
    assert before, pool.health()
    for pid in before.values():
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + RESTART_S
    while True:
        now = {r.index: r for r in pool.health().readers}
        if all(now[i].pid not in (pid, None) and now[i].state == "idle" for i, pid in before.items()):
            return
        assert time.monotonic() < deadline, pool.health()
        time.sleep(0.05)


def by_shape_rows(frame) -> set[tuple[str, str]]:
    """(name, input shapes) of each row the table shows or the frame holds."""
    name = "Name" if "Name" in frame.columns else "name"
    shapes = next(c for c in frame.columns if c.lower().replace(" ", "_") == "input_shapes")
    return {(str(n), str(s)) for n, s in zip(frame[name], frame[shapes], strict=True)}


def test_a_reader_killed_while_the_page_holds_its_key_answers_the_next_click_from_a_re_read(pools):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    at.file_uploader(key="upload").set_value((TRACE.name, TRACE.read_bytes(), "application/gzip"))
    at.run()
    assert_healthy(at)
    assert errors(at) == [] and at.session_state["subject"].startswith("upload:")
    (pool,) = pools
    rereads, restarts = pool.health().rereads, sum(r.restarts for r in pool.health().readers)

    kill_every_reader(pool)
    open_view(at, "Table")
    at.session_state["tbl_rows"] = 500  # every row, so the whole grouped table can be compared
    at.toggle(key="tbl_shape").set_value(True)
    at.run()
    assert_healthy(at)
    assert errors(at) == []

    health = pool.health()
    assert health.rereads == rereads + 1  # answered from a re-read of the server's copy
    assert sum(r.restarts for r in health.readers) > restarts
    parsed = parse(str(TRACE), settings=HostSettings())
    expected = run_job(Job(kind=JobKind.BY_SHAPE), JobInput(traces=(parsed.trace,), analyses=(parsed.analysis,)))
    shown = at.dataframe[0].value
    assert by_shape_rows(shown) == by_shape_rows(expected.key_averages)


def test_the_timeline_after_its_reader_was_killed_is_drawn_from_a_re_read(pools):
    """The Timeline tab of an upload whose reader died: the window's marks come from the restarted
    reader's re-read, equal to the window built here from the trace parsed in this process."""
    trace = ROOT / "tests" / "data" / "matmul_add_4096_bf16_compiled.json.gz"  # no other page test's Timeline
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    at.file_uploader(key="upload").set_value((trace.name, trace.read_bytes(), "application/gzip"))
    at.run()
    assert_healthy(at)
    assert errors(at) == [] and at.session_state["subject"].startswith("upload:")
    (pool,) = pools
    rereads = pool.health().rereads

    kill_every_reader(pool)
    open_view(at, "Timeline")
    assert errors(at) == []
    assert pool.health().rereads == rereads + 1  # the window was drawn from a re-read of the server's copy

    parsed = parse(str(trace), settings=HostSettings())
    span = max(parsed.analysis.utilization.trace_span_us, 1.0)
    expected = lv.timeline_window((parsed.trace,), (parsed.analysis,), (parsed.explanation,), start_us=0.0,
                                  end_us=span)
    caption = next(c.value for c in at.caption if "events in this window drawn as themselves" in c.value)
    assert caption.startswith(f"{expected.shown_events:,} of {expected.total_events:,} events"), caption
    assert len(charts(at)) == 1

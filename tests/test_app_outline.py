"""The page holds outlines, never a parsed trace: every result a reader sends the server while a
visitor opens an upload, each of its views, compare and a lesson's H200 recording is an
``Outline`` or a view's answer — no ``Parsed``, no ``Trace``, no ``Analysis`` — and the views
that need the trace's events (the Timeline, the Memory chart, the Trace tab's categories, compare's
timelines, the lesson's reveal) still draw.
"""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from lab.analysis import Analysis  # noqa: E402
from lab.read import Outline, Parsed  # noqa: E402
from lab.read.queue import ReaderClient  # noqa: E402
from lab.trace import Trace  # noqa: E402
from lab.views.timeline import TimelineData  # noqa: E402
from tests.test_app import APP, H200_TRACE, TIMEOUT_S, assert_healthy, charts, errors, open_view  # noqa: E402

pytestmark = [pytest.mark.apptest, pytest.mark.pool, pytest.mark.timeout(900)]


def frames_in(value, depth: int = 0) -> list[str]:
    """The names of the event-level objects inside ``value`` (dataclasses and containers walked)."""
    if isinstance(value, Parsed | Trace | Analysis):
        return [type(value).__name__]
    if depth > 4:
        return []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [n for f in dataclasses.fields(value) for n in frames_in(getattr(value, f.name), depth + 1)]
    if isinstance(value, list | tuple):
        return [n for v in value[:50] for n in frames_in(v, depth + 1)]
    return []


@pytest.fixture
def received(monkeypatch) -> list:
    """Every result a reader sends the server while the test runs."""
    seen: list = []
    done = ReaderClient.on_done

    def recorded(self, ticket, message, value):
        out = done(self, ticket, message, value)
        seen.append(out)
        return out

    monkeypatch.setattr(ReaderClient, "on_done", recorded)
    return seen


def test_no_parsed_trace_reaches_the_server_while_every_view_still_draws(received):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    at.file_uploader(key="upload").set_value(("mine.json.gz", H200_TRACE.read_bytes(), "application/gzip"))
    at.run()
    assert_healthy(at)
    assert errors(at) == [] and at.session_state["subject"].startswith("upload:")
    for view in ("Summary", "Table", "Timeline", "Memory", "Trace", "TensorBoard", "Insights"):
        open_view(at, view)
        assert errors(at) == [], view
    open_view(at, "Timeline")
    assert len(charts(at)) == 1
    at.session_state["cmp_a"] = at.session_state["subject"]
    at.session_state["cmp_b"] = "sample:matmul_add_4096_bf16_compiled.json.gz"
    open_view(at, "Compare")
    assert errors(at) == [] and len(charts(at)) == 2  # both timelines, each a window asked of a reader
    at.selectbox(key="lesson_key").set_value("sdpa_backends")
    at.run()
    next(b for b in at.button if b.label == "Open the H200 recording").click()
    at.run()
    assert_healthy(at)
    assert errors(at) == []

    assert received, "no reader result reached the server"
    assert [n for v in received for n in frames_in(v)] == []
    assert any(isinstance(v, Outline) for v in received)
    assert any(isinstance(v, TimelineData) for v in received)

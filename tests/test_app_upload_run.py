"""An upload opens in the page run it came with: that run waits for the read before
"Showing", and draws the upload's Summary itself — no second page run from the top (which cost
0.1-0.2 s of server time and a second browser redraw, bench/bench_upload_verdict.py). The
own-trace lesson's expander stays above the views, its questions asked once the view is drawn.
AppTest, as tests/test_app.py; expectations computed from the trace file here.
"""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
import streamlit  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from lab.analysis import (  # noqa: E402
    Run,  # noqa: E402
    analyze,
)
from lab.judge import judge_trace  # noqa: E402
from lab.teach import own_questions  # noqa: E402
from lab.trace.load import load_trace  # noqa: E402
from tests.test_app import APP, H200_TRACE, ROOT, TIMEOUT_S, assert_healthy, errors  # noqa: E402

pytestmark = [pytest.mark.apptest, pytest.mark.timeout(900)]
OTHER_TRACE = ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz"  # not the first visit's sample


@pytest.fixture
def at():
    app = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    app.run()
    return app


@pytest.fixture
def page_runs(monkeypatch) -> dict[str, int]:
    """How many page runs began (``state.all_subjects`` is called once in each) and how many
    ``st.rerun`` calls were made, while the test runs."""
    from ui import state

    counts = {"runs": 0, "reruns": 0}
    all_subjects, rerun = state.all_subjects, streamlit.rerun

    def counted_subjects():
        counts["runs"] += 1
        return all_subjects()

    def counted_rerun(*args, **kwargs):
        counts["reruns"] += 1
        return rerun(*args, **kwargs)

    monkeypatch.setattr(state, "all_subjects", counted_subjects)
    monkeypatch.setattr(streamlit, "rerun", counted_rerun)
    return counts


def _verdict(path) -> str:
    """The verdict the Summary leads with: the judged one (the finding with the largest saving)."""
    trace = load_trace(path.read_bytes())
    analysis = analyze(trace)
    return judge_trace(trace, analysis).verdict


def test_the_run_that_accepts_an_upload_shows_its_verdict_without_a_second_run(at, page_runs):
    expected, sample_verdict = _verdict(OTHER_TRACE), _verdict(H200_TRACE)
    assert expected != sample_verdict  # else the upload's Summary could not be told from the sample's
    assert sample_verdict in [t.value for t in at.text]  # a first visit: the sample's Summary
    page_runs.update(runs=0, reruns=0)
    at.file_uploader(key="upload").set_value((OTHER_TRACE.name, OTHER_TRACE.read_bytes(), "application/gzip"))
    at.run()
    assert_healthy(at)
    assert errors(at) == []
    assert at.session_state["subject"].startswith("upload:")
    shown = [t.value for t in at.text]
    assert expected in shown and sample_verdict not in shown
    assert page_runs == {"runs": 1, "reruns": 0}
    # The uploader let its bytes go (ui.upload._release): the next page run opens nothing again.
    at.run()
    assert page_runs == {"runs": 2, "reruns": 0}
    assert [s.title for s in at.session_state["uploads"]] == [f"Upload: {OTHER_TRACE.name}"]


def test_the_own_trace_lesson_of_an_upload_sits_above_its_views(at):
    at.file_uploader(key="upload").set_value((OTHER_TRACE.name, OTHER_TRACE.read_bytes(), "application/gzip"))
    at.run()
    assert_healthy(at)
    trace = load_trace(OTHER_TRACE.read_bytes())
    asked = own_questions(Run("upload", trace, analyze(trace)))
    assert asked
    digest = next(s.digest for s in at.session_state["uploads"])
    radios = {r.label for r in at.radio if str(r.key).startswith(f"own_{digest}_")}
    assert radios == {q.text for q in asked}
    labels = [type(node).__name__ + ":" + str(getattr(node, "label", "")) for node in _walk(at.main)]
    lesson = next(i for i, x in enumerate(labels) if x.startswith("Expander:Predict, then look"))
    assert lesson < labels.index("Tab:Summary")  # drawn above the views, filled after them


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)

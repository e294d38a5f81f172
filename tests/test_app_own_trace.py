"""Your own trace as a lesson on the page (ui/own_trace.py): the questions before anything of
their answers, the answers only after *Lock in*, for the sample a first visit shows and for an
upload. AppTest, as tests/test_app.py."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from lab.analysis import (
    Run,  # noqa: E402
    analyze,  # noqa: E402
)
from lab.teach import own_questions  # noqa: E402
from lab.trace.load import load_trace  # noqa: E402
from lab.views import title_lines  # noqa: E402
from tests.test_app import APP, H200_TRACE, TIMEOUT_S, assert_healthy, plain  # noqa: E402

pytestmark = [pytest.mark.apptest, pytest.mark.timeout(900)]


@pytest.fixture
def at():
    app = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    app.run()
    return app


def page_text(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [t.value for t in at.text]
    return plain("\n".join(parts))


def own_radios(at) -> list:
    return [r for r in at.radio if str(r.key).startswith("own_")]


def test_own_trace_questions_reveal_only_after_the_prediction(at):
    assert_healthy(at)
    trace = load_trace(H200_TRACE.read_bytes())  # the first visit's sample is this recording
    run = Run("sample", trace, analyze(trace))
    answers = {q.key: q.answer([run]) for q in own_questions(run)}
    assert {"own.top_self_cpu", "own.gpu_busy", "own.top_kernel_share", "own.bound"} <= set(answers)
    radios = own_radios(at)
    assert {r.label for r in radios} >= {q.text for q in own_questions(run)}
    before = page_text(at)
    assert not any(a.measured_text in before for a in answers.values())  # nothing of the answer yet
    assert "Answer:" not in before
    for r in radios:  # predict the first choice of each
        r.set_value(r.options[0])
    next(b for b in at.button if b.label == "Lock in and reveal").click()
    at.run()
    assert_healthy(at)
    after = page_text(at)
    for key, answer in answers.items():
        assert answer.measured_text in after, key
        assert f"Answer: **{answer.choice}**" in after, key
    assert own_radios(at) == []  # predicted: no form left for this trace
    score = at.session_state["teach_score"]
    assert sum(k.startswith("own.") for k in score) == len(answers)


def test_an_attendees_own_trace_predictions_count_in_the_room_like_a_lessons(monkeypatch, tmp_path):
    """In a room, your own trace's questions count like lesson questions — the
    instructor sees each prediction and, once revealed, the measured answer."""
    from tests.test_app_room import button, healthy, page

    monkeypatch.setenv("PROFILER_LAB_DATABASE_URL", f"sqlite:///{tmp_path / 'rooms.sqlite3'}")
    teacher = page()
    button(teacher, "Open a room (instructor)").click()
    teacher.run()
    healthy(teacher)
    code = teacher.session_state["room_instructor"].code
    attendee = page()
    attendee.text_input(key="room_code").input(code)
    attendee.text_input(key="room_name").input("Ada")
    button(attendee, "Join the room").click()
    attendee.run()
    healthy(attendee)
    trace = load_trace(H200_TRACE.read_bytes())  # the first visit's sample
    run = Run("sample", trace, analyze(trace))
    answers = {q.key: q.answer([run]) for q in own_questions(run)}
    for r in own_radios(attendee):
        r.set_value(r.options[0])
    button(attendee, "Lock in and reveal").click()
    attendee.run()
    healthy(attendee)

    teacher.run()
    healthy(teacher)
    captions = [plain(c.value) for c in teacher.caption]
    for key, answer in answers.items():
        text = next(q.text for q in own_questions(run) if q.key == key)
        lines = title_lines(text)  # the chart's title: the question in lines that fit the chart
        assert any(all(line in plain(str(c.proto.spec)) for line in lines)
                   for c in teacher.get("vega_lite_chart")), key
        assert f"1 answer · measured: {answer.choice} (1)" in captions, (key, captions)

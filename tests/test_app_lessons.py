"""The lessons of ``tests/recording_brute.LESSON_KEYS`` on the page, through AppTest: each one's
H200 recording opens after the predictions are locked in, its lesson check lists its signals and
the reveal answers every question it asked, with no exception or warning."""

from __future__ import annotations

import pytest

from lab.lessons import questions_for
from tests import recording_brute
from tests.test_app import assert_healthy, at, plain  # noqa: F401 - ``at`` is the page fixture
from tests.test_lesson_recordings import recording

pytestmark = [pytest.mark.apptest, pytest.mark.timeout(600)]


@pytest.mark.parametrize("key", recording_brute.LESSON_KEYS)
def test_lesson_recording_opens_and_the_reveal_answers(at, key):  # noqa: F811
    at.selectbox(key="lesson_key").set_value(key)
    at.run()
    asked = questions_for(key, "cuda")
    for q in asked:  # predict the first choice of each: right or wrong, the reveal scores it
        at.radio(key=f"predict_{q.key}").set_value(q.choices[0])
    next(b for b in at.button if b.label == "Lock in my predictions").click()
    at.run()
    at.button(key="open_lesson_recording").click()
    at.run()
    assert_healthy(at)
    assert all(s.startswith("sample:") for s in at.session_state["lesson_check"]["subjects"])
    text = [plain(m.value) for m in at.markdown]
    answers = [t for t in text if t.startswith("Answer: **")]
    assert len(answers) == len(asked), answers
    _, runs = recording(key)
    for q in asked:  # the page reveals the choice computed from the same recording
        assert any(f"**{q.text}**" in t for t in text), q.text
        assert any(t.startswith(f"Answer: **{q.answer(runs).choice}**") for t in answers), (q.key, answers)
    checks = [t for t in text if any(i in t for i in (":material/check_circle:", ":material/cancel:",
                                                      ":material/info:")) and " — " in t]
    assert checks and not any(":material/cancel:" in c for c in checks), checks
    assert any("predictions" in c.value and "right" in c.value for c in at.caption)

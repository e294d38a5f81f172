"""Predict → reveal on the page, through AppTest: a prediction counts only if it was made before
its answer could be seen (a reveal, the lesson's explanation, an opened recording); the score is
one figure, the same in the sidebar and the reveal; a lesson's Compare opens that lesson's pair
even after unrelated runs; a finished lesson folds away when a newer run arrives.

The right choices are computed from the lesson's H200 recording (``Question.answer`` on its runs,
which tests/test_questions.py checks against the raw JSON), so a test can predict right or wrong
on purpose.
"""

from __future__ import annotations

import pytest

from lab.lessons import questions_for
from tests.test_app import assert_healthy, at, open_view, plain, submit  # noqa: F401 - ``at`` is the page fixture
from tests.test_lesson_recordings import recording

pytestmark = [pytest.mark.apptest, pytest.mark.timeout(900)]

KEY = "calls"  # a pair with an H200 recording whose questions a GPU run answers


def _right(key: str) -> dict[str, str]:
    """Question key → the right choice on the lesson's H200 recording."""
    _, runs = recording(key)
    return {q.key: q.answer(runs).choice for q in questions_for(key, "cuda")}


def _wrong(key: str) -> dict[str, str]:
    right = _right(key)
    return {q.key: next(c for c in q.choices if c != right[q.key]) for q in questions_for(key, "cuda")}


def _pick_lesson(page, key: str = KEY) -> None:
    page.selectbox(key="lesson_key").set_value(key)
    page.run()


def _predict(page, choices: dict[str, str]) -> None:
    for key, choice in choices.items():
        page.radio(key=f"predict_{key}").set_value(choice)
    next(b for b in page.button if b.label == "Lock in my predictions").click()
    page.run()


def _open_recording(page) -> None:
    page.button(key="open_lesson_recording").click()
    page.run()
    assert_healthy(page)


def _score(where) -> list[str]:
    return [c.value for c in where.caption if c.value.startswith("Your predictions:")]


def _answers(page) -> list[str]:
    return [plain(m.value) for m in page.markdown if plain(m.value).startswith("Answer: **")]


def test_no_scored_relock_after_a_reveal_and_one_score_everywhere(at):  # noqa: F811
    _pick_lesson(at)
    _predict(at, _wrong(KEY))
    _open_recording(at)
    n = len(_right(KEY))
    assert _score(at.sidebar) == _score(at.main) == [f"Your predictions: 0 of {n} right"]
    # The answers are on the page: the radios are locked, and a request that sets them to the
    # right choices anyway (as a forged one could) and locks in again changes nothing that counts.
    for key, choice in _right(KEY).items():
        assert at.radio(key=f"predict_{key}").disabled, key
        at.session_state[f"predict_{key}"] = choice
    _predict(at, {})
    assert_healthy(at)
    assert at.session_state["teach_predictions"] == _wrong(KEY)
    assert _score(at.sidebar) == _score(at.main) == [f"Your predictions: 0 of {n} right"]
    assert all(":material/cancel:" in plain(m.value) for m in at.markdown
               if any(f"**{q.text}**" in plain(m.value) for q in questions_for(KEY, "cuda")))


def test_a_prediction_after_the_recording_opened_is_not_scored(at):  # noqa: F811
    _pick_lesson(at)
    _open_recording(at)  # no prediction: the recording shows every answer
    assert all("(no prediction)" in a for a in _answers(at)), _answers(at)
    _predict(at, _right(KEY))
    assert_healthy(at)
    assert KEY + "." not in "".join(at.session_state["teach_predictions"])
    assert at.session_state["teach_unscored"] == _right(KEY)
    assert all(v is None for k, v in at.session_state["teach_score"].items() if k.startswith(KEY + "."))
    assert _score(at.sidebar) == _score(at.main) == []  # nothing scored, nowhere
    assert all("not scored" in a for a in _answers(at)), _answers(at)
    assert any("made after its answer was shown: not scored" in c.value for c in at.sidebar.caption)


def test_the_explanation_locks_the_questions_it_answers(at):  # noqa: F811
    """A lesson's check and explanation (here of one recording) state its figures: a question of
    that lesson predicted afterwards is not scored, one predicted before still is."""
    _pick_lesson(at, "cuda_graphs")
    first, *rest = questions_for("cuda_graphs", "cuda")
    _predict(at, {first.key: _right("cuda_graphs")[first.key]})
    _open_recording(at)
    _predict(at, {q.key: _right("cuda_graphs")[q.key] for q in rest})
    assert at.session_state["teach_score"][first.key] is True
    assert all(at.session_state["teach_score"][q.key] is None for q in rest)
    assert _score(at.sidebar) == _score(at.main) == ["Your predictions: 1 of 1 right"]


def test_a_lessons_compare_opens_its_pair_after_unrelated_runs_and_folds_after_a_new_run(at):  # noqa: F811
    submit(at, cfg_m=32, cfg_k=32, cfg_n=32, cfg_step_label="mine_one")
    submit(at, cfg_m=48, cfg_k=48, cfg_n=48, cfg_step_label="mine_two")
    assert_healthy(at)
    _pick_lesson(at, "eager_vs_compile")
    _open_recording(at)
    open_view(at, "Compare")
    pair = (at.session_state["cmp_a"], at.session_state["cmp_b"])
    assert pair[0].startswith("sample:matmul_add_4096x4096x4096_bfloat16"), pair
    assert pair[1].startswith("sample:matmul_add_compiled_4096x4096x4096_bfloat16"), pair
    assert (at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value) == pair
    assert not [e.label for e in at.expander if "finished" in e.label]  # the lesson is the latest thing
    # A newer run arrives: the lesson's boxes fold away, and Compare puts the new run first again.
    submit(at, cfg_m=40, cfg_k=40, cfg_n=40, cfg_step_label="mine_three")
    assert_healthy(at)
    folded = [e.label for e in at.expander if "finished: a newer result arrived" in e.label]
    assert any(label.startswith("Lesson check — ") for label in folded), folded
    assert any(label.startswith("Reveal — ") for label in folded), folded
    open_view(at, "Compare")
    runs = at.session_state["runs"]
    assert (at.session_state["cmp_a"], at.session_state["cmp_b"]) == (runs[-2].key, runs[-1].key)

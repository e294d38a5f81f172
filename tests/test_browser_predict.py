"""Predict → reveal in a real browser (the AppTest twins are in tests/test_app_predict.py): a
locked prediction cannot be re-locked into a scored one after the reveal, the score reads the same
in the sidebar and the reveal, a choice made once the recording showed the answers is kept apart
(not scored), and a lesson's Compare opens its pair after an unrelated run. The right choices are
computed from the lesson's H200 recording (``Question.answer`` on its runs), so a test predicts
wrong on purpose. Recordings only, and one 64³ CPU run: fast. Screenshots go to artifacts/ (browser_predict_*.png)."""

from __future__ import annotations

import re

import pytest
from lessonruns import h200_runs

from lab.lessons import LESSONS, questions_for
from tests.browser_pages import ARTIFACTS, app_server, open_app_ready, pick_lesson, wait_page_idle

RUN_S = 300
UI_S = 120
KEY = "calls"  # a pair with an H200 recording that answers every question a CPU host asks
SCORE = re.compile(r"Your predictions: \d+ of \d+ right")

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def server(playwright_api):
    with app_server("browser_predict_server.log") as url:
        yield url


@pytest.fixture
def page(browser, server, playwright_api):
    page = open_app_ready(playwright_api, browser, server, width=1280, height=1600, ui_s=UI_S, run_s=RUN_S)
    try:
        yield page
    finally:
        page.context.close()


def _sidebar(page):
    return page.locator('[data-testid="stSidebar"]')


def _main(page):
    return page.locator('[data-testid="stMain"]')


def _lock_in(page) -> None:
    _sidebar(page).get_by_role("button", name="Lock in my predictions").click()
    wait_page_idle(page, RUN_S)


def _open_recording(page) -> None:
    _sidebar(page).get_by_role("button", name="Open the H200 recording").click()
    wait_page_idle(page, RUN_S)
    _main(page).get_by_text("Reveal — ").first.wait_for(timeout=RUN_S * 1000)


def _predict_form(page):
    return _sidebar(page).locator('[data-testid="stForm"]').filter(has_text="Predict first")


def _scores(where) -> list[str]:
    return [t.strip() for t in where.get_by_text(SCORE).all_inner_texts()]


def _radio(page, question):
    return _predict_form(page).locator('[data-testid="stRadio"]').filter(has_text=question.text[:40])


def _predict(page, choices: dict[str, str], kind: str = "cuda") -> None:
    """Click each question's choice in the lesson's form, then lock them in."""
    for question in questions_for(KEY, kind):
        _radio(page, question).get_by_text(choices[question.key], exact=True).click()
    _lock_in(page)


def _right() -> dict[str, str]:
    """The choices the H200 recording answers (``Question.answer`` on its runs, as the reveal computes them)."""
    runs = h200_runs(KEY)
    return {q.key: q.answer(runs).choice for q in questions_for(KEY, "cuda")}


def _answers(page) -> list[str]:
    return [line for line in _main(page).inner_text().splitlines() if line.startswith("Answer: ")]


def test_the_score_is_one_and_a_reveal_locks_it(page, playwright_api):
    pick_lesson(page, LESSONS[KEY].title, run_s=RUN_S)
    right, asked = _right(), questions_for(KEY, "cuda")
    # The first question right, the others wrong: a score no stale or doubled count can match.
    first = asked[0].key
    choices = {q.key: right[q.key] if q.key == first else next(c for c in q.choices if c != right[q.key])
               for q in asked}
    _predict(page, choices)
    _open_recording(page)
    playwright_api.expect(_main(page).get_by_text("Lesson check")).to_be_visible(timeout=UI_S * 1000)
    want = [f"Your predictions: 1 of {len(asked)} right"]
    assert _scores(_sidebar(page)) == _scores(_main(page)) == want, (_scores(_sidebar(page)), _scores(_main(page)))
    page.screenshot(path=str(ARTIFACTS / "browser_predict_reveal_1280.png"), full_page=True)
    # The answers are on the page: every prediction is locked, and locking in again changes nothing.
    for question in asked:
        radios = _radio(page, question).locator("input[type=radio]")
        assert radios.count() == len(question.choices), question.key
        assert all(radios.nth(i).is_disabled() for i in range(radios.count())), question.key
    _lock_in(page)
    assert _scores(_sidebar(page)) == _scores(_main(page)) == want
    assert len(_answers(page)) == len(asked) and all("you predicted" in a for a in _answers(page)), _answers(page)


def test_a_prediction_after_the_recording_opened_is_not_scored(page):
    pick_lesson(page, LESSONS[KEY].title, run_s=RUN_S)
    _open_recording(page)  # no prediction: the recording shows every answer
    assert _answers(page) and all("(no prediction)" in a for a in _answers(page)), _answers(page)
    for question in questions_for(KEY, "cuda"):
        assert "its answer has been shown: not scored" in _radio(page, question).inner_text(), question.key
    _predict(page, _right())  # the right answers, picked once they were on the page
    assert _scores(_sidebar(page)) == _scores(_main(page)) == []  # nothing scored, nowhere
    assert all("after its answer was shown: not scored" in a for a in _answers(page)), _answers(page)
    assert "made after its answer was shown: not scored" in _sidebar(page).inner_text()


def test_a_lessons_compare_opens_its_pair_after_an_unrelated_run(page, playwright_api):
    sliders = _sidebar(page).get_by_role("slider")
    for i in range(3):  # M, K, N: 1024 → 64
        sliders.nth(i).focus()
        for _ in range(4):
            sliders.nth(i).press("ArrowLeft")
    _sidebar(page).get_by_role("button", name="Run profile").click()
    playwright_api.expect(_main(page).get_by_text("Profiled matmul_add 64x64x64")).to_be_attached(timeout=RUN_S * 1000)
    wait_page_idle(page, RUN_S)
    pick_lesson(page, LESSONS["eager_vs_compile"].title, run_s=RUN_S)
    _open_recording(page)
    _main(page).get_by_role("tab", name="Compare", exact=True).click()
    wait_page_idle(page, RUN_S)
    a = _main(page).get_by_role("combobox", name="A (before)")
    b = _main(page).get_by_role("combobox", name="B (after)")
    for box in (a, b):  # the lesson's two recordings, not the run made before
        value = box.input_value()
        assert value.startswith("Sample:") and "64x64x64" not in value, value
    assert "compile" not in a.input_value().lower() and "compile" in b.input_value().lower(), \
        (a.input_value(), b.input_value())


def test_predict_run_reveal_on_this_host(page, playwright_api):
    """The whole loop on a run made here: predict, *Run lesson*, and the reveal answers every
    question this host's runs ask, each with the prediction, under one score in both places."""
    pick_lesson(page, LESSONS[KEY].title, run_s=RUN_S)
    asked = questions_for(KEY, "cpu")
    _predict(page, {q.key: q.choices[0] for q in asked}, "cpu")
    _sidebar(page).get_by_role("button", name="Run lesson").click()
    reveal = _main(page).get_by_text(f"Reveal — {LESSONS[KEY].title}").first
    playwright_api.expect(reveal).to_be_visible(timeout=RUN_S * 1000)
    wait_page_idle(page, RUN_S)
    answers = _answers(page)
    assert len(answers) == len(asked) and all("you predicted" in a for a in answers), answers
    side = _scores(_sidebar(page))
    assert len(side) == 1 and side == _scores(_main(page)), (side, _scores(_main(page)))
    assert side[0].endswith(f"of {len(asked)} right"), side
    reveal.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "browser_predict_run_reveal_1280.png"), full_page=True)
    # The speed-up's evidence is the Summary cards: its button opens the Summary, not the Table.
    _main(page).get_by_role("tab", name="Table", exact=True).click()
    wait_page_idle(page, RUN_S)
    _main(page).get_by_role("button", name="Open the Summary").click()
    wait_page_idle(page, RUN_S)
    summary = _main(page).get_by_role("tab", name="Summary", exact=True)
    playwright_api.expect(summary).to_have_attribute("aria-selected", "true", timeout=UI_S * 1000)

"""In a real browser at 1280 px: the lesson "One slow rank holds everyone" run live from the page (a
4-process gloo job) opens as one job in its Ranks view, which names the planted straggler by its
cause. Screenshots go to artifacts/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from browser_pages import ARTIFACTS, app_server, chromium, open_app_ready, sync_api  # noqa: E402
from test_browser import main, pick_option, sidebar, wait_idle  # noqa: E402

from lab.lessons import LESSONS  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
RUN_S = 300  # four interpreters importing torch on 2 shared cores, then four reads


def test_the_slow_rank_lesson_runs_four_processes_and_opens_its_ranks_view():
    api = sync_api()
    with app_server("ddp_browser.log", env={"KINETO_LOG_LEVEL": "6"}) as url, chromium(api) as browser:
        page = open_app_ready(api, browser, url, width=1280, height=900, ui_s=120, run_s=RUN_S)
        side = sidebar(page)
        lesson = side.locator('[data-testid="stSelectbox"]').filter(has_text="Lesson")
        pick_option(page, lesson, LESSONS["slow_rank"].title)
        wait_idle(page)
        # Predict first, as a learner would: then the reveal scores the predictions.
        side.get_by_text("50 ms or more", exact=True).click()
        side.get_by_text("under 1 ms", exact=True).click()
        side.get_by_role("button", name="Lock in my predictions").click()
        wait_idle(page)
        side.get_by_role("button", name="Run lesson").click()
        api.expect(page.get_by_role("tab", name="Ranks", exact=True)).to_have_attribute(
            "aria-selected", "true", timeout=RUN_S * 1000)
        wait_idle(page)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "slow_rank_lesson_ranks_1280.png"))
        text = main(page).inner_text()
        assert "4 ranks of a world of 4 over gloo" in text
        assert "Straggler: rank 2" in text and "rank 2 spends" in text and "'load_batch'" in text
        assert "waiting for a trace reader" not in text and "dispatched on reader" not in text
        # The lesson is still the latest thing opened: its check and reveal are open, not folded away.
        assert "a newer result arrived" not in text
        page.screenshot(path=str(ARTIFACTS / "slow_rank_lesson_full_1280.png"), full_page=True)

"""In a real browser at 1280 px: a 4-process ddp_gloo run from the page's form opens as one job in
its Ranks view, which names the planted straggler by its cause. Screenshots go to artifacts/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from browser_pages import ARTIFACTS, app_server, chromium, open_app_ready, sync_api  # noqa: E402
from test_browser import main, open_expander, pick_option, sidebar, wait_idle  # noqa: E402

from lab.core.workloads import WORKLOADS  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
RUN_S = 300  # four interpreters importing torch on 2 shared cores, then four reads


def test_a_four_rank_run_from_the_form_opens_its_ranks_view():
    api = sync_api()
    with app_server("ddp_browser.log", env={"KINETO_LOG_LEVEL": "6"}) as url, chromium(api) as browser:
        page = open_app_ready(api, browser, url, width=1280, height=900, ui_s=120, run_s=RUN_S)
        side = sidebar(page)
        pick_option(page, side.get_by_role("combobox").first, WORKLOADS["ddp_gloo"].title)
        wait_idle(page)
        side.get_by_role("textbox", name="Exact sizes (optional)").fill("32,256,256")
        side.get_by_text("cpu", exact=True).first.click()
        job = side.locator('[data-testid="stExpander"]').filter(has_text="Distributed job")
        open_expander(page, job)
        job.get_by_role("spinbutton", name="Straggler rank (-1 = none)").fill("2")
        job.get_by_role("spinbutton", name="Processes (ranks)").fill("4")
        side.get_by_role("button", name="Run profile").click()
        api.expect(page.get_by_role("tab", name="Ranks", exact=True)).to_have_attribute(
            "aria-selected", "true", timeout=RUN_S * 1000)
        wait_idle(page)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "ddp_gloo_ranks_1280.png"))
        text = main(page).inner_text()
        assert "4 ranks of a world of 4 over gloo" in text
        assert "Straggler: rank 2" in text and "rank 2 spends" in text and "'load_batch'" in text
        assert "waiting for a trace reader" not in text and "dispatched on reader" not in text

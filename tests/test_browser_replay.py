"""In a real browser at 1280 px: open a trace with shapes, replay its hottest op from the Table,
see the replay beside the row, run one variant in one click, and open Compare with the two runs.
Screenshots go to artifacts/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from browser_pages import ARTIFACTS, app_server, chromium, open_app_ready, sync_api  # noqa: E402
from test_browser import main, wait_idle  # noqa: E402

from lab import views as lv  # noqa: E402
from lab.trace import load_trace  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
TRACE = ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz"
RUN_S = 300


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"replay_{name}_1280.png"), full_page=True)


def test_a_row_replayed_here_then_a_variant_then_compare():
    api = sync_api()
    hottest = lv.replay_choices(load_trace(TRACE.read_bytes()))[0].hot
    with app_server("replay_browser.log", env={"KINETO_LOG_LEVEL": "6"}) as url, chromium(api) as browser:
        page = open_app_ready(api, browser, url, width=1280, height=1300, ui_s=120, run_s=RUN_S)
        m = main(page)
        uploader = m.locator('[data-testid="stFileUploader"]')
        if not uploader.is_visible():
            m.get_by_text("Open your own trace").click()
        uploader.locator('input[type="file"]').set_input_files(str(TRACE))
        page.wait_for_timeout(2000)  # the upload's page run starts after the file arrives
        wait_idle(page)
        page.get_by_role("tab", name="Table", exact=True).click()
        wait_idle(page)
        m.get_by_text("Replay an op of this trace here").click()
        api.expect(m.get_by_role("button", name="Replay here")).to_be_visible()
        wait_idle(page)
        _shot(page, "form")
        m.get_by_role("button", name="Replay here").click()
        api.expect(m.get_by_text("Try a variant")).to_be_visible(timeout=RUN_S * 1000)
        wait_idle(page)
        text = m.inner_text()
        assert f"Replay of {hottest.op}" in text
        assert "replay / trace:" in text and "the trace ran on NVIDIA H200" in text  # the table is a canvas
        _shot(page, "result")
        # A layout variant: it runs on every host. A dtype variant may be refused where the host's CPU
        # has no fast bfloat16 (a 1024³ bf16 matmul takes 3 s per call on a 2-core EPYC without
        # AVX-512: the lab estimates 80 s and says so instead of running).
        m.get_by_role("button", name="contiguous inputs", exact=True).click()
        api.expect(m.get_by_text("a variant: layout contiguous", exact=False)).to_be_visible(timeout=RUN_S * 1000)
        wait_idle(page)
        _shot(page, "variant")
        page.get_by_role("tab", name="Compare", exact=True).click()
        wait_idle(page)
        a, b = (m.locator('[data-testid="stSelectbox"]').filter(has_text=label).locator("input").input_value()
                for label in ("A (before)", "B (after)"))
        assert "(as recorded)" in a and "(contiguous inputs)" in b  # the replay, then its variant
        assert "Operators" in m.inner_text()
        _shot(page, "compare")

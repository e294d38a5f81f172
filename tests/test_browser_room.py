"""A room in real browsers: one instructor and three attendees (four browser contexts, one server).

Attendees join by the code the instructor's page shows, lock in a prediction, and the
instructor's histogram counts three answers; one attendee opens the lesson's H200 recording
and sees the reveal; two run sweep shapes and the room's roofline shows their points.
Screenshots of the instructor view, the reveal and the room roofline go to artifacts/.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from browser_harness import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    ServerFailed,
    require_browser,
    streamlit_server,
    wait_page_idle,
)

ARTIFACTS = ROOT / "artifacts"
RUN_S = 300  # the first run waits for the worker's warm-up on a shared 2-core box
UI_S = 60
LIVE_S = 30  # the instructor view refreshes every ui.room.LIVE_EVERY_S (3 s)
QUESTION = "At 64³, which is larger in the table's aten::mm row: Self CPU or Self CUDA?"
PREDICTIONS = ("Self CPU", "Self CPU", "Self CUDA")

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_browser()
    ARTIFACTS.mkdir(exist_ok=True)
    db = tmp_path_factory.mktemp("rooms") / "rooms.sqlite3"
    old = os.environ.get("PROFILER_LAB_DATABASE_URL")
    os.environ["PROFILER_LAB_DATABASE_URL"] = f"sqlite:///{db}"  # the server inherits it
    try:
        with streamlit_server(ARTIFACTS / "browser_room_server.log") as (url, _process):
            yield url
    except ServerFailed as exc:
        pytest.fail(str(exc))
    finally:
        if old is None:
            os.environ.pop("PROFILER_LAB_DATABASE_URL", None)
        else:
            os.environ["PROFILER_LAB_DATABASE_URL"] = old


def wait_idle(page, timeout_s: float = RUN_S) -> None:
    wait_page_idle(page, timeout_s)


def sidebar(page):
    return page.locator('[data-testid="stSidebar"]')


def join(page, code: str, name: str) -> None:
    sidebar(page).get_by_label("Room code").fill(code)
    sidebar(page).get_by_label("Your name (shown to the instructor)").fill(name)
    sidebar(page).get_by_role("button", name="Join the room").click()
    from playwright.sync_api import expect

    expect(sidebar(page).get_by_text(re.compile(rf"In room {code} as"))).to_be_visible(timeout=UI_S * 1000)
    wait_idle(page)


def predict(page, choice: str) -> None:
    from playwright.sync_api import expect

    group = sidebar(page).get_by_role("radiogroup", name=QUESTION)
    group.get_by_text(choice, exact=True).click()
    sidebar(page).get_by_role("button", name="Lock in my predictions").click()
    expect(sidebar(page).get_by_text("prediction(s) locked in")).to_be_visible(timeout=UI_S * 1000)


def test_instructor_sees_three_attendees_answers(server):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            # The instructor's screen is tall: the whole room view in one screenshot.
            contexts = [browser.new_context(viewport={"width": 1400, "height": 1800 if i == 0 else 1000})
                        for i in range(4)]
            pages = [c.new_page() for c in contexts]
            for page in pages:
                page.set_default_timeout(UI_S * 1000)
                page.goto(server)
            teacher, attendees = pages[0], pages[1:]
            wait_idle(teacher)
            sidebar(teacher).get_by_role("button", name="Open a room (instructor)").click()
            hosted = sidebar(teacher).get_by_text(re.compile(r"You host room [A-Z]{5}"))
            expect(hosted).to_be_visible(timeout=UI_S * 1000)
            code = re.search(r"[A-Z]{5}", hosted.inner_text().replace("You host room", "")).group(0)
            view = teacher.locator(".st-key-instructor_view")
            expect(view.get_by_text("Joined")).to_be_visible(timeout=LIVE_S * 1000)

            for i, (page, choice) in enumerate(zip(attendees, PREDICTIONS)):
                wait_idle(page)
                join(page, code, f"attendee {i + 1}")
                predict(page, choice)

            sidebar(attendees[0]).screenshot(path=str(ARTIFACTS / "room_attendee_sidebar.png"))
            expect(view.get_by_text("3 answers")).to_be_visible(timeout=LIVE_S * 1000)
            expect(view.get_by_text("In the room: attendee 1, attendee 2, attendee 3")).to_be_visible()

            # One attendee opens the H200 recording: the reveal, measured from that trace.
            first = attendees[0]
            sidebar(first).get_by_role("button", name="Open the H200 recording").click()
            box = first.locator(".st-key-reveal_box")
            expect(box.get_by_text("Answer: Self CPU")).to_be_visible(timeout=RUN_S * 1000)
            wait_idle(first)
            box.get_by_text("The events that prove it").first.click()
            first.wait_for_timeout(1500)
            box.screenshot(path=str(ARTIFACTS / "room_reveal.png"))
            expect(view.get_by_text(re.compile(r"measured: Self CPU \(1\)"))).to_be_visible(timeout=LIVE_S * 1000)

            # Two attendees run their seats' sweep shapes: the room's roofline fills in.
            for page in attendees[1:]:
                sidebar(page).get_by_role("button", name=re.compile(r"^Run my sweep shape")).click()
            for page in attendees[1:]:
                expect(page.get_by_text(re.compile(r"Profiled sweep"))).to_be_attached(timeout=RUN_S * 1000)
                wait_idle(page)
            runs = view.locator('[data-testid="stMetric"]').filter(has_text="Runs shared")
            expect(runs).to_contain_text("2", timeout=LIVE_S * 1000)
            roof = view.get_by_text(re.compile(r"^Roof: .* FLOP/byte"))
            expect(roof).to_be_visible(timeout=LIVE_S * 1000)
            teacher.wait_for_timeout(1500)
            view.screenshot(path=str(ARTIFACTS / "room_instructor_view.png"))
            charts = view.locator('[data-testid="stVegaLiteChart"]')
            charts.last.screenshot(path=str(ARTIFACTS / "room_roofline.png"))
        finally:
            browser.close()

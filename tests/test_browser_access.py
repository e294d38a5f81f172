"""A hosted lab in a real browser: one `streamlit run app.py` with a workshop passcode and a host
token set in its environment, two browser contexts (an attendee, the host).

Checked in the DOM, not only on screen: before the passcode a context has only the sign-in
page (no sidebar, no tabs, one password box); a wrong passcode is refused with the same words
whatever was typed; the right one opens the page, without *Server status* anywhere in the
attendee's DOM; the host token opens it with *Server status*; neither secret is ever in a
page. The page with nothing set (everyone in, Server status shown) is tests/test_browser.py's.
Screenshots go to artifacts/ (git-ignored).
"""

from __future__ import annotations

import pytest

from tests.browser_pages import ARTIFACTS, SERVER_START_S, app_server, open_app, wait_page_idle

PASSCODE, TOKEN = "violet-heron-17", "host-4f2a9c"
SERVER_STATUS = "Server status (for the host)"
# The first full page run waits for the worker's warm-up (torch import on 2 shared cores).
RUN_S = 300
UI_S = 120

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def server(playwright_api):
    with app_server("browser_access_server.log",
                    env={"PROFILER_LAB_PASSCODE": PASSCODE, "PROFILER_LAB_HOST_TOKEN": TOKEN}) as url:
        yield url


def new_page(browser, url: str):
    return open_app(browser, url, width=1280, height=900, timeout_s=UI_S)


def wait_idle(page, timeout_s: float = UI_S) -> None:
    wait_page_idle(page, timeout_s)


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"browser_access_{name}.png"))


def assert_sign_in_page_only(page) -> None:
    """The DOM holds the title, one password box and its button: nothing of the lab."""
    assert page.locator('[data-testid="stSidebar"]').count() == 0
    assert page.get_by_role("tab").count() == 0
    inputs = page.locator('[data-testid="stMain"] input')
    assert inputs.count() == 1 and inputs.first.get_attribute("type") == "password"
    html = page.content()
    for absent in ("Server status", "Run profile", "Lessons", "Showing", "workers alive", PASSCODE, TOKEN):
        assert absent not in html, absent


def sign_in(page, text: str) -> None:
    box = page.get_by_label("Workshop passcode", exact=True)
    box.fill(text)
    page.get_by_role("button", name="Sign in").click()


def test_passcode_then_attendee_and_host(playwright_api, browser, server):
    expect = playwright_api.expect
    attendee = new_page(browser, server)
    expect(attendee.get_by_label("Workshop passcode", exact=True)).to_be_visible(timeout=SERVER_START_S * 1000)
    wait_idle(attendee)
    assert_sign_in_page_only(attendee)
    shot(attendee, "sign_in")

    # Wrong passcodes, near and far: the same words, and still only the sign-in page.
    for wrong in ("violet-heron-16", "x"):
        sign_in(attendee, wrong)
        wait_idle(attendee)
        alert = attendee.locator('[data-testid="stAlertContentError"]')
        expect(alert).to_have_count(1)
        # The words, apart from the icon (a ligature whose text is "error").
        assert alert.locator('[data-testid="stMarkdownContainer"]').inner_text().strip() == "That is not the passcode."
        assert_sign_in_page_only(attendee)
    shot(attendee, "wrong_passcode")

    sign_in(attendee, PASSCODE)
    expect(attendee.get_by_role("tab", name="Summary", exact=True)).to_be_visible(timeout=RUN_S * 1000)
    wait_idle(attendee, RUN_S)
    sidebar = attendee.locator('[data-testid="stSidebar"]')
    expect(sidebar.get_by_role("button", name="Run profile")).to_be_visible()
    expect(sidebar.get_by_text("Host sign-in")).to_be_visible()
    html = attendee.content()
    assert "Server status" not in html and "workers alive" not in html
    assert PASSCODE not in html and TOKEN not in html
    shot(attendee, "attendee_page")

    # The host enters the host token on the same sign-in page: Server status, secrets as "set".
    host = new_page(browser, server)
    expect(host.get_by_label("Workshop passcode", exact=True)).to_be_visible(timeout=UI_S * 1000)
    sign_in(host, TOKEN)
    status = host.locator('[data-testid="stExpander"]').filter(has_text=SERVER_STATUS)
    expect(status).to_have_count(1, timeout=RUN_S * 1000)
    wait_idle(host, RUN_S)
    status.locator("summary").first.click()
    expect(status.get_by_text("PROFILER_LAB_PASSCODE=set")).to_be_visible()
    expect(status.get_by_text("workers alive", exact=False).first).to_be_visible()
    assert host.locator('[data-testid="stSidebar"]').get_by_text("Host sign-in").count() == 0
    html = host.content()
    assert PASSCODE not in html and TOKEN not in html
    host.set_viewport_size({"width": 1280, "height": 1600})
    shot(host, "host_status")

    # The attendee's page, run again (another tab of the lab): still no Server status in its DOM.
    attendee.get_by_role("tab", name="Insights", exact=True).click()
    wait_idle(attendee)
    assert "Server status" not in attendee.content()
    for page in (attendee, host):
        page.context.close()

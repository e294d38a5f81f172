"""The load test with everyone in one room (``load_test.py --room``).

Before the clicks, one extra instructor session opens a room (sidebar → Room → "Open a room
(instructor)") and reads its code from the sidebar's "You host room CODE"; each attendee joins
it with its own display name (``learner 07``, never its step label, so the isolation checks
still see only labels) right after its page loads, before it fills the form and clicks. At the
end the instructor's live view (container ``instructor_view``, refreshed every 3 s) must count
every attendee under "Joined", list every name and show one shared run per completed
attendee. The selectors are those of tests/test_browser_room.py.
"""

from __future__ import annotations

import re

from load_result import RoomResult

__all__ = ["NAME_PREFIX", "display_name", "join_room", "open_room", "read_room"]

NAME_PREFIX = "learner "
CODE_RE = re.compile(r"You host room ([A-Z]{5})")
# The instructor view refreshes every ui.room.LIVE_EVERY_S (3 s); on a loaded 2-core box a
# refresh can wait for CPU for tens of seconds, so give the final counts generous time.
LIVE_S = 120
UI_S = 300


def display_name(index: int) -> str:
    return f"{NAME_PREFIX}{index:02d}"


def _sidebar(page):
    return page.locator('[data-testid="stSidebar"]')


async def open_room(browser, url: str, expect, wait_idle):
    """A fresh instructor context opens a room; returns (context, page, code)."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1800})
    context.set_default_timeout(UI_S * 1000)
    page = await context.new_page()
    await page.goto(url, timeout=UI_S * 1000)
    await expect(_sidebar(page).get_by_text("Detected:")).to_be_visible(timeout=UI_S * 1000)
    await wait_idle(page)
    await _sidebar(page).get_by_role("button", name="Open a room (instructor)").click()
    hosted = _sidebar(page).get_by_text(CODE_RE)
    await expect(hosted).to_be_visible(timeout=UI_S * 1000)
    match = CODE_RE.search(await hosted.inner_text())
    if match is None:
        raise RuntimeError(f"no room code in {await hosted.inner_text()!r}")
    await expect(page.locator(".st-key-instructor_view").get_by_text("Joined")).to_be_visible(timeout=LIVE_S * 1000)
    return context, page, match.group(1)


async def join_room(page, code: str, name: str, expect, wait_idle) -> None:
    sidebar = _sidebar(page)
    await sidebar.get_by_label("Room code").fill(code)
    await sidebar.get_by_label("Your name (shown to the instructor)").fill(name)
    await sidebar.get_by_role("button", name="Join the room").click()
    await expect(sidebar.get_by_text(re.compile(rf"In room {code} as"))).to_be_visible(timeout=UI_S * 1000)
    await wait_idle(page)


async def _metric(view, label: str) -> int | None:
    text = await view.locator('[data-testid="stMetric"]').filter(has_text=label).first.inner_text(timeout=10_000)
    numbers = re.findall(r"\d+", text.replace(label, ""))
    return int(numbers[-1]) if numbers else None


async def read_room(page, code: str, names: list[str], expected_runs: int) -> RoomResult:
    """Wait (up to LIVE_S) for the instructor's view to count everyone, then read what it shows."""
    view = page.locator(".st-key-instructor_view")
    joined = runs = None
    listed = 0
    error = None
    for _ in range(LIVE_S // 2):
        try:
            joined, runs = await _metric(view, "Joined"), await _metric(view, "Runs shared")
            caption = view.get_by_text(re.compile(r"^In the room: "))
            text = await caption.first.inner_text(timeout=10_000) if await caption.count() else ""
            listed = sum(bool(re.search(rf"(?:: |, ){re.escape(n)}(?:,|$)", text)) for n in names)
            error = None
        except Exception as exc:  # noqa: BLE001 - the view may be mid-redraw; read again
            error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
        if error is None and joined == len(names) and runs == expected_runs and listed == len(names):
            break
        await page.wait_for_timeout(2000)
    return RoomResult(code=code, expected=len(names), joined=joined, runs_shared=runs,
                      expected_runs=expected_runs, names_listed=listed, error=error)

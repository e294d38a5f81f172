"""The load test's driver: N real browser sessions against one server, then a new one.

Each session is its own browser context (its own Streamlit session) in one headless Chromium
driven by Playwright's async API. It loads the page, types its own step label (``attendee_07``)
and picks its own size with the sliders, by keyboard; then every session clicks "Run profile"
at the same moment, and each checks that it sees only its own work (the Showing box, the Table
view's text table and CSV download, the Trace view's download). After the load: the server's
health, and a new session that loads the page and gets a run through. ``run_load`` returns
all of it as a ``LoadResult``; the page clock is in page_clock.py, the figures and the
Markdown in load_result.py and load_report.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import gzip
import io
import json
import math
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from browser_harness import CHROMIUM, CHROMIUM_ARGS, IDLE_JS, ROOT, health
from load_resources import MemorySampler, cpu_used
from load_result import LoadResult, NewSession, RoomResult, SessionResult
from load_room import display_name, join_room, open_room, read_room
from page_clock import PageClock, install_probe, read_clock, wait_result

__all__ = ["AFTER_LABEL", "ARTIFACTS", "LABEL_PREFIX", "SIZES", "run_load"]

ARTIFACTS = ROOT / "artifacts"
# M=K=N per session, rotating: small enough that 20 CPU runs take seconds, distinct so that
# each session's result names its own shape.
SIZES = (64, 128, 256)
# The form's sliders start at RunConfig's default (1024); each ArrowLeft halves the value.
SLIDER_START = 1024
LABEL_PREFIX = "attendee_"
AFTER_LABEL = "after_load_check"
# Generous on 2 shared cores: the server's first page run waits for the worker's torch import
# and warm-up; 20 runs queue behind one CPU worker; 20 pages redraw at once.
PAGE_LOAD_S = 300
UI_S = 300
# Click → result: a 256³ CPU run takes well under 2 s; allow 30 s per queued run on top.
RUN_BASE_S = 120
RUN_PER_SESSION_S = 30
# Seconds of CPU accounting with every page loaded and idle, before the clicks (a baseline).
IDLE_SAMPLE_S = 5.0
# The new session's pause between its idle, filled form and its click (see new_session_check):
# the expander's open animation (0.47 s) is over, as for attendees who click after IDLE_SAMPLE_S.
CLICK_SETTLE_S = 1.0


@dataclass
class Session:
    """A session while it is driven (its browser context and page); ``result()`` freezes it."""

    index: int
    label: str
    size: int
    room_code: str | None = None  # --room: join this room (as display_name(index)) before filling the form
    context: object = None
    page: object = None
    load_s: float | None = None
    clock: PageClock = field(default_factory=PageClock)
    server_wait_s: float | None = None
    completed: bool = False
    isolated: bool = False
    checks: dict[str, bool] = field(default_factory=dict)
    error: str | None = None
    # What the browser reported meanwhile: console errors and warnings, websocket closes.
    events: list[str] = field(default_factory=list)

    def result(self) -> SessionResult:
        return SessionResult(index=self.index, label=self.label, size=self.size, load_s=self.load_s,
                             clock=self.clock, server_wait_s=self.server_wait_s, completed=self.completed,
                             isolated=self.isolated, checks=dict(self.checks), error=self.error)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"


# --------------------------------------------------------------------------- one session


async def wait_idle(page, timeout_s: float = UI_S) -> None:
    """Until the script run is over and every widget is drawn (see browser_harness.IDLE_JS)."""
    await page.wait_for_timeout(300)
    await page.wait_for_function(IDLE_JS, timeout=timeout_s * 1000, polling=250)
    await page.wait_for_timeout(300)


def main_area(page):
    return page.locator('[data-testid="stMain"]')


def sidebar(page):
    return page.locator('[data-testid="stSidebar"]')


async def open_tab(page, name: str) -> None:
    await page.get_by_role("tab", name=name, exact=True).click()
    await wait_idle(page)


def watch_browser(page, events: list[str], t0: float) -> None:
    """Note the page's console errors and warnings and its websocket closes in ``events``."""
    def on_console(message) -> None:
        if message.type in ("error", "warning"):
            events.append(f"{time.monotonic() - t0:.1f} s console {message.type}: {message.text[:200]}")

    def on_websocket(ws) -> None:
        ws.on("close", lambda _ws: events.append(f"{time.monotonic() - t0:.1f} s websocket closed"))

    page.on("console", on_console)
    page.on("websocket", on_websocket)


async def load_and_fill(browser, url: str, session: Session, expect) -> None:
    """Open the page in a fresh context, set the sizes and the label; ready to click."""
    t0 = time.monotonic()
    session.context = await browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    session.context.set_default_timeout(UI_S * 1000)
    page = session.page = await session.context.new_page()
    watch_browser(page, session.events, t0)
    await page.goto(url, timeout=PAGE_LOAD_S * 1000)
    await expect(sidebar(page).get_by_text("Detected:")).to_be_visible(timeout=PAGE_LOAD_S * 1000)
    await wait_idle(page, PAGE_LOAD_S)
    if session.room_code is not None:
        await join_room(page, session.room_code, display_name(session.index), expect, wait_idle)
    presses = int(math.log2(SLIDER_START // session.size))
    sliders = sidebar(page).get_by_role("slider")
    for i in range(3):  # M, K, N
        await sliders.nth(i).focus()
        for _ in range(presses):
            await sliders.nth(i).press("ArrowLeft")
        await expect(sliders.nth(i)).to_have_attribute("aria-valuetext", str(session.size))
    await sidebar(page).get_by_text("record_function labels").click()
    box = sidebar(page).get_by_label("Whole step")
    await box.fill(session.label)
    if await box.input_value() != session.label:
        raise RuntimeError(f"the step label box holds {await box.input_value()!r}")
    await install_probe(page, session.label)
    session.load_s = time.monotonic() - t0


async def click_run(session: Session) -> None:
    await sidebar(session.page).get_by_role("button", name="Run profile").click()


async def await_result(session: Session, expect, *, timeout_s: float) -> None:
    page = session.page
    try:
        await wait_result(page, timeout_s=timeout_s)
    finally:  # what the page saw, also when the result never came (a failure's diagnosis)
        with contextlib.suppress(Exception):
            session.clock = await read_clock(page)
    shape = f"{session.size}x{session.size}x{session.size}"
    profiled = main_area(page).get_by_text(re.compile(rf"^Profiled matmul_add {shape} float32 in [0-9.]+ s$"))
    await expect(profiled).to_be_attached(timeout=UI_S * 1000)
    match = re.search(r"in ([0-9.]+) s", await profiled.first.text_content() or "")
    session.server_wait_s = float(match.group(1)) if match else None
    session.completed = True


async def open_expander(page, title: str):
    """Open the main area's expander ``title`` and return its code block.

    A click that lands while the page redraws (20 pages on 2 cores) can be lost, so whether
    the expander opened is checked and the click repeated.
    """
    expander = main_area(page).locator('[data-testid="stExpander"]').filter(has_text=title)
    body = expander.locator('[data-testid="stExpanderDetails"]').first  # "inert" while collapsed
    for _ in range(5):
        if await body.get_attribute("inert") is None:
            break
        await expander.locator("summary").first.click()
        await page.wait_for_timeout(1000)
    code = expander.locator('[data-testid="stCode"]').first
    await code.wait_for(state="visible", timeout=UI_S * 1000)
    return code


def foreign_labels(text: str, own: str, everyone: list[str]) -> list[str]:
    return [label for label in everyone if label != own and label in text]


def annotation_names(trace_gz: bytes) -> set[str]:
    """user_annotation names of a gzipped Chrome trace (torch's ProfilerStep#N included)."""
    events = json.loads(gzip.decompress(trace_gz))["traceEvents"]
    return {e.get("name") for e in events if e.get("cat") == "user_annotation"}


async def download(page, button_name: str, folder: Path) -> bytes:
    async with page.expect_download(timeout=UI_S * 1000) as info:
        await main_area(page).get_by_role("button", name=button_name).click()
    dl = await info.value
    path = folder / f"{os.getpid()}_{id(page)}_{dl.suggested_filename}"
    await dl.save_as(path)
    data = path.read_bytes()
    path.unlink()
    return data


async def check_isolation(session: Session, everyone: list[str], folder: Path, expect) -> None:
    """Whatever this session can see names its own label and no other attendee's."""
    page, label = session.page, session.label
    await wait_idle(page)
    checks = session.checks
    showing = main_area(page).get_by_role("combobox", name="Showing")
    checks["showing"] = (await showing.input_value()).startswith(f"Run: {label} · ")
    others = foreign_labels(await page.locator('[data-testid="stApp"]').inner_text(), label, everyone)
    checks["page_text_no_other"] = not others

    await open_tab(page, "Table")
    code = await open_expander(page, "The classic text table")
    text_table = await code.inner_text()
    checks["table_text_own"] = label in text_table
    checks["table_text_no_other"] = not foreign_labels(text_table, label, everyone)
    table_csv = (await download(page, "Download table (CSV)", folder)).decode()
    names = {row.get("name") for row in csv.DictReader(io.StringIO(table_csv))}
    checks["table_csv_own"] = label in names
    checks["table_csv_no_other"] = not foreign_labels(table_csv, label, everyone)

    await open_tab(page, "Trace")
    annotations = annotation_names(await download(page, "Download trace (.json.gz)", folder))
    checks["trace_own"] = label in annotations
    checks["trace_no_other"] = not (annotations & (set(everyone) - {label}))
    session.isolated = all(checks.values())


async def screenshot(session: Session) -> None:
    if session.page is None:
        return
    try:
        await session.page.screenshot(path=str(ARTIFACTS / f"load_{session.label}.png"))
    except Exception:  # noqa: BLE001 - best effort
        pass


# --------------------------------------------------------------------------- the load


async def warm_up_page(browser, url: str, expect) -> float:
    """The server's first page run waits for the worker's warm-up: pay it once, apart (seconds)."""
    t0 = time.monotonic()
    warm = await browser.new_context()
    warm_page = await warm.new_page()
    await warm_page.goto(url, timeout=PAGE_LOAD_S * 1000)
    await expect(sidebar(warm_page).get_by_text("Detected:")).to_be_visible(timeout=PAGE_LOAD_S * 1000)
    await warm.close()
    return time.monotonic() - t0


async def prepare_all(browser, url: str, sessions: list[Session], expect, load_concurrency: int) -> list[Session]:
    """Load and fill every page, ``load_concurrency`` at a time; the sessions ready to click."""
    gate = asyncio.Semaphore(max(1, load_concurrency))

    async def prepare(session: Session) -> None:
        async with gate:
            try:
                await load_and_fill(browser, url, session, expect)
            except Exception as exc:  # noqa: BLE001 - recorded per session
                session.error = f"load: {_why(exc)}"

    await asyncio.gather(*(prepare(s) for s in sessions))
    return [s for s in sessions if s.error is None]


async def click_all(ready: list[Session]) -> list[Session]:
    """Every session clicks at once, so that the runs meet in the service's queue."""
    outcomes = await asyncio.gather(*(click_run(s) for s in ready), return_exceptions=True)
    for session, outcome in zip(ready, outcomes):
        if isinstance(outcome, BaseException):
            session.error = f"click: {_why(outcome)}"
    return [s for s in ready if s.error is None]


async def finish_all(clicked: list[Session], labels: list[str], folder: Path, expect, *,
                     memory: MemorySampler, cpu_before, phase_t0: float) -> tuple[dict[str, float], float]:
    """Each session waits for its result, then runs its checks (as an attendee would, while others
    still wait). CPU is read when the last result is in, before the checks add their own load."""
    timeout_s = RUN_BASE_S + RUN_PER_SESSION_S * len(labels)

    async def finish(session: Session) -> None:
        try:
            await await_result(session, expect, timeout_s=timeout_s)
        except Exception as exc:  # noqa: BLE001
            session.error = f"result: {_why(exc)}"
            return
        try:
            await check_isolation(session, labels, folder, expect)
        except Exception as exc:  # noqa: BLE001
            session.error = f"checks: {_why(exc)}"

    results_in = asyncio.Event()

    async def watch_results() -> None:
        while not all(s.completed or s.error for s in clicked):
            await asyncio.sleep(0.5)
        results_in.set()

    watcher = asyncio.create_task(watch_results())
    checks = asyncio.gather(*(finish(s) for s in clicked))
    await results_in.wait()
    cpu_phase = cpu_used(cpu_before, memory.cpu_snapshot())
    phase_s = time.monotonic() - phase_t0
    await checks
    await watcher
    return cpu_phase, phase_s


async def start_room(browser, url: str, expect, sessions: list[Session]):
    """--room: an instructor session opens a room; every attendee will join it. (context, page, code)"""
    context, page, code = await open_room(browser, url, expect, wait_idle)
    print(f"instructor opened room {code}; the attendees join it before their clicks", flush=True)
    for session in sessions:
        session.room_code = code
    return context, page, code


async def end_room(instructor, sessions: list[Session]) -> RoomResult:
    """--room: what the instructor's view shows once every result is in; closes its context."""
    context, page, code = instructor
    try:
        joined = [display_name(s.index) for s in sessions if s.load_s is not None]
        result = await read_room(page, code, joined, sum(s.completed for s in sessions))
        with contextlib.suppress(Exception):  # best effort: what the instructor saw, to look at
            await page.locator(".st-key-instructor_view").screenshot(path=str(ARTIFACTS / "load_room_instructor.png"))
        return result
    finally:
        await context.close()


async def run_load(url: str, n: int, *, server_pid: int, load_concurrency: int, room: bool = False) -> LoadResult:
    from playwright.async_api import async_playwright, expect

    labels = [f"{LABEL_PREFIX}{i:02d}" for i in range(n)]
    sessions = [Session(index=i, label=label, size=SIZES[i % len(SIZES)]) for i, label in enumerate(labels)]
    folder = Path(tempfile.mkdtemp(prefix="load_test_"))
    ARTIFACTS.mkdir(exist_ok=True)
    started = time.monotonic()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        memory = MemorySampler(server_pid).start()
        peaks = room_result = None
        try:
            warmup_load_s = await warm_up_page(browser, url, expect)
            instructor = await start_room(browser, url, expect, sessions) if room else None
            ready = await prepare_all(browser, url, sessions, expect, load_concurrency)
            print(f"{len(ready)}/{n} pages loaded and filled; clicking 'Run profile' in all of them", flush=True)

            # Baseline: what the loaded, idle pages and the server burn with nothing happening.
            idle_before, idle_t0 = memory.cpu_snapshot(), time.monotonic()
            await asyncio.sleep(IDLE_SAMPLE_S)
            cpu_idle = cpu_used(idle_before, memory.cpu_snapshot())
            idle_s = time.monotonic() - idle_t0

            cpu_before, phase_t0 = memory.cpu_snapshot(), time.monotonic()
            clicked = await click_all(ready)
            cpu_phase, phase_s = await finish_all(clicked, labels, folder, expect, memory=memory,
                                                  cpu_before=cpu_before, phase_t0=phase_t0)
            room_result = await end_room(instructor, sessions) if instructor else None
            for session in sessions:
                if session.error:
                    await screenshot(session)
            for session in sessions:
                if session.context is not None:
                    await session.context.close()

            health_after = health(url)
            new_session = await new_session_check(browser, url, expect)
        finally:
            peaks = memory.stop()
            await browser.close()
            shutil.rmtree(folder, ignore_errors=True)
    done = [s for s in sessions if s.completed]
    clicks = [s.clock.click_ms for s in sessions if s.clock.click_ms is not None]
    results = [s.clock.result_ms for s in done if s.clock.result_ms is not None]
    return LoadResult(
        sessions=tuple(s.result() for s in sessions), warmup_load_s=warmup_load_s,
        clicks_spread_s=(max(clicks) - min(clicks)) / 1000 if clicks else 0.0,
        total_wall_s=(max(results) - min(clicks)) / 1000 if results and clicks else 0.0,
        overall_s=time.monotonic() - started, health_after=health_after, new_session=new_session,
        memory=peaks, load_concurrency=load_concurrency, cpu_phase_s=cpu_phase, phase_s=phase_s,
        cpu_idle_s=cpu_idle, idle_s=idle_s, room=room_result)


async def new_session_check(browser, url: str, expect) -> NewSession:
    """After the load: a fresh visitor loads the page and gets a 64³ run through.

    It clicks under the attendees' conditions: page idle, form filled a while ago. (It used to
    click at once after filling, ~0.1 s after opening the labels expander, whose open animation
    slides the button 270 px down over 0.47 s, measured. Twice on a loaded 2-core box its click
    never reached the page's script: no status box, the sample still shown, 150 s later. Not
    reproduced in 5 quick load tests at load average 7 nor in 35 new sessions, 10 of them with
    the page's main thread 80 % busy; the attendees' clicks, which wait, never failed.) A failure
    keeps what the page saw, so that it says where the run stopped: the DOM click, the status
    box, the Showing box, the browser's errors and websocket closes.
    """
    session = Session(index=-1, label=AFTER_LABEL, size=64)
    try:
        await load_and_fill(browser, url, session, expect)
        await wait_idle(session.page)
        await session.page.wait_for_timeout(CLICK_SETTLE_S * 1000)
        await click_run(session)
        await await_result(session, expect, timeout_s=RUN_BASE_S + RUN_PER_SESSION_S)
        showing = await main_area(session.page).get_by_role("combobox", name="Showing").input_value()
        ok = showing.startswith(f"Run: {AFTER_LABEL} · ")
        return NewSession(ok=ok, wait_s=session.clock.wait_s, error=None if ok else f"Showing box holds {showing!r}",
                          clock=session.clock, showing=showing, events=tuple(session.events))
    except Exception as exc:  # noqa: BLE001
        await screenshot(session)
        showing = status_boxes = None
        if session.page is not None:
            with contextlib.suppress(Exception):
                showing = await main_area(session.page).get_by_role("combobox", name="Showing").input_value(
                    timeout=5000)
                status_boxes = await main_area(session.page).locator('[data-testid="stExpander"]').filter(
                    has_text=re.compile("^.{0,40}Profil")).count()
        c = session.clock
        where = (f"{_why(exc)} (DOM click seen: {'yes' if c.click_ms else 'no'}; status box drawn: "
                 f"{'yes' if c.accepted_ms else 'no'}; status boxes now: {status_boxes}; Showing: {showing!r})")
        return NewSession(ok=False, wait_s=None, error=where, clock=c, showing=showing, events=tuple(session.events))
    finally:
        if session.context is not None:
            await session.context.close()

"""The page in a real browser: `streamlit run app.py` + headless Chromium driven by Playwright.

What AppTest cannot show: the websocket round trips, the form's slider and text box under a
keyboard, the Vega chart actually drawn, a real file download and a real file upload, and
status lines arriving while runs wait in the queue. Screenshots go to artifacts/ (git-ignored).

Chromium comes from the system (/usr/bin/chromium, Debian's package); Playwright never
downloads a browser here. Outside CI a missing Chromium skips this test with the reason;
in CI (CI=true) it fails, so the browser check cannot silently disappear.
"""

from __future__ import annotations

import base64
import gzip
import http.server
import json
import os
import re
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from browser_harness import (  # noqa: E402  (shared with bench/load_test.py)
    CHROMIUM,
    CHROMIUM_ARGS,
    SERVER_START_S,
    ServerFailed,
    require_browser,
    streamlit_server,
    wait_page_idle,
)

ARTIFACTS = ROOT / "artifacts"
H200_TRACE = ROOT / "tests" / "data" / "matmul_add_4096_bf16.json.gz"
LABEL = "browser_step_label"
# Generous: 2 shared cores, and the first run may wait for the worker's torch import and warm-up.
RUN_S = 300
UI_S = 120
# Tries at opening an expander: a click that lands while the page redraws can be lost.
EXPANDER_CLICKS = 5

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1500)]

SAMPLE_TRACE = ROOT / "lab" / "samples" / "matmul_add_4096_bf16.json.gz"  # the page's first subject
SCREENS = ARTIFACTS / "screens"
SCREEN_HEIGHT_PX = 2000  # tall enough for the longest view (Compare's two timelines)
VIEWS = ("Summary", "Table", "Timeline", "Memory", "Insights", "Trace", "Compare")
STANDIN_HTML = """<!doctype html><title>Perfetto stand-in</title><script>
window.pings = 0;
window.addEventListener("message", (event) => {
  if (event.data === "PING") { window.pings++; event.source.postMessage("PONG", "*"); return; }
  const msg = event.data && event.data.perfetto;
  if (!msg) return;
  const bytes = new Uint8Array(msg.buffer);
  let text = "";
  for (let i = 0; i < bytes.length; i++) text += String.fromCharCode(bytes[i]);
  window.received = {title: msg.title, fileName: msg.fileName, b64: btoa(text), origin: event.origin};
});
</script>"""


@pytest.fixture(scope="module")
def playwright_api():
    """Playwright's sync API, checked before any server starts (skip or fail at once)."""
    require_browser()
    from playwright import sync_api

    return sync_api


# The host's run-time estimate limit for this server: the 4096³ runs of the room test must pass it
# however slowly a loaded box measured its CPU at warm-up (here, at a load average of 10 on 2
# cores, the default 20 s refused them); 16384³ float32 (~10 min here) stays far over it.
MAX_RUN_ESTIMATE_S = "120"


@pytest.fixture(scope="module")
def perfetto_standin():
    """A local page speaking Perfetto's postMessage protocol (this machine has no internet):
    answers 'PING' with 'PONG' and keeps the {perfetto: {buffer, title}} it gets in
    ``window.received`` (base64) for the test to read. Yields its origin."""
    page = STANDIN_HTML.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):  # quiet
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def server(playwright_api, perfetto_standin):
    """`streamlit run app.py` on a free port, its Perfetto button pointed at the stand-in;
    stopped (with its workers) whatever happens."""
    ARTIFACTS.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as env:  # read by the server at start, restored after
        env.setitem(os.environ, "PROFILER_LAB_MAX_RUN_ESTIMATE_S", MAX_RUN_ESTIMATE_S)
        env.setitem(os.environ, "PROFILER_LAB_PERFETTO_ORIGIN", perfetto_standin)
        try:
            with streamlit_server(ARTIFACTS / "browser_server.log") as (url, _process):
                yield url
        except ServerFailed as exc:
            pytest.fail(str(exc))


@pytest.fixture(scope="module")
def page(playwright_api, server):
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        context.set_default_timeout(UI_S * 1000)
        page = context.new_page()
        page.goto(server)
        try:
            yield page
        finally:
            context.close()
            browser.close()


@pytest.fixture
def fresh_page(page, server):
    """A visitor of their own (a new browser context on the module's server): a test that runs
    profiles leaves the end-to-end test's page at its first visit, whichever order they run in."""
    context = page.context.browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    context.set_default_timeout(UI_S * 1000)
    try:
        visitor = context.new_page()
        visitor.goto(server)
        yield visitor
    finally:
        context.close()


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"browser_{name}.png"))


def wait_idle(page) -> None:
    """Until the script run is over and every widget is drawn (no loading skeletons: widget
    code loads lazily, slowly on a busy machine). On a fresh server the first page run ends
    only once the profiling worker has warmed up (ui.run.await_worker)."""
    wait_page_idle(page, RUN_S)


def open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()
    wait_idle(page)


def open_expander(page, expander) -> None:
    """Open ``expander`` (a Streamlit expander or status box) as a visitor would, by its summary."""
    body = expander.locator('[data-testid="stExpanderDetails"]').first  # "inert" while collapsed
    for _ in range(EXPANDER_CLICKS):
        if body.get_attribute("inert") is None:
            return
        expander.locator("summary").first.click()
        page.wait_for_timeout(1000)
    assert body.get_attribute("inert") is None, f"the expander did not open after {EXPANDER_CLICKS} clicks"


def pick_option(page, select, name: str) -> None:
    """Choose ``name`` in a selectbox as a visitor would. A click that lands while the page
    redraws only focuses the box (seen on this 2-core box: the list never opened), so it is
    clicked again until the option shows."""
    option = page.get_by_role("option", name=name)
    for _ in range(EXPANDER_CLICKS):
        select.click()
        page.wait_for_timeout(1000)
        if option.is_visible():
            break
        page.keyboard.press("Escape")
    option.click()


def main(page):
    return page.locator('[data-testid="stMain"]')


def sidebar(page):
    return page.locator('[data-testid="stSidebar"]')


def test_page_end_to_end(playwright_api, page, tmp_path):
    expect = playwright_api.expect

    # First visit: a recorded H200 trace, with GPU lanes, before anything was run.
    expect(page.get_by_role("tab", name="Summary", exact=True)).to_be_visible(timeout=SERVER_START_S * 1000)
    expect(main(page).get_by_text("recorded on an NVIDIA H200")).to_be_visible()
    wait_idle(page)
    expect(sidebar(page).get_by_text("Detected:")).to_be_visible()  # redrawn once the worker was ready
    shot(page, "first_visit")
    open_tab(page, "Timeline")
    chart = main(page).locator('[data-testid="stVegaLiteChart"]')
    expect(chart).to_be_visible()
    expect(chart.locator("canvas, svg").first).to_be_visible()
    shot(page, "sample_timeline")
    open_tab(page, "Memory")  # the sample was recorded without profile_memory: said so, no chart
    expect(main(page).get_by_text("This trace has no [memory] events")).to_be_visible()
    expect(main(page).locator('[data-testid="stVegaLiteChart"]')).to_have_count(0)

    # The form: sliders by keyboard (each arrow moves one power of two), then the step label.
    sliders = sidebar(page).get_by_role("slider")
    for i in range(3):  # M, K, N: 1024 → 64
        sliders.nth(i).focus()
        for _ in range(4):
            sliders.nth(i).press("ArrowLeft")
        expect(sliders.nth(i)).to_have_attribute("aria-valuetext", "64")
    sidebar(page).get_by_text("record_function labels").click()
    step_box = sidebar(page).get_by_label("Whole step")
    step_box.fill("")
    step_box.press_sequentially(LABEL + "_" * 60)  # typed key by key: the box stops at 64 characters
    assert step_box.input_value() == (LABEL + "_" * 60)[:64]
    step_box.fill(LABEL)
    sidebar(page).get_by_text("Profiler options").click()
    sidebar(page).get_by_text("profile_memory", exact=True).click()  # the run records allocations
    sidebar(page).get_by_text("Profiler options").click()  # closed again: the sidebar as before
    sidebar(page).get_by_role("button", name="Run profile").click()
    expect(main(page).get_by_text("Profiled matmul_add 64x64x64 float32 in")).to_be_attached(timeout=RUN_S * 1000)
    wait_idle(page)
    showing = main(page).get_by_role("combobox", name="Showing")
    expect(showing).to_have_value(re.compile(f"^Run: {LABEL} · matmul_add 64x64x64 float32 cpu"))
    expect(page.get_by_role("tab", name="Summary", exact=True)).to_have_attribute("aria-selected", "true")
    shot(page, "run_summary")

    open_tab(page, "Timeline")
    expect(main(page).locator('[data-testid="stVegaLiteChart"]').locator("canvas, svg").first).to_be_visible()
    shot(page, "run_timeline")

    # profile_memory was on: the Memory tab draws the allocated curve with its peak.
    open_tab(page, "Memory")
    memory_chart = main(page).locator('[data-testid="stVegaLiteChart"]')
    expect(memory_chart.locator("canvas, svg").first).to_be_visible()
    expect(main(page).get_by_text("allocator records in this window")).to_be_visible()
    expect(main(page).get_by_text("Devices", exact=True)).to_be_visible()
    shot(page, "run_memory")

    open_tab(page, "Table")
    expect(main(page).locator('[data-testid="stDataFrame"]').first).to_be_visible()
    main(page).get_by_text("The classic text table").click()
    expect(main(page).locator('[data-testid="stCode"]').get_by_text(LABEL)).to_be_visible()
    shot(page, "run_table")

    open_tab(page, "Trace")
    with page.expect_download(timeout=UI_S * 1000) as info:
        main(page).get_by_role("button", name="Download trace (.json.gz)").click()
    download = info.value
    assert download.suggested_filename.endswith(".pt.trace.json.gz")
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    trace = json.loads(gzip.decompress(path.read_bytes()))
    assert LABEL in {event.get("name") for event in trace["traceEvents"]}

    # A real upload through the widget: the shared H200 trace shows its GPU kernels.
    main(page).get_by_text("Open your own trace").click()
    main(page).locator('input[type="file"]').set_input_files(str(H200_TRACE))
    expect(showing).to_have_value(f"Upload: {H200_TRACE.name}", timeout=UI_S * 1000)
    wait_idle(page)
    open_tab(page, "Table")
    expect(main(page).get_by_text("GPU kernels")).to_be_visible()

    # A lesson pair: both runs queue at once, and the status box keeps one line per run.
    lesson = sidebar(page).locator('[data-testid="stSelectbox"]').filter(has_text="Lesson")
    pick_option(page, lesson, "Cold vs warm: why the first step is slow")
    wait_idle(page)
    sidebar(page).get_by_role("button", name="Run lesson").click()
    status_box = main(page).locator('[data-testid="stExpander"]').filter(has_text="Profiled cold and warm in")
    expect(status_box).to_be_attached(timeout=RUN_S * 1000)
    wait_idle(page)
    # The box collapses once the pair is back; it holds each run's last status line, and those
    # are asserted here, not lines caught live. A live line is drawn only if the browser renders
    # between the script's 0.2 s polls (ui/run.py POLL_S): a pair done by the first poll sends its
    # lines already "done", with the box's collapse, and they are never drawn expanded. Measured
    # on this 2-core box (10 pair runs, a MutationObserver reading the page's text): with the
    # renderer free, 2 of 5 showed no live cold:/warm: line (both "Profiled cold and warm in
    # 0.1 s"); with its main thread held 1.5 s after the click (a CPU-starved Chromium), 4 of 5;
    # in 10 of 10 the collapsed box held "cold: done · N s" and "warm: done · N s". Queue
    # positions in real pages are evidenced by bench/load_test.py (highest position seen), the
    # wording of the queued and running lines by test_app's status test.
    open_expander(page, status_box)
    for name in ("cold", "warm"):
        expect(status_box.get_by_text(re.compile(rf"^{name}: done · [0-9.]+ s$"))).to_be_visible()
    assert_no_none(page, "Run lesson")

    expect(page.get_by_role("tab", name="Compare", exact=True)).to_have_attribute("aria-selected", "true")
    charts = main(page).locator('[data-testid="stVegaLiteChart"]')
    expect(charts).to_have_count(2)
    for chart_index in range(2):
        expect(charts.nth(chart_index).locator("canvas, svg").first).to_be_visible()
    expect(main(page).get_by_text("Timeline A:")).to_be_visible()
    expect(main(page).get_by_text("Timeline B:")).to_be_visible()
    for heading in ("Totals", "GPU kernels", "Operators"):
        expect(main(page).get_by_text(heading, exact=False).first).to_be_visible()
    # Two CPU runs: no kernels to diff (said so), the totals and the operator diff as tables.
    expect(main(page).get_by_text("Neither trace has GPU kernels")).to_be_visible()
    expect(main(page).locator('[data-testid="stDataFrame"]')).to_have_count(2)
    page.set_viewport_size({"width": 1280, "height": 2400})
    shot(page, "lesson_compare")


def assert_no_none(page, after: str) -> None:
    """No stray "None" anywhere on the page (Streamlit's magic writes a bare expression's value)."""
    text = page.locator('[data-testid="stApp"]').inner_text()
    lines = [line for line in text.splitlines() if re.search(r"\bNone\b", line)]
    assert not lines, f"'None' on the page after {after}: {lines[:5]}"


def screens(page, width: int) -> None:
    """Each view into artifacts/screens/ (looked at by hand before closing an issue). Streamlit
    scrolls inside its own container, so the window is made tall rather than "full page"."""
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": width, "height": SCREEN_HEIGHT_PX})
    for view in VIEWS:
        open_tab(page, view)
        page.screenshot(path=str(SCREENS / f"{width}_{view.lower()}.png"))


def check_narrow_layout(page, width: int) -> None:
    """At 800 px: the sidebar folded away, the chart as wide as the main column, nothing clipped."""
    expect = sys.modules["playwright.sync_api"].expect
    expect(sidebar(page)).to_have_attribute("data-collapsed", "true", timeout=UI_S * 1000)
    open_tab(page, "Timeline")
    chart = main(page).locator('[data-testid="stVegaLiteChart"]')
    expect(chart.locator("canvas, svg").first).to_be_visible(timeout=UI_S * 1000)
    block = main(page).locator('[data-testid="stMainBlockContainer"]').bounding_box()
    drawn = chart.locator("canvas, svg").first.bounding_box()
    assert drawn["width"] >= 0.85 * block["width"], (drawn, block)  # the container's width, not ~450 px
    assert drawn["x"] + drawn["width"] <= width  # legend and axis inside the window
    zoom = main(page).locator('[data-testid="stSelectbox"]').filter(has_text="Zoom to").first.bounding_box()
    assert zoom["x"] >= 0 and zoom["x"] + zoom["width"] <= width


def open_in_perfetto(page) -> None:
    """The Trace view's button: a new tab, PING → PONG, then the trace's bytes as sent."""
    open_tab(page, "Trace")
    button = main(page).frame_locator("iframe").get_by_role("button", name="Open in Perfetto")
    with page.context.expect_page(timeout=UI_S * 1000) as new_tab:
        button.click()
    tab = new_tab.value
    tab.wait_for_function("() => window.received !== undefined", timeout=UI_S * 1000)
    got = tab.evaluate("() => window.received")
    pings = tab.evaluate("() => window.pings")
    tab.close()
    assert pings >= 1 and got["title"].startswith("Sample:")
    assert got["fileName"].endswith(".pt.trace.json.gz")
    sent = base64.b64decode(got["b64"])
    assert sent == SAMPLE_TRACE.read_bytes()  # gzipped, as stored: Perfetto opens .json.gz as is
    events = json.loads(gzip.decompress(sent))["traceEvents"]
    want = json.loads(gzip.decompress(SAMPLE_TRACE.read_bytes()))["traceEvents"]
    assert len(events) == len(want) and Counter(e.get("name") for e in events) == Counter(e.get("name") for e in want)


def test_views_at_1280_and_800_px_and_open_in_perfetto(playwright_api, page, server):
    """Each view at both widths (screenshots), the narrow layout, a lesson's recording with no
    stray "None", and the Perfetto hand-off against the local stand-in."""
    browser = page.context.browser
    for width in (1280, 800):
        context = browser.new_context(viewport={"width": width, "height": 900})
        context.set_default_timeout(UI_S * 1000)
        try:
            tab = context.new_page()
            tab.goto(server)
            playwright_api.expect(tab.get_by_role("tab", name="Summary", exact=True)).to_be_visible(
                timeout=SERVER_START_S * 1000)
            wait_idle(tab)
            if width == 1280:
                open_in_perfetto(tab)
                lesson = sidebar(tab).locator('[data-testid="stSelectbox"]').filter(has_text="Lesson")
                pick_option(tab, lesson, "SDPA backends: math vs FlashAttention")
                wait_idle(tab)
                sidebar(tab).get_by_role("button", name="Open the H200 recording").click()
                wait_idle(tab)
                playwright_api.expect(tab.get_by_text("Lesson check")).to_be_visible(timeout=UI_S * 1000)
                assert_no_none(tab, "Open the H200 recording")
            else:
                check_narrow_layout(tab, width)
            screens(tab, width)
            if width == 1280:  # Compare kept the lesson's pair while the other views were open
                a = main(tab).get_by_role("combobox", name="A (before)")
                playwright_api.expect(a).to_have_value(re.compile("SDPA, math backend"), timeout=UI_S * 1000)
        finally:
            context.close()


# The page's clock for one click: when "Run profile" was clicked and when ``text`` first showed,
# both from performance.now() in the page (Playwright's polling does not count).
CLICK_CLOCK_JS = """(text) => {
    window.__clock = {click: null, shown: null};
    document.addEventListener("click", (e) => {
        const b = e.target.closest && e.target.closest("button");
        if (b && b.innerText.includes("Run profile") && window.__clock.click === null) {
            window.__clock.click = performance.now();
        }
    }, true);
    const seen = new MutationObserver(() => {
        if (window.__clock.click !== null && document.body.innerText.includes(text)) {
            window.__clock.shown = performance.now();
            seen.disconnect();
        }
    });
    seen.observe(document.body, {childList: true, subtree: true, characterData: true});
}"""


def run_form(page, exact: str) -> None:
    """Fill the exact sizes and click "Run profile"."""
    sidebar(page).get_by_role("textbox", name="Exact sizes (optional)").fill(exact)
    sidebar(page).get_by_role("button", name="Run profile").click()


# Polls of Server status while the worker's warm spare warms up (~12 s after the worker on this box).
SPARE_POLLS = 60


def server_status(page, tab: str) -> str:
    """Server status as a page run drawn now shows it (opening ``tab`` reruns the page)."""
    open_tab(page, tab)
    box = sidebar(page).locator('[data-testid="stExpander"]').filter(has_text="Server status")
    return box.locator('[data-testid="stText"]').first.text_content() or ""


def wait_for_spare(page) -> str:
    """Rerun until Server status shows the worker's warm spare ready; its text."""
    for i in range(SPARE_POLLS):
        text = server_status(page, ("Table", "Summary")[i % 2])
        if "warm spare: ready" in text:
            return text
        page.wait_for_timeout(1000)
    raise AssertionError(f"no warm spare after {SPARE_POLLS} polls; Server status said:\n{text}")


def running_line(name: str):
    return re.compile(rf"^{re.escape(name)}: (dispatched|checking|allocating|warming up|profiling|exporting|timing)")


def test_room_refusal_cancel_and_one_run_per_session(playwright_api, fresh_page, server):
    """Run limits in the browser: a run far too long is refused at once with its estimate; Cancel
    on a running 4096³ run hands the worker to its warm spare (the next run starts, no new
    warm-up: Server status counts the spare taking over); a second click while waiting replaces
    the waiting run (the page says so) instead of queueing a second one."""
    expect = playwright_api.expect
    page = fresh_page
    page.set_viewport_size({"width": 1280, "height": 900})
    wait_idle(page)

    # 16384³ float32 on the CPU: refused with an estimate, timed by the page's clock.
    page.evaluate(CLICK_CLOCK_JS, "longer than a run may take here")
    run_form(page, "16384,16384,16384")
    refusal = main(page).get_by_text(re.compile("would take about .* on this host's CPU"))
    expect(refusal).to_be_visible(timeout=UI_S * 1000)
    text = refusal.inner_text()
    assert "or smaller" in text and "PROFILER_LAB" not in text, text
    clock = page.evaluate("window.__clock")
    print(f"16384³ float32 refused {clock['shown'] - clock['click']:.0f} ms after the click (page clock)")
    wait_idle(page)
    shot(page, "room_refused")

    # Cancel a running 4096³ float32 run (estimated ~10 s on an idle box here), then the next run
    # starts on the spare, warmed up before the cancel.
    before = wait_for_spare(page)
    took_over = int(re.search(r"warm spare: ready.*took over (\d+) times", before).group(1))
    big = "matmul_add 4096x4096x4096 float32"
    run_form(page, "4096,4096,4096")
    expect(main(page).get_by_text(running_line(big))).to_be_visible(timeout=RUN_S * 1000)
    shot(page, "room_running")
    main(page).get_by_role("button", name="Cancel").click()
    expect(page.get_by_text("Run cancelled: the worker is free")).to_be_visible(timeout=UI_S * 1000)
    wait_idle(page)
    page.evaluate(CLICK_CLOCK_JS, "Profiled matmul_add 64x64x64 float32 in")
    run_form(page, "64,64,64")
    expect(main(page).get_by_text("Profiled matmul_add 64x64x64 float32 in")).to_be_attached(timeout=RUN_S * 1000)
    clock = page.evaluate("window.__clock")
    wait_idle(page)
    after = server_status(page, "Table")
    assert f"took over {took_over + 1} times" in after, after  # the spare served it: no new warm-up
    open_tab(page, "Summary")
    print(f"after Cancel, the next run was back {clock['shown'] - clock['click']:.0f} ms after its click")
    shot(page, "room_after_cancel")

    # Another visitor's run holds the only worker; this page clicks twice: one entry, replaced.
    other = page.context.browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page2 = other.new_page()
        page2.set_default_timeout(UI_S * 1000)
        page2.goto(server)
        wait_idle(page2)
        blocker = "matmul_add 4096x4096x4096 float32"
        run_form(page2, "4096,4096,4096")
        expect(main(page2).get_by_text(running_line(blocker))).to_be_visible(timeout=RUN_S * 1000)
        run_form(page, "64,64,32")
        queued = main(page).get_by_text(re.compile(r"64x64x32 float32: queued — position 1 \(next to run\)"))
        expect(queued).to_be_visible(timeout=UI_S * 1000)
        sidebar(page).get_by_role("button", name="Run profile").click()  # the same click again
        expect(main(page).get_by_text("Your earlier run, still waiting or running, was replaced")).to_be_visible()
        expect(queued).to_be_visible()  # still position 1: the replaced run left the queue
        shot(page, "room_replaced")
        main(page2).get_by_role("button", name="Cancel").click()  # frees the worker (its spare again)
        expect(main(page).get_by_text("Profiled matmul_add 64x64x32 float32 in")).to_be_attached(timeout=RUN_S * 1000)
    finally:
        other.close()
    wait_idle(page)


GLOO_CPU = ROOT / "tests" / "data" / "groundtruth" / "cpu"


def test_two_rank_upload_opens_the_ranks_view(playwright_api, page, server):
    """Two files set on the uploader at once: one job's ranks, side by side (a page of its own,
    so the end-to-end test's page keeps its state whichever runs first)."""
    expect = playwright_api.expect
    ranks_page = page.context.new_page()
    try:
        ranks_page.set_viewport_size({"width": 1280, "height": 1800})
        ranks_page.goto(server)
        expect(ranks_page.get_by_role("tab", name="Summary", exact=True)).to_be_visible(timeout=SERVER_START_S * 1000)
        wait_idle(ranks_page)
        expect(ranks_page.get_by_role("tab", name="Ranks", exact=True)).to_have_count(0)  # a single trace
        main(ranks_page).get_by_text("Open your own trace").click()
        files = [str(GLOO_CPU / f"gloo_ddp_rank{r}.json.gz") for r in (0, 1)]
        main(ranks_page).locator('input[type="file"]').set_input_files(files)
        tab = ranks_page.get_by_role("tab", name="Ranks", exact=True)
        expect(tab).to_have_attribute("aria-selected", "true", timeout=UI_S * 1000)
        wait_idle(ranks_page)
        expect(main(ranks_page).get_by_text("2 ranks of a world of 2 over gloo")).to_be_visible()
        expect(main(ranks_page).get_by_text(re.compile(r"first events at rank 0 \+0\.0 µs, rank 1 \+"))).to_be_visible()
        expect(main(ranks_page).get_by_text("Straggler: rank 1 starts its collectives last")).to_be_visible()
        expect(main(ranks_page).locator('[data-testid="stDataFrame"]').first).to_be_visible()
        chart = main(ranks_page).locator('[data-testid="stVegaLiteChart"]')
        expect(chart.locator("canvas, svg").first).to_be_visible()
        shot(ranks_page, "ranks")
    finally:
        ranks_page.close()

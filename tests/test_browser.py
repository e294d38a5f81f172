"""The page in a real browser: `streamlit run app.py` + headless Chromium driven by Playwright.

What AppTest cannot show: the websocket round trips, the form's slider and text box under a
keyboard, the Vega chart actually drawn, a real file download and a real file upload, and
status lines arriving while runs wait in the queue. Screenshots go to artifacts/ (git-ignored).

Chromium comes from the system (/usr/bin/chromium, Debian's package); Playwright never
downloads a browser here. Outside CI a missing Chromium skips this test with the reason;
in CI (CI=true) it fails, so the browser check cannot silently disappear.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking"]
H200_TRACE = ROOT / "tests" / "data" / "matmul_add_4096_bf16.json.gz"
LABEL = "browser_step_label"
# Generous: 2 shared cores, and the first run may wait for the worker's torch import and warm-up.
SERVER_START_S = 180
RUN_S = 300
UI_S = 120

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1500)]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _require(condition: bool, reason: str) -> None:
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI=true but {reason}; .ci/run installs it")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"streamlit exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"streamlit did not answer within {SERVER_START_S} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def playwright_api():
    """Playwright's sync API, checked before any server starts (skip or fail at once)."""
    _require(Path(CHROMIUM).exists(), f"{CHROMIUM} is missing (apt-get install chromium)")
    try:
        from playwright import sync_api
    except ImportError:
        _require(False, "playwright is not installed (pip install -r requirements-dev.txt)")
    return sync_api


@pytest.fixture(scope="module")
def server(playwright_api):
    """`streamlit run app.py` on a free port; stopped (with its workers) whatever happens."""
    ARTIFACTS.mkdir(exist_ok=True)
    port = _free_port()
    log = ARTIFACTS / "browser_server.log"
    env = {**os.environ, "KINETO_LOG_LEVEL": "6", "PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:
        # Own process group: the profiling workers are the server's children and go with it.
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
             "--server.headless", "true", "--server.address", "127.0.0.1"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log)
        yield url
    finally:
        _stop(process)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # streamlit stops; the service's atexit stops workers
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:  # whatever is left of the group this fixture created (a worker that did not exit)
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if process.poll() is None:
        process.wait(timeout=10)


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


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"browser_{name}.png"))


IDLE_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return app && app.dataset.testScriptState === "notRunning"
        && !document.querySelector('[data-testid="stSkeleton"]');
}"""


def wait_idle(page) -> None:
    """Until the script run is over and every widget is drawn (no loading skeletons: widget
    code loads lazily, slowly on a busy machine). On a fresh server the first page run ends
    only once the profiling worker has warmed up (ui.run.await_worker)."""
    page.wait_for_timeout(300)
    page.wait_for_function(IDLE_JS, timeout=RUN_S * 1000)
    page.wait_for_timeout(300)


def open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()
    wait_idle(page)


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

    # A lesson pair: both runs queue at once; the status box says where each one is.
    page.evaluate("""() => {
        window.__statusLines = [];
        new MutationObserver(() => window.__statusLines.push(document.body.innerText))
            .observe(document.body, {subtree: true, childList: true, characterData: true});
    }""")
    lesson = sidebar(page).locator('[data-testid="stSelectbox"]').filter(has_text="Lesson")
    lesson.click()
    page.get_by_role("option", name="Cold vs warm: why the first step is slow").click()
    wait_idle(page)
    sidebar(page).get_by_role("button", name="Run lesson").click()
    expect(main(page).get_by_text("Profiled cold and warm in")).to_be_attached(timeout=RUN_S * 1000)
    wait_idle(page)
    seen = "\n".join(page.evaluate("() => window.__statusLines"))
    # One status line per run. Whether "warm" is ever drawn as queued depends on how fast
    # "cold" runs (0.1 s at 256³ here: often not); the queue position in real pages is shown by
    # bench/load_test.py (highest position seen) and the wording by test_app's status test.
    status = sorted({line for line in seen.splitlines() if line.startswith(("cold:", "warm:"))})
    assert any(line.startswith("warm: ") for line in status), status
    assert "cold: " in seen

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

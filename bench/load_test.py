"""Workshop load test: many real browser sessions against one `streamlit run app.py`.

    python bench/load_test.py                  # 20 sessions; writes "Workshop load test" in BENCHMARKS.md
    python bench/load_test.py --quick --no-write   # 3 sessions, BENCHMARKS.md untouched (CI)
    python bench/load_test.py --sessions 30 --port 8599

What an attendee does, N times at once: each session is its own browser context (its own
Streamlit session) in one headless Chromium driven by Playwright's async API. It loads the
page, types its own step label (``attendee_07``) and picks its own size (M=K=N from 64, 128,
256 with the sliders, by keyboard), then every session clicks "Run profile" at the same
moment. One CPU worker runs the profiles one at a time, so the runs wait in the service's
queue; each page shows its queue position, and an in-page observer keeps the highest one it
saw (the evidence that the sessions overlapped in the queue).

Then each session checks that it sees only its own work: the Showing box names its run, the
Table view's text table and CSV download hold its label and no other attendee's, and the
trace from the Trace view's download (gunzip → JSON) has its label among the user_annotation
names and no other attendee's. At the end the server must answer /_stcore/health with "ok"
and a new session must still load the page and get a run through.

Timing: "click → result" runs from the DOM click event on "Run profile" to the moment the
Showing box names the new run (both taken in the page with Date.now(), checked every 50 ms),
so Playwright's polling does not inflate it; the page also notes when its status box first
says "Profiling …" (the server ran the click) and "Profiled …", which splits the wait. Total
wall = first click → last result; runs/min = sessions / total wall. A session that has its
result goes on to its checks while the others still wait, as an attendee would. Page loads
are staggered (``--load-concurrency`` at a time): 20 Chromium pages starting at once on 2
cores only measure the box, not the lab; the clicks are not staggered.

Where the CPU goes: CPU seconds of Chromium, the server and its worker from the clicks to the
last result, and over 5 s with every page loaded and idle (the baseline). On a small box the
browsers compete with the server for the same cores, which a workshop's laptops do not.
Memory: the lowest available system memory and the peak RSS of the server (with its worker)
and of Chromium (all its processes; shared pages are counted per process, so an upper bound),
sampled every second.

Chromium comes from the system (/usr/bin/chromium); Playwright never downloads a browser.
Exit status 0 only if every session completed with isolation holding, the server is healthy,
the new session worked and (full runs) the sessions overlapped in the queue.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime as dt
import gzip
import io
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks_md import write_section  # bench/ is on sys.path when this script runs

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
BENCHMARKS = ROOT / "BENCHMARKS.md"
SECTION_TITLE = "## Workshop load test"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking"]
# M=K=N per session, rotating: small enough that 20 CPU runs take seconds, distinct so that
# each session's result names its own shape.
SIZES = (64, 128, 256)
# The form's sliders start at RunConfig's default (1024); each ArrowLeft halves the value.
SLIDER_START = 1024
LABEL_PREFIX = "attendee_"
AFTER_LABEL = "after_load_check"
# Generous on 2 shared cores: the server's first page run waits for the worker's torch import
# and warm-up; 20 runs queue behind one CPU worker; 20 pages redraw at once.
SERVER_START_S = 180
PAGE_LOAD_S = 300
UI_S = 300
# Click → result: a 256³ CPU run takes well under 2 s; allow 30 s per queued run on top.
RUN_BASE_S = 120
RUN_PER_SESSION_S = 30
# Seconds of CPU accounting with every page loaded and idle, before the clicks (a baseline).
IDLE_SAMPLE_S = 5.0
# The in-page clock check for "result visible" (ms): the precision of click → result.
RESULT_CHECK_MS = 50

IDLE_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return app && app.dataset.testScriptState === "notRunning"
        && !document.querySelector('[data-testid="stSkeleton"]');
}"""

# Installed in every page before the click: records the DOM click on "Run profile", the first
# moment the Showing box names this session's run, and every queue position the page shows.
PROBE_JS = """(label) => {
    window.__clickAt = null; window.__resultAt = null; window.__maxQueuePos = 0; window.__queuePositions = [];
    document.addEventListener("click", (e) => {
        const button = e.target.closest && e.target.closest("button");
        if (button && button.innerText.includes("Run profile") && window.__clickAt === null) {
            window.__clickAt = Date.now();
        }
    }, true);
    const prefix = "Run: " + label + " \\u00b7";
    const timer = setInterval(() => {
        if (window.__clickAt === null) return;
        for (const input of document.querySelectorAll('input[role="combobox"]')) {
            if (input.value.startsWith(prefix)) { window.__resultAt = Date.now(); clearInterval(timer); return; }
        }
    }, %d);
    window.__acceptedAt = null; window.__profiledAt = null;
    const scan = (text) => {
        if (!text) return;
        // The status box: "Profiling …" once the server ran the click, "Profiled … in N s" at the end.
        if (window.__acceptedAt === null && text.includes("Profiling matmul_add")) window.__acceptedAt = Date.now();
        if (window.__profiledAt === null && text.includes("Profiled matmul_add")) window.__profiledAt = Date.now();
        for (const m of text.matchAll(/queued \\u2014 position (\\d+)/g)) {
            const pos = Number(m[1]);
            window.__queuePositions.push(pos);
            if (pos > window.__maxQueuePos) window.__maxQueuePos = pos;
        }
    };
    new MutationObserver((mutations) => {
        for (const m of mutations) {
            if (m.type === "characterData") scan(m.target.textContent);
            for (const node of m.addedNodes) scan(node.textContent);
        }
    }).observe(document.body, {subtree: true, childList: true, characterData: true});
}""" % RESULT_CHECK_MS


# The result's time (a number), or the text of an error or exception box the page shows instead.
RESULT_OR_ERROR_JS = """() => {
    if (window.__resultAt) return window.__resultAt;
    const box = document.querySelector('[data-testid="stException"], [data-testid="stAlertContentError"], [data-testid="stAlertContentWarning"]');
    return box ? (box.innerText || "error") : null;
}"""


@dataclass
class Session:
    index: int
    label: str
    size: int
    context: object = None
    page: object = None
    load_s: float | None = None
    click_ms: float | None = None  # Date.now() in the page
    result_ms: float | None = None
    accepted_ms: float | None = None  # the status box "Profiling …" appeared: the server ran the click
    profiled_ms: float | None = None  # "Profiled … in N s" appeared: the run is back
    server_wait_s: float | None = None  # "Profiled … in N s" as the page reported it
    max_queue_pos: int = 0
    queue_updates: int = 0
    completed: bool = False
    isolated: bool = False
    checks: dict = field(default_factory=dict)
    error: str | None = None

    @property
    def wait_s(self) -> float | None:
        if self.click_ms is None or self.result_ms is None:
            return None
        return (self.result_ms - self.click_ms) / 1000

    def part_s(self, start: str, end: str) -> float | None:
        """Seconds between two of click/accepted/profiled/result (page clock), or None."""
        a, b = getattr(self, f"{start}_ms"), getattr(self, f"{end}_ms")
        return None if a is None or b is None else (b - a) / 1000


# --------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, log: Path) -> subprocess.Popen:
    """`streamlit run app.py` in its own process group (its profiling worker goes with it)."""
    env = {**os.environ, "KINETO_LOG_LEVEL": "6", "PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
             "--server.headless", "true", "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def health(url: str) -> str | None:
    """The body of GET /_stcore/health ("ok" when the server is up), or None."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=10) as response:
            return response.read().decode().strip() if response.status == 200 else None
    except OSError:
        return None


def wait_healthy(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        if health(url) == "ok":
            return
        time.sleep(0.5)
    raise RuntimeError(f"streamlit did not answer within {SERVER_START_S} s:\n{log.read_text()[-3000:]}")


def stop_server(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # streamlit stops; the service's atexit stops workers
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:  # whatever is left of the group we created (a worker that did not exit)
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if process.poll() is None:
        process.wait(timeout=10)


# --------------------------------------------------------------------------- machine and memory


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class MemorySampler:
    """Every second: system available memory, RSS of the server's process group and of Chromium."""

    def __init__(self, server_pid: int):
        import psutil

        self._psutil = psutil
        self.server_pid = server_pid
        self.min_available_bytes = psutil.virtual_memory().available
        self.peak_server_bytes = 0
        self.peak_chromium_bytes = 0
        self.peak_chromium_procs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _rss(self, procs) -> int:
        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
                pass
        return total

    def sample(self) -> None:
        ps = self._psutil
        self.min_available_bytes = min(self.min_available_bytes, ps.virtual_memory().available)
        try:
            server = ps.Process(self.server_pid)
            self.peak_server_bytes = max(self.peak_server_bytes,
                                         self._rss([server, *server.children(recursive=True)]))
        except ps.NoSuchProcess:
            pass
        me = ps.Process()
        chromium = [p for p in me.children(recursive=True) if _is_chromium(p)]
        self.peak_chromium_procs = max(self.peak_chromium_procs, len(chromium))
        self.peak_chromium_bytes = max(self.peak_chromium_bytes, self._rss(chromium))

    def cpu_snapshot(self) -> dict[str, dict[int, float]]:
        """CPU seconds (user + system) so far per process: the server, its worker(s), Chromium."""
        ps = self._psutil
        groups: dict[str, list] = {"server": [], "worker": [], "chromium": []}
        try:
            server = ps.Process(self.server_pid)
            groups["server"] = [server]
            groups["worker"] = server.children(recursive=True)
        except ps.NoSuchProcess:
            pass
        groups["chromium"] = [p for p in ps.Process().children(recursive=True) if _is_chromium(p)]
        snapshot = {}
        for name, procs in groups.items():
            snapshot[name] = {}
            for p in procs:
                try:
                    t = p.cpu_times()
                    snapshot[name][p.pid] = t.user + t.system
                except (ps.NoSuchProcess, ps.AccessDenied):
                    pass
        return snapshot

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self.sample()

    def start(self) -> "MemorySampler":
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()


def cpu_used(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]) -> dict[str, float]:
    """CPU seconds per group between two snapshots (a process born in between counts in full)."""
    return {name: sum(t - before.get(name, {}).get(pid, 0.0) for pid, t in pids.items())
            for name, pids in after.items()}


def _is_chromium(process) -> bool:
    try:
        return "chrom" in process.name().lower()
    except Exception:  # noqa: BLE001 - a process that just exited
        return False


# --------------------------------------------------------------------------- one session


async def wait_idle(page, timeout_s: float = UI_S) -> None:
    """Until the script run is over and every widget is drawn (see tests/test_browser.py)."""
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


async def load_and_fill(browser, url: str, session: Session, expect) -> None:
    """Open the page in a fresh context, set the sizes and the label; ready to click."""
    t0 = time.monotonic()
    session.context = await browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    session.context.set_default_timeout(UI_S * 1000)
    page = session.page = await session.context.new_page()
    await page.goto(url, timeout=PAGE_LOAD_S * 1000)
    await expect(sidebar(page).get_by_text("Detected:")).to_be_visible(timeout=PAGE_LOAD_S * 1000)
    await wait_idle(page, PAGE_LOAD_S)
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
    await page.evaluate(PROBE_JS, session.label)
    session.load_s = time.monotonic() - t0


async def click_run(session: Session) -> None:
    await sidebar(session.page).get_by_role("button", name="Run profile").click()


async def await_result(session: Session, expect, *, timeout_s: float) -> None:
    page = session.page
    handle = await page.wait_for_function(RESULT_OR_ERROR_JS, timeout=timeout_s * 1000, polling=500)
    outcome = await handle.json_value()
    if isinstance(outcome, str):
        raise RuntimeError(f"the page shows an error instead of a result: {outcome[:300]}")
    session.result_ms = outcome
    session.click_ms = await page.evaluate("() => window.__clickAt")
    session.accepted_ms = await page.evaluate("() => window.__acceptedAt")
    session.profiled_ms = await page.evaluate("() => window.__profiledAt")
    session.max_queue_pos = await page.evaluate("() => window.__maxQueuePos")
    session.queue_updates = await page.evaluate("() => window.__queuePositions.length")
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


# --------------------------------------------------------------------------- the load test


@dataclass
class LoadReport:
    sessions: list[Session]
    warmup_load_s: float
    clicks_spread_s: float
    total_wall_s: float
    overall_s: float
    health_after: str | None
    new_session_ok: bool
    new_session_wait_s: float | None
    new_session_error: str | None
    memory: MemorySampler | None
    load_concurrency: int
    cpu_phase_s: dict[str, float]  # CPU seconds per process group from the clicks to the last result
    phase_s: float  # that phase's wall time (Python clock, ±0.5 s)
    cpu_idle_s: dict[str, float]  # the same over idle_s with every page loaded and nothing clicked
    idle_s: float


async def run_load(url: str, n: int, *, server_pid: int, load_concurrency: int) -> LoadReport:
    from playwright.async_api import async_playwright, expect

    labels = [f"{LABEL_PREFIX}{i:02d}" for i in range(n)]
    sessions = [Session(index=i, label=label, size=SIZES[i % len(SIZES)]) for i, label in enumerate(labels)]
    folder = Path(tempfile.mkdtemp(prefix="load_test_"))
    ARTIFACTS.mkdir(exist_ok=True)
    started = time.monotonic()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        memory = MemorySampler(server_pid).start()
        try:
            # The server's first page run waits for the worker's warm-up: pay it once, apart.
            t0 = time.monotonic()
            warm = await browser.new_context()
            warm_page = await warm.new_page()
            await warm_page.goto(url, timeout=PAGE_LOAD_S * 1000)
            await expect(sidebar(warm_page).get_by_text("Detected:")).to_be_visible(timeout=PAGE_LOAD_S * 1000)
            await warm.close()
            warmup_load_s = time.monotonic() - t0

            gate = asyncio.Semaphore(max(1, load_concurrency))

            async def prepare(session: Session) -> None:
                async with gate:
                    try:
                        await load_and_fill(browser, url, session, expect)
                    except Exception as exc:  # noqa: BLE001 - recorded per session
                        session.error = f"load: {type(exc).__name__}: {str(exc).splitlines()[0]}"

            await asyncio.gather(*(prepare(s) for s in sessions))
            ready = [s for s in sessions if s.error is None]
            print(f"{len(ready)}/{n} pages loaded and filled; clicking 'Run profile' in all of them", flush=True)

            # Baseline: what the loaded, idle pages and the server burn with nothing happening.
            idle_before, idle_t0 = memory.cpu_snapshot(), time.monotonic()
            await asyncio.sleep(IDLE_SAMPLE_S)
            cpu_idle = cpu_used(idle_before, memory.cpu_snapshot())
            idle_s = time.monotonic() - idle_t0

            # Every session clicks at once: the runs meet in the service's queue.
            cpu_before, phase_t0 = memory.cpu_snapshot(), time.monotonic()
            outcomes = await asyncio.gather(*(click_run(s) for s in ready), return_exceptions=True)
            for session, outcome in zip(ready, outcomes):
                if isinstance(outcome, BaseException):
                    session.error = f"click: {type(outcome).__name__}: {str(outcome).splitlines()[0]}"
            clicked = [s for s in ready if s.error is None]

            async def finish(session: Session) -> None:
                try:
                    await await_result(session, expect, timeout_s=RUN_BASE_S + RUN_PER_SESSION_S * n)
                except Exception as exc:  # noqa: BLE001
                    session.error = f"result: {type(exc).__name__}: {str(exc).splitlines()[0]}"
                    return
                try:
                    await check_isolation(session, labels, folder, expect)
                except Exception as exc:  # noqa: BLE001
                    session.error = f"checks: {type(exc).__name__}: {str(exc).splitlines()[0]}"

            # CPU is read when the last result is in, before the isolation checks add their own load.
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
            for session in sessions:
                if session.error and session.page is not None:
                    try:
                        await session.page.screenshot(path=str(ARTIFACTS / f"load_{session.label}.png"))
                    except Exception:  # noqa: BLE001 - best effort
                        pass
            for session in sessions:
                if session.context is not None:
                    await session.context.close()

            health_after = health(url)
            new_ok, new_wait_s, new_error = await new_session_check(browser, url, expect)
        finally:
            memory.stop()
            await browser.close()
            shutil.rmtree(folder, ignore_errors=True)
    done = [s for s in sessions if s.completed]
    clicks = [s.click_ms for s in sessions if s.click_ms is not None]
    results = [s.result_ms for s in done]
    return LoadReport(
        sessions=sessions, warmup_load_s=warmup_load_s,
        clicks_spread_s=(max(clicks) - min(clicks)) / 1000 if clicks else 0.0,
        total_wall_s=(max(results) - min(clicks)) / 1000 if results and clicks else 0.0,
        overall_s=time.monotonic() - started, health_after=health_after, new_session_ok=new_ok,
        new_session_wait_s=new_wait_s, new_session_error=new_error, memory=memory,
        load_concurrency=load_concurrency, cpu_phase_s=cpu_phase, phase_s=phase_s,
        cpu_idle_s=cpu_idle, idle_s=idle_s)


async def new_session_check(browser, url: str, expect) -> tuple[bool, float | None, str | None]:
    """After the load: a fresh visitor loads the page and gets a 64³ run through."""
    session = Session(index=-1, label=AFTER_LABEL, size=64)
    try:
        await load_and_fill(browser, url, session, expect)
        await click_run(session)
        await await_result(session, expect, timeout_s=RUN_BASE_S + RUN_PER_SESSION_S)
        value = await main_area(session.page).get_by_role("combobox", name="Showing").input_value()
        ok = value.startswith(f"Run: {AFTER_LABEL} · ")
        return ok, session.wait_s, None if ok else f"Showing box holds {value!r}"
    except Exception as exc:  # noqa: BLE001
        if session.page is not None:
            try:
                await session.page.screenshot(path=str(ARTIFACTS / f"load_{AFTER_LABEL}.png"))
            except Exception:  # noqa: BLE001 - best effort
                pass
        return False, None, f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    finally:
        if session.context is not None:
            await session.context.close()


# --------------------------------------------------------------------------- figures


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (p95 of 20 values = the 19th smallest)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Figures:
    sessions: int
    completed: int
    isolated: int
    wait_p50_s: float | None
    wait_p95_s: float | None
    wait_max_s: float | None
    runs_per_min: float | None
    max_queue_pos: int
    sessions_saw_queue: int

    @property
    def isolation_holds(self) -> bool:
        return self.isolated == self.completed == self.sessions


def figures(report: LoadReport) -> Figures:
    sessions = report.sessions
    waits = [s.wait_s for s in sessions if s.wait_s is not None]
    done = [s for s in sessions if s.completed]
    return Figures(
        sessions=len(sessions), completed=len(done), isolated=sum(s.isolated for s in done),
        wait_p50_s=statistics.median(waits) if waits else None,
        wait_p95_s=percentile(waits, 95) if waits else None,
        wait_max_s=max(waits) if waits else None,
        runs_per_min=len(done) / report.total_wall_s * 60 if report.total_wall_s > 0 else None,
        max_queue_pos=max((s.max_queue_pos for s in sessions), default=0),
        sessions_saw_queue=sum(s.max_queue_pos > 0 for s in sessions))


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


# Where a session's wait goes, on the page's clock: (start, end, what it covers).
PARTS = (
    ("click", "accepted", "click → status box (the server ran the click and queued the run)"),
    ("accepted", "profiled", "status box → \"Profiled\" (queue and run, as the page saw them)"),
    ("profiled", "result", "\"Profiled\" → Showing names the run (the page's redraw)"),
)


def part_medians(report: LoadReport) -> list[tuple[str, float | None]]:
    medians = []
    for start, end, what in PARTS:
        values = [v for s in report.sessions if s.completed and (v := s.part_s(start, end)) is not None]
        medians.append((what, statistics.median(values) if values else None))
    return medians


def breakdown_line(report: LoadReport) -> str:
    server = [s.server_wait_s for s in report.sessions if s.server_wait_s is not None]
    parts = "; ".join(f"{what}: {_s(value)}" for what, value in part_medians(report))
    drew = sum(s.accepted_ms is not None for s in report.sessions if s.completed)
    done = sum(s.completed for s in report.sessions)
    if drew < done:
        parts += (f" ({done - drew} of {done} pages never drew the \"Profiling\" state: their redraw caught up "
                  "only once the run was back, so only the last part is known for them)")
    own = f"; the page's own \"Profiled … in N s\" (server clock, from the run's submission): {_s(statistics.median(server))}" \
        if server else ""
    return f"Where the wait goes (medians): {parts}{own}."


def cpu_line(report: LoadReport) -> str:
    cpu = report.cpu_phase_s
    available = (os.cpu_count() or 1) * report.phase_s
    parts = ", ".join(f"{name} {cpu.get(name, 0.0):.1f}" for name in ("chromium", "server", "worker"))
    idle = ", ".join(f"{name} {report.cpu_idle_s.get(name, 0.0):.1f}" for name in ("chromium", "server", "worker"))
    return (f"CPU seconds from the clicks to the last result ({report.phase_s:.1f} s wall, "
            f"{available:.0f} CPU-s on {os.cpu_count()} cores): {parts}; for comparison, the {report.idle_s:.0f} s "
            f"before the clicks with every page loaded and idle: {idle}.")


def session_table(report: LoadReport) -> str:
    rows = ["| session | M=K=N | page load | click → result | click → status box | status box → \"Profiled\" | "
            "\"Profiled\" → Showing | page's own \"Profiled in\" | highest queue position | isolated |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in report.sessions:
        iso = "yes" if s.isolated else ("no: " + ", ".join(k for k, v in s.checks.items() if not v)
                                        if s.checks else "—")
        if s.error:
            iso = f"error ({s.error[:80]})"
        parts = " | ".join(_s(s.part_s(start, end)) for start, end, _ in PARTS)
        rows.append(f"| {s.label} | {s.size} | {_s(s.load_s)} | {_s(s.wait_s)} | {parts} | {_s(s.server_wait_s)} | "
                    f"{s.max_queue_pos or '—'} | {iso} |")
    return "\n".join(rows)


def summary_table(f: Figures, report: LoadReport) -> str:
    rpm = "—" if f.runs_per_min is None else f"{f.runs_per_min:.1f}"
    return "\n".join([
        "| sessions completed | isolation holds | click → result p50 | p95 | max | total wall (first click → last result) | runs/min | highest queue position seen | server health after | new session after |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|---|",
        f"| {f.completed}/{f.sessions} | {'yes' if f.isolation_holds else 'no'} ({f.isolated}/{f.sessions}) | "
        f"{_s(f.wait_p50_s)} | {_s(f.wait_p95_s)} | {_s(f.wait_max_s)} | {report.total_wall_s:.1f} s | {rpm} | "
        f"{f.max_queue_pos} | {report.health_after or 'no answer'} | "
        f"{'works' if report.new_session_ok else 'FAILED'} ({_s(report.new_session_wait_s)}) |",
    ])


def machine_line(load_at_start: tuple[float, float, float]) -> str:
    import playwright
    import streamlit

    chromium = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    pw = getattr(playwright, "__version__", None)
    if pw is None:
        from importlib.metadata import version

        pw = version("playwright")
    return (f"{os.cpu_count()} CPUs ({cpu_model()}), "
            f"{_gib(_total_memory())} GiB memory, Python {platform.python_version()}, streamlit {streamlit.__version__}, "
            f"Playwright {pw}, {chromium or 'Chromium'}; load average at start "
            f"{load_at_start[0]:.2f} / {load_at_start[1]:.2f} / {load_at_start[2]:.2f} (1 / 5 / 15 min)")


def _total_memory() -> int:
    import psutil

    return psutil.virtual_memory().total


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f}"


def reading(report: LoadReport, f: Figures) -> str:
    """The section's reading, from this run's figures (no hard-coded conclusion)."""
    cpu = report.cpu_phase_s
    total = sum(cpu.get(name, 0.0) for name in ("chromium", "server", "worker")) or 1.0
    share = {name: 100 * cpu.get(name, 0.0) / total for name in ("chromium", "server", "worker")}
    server = [s.server_wait_s for s in report.sessions if s.server_wait_s is not None]
    own = _s(statistics.median(server)) if server else "—"
    return (f"Reading: here the browsers and the server share {os.cpu_count()} cores. While the runs were in "
            f"flight, Chromium took {share['chromium']:.0f} % of the CPU used, the server's script runs "
            f"{share['server']:.0f} % and the profiling worker {share['worker']:.0f} %. The page's own figure "
            f"(the run's submission → its result, server clock) has a median of {own} against {_s(f.wait_p50_s)} "
            "from the click to the result on screen: the rest is the click reaching the server's script and the "
            "redraws reaching the pages, both waiting for CPU that the pages themselves use. In a workshop the "
            "browsers run on the attendees' laptops and leave the cores to the server, so the waits measured here "
            "overstate theirs; the "
            f"server stayed healthy and a new session right after got its 64³ result in {_s(report.new_session_wait_s)}.")


def markdown_section(report: LoadReport, f: Figures, command: str, load_at_start) -> str:
    mem = report.memory
    memory_line = ""
    if mem is not None:
        memory_line = (f"Memory during the test: lowest available system memory {_gib(mem.min_available_bytes)} GiB; "
                       f"peak RSS of the server with its worker {_gib(mem.peak_server_bytes)} GiB; peak RSS of Chromium "
                       f"{_gib(mem.peak_chromium_bytes)} GiB over up to {mem.peak_chromium_procs} processes "
                       "(summed RSS counts shared pages once per process: an upper bound).")
    overlap = (f"{f.sessions_saw_queue} of {f.sessions} sessions were shown a queue position; the highest was "
               f"{f.max_queue_pos} (that many runs waiting, the first of them next, while one ran).")
    failures = [s for s in report.sessions if s.error or not s.isolated]
    failure_lines = [f"- {s.label}: {s.error or 'isolation: ' + str(s.checks)}" for s in failures]
    return "\n".join([
        SECTION_TITLE,
        "",
        f"Command: `{command}` — {dt.date.today().isoformat()}, {machine_line(load_at_start)}.",
        "",
        "Method: `streamlit run app.py` on a free local port (one CPU worker, default host settings), "
        f"then {f.sessions} real sessions, each its own browser context in one headless Chromium (Playwright "
        "async API). A first page load pays the worker's warm-up apart "
        f"({report.warmup_load_s:.1f} s). Page loads are staggered, {report.load_concurrency} at a time; each "
        "session sets M=K=N (64, 128 or 256, rotating) with the sliders and its own step label "
        "(`attendee_00` …), then all sessions click \"Run profile\" together "
        f"(clicks spread over {report.clicks_spread_s:.2f} s). Click → result: DOM click to the Showing box "
        f"naming the run, timed in the page (±{RESULT_CHECK_MS} ms). Then each session checks its Showing box and "
        "page text, the Table view (text table and CSV download) and the Trace view's .json.gz download "
        "(user_annotation names): its own label present, no other attendee's. Afterwards: GET "
        "/_stcore/health, and a new session loads the page and runs a 64³ profile.",
        "",
        summary_table(f, report),
        "",
        f"Overlap: {overlap} Script wall time, server start excluded: {report.overall_s:.0f} s.",
        "",
        breakdown_line(report),
        "",
        cpu_line(report),
        "",
        memory_line,
        "",
        "<details><summary>Per session</summary>",
        "",
        session_table(report),
        "",
        "</details>",
        *([""] + failure_lines if failure_lines else []),
        "",
        reading(report, f),
        "",
    ])


def print_report(report: LoadReport, f: Figures) -> None:
    print()
    print(session_table(report))
    print()
    print(summary_table(f, report))
    print()
    print(f"completed: {f.completed}/{f.sessions}")
    print(f"isolation holds: {'yes' if f.isolation_holds else 'no'} ({f.isolated}/{f.sessions} sessions saw only their own label)")
    print(f"click -> result: p50 {_s(f.wait_p50_s)}, p95 {_s(f.wait_p95_s)}, max {_s(f.wait_max_s)}")
    rpm = "—" if f.runs_per_min is None else f"{f.runs_per_min:.1f}"
    print(f"total wall (first click -> last result): {report.total_wall_s:.1f} s; throughput {rpm} runs/min")
    print(f"highest queue position seen: {f.max_queue_pos} ({f.sessions_saw_queue}/{f.sessions} sessions saw one); "
          f"clicks spread over {report.clicks_spread_s:.2f} s")
    print(breakdown_line(report))
    print(cpu_line(report))
    print(f"server health after: {report.health_after or 'no answer'}")
    print(f"new session after the load: {'works' if report.new_session_ok else 'FAILED: ' + str(report.new_session_error)}")
    if report.memory:
        m = report.memory
        print(f"memory: min available {_gib(m.min_available_bytes)} GiB, server peak RSS {_gib(m.peak_server_bytes)} GiB, "
              f"chromium peak RSS {_gib(m.peak_chromium_bytes)} GiB ({m.peak_chromium_procs} processes)")
    for s in report.sessions:
        if s.error:
            print(f"  {s.label}: {s.error}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=None, help="concurrent sessions (default 20; --quick: 3)")
    parser.add_argument("--quick", action="store_true", help="3 sessions (CI)")
    parser.add_argument("--no-write", action="store_true", help="do not touch BENCHMARKS.md")
    parser.add_argument("--port", type=int, default=None, help="server port (default: a free one)")
    parser.add_argument("--load-concurrency", type=int, default=4,
                        help="pages loading at once before the clicks (default 4)")
    args = parser.parse_args()
    n = args.sessions or (3 if args.quick else 20)
    if n < 1:
        parser.error("--sessions must be at least 1")
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing: apt-get install chromium (Playwright never downloads one here)")
        return 2
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        print("playwright is not installed: pip install -r requirements-dev.txt")
        return 2

    load_at_start = os.getloadavg()
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    ARTIFACTS.mkdir(exist_ok=True)
    log = ARTIFACTS / "load_test_server.log"
    print(f"server: {url} (log {log.relative_to(ROOT)}); {n} sessions; load average {load_at_start[0]:.2f}", flush=True)
    process = start_server(port, log)
    try:
        wait_healthy(url, process, log)
        report = asyncio.run(run_load(url, n, server_pid=process.pid, load_concurrency=args.load_concurrency))
    finally:
        stop_server(process)
    f = figures(report)
    print_report(report, f)
    overlapped = args.quick or n < 2 or f.max_queue_pos >= 2
    if not overlapped:
        print(f"the sessions did not overlap in the queue (highest position {f.max_queue_pos}): not a load test")
    if not args.no_write:
        flags = [a for a in sys.argv[1:]]
        command = " ".join(["python bench/load_test.py", *flags])
        write_section(markdown_section(report, f, command, load_at_start), BENCHMARKS)
        print(f"wrote the '{SECTION_TITLE[3:]}' section of {BENCHMARKS.name}")
    ok = (f.completed == f.sessions and f.isolation_holds and report.health_after == "ok"
          and report.new_session_ok and overlapped)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

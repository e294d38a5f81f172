"""Uploads under load: many real browser sessions upload a large trace each at the same moment.

    python bench/bench_uploads.py                    # 12 sessions, a ~500 MB-JSON trace; writes "Uploads under load"
    python bench/bench_uploads.py --quick --no-write # 3 sessions, a ~20 MB-JSON trace (tests/test_bench_quick.py)
    python bench/bench_uploads.py --sessions 6 --megabytes 200

The trace is the H200 seed trace tiled to the size asked (``bench/make_large_trace.py``: copies
shifted in time, ids renumbered) and gzipped so it fits the upload limit; it is made once and
kept in /tmp/profiler_lab_bench/uploads. ``streamlit run app.py`` starts with default host
settings; one headless Chromium (Playwright, async) opens one context per session, loads
the pages a few at a time, opens "Open your own trace" in each, and then every session sets the
file on the uploader at the same moment. Each session waits for its outcome: the Showing box
names its upload with the Summary drawn ("summary"), or an error box saying why it cannot be
opened ("refusal"); the highest queue position its status line showed is kept.

Meanwhile another session (the observer) clicks "Run profile" (64³, CPU) again and again:
click → result (DOM click to the Showing box naming the new run, page clock) while the uploads
are read, beside the same click with nothing else going on (before the uploads). Every 0.5 s
the bench samples the resident memory of the server process alone, of its trace readers and
of its profiling worker, the system's available memory, and the time GET /_stcore/health takes.
The server's peak RSS must stay under a bound stated before the run from the trace's JSON
size: idle RSS + (sessions + readers) × 0.5 × JSON (each kept result, one in flight per reader;
measured 0.46×) + 512 MiB. Exit status 0 only if every session got its summary or a clear
refusal, the server answered health "ok" afterwards, and its peak RSS stayed under the bound.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import make_large_trace
from benchmarks_md import write_section  # bench/ is on sys.path when this script runs
from browser_harness import (  # the server and browser helpers the load test uses, shared, not copied
    CHROMIUM,
    CHROMIUM_ARGS,
    IDLE_JS,
    free_port,
    health,
    start_server,
    stop_server,
    wait_healthy,
)
from load_driver import PAGE_LOAD_S, main_area, sidebar, wait_idle
from load_report import machine_line

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
SECTION_TITLE = "## Uploads under load"
TRACE_DIR = Path("/tmp/profiler_lab_bench/uploads")
# Parsed result per byte of JSON (0.46× measured on the 509 MB tile, lab/read/limits.py), rounded up.
RESULT_PER_JSON_BYTE = 0.5
BOUND_SLACK_BYTES = 512 * 2**20
# Upload → outcome, all sessions: 12 large reads one after another on a 2-core box, ~25 s each.
OUTCOME_S = 1800
# --quick (the CI test): 3 reads of a 20 MB trace take ~4 s here and a 64³ click ~0.3 s, so a
# minute or two is generous; every wait fails with what the page showed long before the
# test's own subprocess limit, instead of one stuck wait eating it (a CI run lost 900 s so).
QUICK_PAGE_LOAD_S = 120
QUICK_OUTCOME_S = 180
# The observer's last click may be in flight when the uploads end: it gets this long, then is cancelled.
WATCHER_GRACE_S = 60
OBSERVER_PAUSE_S = 2.0
IDLE_CLICKS = 3
LOAD_CONCURRENCY = 3

# Set before the uploads: the highest queue position the status line shows, and when it first appears.
UPLOAD_PROBE_JS = """() => {
    window.__maxPos = 0; window.__queuedAt = null;
    const scan = (text) => {
        if (!text) return;
        for (const m of text.matchAll(/waiting for a trace reader \\u2014 position (\\d+)/g)) {
            if (window.__queuedAt === null) window.__queuedAt = Date.now();
            window.__maxPos = Math.max(window.__maxPos, Number(m[1]));
        }
    };
    new MutationObserver((ms) => { for (const m of ms) {
        if (m.type === "characterData") scan(m.target.textContent);
        for (const n of m.addedNodes) scan(n.textContent);
    } }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
# "summary" once the Showing box names the upload and the Summary's cards are drawn; the text
# of an error box if one appears instead; null meanwhile.
OUTCOME_JS = """(name) => {
    const err = document.querySelector('[data-testid="stMain"] [data-testid="stAlertContentError"], [data-testid="stException"]');
    if (err) return "refusal: " + err.innerText;
    const app = document.querySelector('[data-testid="stApp"]');
    const idle = app && app.dataset.testScriptState === "notRunning";
    for (const input of document.querySelectorAll('input[role="combobox"]')) {
        if (input.value === "Upload: " + name && idle && document.querySelector('[data-testid="stMain"] [data-testid="stMetric"]')) return "summary";
    }
    return null;
}"""
# The observer: click "Run profile", then until the Showing box names a run it did not name before.
CLICK_JS = """() => {
    const box = [...document.querySelectorAll('input[role="combobox"]')].find(i => i.value.startsWith("Run: ") || i.value.startsWith("Sample: ") || i.value.startsWith("Upload: "));
    window.__before = box ? box.value : ""; window.__clickAt = Date.now();
    [...document.querySelectorAll('[data-testid="stSidebar"] button')].find(b => b.innerText.includes("Run profile")).click();
}"""
RECLICK_JS = """() => {
    [...document.querySelectorAll('[data-testid="stSidebar"] button')].find(b => b.innerText.includes("Run profile")).click();
}"""
RECLICK_S = 30
RESULT_JS = """() => {
    for (const input of document.querySelectorAll('input[role="combobox"]')) {
        if (input.value.startsWith("Run: ") && input.value !== window.__before) return Date.now() - window.__clickAt;
    }
    return null;
}"""


# --------------------------------------------------------------------------- the trace


def make_trace(megabytes: float) -> tuple[Path, int, int]:
    """The seed trace tiled to ~``megabytes`` MB of JSON, gzipped: (path, JSON bytes, events); made once."""
    TRACE_DIR.mkdir(parents=True, exist_ok=True)
    doc = make_large_trace.load_source(make_large_trace.DEFAULT_SOURCE)
    n_events = make_large_trace.events_for_megabytes(doc, megabytes)
    gz = TRACE_DIR / f"trace_{n_events}.json.gz"
    meta = gz.with_suffix(".size")
    if not (gz.exists() and meta.exists()):
        plain = make_large_trace.write_trace(doc, n_events, TRACE_DIR, gzip_too=True)
        meta.write_text(str(plain.stat().st_size))
        plain.unlink()
    return gz, int(meta.read_text()), n_events


# --------------------------------------------------------------------------- sampling


class Sampler:
    """Every 0.5 s: RSS of the server alone, its readers and its worker; available memory; health time."""

    def __init__(self, server_pid: int, url: str):
        import psutil

        self.ps, self.server_pid, self.url = psutil, server_pid, url
        self.phase = "idle"
        self.rss: dict[str, dict[str, int]] = {}  # phase → {server, readers, reader_max, worker} peaks
        self.health_ms: dict[str, list[float]] = {}
        self.min_available = psutil.virtual_memory().available
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        ps = self.ps
        self.min_available = min(self.min_available, ps.virtual_memory().available)
        try:
            server = ps.Process(self.server_pid)
            sizes = {"server": server.memory_info().rss, "readers": 0, "reader_max": 0, "worker": 0}
            for child in server.children(recursive=True):
                rss = child.memory_info().rss
                if "lab.read.reader" in " ".join(child.cmdline()):
                    sizes["readers"] += rss
                    sizes["reader_max"] = max(sizes["reader_max"], rss)
                else:
                    sizes["worker"] += rss
        except (ps.NoSuchProcess, ps.AccessDenied):
            return
        peaks = self.rss.setdefault(self.phase, {})
        for key, value in sizes.items():
            peaks[key] = max(peaks.get(key, 0), value)
        t0 = time.perf_counter()
        answer = health(self.url)
        if answer == "ok":
            self.health_ms.setdefault(self.phase, []).append((time.perf_counter() - t0) * 1000)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._sample()

    def start(self) -> Sampler:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def peak(self, key: str) -> int:
        return max((p.get(key, 0) for p in self.rss.values()), default=0)


# --------------------------------------------------------------------------- sessions


@dataclass
class Upload:
    index: int
    page: object = None
    started: float | None = None
    outcome: str | None = None  # "summary" or "refusal: …"
    seconds: float | None = None  # file set → outcome (Python clock, ±0.25 s)
    max_position: int = 0
    error: str | None = None


@dataclass
class Report:
    uploads: list[Upload]
    idle_clicks_s: list[float]
    busy_clicks_s: list[float]
    uploads_wall_s: float
    health_after: str | None
    status_text: str
    sampler: Sampler
    idle_server_rss: int = 0
    observer_errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Waits:
    """How long each kind of wait may take (seconds): the full bench's, or --quick's."""

    page_load_s: float = PAGE_LOAD_S
    outcome_s: float = OUTCOME_S


WAITS = {"full": Waits(), "quick": Waits(page_load_s=QUICK_PAGE_LOAD_S, outcome_s=QUICK_OUTCOME_S)}
T0 = time.monotonic()


def step(message: str) -> None:
    """A progress line (seconds since start): when a wait fails, the log says which phase it was."""
    print(f"[{time.monotonic() - T0:6.1f} s] {message}", flush=True)


PAGE_STATE_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    const main = document.querySelector('[data-testid="stMain"]');
    const side = document.querySelector('[data-testid="stSidebar"]');
    return {script: app ? app.dataset.testScriptState : "no app",
            skeletons: document.querySelectorAll('[data-testid="stSkeleton"]').length,
            main: main ? main.innerText.slice(0, 1500) : "no main", sidebar: side ? side.innerText.slice(0, 600) : ""};
}"""


async def describe_pages(pages: dict[str, object]) -> None:
    """What each page shows (script state, text, a screenshot in artifacts/): printed when a wait failed."""
    for name, page in pages.items():
        if page is None:
            continue
        try:
            state = await page.evaluate(PAGE_STATE_JS)
            shot = ARTIFACTS / f"bench_uploads_{name}.png"
            await page.screenshot(path=str(shot), timeout=15_000)
            print(f"--- page {name}: script {state['script']}, {state['skeletons']} skeletons, screenshot {shot}\n"
                  f"main: {state['main']}\nsidebar: {state['sidebar']}", flush=True)
        except Exception as exc:  # noqa: BLE001 - a page that cannot even be described
            print(f"--- page {name}: could not be read ({type(exc).__name__}: {exc})"[:400], flush=True)


async def open_page(browser, url: str, expect, waits: Waits):
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(waits.page_load_s * 1000)
    page = await context.new_page()
    await page.goto(url, timeout=waits.page_load_s * 1000)
    await expect(sidebar(page).get_by_text("Detected:")).to_be_visible(timeout=waits.page_load_s * 1000)
    await wait_idle(page, waits.page_load_s)
    return page


async def prepare_observer(browser, url: str, expect, waits: Waits):
    """A session with M=K=N=64 on the form (ArrowLeft halves the sliders' 1024 four times)."""
    page = await open_page(browser, url, expect, waits)
    sliders = sidebar(page).get_by_role("slider")
    for i in range(3):
        await sliders.nth(i).focus()
        for _ in range(4):
            await sliders.nth(i).press("ArrowLeft")
        await expect(sliders.nth(i)).to_have_attribute("aria-valuetext", "64")
    return page


async def click_to_result(page, waits: Waits) -> float:
    """Click "Run profile" and time it to the result. A click that left the page idle with no new
    run after ``RECLICK_S`` (a 64³ run takes ~0.3 s) was lost by the browser: it is made again,
    once, and the time still counts from the first click."""
    await page.evaluate(CLICK_JS)
    try:
        handle = await page.wait_for_function(RESULT_JS, timeout=RECLICK_S * 1000, polling=50)
    except Exception:  # noqa: BLE001 - playwright's TimeoutError
        if not await page.evaluate(IDLE_JS):
            raise
        step("a click on Run profile had no effect; clicking again")
        await page.evaluate(RECLICK_JS)
        handle = await page.wait_for_function(RESULT_JS, timeout=waits.outcome_s * 1000, polling=50)
    seconds = await handle.json_value() / 1000
    await wait_idle(page, waits.page_load_s)
    return seconds


async def prepare_upload(browser, url: str, upload: Upload, expect, gate: asyncio.Semaphore, waits: Waits) -> None:
    async with gate:
        try:
            upload.page = await open_page(browser, url, expect, waits)
            await main_area(upload.page).get_by_text("Open your own trace").click()
            await expect(main_area(upload.page).locator('input[type="file"]')).to_be_attached()
            await upload.page.evaluate(UPLOAD_PROBE_JS)
        except Exception as exc:  # noqa: BLE001 - a session that could not load is reported, not fatal
            upload.error = f"page load: {type(exc).__name__}: {exc}"[:300]


async def do_upload(upload: Upload, path: Path, waits: Waits) -> None:
    if upload.page is None:
        return
    try:
        upload.started = time.monotonic()
        await main_area(upload.page).locator('input[type="file"]').set_input_files(str(path))
        handle = await upload.page.wait_for_function(OUTCOME_JS, arg=path.name, timeout=waits.outcome_s * 1000,
                                                     polling=250)
        upload.outcome = await handle.json_value()
        upload.seconds = time.monotonic() - upload.started
        upload.max_position = await upload.page.evaluate("() => window.__maxPos")
    except Exception as exc:  # noqa: BLE001
        upload.error = f"{type(exc).__name__}: {exc}"[:300]


async def observe(page, done: asyncio.Event, clicks: list[float], errors: list[str], waits: Waits) -> None:
    """Click → result again and again until every upload has its outcome."""
    while not done.is_set():
        try:
            clicks.append(await click_to_result(page, waits))
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
        try:
            await asyncio.wait_for(done.wait(), OBSERVER_PAUSE_S)
        except asyncio.TimeoutError:
            pass


async def server_status(page, expect, waits: Waits) -> str:
    """*Server status* (workers, then the trace readers) as a fresh page run draws it (the
    observer's last run drew it while the uploads were being read)."""
    await page.reload()
    await expect(sidebar(page).get_by_text("Detected:")).to_be_visible(timeout=waits.page_load_s * 1000)
    await wait_idle(page, waits.page_load_s)
    await sidebar(page).get_by_text("Server status (for the host)").click()
    await wait_idle(page, waits.page_load_s)
    texts = sidebar(page).locator('[data-testid="stText"]')
    return "\n".join([await texts.nth(i).inner_text() for i in range(await texts.count())])


async def run_bench(url: str, n: int, path: Path, sampler: Sampler, waits: Waits) -> Report:
    from playwright.async_api import async_playwright, expect

    uploads = [Upload(i) for i in range(n)]
    pages: dict[str, object] = {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            return await _phases(browser, url, path, sampler, waits, uploads, pages, expect)
        except BaseException as exc:
            step(f"FAILED during phase {sampler.phase!r}: {type(exc).__name__}: {str(exc)[:600]}")
            await describe_pages({**pages, **{f"upload{u.index}": u.page for u in uploads}})
            raise
        finally:
            await browser.close()


async def _phases(browser, url, path, sampler, waits, uploads, pages, expect) -> Report:
    step("observer: loading the page")
    pages["observer"] = observer = await prepare_observer(browser, url, expect, waits)
    step("observer: idle clicks")
    idle = [await click_to_result(observer, waits) for _ in range(IDLE_CLICKS)]
    gate = asyncio.Semaphore(LOAD_CONCURRENCY)
    sampler.phase = "pages"
    step(f"loading {len(uploads)} upload pages")
    await asyncio.gather(*(prepare_upload(browser, url, u, expect, gate, waits) for u in uploads))
    await asyncio.sleep(2.0)
    idle_server_rss = max(sampler.rss.get(phase, {}).get("server", 0) for phase in ("idle", "pages"))
    sampler.phase = "uploads"
    done, busy, errors = asyncio.Event(), [], []
    watcher = asyncio.create_task(observe(observer, done, busy, errors, waits))
    step("uploading")
    t0 = time.monotonic()
    await asyncio.gather(*(do_upload(u, path, waits) for u in uploads))
    wall = time.monotonic() - t0
    step(f"uploads over in {wall:.1f} s: " + ", ".join(f"{u.index}: {(u.outcome or u.error or '-')[:80]}"
                                                  for u in uploads))
    done.set()
    try:
        await asyncio.wait_for(watcher, WATCHER_GRACE_S)
    except asyncio.TimeoutError:
        errors.append(f"the observer's last click had no result {WATCHER_GRACE_S} s after the uploads")
    sampler.phase = "after"
    await asyncio.sleep(2.0)
    step("reading Server status")
    status = await server_status(observer, expect, waits)
    return Report(uploads=uploads, idle_clicks_s=idle, busy_clicks_s=busy, uploads_wall_s=wall,
                  health_after=health(url), status_text=status, sampler=sampler, idle_server_rss=idle_server_rss,
                  observer_errors=errors)


# --------------------------------------------------------------------------- figures


def _gb(n: float) -> str:
    return f"{n / 2**30:.2f} GB"


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s" if values else "—"


def _pct(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))] if ordered else 0.0


def _ms(values: list[float]) -> str:
    if not values:
        return "—"
    return (f"median {statistics.median(values):.0f} ms, p95 {_pct(values, 95):.0f} ms, max {max(values):.0f} ms "
            f"({len(values)} requests)")


def bound_bytes(report: Report, json_bytes: int, readers: int) -> int:
    return int(report.idle_server_rss + (len(report.uploads) + readers) * RESULT_PER_JSON_BYTE * json_bytes
               + BOUND_SLACK_BYTES)


def verdicts(report: Report, bound: int) -> dict[str, bool]:
    clear = [u for u in report.uploads if u.outcome == "summary" or (u.outcome or "").startswith("refusal: ")]
    return {"outcomes": len(clear) == len(report.uploads), "health": report.health_after == "ok",
            "rss": report.sampler.peak("server") < bound}


def lines(report: Report, json_bytes: int, events: int, gz_bytes: int, readers: int) -> list[str]:
    s = report.sampler
    bound = bound_bytes(report, json_bytes, readers)
    ok = [u for u in report.uploads if u.outcome == "summary"]
    refused = [u for u in report.uploads if (u.outcome or "").startswith("refusal: ")]
    seconds = [u.seconds for u in ok if u.seconds is not None]
    idle_h, busy_h = s.health_ms.get("idle", []), s.health_ms.get("uploads", [])
    busy = report.busy_clicks_s
    return [
        f"trace: {json_bytes / 1e6:.0f} MB of JSON, {events:,} events, {gz_bytes / 1e6:.1f} MB gzipped",
        f"outcomes: {len(ok)} summaries, {len(refused)} clear refusals, "
        f"{len(report.uploads) - len(ok) - len(refused)} other, of {len(report.uploads)} sessions",
        f"upload -> summary: median {_med(seconds)}, first {min(seconds, default=0):.1f} s, "
        f"last {max(seconds, default=0):.1f} s; all uploads {report.uploads_wall_s:.0f} s",
        f"highest queue position seen: {max((u.max_position for u in report.uploads), default=0)} "
        f"({sum(u.max_position > 0 for u in report.uploads)}/{len(report.uploads)} sessions saw one)",
        f"other session's click -> result: idle median {_med(report.idle_clicks_s)} ({len(report.idle_clicks_s)} clicks); "
        f"during the uploads median {_med(busy)}, p95 {_pct(busy, 95):.2f} s, max {max(busy, default=0):.2f} s "
        f"({len(busy)} clicks)",
        f"GET /_stcore/health: idle {_ms(idle_h)}; during the uploads {_ms(busy_h)}",
        f"peak RSS: server {_gb(s.peak('server'))} (idle {_gb(report.idle_server_rss)}; bound {_gb(bound)}: "
        f"{'under' if s.peak('server') < bound else 'OVER'}), readers together {_gb(s.peak('readers'))}, "
        f"largest reader {_gb(s.peak('reader_max'))}, worker {_gb(s.peak('worker'))}; "
        f"lowest available memory {_gb(s.min_available)}; server RSS after the uploads "
        f"{_gb(s.rss.get('after', {}).get('server', 0))}",
        f"server health after: {report.health_after or 'no answer'}",
    ]


def reading(report: Report) -> str:
    """The section's reading, from this run's figures and the page's *Server status*."""
    import re

    s = report.sampler
    kept = re.search(r"parsed uploads kept: (\d+), (\d+) of (\d+) MB", report.status_text)
    limit = re.search(r"memory limit (\d+) MB each", report.status_text)
    readers = re.search(r"trace readers alive: \d+/(\d+)", report.status_text)
    large = max(1, int(readers.group(1)) - 1) if readers else 1
    seconds = sorted(u.seconds for u in report.uploads if u.outcome == "summary" and u.seconds is not None)
    if not (kept and limit and seconds):
        return "Reading: —"
    return (f"Reading: the server parsed nothing itself. Its RSS went from {_gb(report.idle_server_rss)} to a peak "
            f"of {_gb(s.peak('server'))}, and what it gained is the {kept.group(1)} parsed uploads it keeps for their "
            f"sessions ({kept.group(2)} MB, within the {kept.group(3)} MB `uploads_held_mb` budget however many "
            "sessions upload): the uploaded bytes were let go once read. The busiest reader peaked at "
            f"{_gb(s.peak('reader_max'))} resident, under its {int(limit.group(1)) / 1024:.1f} GB address-space limit. "
            f"Large reads run {'one' if large == 1 else large} at a time on this {os.cpu_count()}-core box (one "
            "reader is kept for small reads), so the later uploads wait for those before them: first summary "
            f"after {seconds[0]:.0f} s, median {statistics.median(seconds):.0f} s, last {seconds[-1]:.0f} s, each "
            "page showing its place meanwhile. Another session's run went to the reader kept for small reads: its "
            f"click → result median was {_med(report.busy_clicks_s)} during the uploads against "
            f"{_med(report.idle_clicks_s)} idle; what tails remain come from the CPU the {len(report.uploads)} "
            "browsers share with the server here.")


def markdown_section(report: Report, figures: list[str], command: str, load: tuple) -> str:
    per = "\n".join(f"| {u.index} | {u.outcome or u.error or '—'} | "
                    f"{'—' if u.seconds is None else f'{u.seconds:.1f}'} | {u.max_position} |" for u in report.uploads)
    status = "\n".join("    " + line for line in report.status_text.splitlines())
    return "\n".join([
        SECTION_TITLE, "",
        f"Command: `{command}` — {dt.date.today().isoformat()}, {machine_line(load)}.", "",
        "Method: " + " ".join(" ".join(__doc__.split("\n\n")[2:4]).split()), "",
        *[f"- {line}" for line in figures], "", reading(report), "",
        "*Server status* after the uploads (the observer's sidebar):", "", status, "",
        "<details><summary>Per session</summary>", "",
        "| session | outcome | upload → outcome (s) | highest queue position |", "| --- | --- | --- | --- |",
        per, "", "</details>", "",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 sessions, ~20 MB of JSON (tests)")
    parser.add_argument("--sessions", type=int, default=None, help="uploading sessions (default 12; --quick 3)")
    parser.add_argument("--megabytes", type=float, default=None, help="JSON size of the trace (default 500; --quick 20)")
    parser.add_argument("--no-write", action="store_true", help="do not touch BENCHMARKS.md")
    args = parser.parse_args()
    n = args.sessions or (3 if args.quick else 12)
    path, json_bytes, events = make_trace(args.megabytes or (20 if args.quick else 500))
    load = os.getloadavg()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ARTIFACTS.mkdir(exist_ok=True)
    log = ARTIFACTS / "bench_uploads_server.log"
    print(f"server {url}; {n} sessions upload {path} ({path.stat().st_size / 1e6:.1f} MB)", flush=True)
    process = start_server(port, log)
    try:
        wait_healthy(url, process, log)
        sampler = Sampler(process.pid, url).start()
        report = asyncio.run(run_bench(url, n, path, sampler, WAITS["quick" if args.quick else "full"]))
        sampler.stop()
        alive = process.poll() is None
    except BaseException:
        print(f"--- server log (last 3000 characters of {log}):\n{log.read_text()[-3000:]}", flush=True)
        raise
    finally:
        stop_server(process)
    readers = int(next((w.split("/")[1].split()[0] for w in report.status_text.split("trace readers alive: ")[1:]), 2))
    figures = [*lines(report, json_bytes, events, path.stat().st_size, readers), f"server process alive after: {alive}"]
    print("\n".join(figures))
    for u in report.uploads:
        print(f"  session {u.index}: {u.outcome or u.error} ({u.seconds or 0:.1f} s, position {u.max_position})")
    for error in report.observer_errors:
        print(f"  observer: {error}")
    print(report.status_text)
    checks = verdicts(report, bound_bytes(report, json_bytes, readers))
    print(f"every session got its summary or a clear refusal: {'yes' if checks['outcomes'] else 'no'}")
    print(f"peak server RSS under the bound: {'yes' if checks['rss'] else 'no'}")
    if not args.no_write:
        write_section(markdown_section(report, figures, " ".join(["python bench/bench_uploads.py", *sys.argv[1:]]), load))
        print(f"wrote the '{SECTION_TITLE[3:]}' section of BENCHMARKS.md")
    return 0 if all(checks.values()) and alive else 1


if __name__ == "__main__":
    sys.exit(main())

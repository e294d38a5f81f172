"""The load test's clock inside each page: click, status box, result, queue positions.

Timed in the page with Date.now() so that Playwright's own polling does not inflate the
figures: ``install_probe`` records the DOM click on "Run profile", the moment the status box
first says "Profiling …" (the server ran the click) and "Profiled …" (the run is back), the
moment the Showing box names this session's run (checked every ``RESULT_CHECK_MS``), and
every queue position the page shows.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RESULT_CHECK_MS", "PageClock", "install_probe", "read_clock", "wait_result"]

# The in-page check for "result visible" (ms): the precision of click → result.
RESULT_CHECK_MS = 50

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
    }, RESULT_CHECK_MS);
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
}""".replace("RESULT_CHECK_MS", str(RESULT_CHECK_MS))

# The result's time (a number), or the text of an error or exception box the page shows instead.
RESULT_OR_ERROR_JS = """() => {
    if (window.__resultAt) return window.__resultAt;
    const box = document.querySelector('[data-testid="stException"], [data-testid="stAlertContentError"], '
        + '[data-testid="stAlertContentWarning"]');
    return box ? (box.innerText || "error") : null;
}"""

READ_JS = """() => ({click_ms: window.__clickAt, accepted_ms: window.__acceptedAt,
    profiled_ms: window.__profiledAt, result_ms: window.__resultAt, max_queue_pos: window.__maxQueuePos,
    queue_updates: window.__queuePositions.length})"""

# The readings, in the order a run passes them.
POINTS = ("click", "accepted", "profiled", "result")


@dataclass(frozen=True)
class PageClock:
    """One page's readings: Date.now() in ms (None where the page never saw that moment)."""

    click_ms: float | None = None
    accepted_ms: float | None = None  # the status box "Profiling …" appeared: the server ran the click
    profiled_ms: float | None = None  # "Profiled … in N s" appeared: the run is back
    result_ms: float | None = None  # the Showing box names this session's run
    max_queue_pos: int = 0
    queue_updates: int = 0

    @property
    def wait_s(self) -> float | None:
        """Click → result, in seconds."""
        return self.part_s("click", "result")

    def part_s(self, start: str, end: str) -> float | None:
        """Seconds between two of click/accepted/profiled/result, or None."""
        if start not in POINTS or end not in POINTS:
            raise ValueError(f"{start!r} → {end!r}: the points are {POINTS}")
        a, b = getattr(self, f"{start}_ms"), getattr(self, f"{end}_ms")
        return None if a is None or b is None else (b - a) / 1000


async def install_probe(page, label: str) -> None:
    """Start the page's clock for the session whose step label is ``label`` (before its click)."""
    await page.evaluate(PROBE_JS, label)


async def wait_result(page, *, timeout_s: float) -> None:
    """Until the Showing box names the run; RuntimeError if the page shows an error box instead."""
    handle = await page.wait_for_function(RESULT_OR_ERROR_JS, timeout=timeout_s * 1000, polling=500)
    outcome = await handle.json_value()
    if isinstance(outcome, str):
        raise RuntimeError(f"the page shows an error instead of a result: {outcome[:300]}")


async def read_clock(page) -> PageClock:
    return PageClock(**await page.evaluate(READ_JS))

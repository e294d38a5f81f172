"""The load test's report: the console summary and the "Workshop load test" section of
BENCHMARKS.md, both from a ``LoadResult`` (no figure is computed twice)."""

from __future__ import annotations

import datetime as dt
import os
import platform
import statistics
import subprocess

from browser_harness import CHROMIUM
from load_resources import cpu_model
from load_result import Figures, LoadResult
from page_clock import RESULT_CHECK_MS

__all__ = ["ROOM_SECTION_TITLE", "SECTION_TITLE", "markdown_section", "print_report", "room_lines"]

SECTION_TITLE = "## Workshop load test"
ROOM_SECTION_TITLE = "## Workshop load test, everyone in one room"  # --room: its own section
GROUPS = ("chromium", "server", "worker")

# Where a session's wait goes, on the page's clock: (start, end, what it covers).
PARTS = (
    ("click", "accepted", "click → status box (the server ran the click and queued the run)"),
    ("accepted", "profiled", "status box → \"Profiled\" (queue and run, as the page saw them)"),
    ("profiled", "result", "\"Profiled\" → Showing names the run (the page's redraw)"),
)


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f}"


def _server_median(result: LoadResult) -> float | None:
    server = [s.server_wait_s for s in result.sessions if s.server_wait_s is not None]
    return statistics.median(server) if server else None


def part_medians(result: LoadResult) -> list[tuple[str, float | None]]:
    medians = []
    for start, end, what in PARTS:
        values = [v for s in result.sessions if s.completed and (v := s.part_s(start, end)) is not None]
        medians.append((what, statistics.median(values) if values else None))
    return medians


def breakdown_line(result: LoadResult) -> str:
    parts = "; ".join(f"{what}: {_s(value)}" for what, value in part_medians(result))
    drew = sum(s.clock.accepted_ms is not None for s in result.sessions if s.completed)
    done = sum(s.completed for s in result.sessions)
    if drew < done:
        parts += (f" ({done - drew} of {done} pages never drew the \"Profiling\" state: their redraw caught up "
                  "only once the run was back, so only the last part is known for them)")
    server = _server_median(result)
    own = ("" if server is None else
           f"; the page's own \"Profiled … in N s\" (server clock, from the run's submission): {_s(server)}")
    return f"Where the wait goes (medians): {parts}{own}."


def cpu_line(result: LoadResult) -> str:
    cpu = result.cpu_phase_s
    available = (os.cpu_count() or 1) * result.phase_s
    parts = ", ".join(f"{name} {cpu.get(name, 0.0):.1f}" for name in GROUPS)
    idle = ", ".join(f"{name} {result.cpu_idle_s.get(name, 0.0):.1f}" for name in GROUPS)
    return (f"CPU seconds from the clicks to the last result ({result.phase_s:.1f} s wall, "
            f"{available:.0f} CPU-s on {os.cpu_count()} cores): {parts}; for comparison, the {result.idle_s:.0f} s "
            f"before the clicks with every page loaded and idle: {idle}.")


def session_table(result: LoadResult) -> str:
    rows = ["| session | M=K=N | page load | click → result | click → status box | status box → \"Profiled\" | "
            "\"Profiled\" → Showing | page's own \"Profiled in\" | highest queue position | isolated |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in result.sessions:
        iso = "yes" if s.isolated else ("no: " + ", ".join(k for k, v in s.checks.items() if not v)
                                        if s.checks else "—")
        if s.error:
            iso = f"error ({s.error[:80]})"
        parts = " | ".join(_s(s.part_s(start, end)) for start, end, _ in PARTS)
        rows.append(f"| {s.label} | {s.size} | {_s(s.load_s)} | {_s(s.wait_s)} | {parts} | {_s(s.server_wait_s)} | "
                    f"{s.max_queue_pos or '—'} | {iso} |")
    return "\n".join(rows)


def summary_table(f: Figures, result: LoadResult) -> str:
    rpm = "—" if f.runs_per_min is None else f"{f.runs_per_min:.1f}"
    new = result.new_session
    return "\n".join([
        "| sessions completed | isolation holds | click → result p50 | p95 | max | "
        "total wall (first click → last result) | runs/min | highest queue position seen | server health after | "
        "new session after |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|---|",
        f"| {f.completed}/{f.sessions} | {'yes' if f.isolation_holds else 'no'} ({f.isolated}/{f.sessions}) | "
        f"{_s(f.wait_p50_s)} | {_s(f.wait_p95_s)} | {_s(f.wait_max_s)} | {result.total_wall_s:.1f} s | {rpm} | "
        f"{f.max_queue_pos} | {result.health_after or 'no answer'} | "
        f"{'works' if new.ok else 'FAILED'} ({_s(new.wait_s)}) |",
    ])


def _total_memory() -> int:
    import psutil

    return psutil.virtual_memory().total


def machine_line(load_at_start: tuple[float, float, float]) -> str:
    import playwright
    import streamlit

    chromium = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    pw = getattr(playwright, "__version__", None)
    if pw is None:
        from importlib.metadata import version

        pw = version("playwright")
    return (f"{os.cpu_count()} CPUs ({cpu_model()}), "
            f"{_gib(_total_memory())} GiB memory, Python {platform.python_version()}, "
            f"streamlit {streamlit.__version__}, "
            f"Playwright {pw}, {chromium or 'Chromium'}; load average at start "
            f"{load_at_start[0]:.2f} / {load_at_start[1]:.2f} / {load_at_start[2]:.2f} (1 / 5 / 15 min)")


def reading(result: LoadResult, f: Figures) -> str:
    """The section's reading, from this run's figures (no hard-coded conclusion)."""
    cpu = result.cpu_phase_s
    total = sum(cpu.get(name, 0.0) for name in GROUPS) or 1.0
    share = {name: 100 * cpu.get(name, 0.0) / total for name in GROUPS}
    own = _s(_server_median(result))
    return (f"Reading: here the browsers and the server share {os.cpu_count()} cores. While the runs were in "
            f"flight, Chromium took {share['chromium']:.0f} % of the CPU used, the server's script runs "
            f"{share['server']:.0f} % and the profiling worker {share['worker']:.0f} %. The page's own figure "
            f"(the run's submission → its result, server clock) has a median of {own} against {_s(f.wait_p50_s)} "
            "from the click to the result on screen: the rest is the click reaching the server's script and the "
            "redraws reaching the pages, both waiting for CPU that the pages themselves use. In a workshop the "
            "browsers run on the attendees' laptops and leave the cores to the server, so the waits measured here "
            "overstate theirs; the "
            f"server stayed healthy and a new session right after got its 64³ result in "
            f"{_s(result.new_session.wait_s)}.")


def _memory_line(result: LoadResult) -> str:
    mem = result.memory
    if mem is None:
        return ""
    return (f"Memory during the test: lowest available system memory {_gib(mem.min_available_bytes)} GiB; "
            f"peak RSS of the server with its worker {_gib(mem.peak_server_bytes)} GiB; peak RSS of Chromium "
            f"{_gib(mem.peak_chromium_bytes)} GiB over up to {mem.peak_chromium_procs} processes "
            "(summed RSS counts shared pages once per process: an upper bound).")


def _method(result: LoadResult, f: Figures) -> str:
    return ("Method: `streamlit run app.py` on a free local port (one CPU worker, default host settings), "
            f"then {f.sessions} real sessions, each its own browser context in one headless Chromium (Playwright "
            "async API). A first page load pays the worker's warm-up apart "
            f"({result.warmup_load_s:.1f} s). Page loads are staggered, {result.load_concurrency} at a time; each "
            "session sets M=K=N (64, 128 or 256, rotating) with the sliders and its own step label "
            "(`attendee_00` …), then all sessions click \"Run profile\" together "
            f"(clicks spread over {result.clicks_spread_s:.2f} s). Click → result: DOM click to the Showing box "
            f"naming the run, timed in the page (±{RESULT_CHECK_MS} ms). Then each session checks its Showing box and "
            "page text, the Table view (text table and CSV download) and the Trace view's .json.gz download "
            "(user_annotation names): its own label present, no other attendee's. Afterwards: GET "
            "/_stcore/health, and a new session loads the page and runs a 64³ profile.")


def room_lines(result: LoadResult) -> list[str]:
    """--room: how the room was used, and the instructor view's verdict (nothing without a room)."""
    if result.room is None:
        return []
    return ["", ("Room: before the page loads, one more session (the instructor) opened a room and read its code; each "
                 "attendee joined it right after its page loaded, under its own display name (`learner 00` …), "
                 "before filling the form. At the end the instructor's live view (refreshed every 3 s) was read "
                 "until it counted everyone (up to 120 s)."),
            "", f"**{result.room.verdict()}**"]


def markdown_section(result: LoadResult, f: Figures, command: str, load_at_start) -> str:
    overlap = (f"{f.sessions_saw_queue} of {f.sessions} sessions were shown a queue position; the highest was "
               f"{f.max_queue_pos} (that many runs waiting, the first of them next, while one ran).")
    failures = [s for s in result.sessions if s.error or not s.isolated]
    failure_lines = [f"- {s.label}: {s.error or 'isolation: ' + str(s.checks)}" for s in failures]
    return "\n".join([
        ROOM_SECTION_TITLE if result.room else SECTION_TITLE,
        "",
        f"Command: `{command}` — {dt.date.today().isoformat()}, {machine_line(load_at_start)}.",
        "",
        _method(result, f),
        *room_lines(result),
        "",
        summary_table(f, result),
        "",
        f"Overlap: {overlap} Script wall time, server start excluded: {result.overall_s:.0f} s.",
        "",
        breakdown_line(result),
        "",
        cpu_line(result),
        "",
        _memory_line(result),
        "",
        "<details><summary>Per session</summary>",
        "",
        session_table(result),
        "",
        "</details>",
        *([""] + failure_lines if failure_lines else []),
        "",
        reading(result, f),
        "",
    ])


def print_report(result: LoadResult, f: Figures) -> None:
    print()
    print(session_table(result))
    print()
    print(summary_table(f, result))
    print()
    print(f"completed: {f.completed}/{f.sessions}")
    print(f"isolation holds: {'yes' if f.isolation_holds else 'no'} "
          f"({f.isolated}/{f.sessions} sessions saw only their own label)")
    print(f"click -> result: p50 {_s(f.wait_p50_s)}, p95 {_s(f.wait_p95_s)}, max {_s(f.wait_max_s)}")
    rpm = "—" if f.runs_per_min is None else f"{f.runs_per_min:.1f}"
    print(f"total wall (first click -> last result): {result.total_wall_s:.1f} s; throughput {rpm} runs/min")
    print(f"highest queue position seen: {f.max_queue_pos} ({f.sessions_saw_queue}/{f.sessions} sessions saw one); "
          f"clicks spread over {result.clicks_spread_s:.2f} s")
    print(breakdown_line(result))
    print(cpu_line(result))
    if result.room is not None:
        print(result.room.verdict())
    print(f"server health after: {result.health_after or 'no answer'}")
    new = result.new_session
    print(f"new session after the load: {'works' if new.ok else 'FAILED: ' + str(new.error)}")
    if not new.ok:
        for event in new.events:
            print(f"  new session: {event}")
    if result.memory:
        m = result.memory
        print(f"memory: min available {_gib(m.min_available_bytes)} GiB, server peak RSS {_gib(m.peak_server_bytes)} "
              f"GiB, chromium peak RSS {_gib(m.peak_chromium_bytes)} GiB ({m.peak_chromium_procs} processes)")
    for s in result.sessions:
        if s.error:
            print(f"  {s.label}: {s.error}")

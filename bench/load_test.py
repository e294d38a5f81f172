"""Workshop load test: many real browser sessions against one `streamlit run app.py`.

    python bench/load_test.py                  # 20 sessions; writes "Workshop load test" in BENCHMARKS.md
    python bench/load_test.py --quick --no-write   # 3 sessions, BENCHMARKS.md untouched (CI)
    python bench/load_test.py --sessions 30 --port 8599
    python bench/load_test.py --quick --no-write --json out/load.json   # also the result as JSON
    python bench/load_test.py --room           # everyone in one room (bench/load_room.py); its own section

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

The parts: load_driver.py (the sessions), page_clock.py (the in-page clock), load_result.py
(the result as data, and its figures), load_report.py (console and BENCHMARKS.md),
load_resources.py (CPU and memory), load_room.py (--room: the instructor and the joins),
browser_harness.py (server and Chromium, shared with the browser test).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

from benchmarks_md import write_section  # bench/ is on sys.path when this script runs
from browser_harness import ROOT, browser_missing, free_port, streamlit_server
from load_driver import ARTIFACTS, run_load
from load_report import ROOM_SECTION_TITLE, SECTION_TITLE, markdown_section, print_report
from load_result import Figures, LoadResult, figures

BENCHMARKS = ROOT / "BENCHMARKS.md"
QUICK_SESSIONS = 3
FULL_SESSIONS = 20
# A full run is a load test only if the runs met in the queue: at least this many waiting at once.
MIN_OVERLAP_POSITION = 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=None,
                        help=f"concurrent sessions (default {FULL_SESSIONS}; --quick: {QUICK_SESSIONS})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SESSIONS} sessions (CI)")
    parser.add_argument("--no-write", action="store_true", help="do not touch BENCHMARKS.md")
    parser.add_argument("--port", type=int, default=None, help="server port (default: a free one)")
    parser.add_argument("--load-concurrency", type=int, default=4,
                        help="pages loading at once before the clicks (default 4)")
    parser.add_argument("--room", action="store_true",
                        help="an instructor opens a room and every session joins it before its click "
                             "(rooms in a fresh SQLite file); writes its own BENCHMARKS.md section")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write the result (load_result.LoadResult) as JSON to PATH")
    args = parser.parse_args(argv)
    args.sessions = args.sessions or (QUICK_SESSIONS if args.quick else FULL_SESSIONS)
    if args.sessions < 1:
        parser.error("--sessions must be at least 1")
    return args


def overlapped(f: Figures, *, quick: bool) -> bool:
    """Whether the sessions met in the queue (not asked of a quick run or of a single session)."""
    return quick or f.sessions < 2 or f.max_queue_pos >= MIN_OVERLAP_POSITION


def passed(result: LoadResult, f: Figures, *, quick: bool) -> bool:
    return (f.completed == f.sessions and f.isolation_holds and result.health_after == "ok"
            and result.new_session.ok and overlapped(f, quick=quick) and (result.room is None or result.room.ok))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    missing = browser_missing()
    if missing:
        print(missing)
        return 2
    n = args.sessions
    load_at_start = os.getloadavg()
    ARTIFACTS.mkdir(exist_ok=True)
    log = ARTIFACTS / "load_test_server.log"
    port = args.port or free_port()
    if args.room:  # the server inherits it: this run's rooms in a file of their own, not the lab's
        db = Path(tempfile.mkdtemp(prefix="load_room_")) / "rooms.sqlite3"
        os.environ["PROFILER_LAB_DATABASE_URL"] = f"sqlite:///{db}"
    print(f"server: http://127.0.0.1:{port} (log {log.relative_to(ROOT)}); {n} sessions; "
          f"load average {load_at_start[0]:.2f}", flush=True)
    with streamlit_server(log, port) as (url, process):
        result = asyncio.run(run_load(url, n, server_pid=process.pid, load_concurrency=args.load_concurrency,
                                   room=args.room))
    f = figures(result)
    print_report(result, f)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(result.to_json())
    if not overlapped(f, quick=args.quick):
        print(f"the sessions did not overlap in the queue (highest position {f.max_queue_pos}): not a load test")
    if not args.no_write:
        command = " ".join(["python bench/load_test.py", *sys.argv[1:]])
        write_section(markdown_section(result, f, command, load_at_start), BENCHMARKS)
        title = ROOM_SECTION_TITLE if args.room else SECTION_TITLE
        print(f"wrote the '{title[3:]}' section of {BENCHMARKS.name}")
    return 0 if passed(result, f, quick=args.quick) else 1


if __name__ == "__main__":
    sys.exit(main())

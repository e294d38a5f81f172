"""Timeline level of detail: marks sent, build times, first paint in headless Chromium.

    python bench/bench_timeline.py            # 1M events, 5 repeats, 3 paints per variant
    python bench/bench_timeline.py --quick    # 200k events, 3 repeats, 1 paint per variant

The large trace repeats a real H200 trace (tests/data) back to back at the ``Trace`` level,
so lanes, nesting and flows are real. First paint: a tiny Streamlit page shows the chart;
Playwright drives the apt Chromium (never ``playwright install``) and reads
``performance.now()`` (ms since navigation start) once the Vega canvas/SVG exists and two
animation frames have passed. Results go to the "Timeline" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import pickle
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from benchmarks_md import write_section  # noqa: E402
from make_large_trace import tile_trace  # noqa: E402

from lab.trace.load import Trace, load_trace  # noqa: E402
from lab.views.timeline import build_timeline, timeline_chart  # noqa: E402

SOURCE = ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking"]
# Windows as fractions of the trace: full view, then three zooms.
WINDOWS = (("full", 0.0, 1.0), ("10%", 0.40, 0.50), ("1%", 0.50, 0.51), ("0.1%", 0.60, 0.601))
# Paint variants: the full view with level of detail (what the app sends), against windows
# drawn without it holding about this many events, to show what the budget buys.
RAW_PAINT_EVENTS = (5_000, 20_000, 50_000)
QUICK_RAW_PAINT_EVENTS = (5_000, 20_000)
SECTION = "## Timeline"

PAGE = '''
import os, pickle, sys
sys.path.insert(0, os.environ["BENCH_ROOT"])
import streamlit as st
from lab.views.timeline import timeline_chart
variant = st.query_params.get("variant", "0")
with open(os.path.join(os.environ["BENCH_DIR"], f"timeline_{variant}.pkl"), "rb") as f:
    data = pickle.load(f)
st.altair_chart(timeline_chart(data), width="stretch")
'''


def median_s(fn, repeats: int) -> tuple[float, float, object]:
    """Median wall and process-CPU seconds of ``fn()`` (CPU time is less sensitive to other
    jobs on a shared machine), and its last result."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), out


def bench_build(trace: Trace, repeats: int) -> list[dict]:
    span = float((trace.events["ts_us"] + trace.events["dur_us"]).max())
    rows = []
    for label, lo, hi in WINDOWS:
        w0, w1 = span * lo, span * hi
        build_s, build_cpu_s, data = median_s(lambda w0=w0, w1=w1: build_timeline(trace, start_us=w0, end_us=w1),
                                                repeats)
        chart_s, chart_cpu_s, _ = median_s(lambda data=data: timeline_chart(data).to_dict(), repeats)
        rows.append({
            "window": label, "events": data.total_events, "bars": len(data.marks),
            "links": len(data.links), "merged": data.merged_events, "build_s": build_s,
            "build_cpu_s": build_cpu_s, "chart_s": chart_s, "chart_cpu_s": chart_cpu_s,
        })
        print(f"  {label:>5}: {data.total_events:>9,} events → {len(data.marks):,} bars + "
              f"{len(data.links):,} links; build {build_s * 1e3:.0f} ms, chart+to_dict {chart_s * 1e3:.0f} ms",
              flush=True)
    return rows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s")


def wait_chromium(timeout_s: float = 600) -> bool:
    """apt may still be installing Chromium in the background; wait for the binary."""
    deadline = time.monotonic() + timeout_s
    while not os.access(CHROMIUM, os.X_OK):
        if time.monotonic() > deadline:
            return False
        time.sleep(5)
    return True


def paint_variants(trace: Trace, raw_events: tuple[int, ...]) -> list[tuple[str, object]]:
    """(label, TimelineData): the default full view, then windows of ~N events, none merged."""
    span = float((trace.events["ts_us"] + trace.events["dur_us"]).max())
    variants = [("full view, level of detail", build_timeline(trace))]
    for n in raw_events:
        w0 = span * 0.25
        w1 = w0 + span * n / len(trace.events)
        variants.append((f"~{n:,} events, no merging", build_timeline(trace, start_us=w0, end_us=w1, max_marks=10**9)))
    return variants


def bench_paint(trace: Trace, paints: int, raw_events: tuple[int, ...]) -> list[dict]:
    from playwright.sync_api import sync_playwright

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, data) in enumerate(paint_variants(trace, raw_events)):
            with open(Path(tmp) / f"timeline_{i}.pkl", "wb") as f:
                pickle.dump(data, f)
            rows.append({"variant": i, "label": label, "marks": data.mark_count, "loads": []})
        page_py = Path(tmp) / "page.py"
        page_py.write_text(PAGE)
        port = free_port()
        env = dict(os.environ, BENCH_ROOT=str(ROOT), BENCH_DIR=tmp)
        server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(page_py), "--server.port", str(port),
             "--server.headless", "true", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            wait_http(f"http://127.0.0.1:{port}/_stcore/health", 60)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    # One unmeasured load: Streamlit's first script run imports altair/pandas.
                    _paint_once(browser, port, 0)
                    for _ in range(paints):
                        for row in rows:  # interleaved, so drift hits every variant alike
                            row["loads"].append(_paint_once(browser, port, row["variant"]))
                finally:
                    browser.close()
        finally:
            server.terminate()
            server.wait(timeout=20)
    for row in rows:
        loads = row.pop("loads")
        row["paint_ms"] = statistics.median(x["paint"] for x in loads)
        row["shell_ms"] = statistics.median(x["shell"] for x in loads)
        # After the app shell: script run, chart spec + Arrow to the browser, Vega drawing.
        row["after_shell_ms"] = statistics.median(x["paint"] - x["shell"] for x in loads)
        print(f"  {row['label']}: {row['marks']:,} marks, first paint {row['paint_ms']:.0f} ms "
              f"(app shell {row['shell_ms']:.0f} ms, then {row['after_shell_ms']:.0f} ms)", flush=True)
    return rows


# Records when Streamlit's app shell first shows up in the DOM (ms since navigation start).
_STAGE_OBSERVER = """
window.__stages = {};
const stages = {shell: '[data-testid="stAppViewContainer"]'};
new MutationObserver(() => {
  for (const [k, sel] of Object.entries(stages))
    if (!(k in window.__stages) && document.querySelector(sel)) window.__stages[k] = performance.now();
}).observe(document, {childList: true, subtree: true});
"""


def _paint_once(browser, port: int, variant: int) -> dict:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        context.add_init_script(_STAGE_OBSERVER)
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{port}/?variant={variant}", wait_until="commit")
        page.wait_for_selector(".vega-embed canvas, .vega-embed svg.marks", timeout=180_000)
        painted = float(page.evaluate(
            "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))"
        ))
        stages = page.evaluate("() => window.__stages")
        return {"paint": painted, "shell": stages.get("shell", float("nan"))}
    finally:
        context.close()


def report(args, n_events: int, build_rows: list[dict], paint_rows: list[dict] | None) -> str:
    import altair
    import streamlit

    cpu = platform.processor() or platform.machine()
    lines = [
        SECTION,
        "",
        f"Command: `python bench/bench_timeline.py{' --quick' if args.quick else ''}` — "
        f"{dt.date.today().isoformat()}, {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, "
        f"pandas {pd.__version__}, numpy {np.__version__}, altair {altair.__version__}, "
        f"streamlit {streamlit.__version__}. Machine shared with other jobs: load average at start "
        f"{args.load_avg:.1f}.",
        "",
        f"Trace: `{SOURCE.name}` (real H200 trace, {n_events // args.copies} events) tiled "
        f"{args.copies:,}× → {n_events:,} events. `build_timeline` (default 5,000-mark budget, "
        f"1,200 px) and `timeline_chart(...).to_dict()`: median of {args.repeats} runs each.",
        "",
        "| window | events in window | bars sent | links sent | events merged | build_timeline wall (CPU) | "
        "chart + to_dict wall (CPU) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in build_rows:
        lines.append(f"| {r['window']} | {r['events']:,} | {r['bars']:,} | {r['links']:,} | {r['merged']:,} | "
                     f"{r['build_s'] * 1e3:.0f} ms ({r['build_cpu_s'] * 1e3:.0f}) | "
                     f"{r['chart_s'] * 1e3:.0f} ms ({r['chart_cpu_s'] * 1e3:.0f}) |")
    lines.append("")
    if paint_rows:
        base = paint_rows[0]["paint_ms"]
        lines += [
            f"First paint: a Streamlit page runs "
            f"`st.altair_chart(timeline_chart(data), width=\"stretch\")` on a pickled `TimelineData`; headless "
            f"Chromium via Playwright. A MutationObserver records `performance.now()` (ms since navigation "
            f"start) when Streamlit's app shell appears; first paint = the Vega SVG/canvas present + 2 animation "
            f"frames; \"after shell\" = first paint − app shell (script run, spec + Arrow transfer, Vega). Median "
            f"of {args.paints} loads per variant, variants interleaved in one run, after one warm-up load.",
            "",
            "| chart | marks drawn | app shell | after shell | first paint | first paint vs level of detail |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in paint_rows:
            lines.append(f"| {r['label']} | {r['marks']:,} | {r['shell_ms']:.0f} ms | {r['after_shell_ms']:.0f} ms | "
                         f"{r['paint_ms']:.0f} ms | {r['paint_ms'] / base:.2f}× |")
        lines.append("")
        worst = paint_rows[-1]
        lines += [
            f"Reading: every window stays within the 5,000-mark budget (bars + links), and the full view of "
            f"{n_events:,} events builds in {build_rows[0]['build_s'] * 1e3:.0f} ms "
            f"({build_rows[0]['build_cpu_s'] * 1e3:.0f} ms CPU). Drawing without level of "
            f"detail, first paint grows with the marks: {worst['marks']:,} marks take "
            f"{worst['paint_ms'] / base:.1f}× as long as the level-of-detail view. Absolute times are inflated "
            f"by the shared machine (see load average); the ratios come from one interleaved run.",
            "",
        ]
    else:
        lines += ["First paint: not measured in this run (`--no-browser` or no Chromium).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200k events, 3 repeats, 1 paint per variant")
    parser.add_argument("--events", type=int, default=None, help="events in the large trace (default 1M, quick 200k)")
    parser.add_argument("--no-browser", action="store_true", help="skip the first-paint measurement")
    parser.add_argument("--no-write", action="store_true", help="print, do not update BENCHMARKS.md")
    args = parser.parse_args()
    args.repeats = 3 if args.quick else 5
    args.paints = 1 if args.quick else 3
    args.load_avg = os.getloadavg()[0]
    events = args.events or (200_000 if args.quick else 1_000_000)

    small = load_trace(SOURCE)
    args.copies = -(-events // len(small.events))
    t0 = time.perf_counter()
    trace = tile_trace(small, args.copies)
    print(f"large trace: {len(trace.events):,} events ({time.perf_counter() - t0:.1f} s to tile)", flush=True)
    build_rows = bench_build(trace, args.repeats)
    paint_rows = None
    if not args.no_browser:
        if wait_chromium():
            paint_rows = bench_paint(trace, args.paints, QUICK_RAW_PAINT_EVENTS if args.quick else RAW_PAINT_EVENTS)
        else:
            print(f"{CHROMIUM} not found: first paint skipped", flush=True)
    text = report(args, len(trace.events), build_rows, paint_rows)
    print("\n" + text)
    if not args.no_write:
        write_section(text)
        print("BENCHMARKS.md updated (section 'Timeline')")


if __name__ == "__main__":
    main()

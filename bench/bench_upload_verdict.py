"""Upload → verdict in Chromium, step by step, beside the same trace read in-process.

    python bench/bench_upload_verdict.py TRACE [TRACE …] [--rounds 3] [--port 8640]

For each trace, ``--rounds`` times, interleaved (A B, A B, …, every trace in each round):

* A, in-process: ``load_trace(bytes) + analyze + judge_trace`` in this process on the file's
  bytes already in memory — the floor an upload is held to;
* B, upload: a fresh browser context opens the page (``streamlit run bench/timed_app.py``: the
  page itself, with time stamps), opens "Open your own trace", and sets the file on the
  uploader; timed from the file input's change event to the Summary's verdict of this upload on
  screen, and to the page idle (script run over, nothing loading).

The breakdown of B lines up the page's ``Date.now()`` (file chosen; the upload request's end,
from the browser's resource timing; the verdict drawn) with the server's stamps
(``bench/timed_app.py``): the browser's request (transfer), Streamlit's upload handling up to the
script holding the bytes, the hand-off to a reader, decode (load_trace), analysis, the result's
way back, and the page's rerun up to the verdict drawn. One machine, one clock.

This process lowers its priority to the readers' (``lab.read.limits.READER_NICE``) once the
server and Chromium have started, so A and the reader's work compete alike with the other jobs
of a shared box; the server and the browser keep their own. Prints a Markdown table and the
per-round figures as JSON lines. ``--browser-cpu N`` gives Chromium CPU N alone (a visitor's
browser draws on the visitor's machine; on one 2-core box it otherwise takes 0.8–1.9 CPU-s per
upload from the reader's cores) and the server, the readers and A the other CPUs. ``--ab-early``
adds a second server with ``PROFILER_LAB_EARLY_READS=0`` (reads queued by the page run, as before
``ui.early_read``) and sends each round's upload to both, in turn.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from browser_harness import CHROMIUM, CHROMIUM_ARGS, IDLE_JS, streamlit_server  # noqa: E402

PROBE_JS = """(name) => {
    window.__chosen = null; window.__verdict = null; window.__idle = null;
    document.addEventListener("change", (e) => {
        if (e.target && e.target.type === "file" && window.__chosen === null) window.__chosen = Date.now();
    }, true);
    const shows = () => {
        for (const input of document.querySelectorAll('input[role="combobox"]')) {
            if (input.value.includes(name)) return true;
        }
        return false;
    };
    // Drawn by this page run: the previous run's Summary (the sample's) stays in the page, marked
    // stale, until this run draws over it; it used to count once "Showing" named the upload.
    const fresh = (el) => el.closest('[data-testid="stElementContainer"]')?.dataset.stale !== "true";
    const verdictDrawn = () => [...document.querySelectorAll('[data-testid="stMarkdownContainer"] strong')]
        .some((el) => el.textContent === "Verdict" && fresh(el));
    const idle = IDLE_JS;
    // Checked when the page changes, not on a timer: a 10 ms setInterval querying the page was
    // 414 timer tasks, ~0.17 s of the renderer's main thread during one 3.7 s upload (a Chromium
    // trace of it), taken from the 2 cores the read runs on. Each check runs right after React's
    // commit (a mutation), so its Date.now() is when the verdict entered the page.
    const observer = new MutationObserver(() => {
        if (window.__chosen === null) return;
        if (window.__verdict === null && shows() && verdictDrawn()) window.__verdict = Date.now();
        if (window.__verdict !== null && window.__idle === null && idle()) {
            window.__idle = Date.now(); observer.disconnect();
        }
    });
    observer.observe(document.documentElement, {subtree: true, childList: true, attributes: true,
                                                characterData: true});
}""".replace("IDLE_JS", IDLE_JS)

UPLOAD_TIMING_JS = """() => performance.getEntriesByType("resource")
    .filter((e) => e.name.includes("/_stcore/upload_file"))
    .map((e) => ({start: performance.timeOrigin + e.startTime, end: performance.timeOrigin + e.responseEnd}))"""

# Breakdown segments: (label, from, to); points are page ("page:…") or server stamps.
SEGMENTS = (
    ("transfer (browser → server, Streamlit stores the file)", "page:chosen", "page:upload_end"),
    # The read's start: begun on the file's arrival (ui.early_read), it does not wait for the page
    # run below, and this row is ~0 (or below 0: the reader began before the browser's request ended).
    ("upload stored → reader parsing (on the path: rerun, page top, digest, queue)", "page:upload_end",
     "stage:parsing"),
    ("· Streamlit: rerun with the file, page top → upload box", "page:upload_end", "accept"),
    ("· hand-off: read queued → reader parsing", "submitted", "stage:parsing"),
    ("decode (load_trace)", "stage:parsing", "stage:analysing"),
    ("analysis (analyze + judge_trace)", "stage:analysing", "stage:sending"),
    ("result's way back (pack, pipe, unpickle)", "stage:sending", "received"),
    ("page: settle, rerun, Summary drawn", "received", "page:verdict"),
    ("· of which: result → settled (the upload joins the session)", "received", "settled"),
    ("· of which: settled → Summary begins (the page run(s) up to it)", "settled", "verdict:summary_start"),
    ("· of which: the Summary, server side", "verdict:summary_start", "verdict:summary_end"),
    ("· of which: Summary drawn → verdict on screen (sent, browser draws)", "verdict:summary_end", "page:verdict"),
)
# Stamps that happen in every page run, taken for the run that draws the upload's verdict: the
# first after "settled" (the first after the file's choice is the page run that accepted it).
AFTER_SETTLED = ("summary_start", "summary_end")


def unique_copy(trace: Path, folder: Path, n: int) -> Path:
    """``trace`` with the same name and events but bytes of its own (``n``): the server keeps
    results by the bytes' digest (a job's answers, server-wide), so a second upload of the same
    bytes — the warm-up's, an earlier round's — would skip work a first upload does. A gzip's
    header time (bytes 4-7) is set to ``n``; plain JSON gets ``n`` trailing newlines."""
    data = bytearray(trace.read_bytes())
    if data[:2] == b"\x1f\x8b":
        data[4:8] = n.to_bytes(4, "little")
    else:
        data += b"\n" * n
    folder = folder / str(n)
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / trace.name
    out.write_bytes(data)
    return out


def in_process(data: bytes) -> float:
    from lab.analysis import analyze
    from lab.judge import judge_trace
    from lab.trace import load_trace

    started = time.perf_counter()
    trace = load_trace(data)
    analysis = analyze(trace)
    judge_trace(trace, analysis)
    return time.perf_counter() - started


def read_stamps(path: Path, since: float) -> dict[str, float]:
    """The first stamp of each kind after ``since`` (one upload at a time, so no mixing), and
    as "verdict:<kind>" the first of each of ``AFTER_SETTLED`` after the upload settled."""
    out: dict[str, float] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["t"] < since:
            continue
        if rec["ev"] not in out:
            out[rec["ev"]] = rec["t"]
        if "settled" in out and rec["ev"] in AFTER_SETTLED and f"verdict:{rec['ev']}" not in out:
            out[f"verdict:{rec['ev']}"] = rec["t"]
    return out


def timeline(path: Path, points: dict[str, float]) -> list[tuple[float, str]]:
    """Every stamp from the file's choice to the page idle, and the page's points, in order,
    in seconds after the choice: the per-run breakdown (``--timeline``)."""
    chosen, idle = points["page:chosen"], points["page:idle"]
    rows = [(rec["t"] - chosen, rec["ev"]) for rec in map(json.loads, path.read_text().splitlines())
            if chosen - 0.05 <= rec["t"] <= idle + 0.05]
    rows += [(t - chosen, k) for k, t in points.items() if k.startswith("page:")]
    return sorted(rows)


def upload_once(browser, url: str, path: Path, stamps: Path, timeout_s: float) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(url, timeout=timeout_s * 1000)
        page.get_by_text("Detected:").first.wait_for(timeout=timeout_s * 1000)
        page.wait_for_function(IDLE_JS, timeout=timeout_s * 1000)
        page.get_by_text("Open your own trace").first.click()
        page.locator('input[type="file"]').wait_for(state="attached", timeout=timeout_s * 1000)
        page.wait_for_timeout(500)
        page.evaluate(PROBE_JS, path.name)
        page.locator('input[type="file"]').set_input_files(str(path))
        page.wait_for_function("() => window.__idle !== null", timeout=timeout_s * 1000, polling=100)
        clock = page.evaluate("() => ({chosen: window.__chosen, verdict: window.__verdict, idle: window.__idle})")
        uploads = page.evaluate(UPLOAD_TIMING_JS)
    finally:
        context.close()
    points = {f"page:{k}": v / 1000 for k, v in clock.items()}
    if uploads:
        points["page:upload_end"] = max(u["end"] for u in uploads) / 1000
    points.update(read_stamps(stamps, points["page:chosen"] - 0.05))
    return points


def segments(points: dict[str, float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for label, a, b in SEGMENTS:
        out[label] = points[b] - points[a] if a in points and b in points else None
    out["total: file chosen → verdict on screen"] = points["page:verdict"] - points["page:chosen"]
    out["file chosen → page idle"] = points["page:idle"] - points["page:chosen"]
    return out


def _pin_children(pids: list[int], cpu: int) -> None:
    """Every process the servers started (readers, profiling workers, their spares) onto ``cpu``."""
    import psutil

    for pid in pids:
        for child in psutil.Process(pid).children(recursive=True):
            try:
                child.cpu_affinity([cpu])
            except psutil.Error:
                pass


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--port", type=int, default=8640)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--timeline", action="store_true",
                    help="print every stamp of each upload, in seconds after the file's choice")
    ap.add_argument("--browser-cpu", type=int, default=None,
                    help="run Chromium on this CPU alone and the server, its readers and the in-process contender on "
                         "the others (a visitor's browser runs on the visitor's machine, not the server's)")
    ap.add_argument("--reader-cpu", type=int, default=None,
                    help="the servers' child processes (readers, workers) and the in-process contender on this CPU "
                         "alone, the servers and Chromium on the others: a read with a core of its own, as on a "
                         "many-core host whose visitors' browsers are elsewhere (set after the warm-up upload, "
                         "once the readers exist)")
    ap.add_argument("--ab-early", action="store_true",
                    help="A/B of ui.early_read: a second server (port + 1) with PROFILER_LAB_EARLY_READS=0, each "
                         "round's uploads to both, in turn (which goes first alternates)")
    ap.add_argument("--log", type=Path, default=Path("/tmp/profiler_lab_bench/upload_verdict_server.log"))
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from lab.read.limits import READER_NICE

    args.log.parent.mkdir(parents=True, exist_ok=True)
    variants = ["early", "on the page"] if args.ab_early else ["as set"]
    extra = {"early": {"PROFILER_LAB_EARLY_READS": "1"}, "on the page": {"PROFILER_LAB_EARLY_READS": "0"},
             "as set": {}}
    stamps = {v: args.log.with_name(f"{args.log.stem}.{i}.stamps.jsonl") for i, v in enumerate(variants)}
    for path in stamps.values():
        path.write_text("")
    load = os.getloadavg()
    everyone = os.sched_getaffinity(0)
    server_cpus = everyone - {args.browser_cpu} if args.browser_cpu is not None else everyone
    os.sched_setaffinity(0, server_cpus)  # the server and its readers inherit it
    cols = [(str(p), v) for p in args.traces for v in variants]
    results: dict[tuple[str, str], dict[str, list]] = {c: {"in_process": [], "upload": []} for c in cols}
    if args.reader_cpu is not None:
        server_cpus = everyone - {args.reader_cpu}
        os.sched_setaffinity(0, server_cpus)
    with contextlib.ExitStack() as servers:
        started = {v: servers.enter_context(streamlit_server(
                       args.log.with_name(f"{args.log.stem}.{i}.log"), port=args.port + i,
                       env={"PROFILER_LAB_STAMPS": str(stamps[v]), **extra[v]}, script="bench/timed_app.py"))
                   for i, v in enumerate(variants)}
        urls = {v: url for v, (url, _) in started.items()}
        if args.browser_cpu is not None:
            os.sched_setaffinity(0, {args.browser_cpu})  # Playwright's driver, and Chromium from it
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            os.sched_setaffinity(0, server_cpus)
            os.nice(READER_NICE)  # after the browser started: it keeps the server's priority
            copies = Path(tempfile.mkdtemp(prefix="upload_verdict_"))
            n = iter(range(1, 1_000_000))
            try:
                # Warm-up: page code, readers (bytes of their own: no round finds its results kept).
                for v in variants:
                    upload_once(browser, urls[v], unique_copy(args.traces[0], copies, next(n)), stamps[v],
                                args.timeout)
                if args.reader_cpu is not None:
                    _pin_children([process.pid for _, process in started.values()], args.reader_cpu)
                    os.sched_setaffinity(0, {args.reader_cpu})  # A, in this process, beside the readers
                for trace in args.traces:
                    in_process(trace.read_bytes())
                for r in range(args.rounds):
                    for trace in args.traces:
                        order = variants if r % 2 == 0 else variants[::-1]
                        for v in order:
                            copy = unique_copy(trace, copies, next(n))
                            a = in_process(copy.read_bytes())
                            points = upload_once(browser, urls[v], copy, stamps[v], args.timeout)
                            copy.unlink()
                            b = segments(points)
                            if args.timeline:
                                for t, ev in timeline(stamps[v], points):
                                    print(f"  {t:8.3f}  {ev}")
                            results[(str(trace), v)]["in_process"].append(a)
                            results[(str(trace), v)]["upload"].append(b)
                            print(json.dumps({"round": r, "trace": trace.name, "variant": v, "in_process_s": a, **b}),
                                  flush=True)
            finally:
                browser.close()
                shutil.rmtree(copies, ignore_errors=True)
    where = (f"Chromium on CPU {args.browser_cpu}, the rest on {sorted(server_cpus)}" if args.browser_cpu is not None
             else f"readers and A on CPU {args.reader_cpu}, servers and Chromium on {sorted(server_cpus)}"
             if args.reader_cpu is not None else "all on every CPU")
    print(f"\n{where}; load average at start: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; "
          f"at end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}; rounds: {args.rounds}\n")
    heads = [Path(t).name if v == "as set" else f"{Path(t).name}, read {v}" for t, v in cols]
    print("| step (median s) | " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * len(cols))
    labels = list(results[cols[0]]["upload"][0].keys())
    for label in labels:
        cells = [_median([u[label] for u in results[c]["upload"]]) for c in cols]
        print(f"| {label} | " + " | ".join("—" if x is None else f"{x:.3f}" for x in cells) + " |")
    cells = [_median(results[c]["in_process"]) for c in cols]
    print("| in-process load_trace + analyze + judge_trace | " + " | ".join(f"{x:.3f}" for x in cells) + " |")
    ratios = []
    for c in cols:
        pairs = [u["total: file chosen → verdict on screen"] / a
                 for u, a in zip(results[c]["upload"], results[c]["in_process"], strict=True)]
        ratios.append(statistics.median(pairs))
    print("| **upload → verdict ÷ in-process** (median of per-round ratios) | "
          + " | ".join(f"**{x:.2f}×**" for x in ratios) + " |")
    if args.ab_early:  # paired: the same round's two uploads of a trace, a minute apart at most
        print()
        for trace in args.traces:
            total = "total: file chosen → verdict on screen"
            diffs = [e[total] - p[total] for e, p in zip(results[(str(trace), "early")]["upload"],
                                                          results[(str(trace), "on the page")]["upload"], strict=True)]
            sooner = sum(d < 0 for d in diffs)
            print(f"{trace.name}: early − on the page, per round (s): {', '.join(f'{d:+.3f}' for d in diffs)}; "
                  f"median {statistics.median(diffs):+.3f}; early sooner in {sooner} of {len(diffs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

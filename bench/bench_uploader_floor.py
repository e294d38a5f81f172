"""Streamlit's own share of an upload: when the browser starts the PUT, on a page that is not the lab's.

    python bench/bench_uploader_floor.py [TRACE] [--uploads 4] [--port 8661]

A bare Streamlit script (N markdown lines, a small sidebar form, one ``st.file_uploader``) is run
for N = 5 and N = 80; for each, ``--uploads`` fresh pages set TRACE on the uploader and the page's
resource timing gives the upload request's start and end, in ms after the file input's change
event. What this shows is the uploader's cost before any byte is sent (asking the server for the
file's URL, the widget's own render), which no change to the lab's page can remove
(BENCHMARKS.md, "The read begins on the file's arrival").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_upload_verdict import unique_copy  # noqa: E402
from browser_harness import CHROMIUM, CHROMIUM_ARGS, IDLE_JS, wait_healthy  # noqa: E402

PAGE = '''import os, streamlit as st
N = int(os.environ["N"])
with st.sidebar:
    with st.form("f"):
        for i in range(N // 5):
            st.number_input(f"n{i}", value=i)
        st.form_submit_button("go")
for i in range(N):
    st.markdown(f"**para {i}** some text with `code` and more")
files = st.file_uploader("Trace file", type=["json", "gz", "zip"], accept_multiple_files=True)
if files:
    st.write("got", len(files[0].getvalue()))
'''
TIMING_JS = """() => performance.getEntriesByType("resource").filter((e) => e.name.includes("upload_file"))
    .map((e) => [performance.timeOrigin + e.startTime, performance.timeOrigin + e.responseEnd])"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", nargs="?", type=Path, default=ROOT / "bench" / "data" / "transformer_step_h200.json.gz")
    ap.add_argument("--uploads", type=int, default=4)
    ap.add_argument("--port", type=int, default=8661)
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="uploader_floor_"))
    script = work / "page.py"
    script.write_text(PAGE)
    for n in (5, 80):
        log = work / f"server_{n}.log"
        with log.open("w") as out:
            server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(script), "--server.port",
                                       str(args.port), "--server.headless", "true", "--server.address", "127.0.0.1",
                                       "--browser.gatherUsageStats", "false"], env={**os.environ, "N": str(n)},
                                      stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{args.port}"
        try:
            wait_healthy(url, server, log)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for i in range(args.uploads):
                    page = browser.new_page()
                    page.goto(url)
                    page.wait_for_function(IDLE_JS, timeout=60_000)
                    page.wait_for_timeout(500)
                    page.evaluate("() => { window.__c = null; performance.clearResourceTimings(); "
                                  "document.addEventListener('change', () => { window.__c = Date.now(); }, true); }")
                    page.locator('input[type="file"]').set_input_files(str(unique_copy(args.trace, work, i + 1)))
                    page.get_by_text("got").wait_for(timeout=60_000)
                    chosen = page.evaluate("() => window.__c")
                    start, end = page.evaluate(TIMING_JS)[0]
                    print(f"N={n}: upload request starts {start - chosen:.0f} ms after the change event, "
                          f"ends at {end - chosen:.0f} ms", flush=True)
                    page.close()
                browser.close()
        finally:
            os.killpg(server.pid, 15)
            server.wait(timeout=30)
            time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

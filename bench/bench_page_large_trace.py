"""The page on a large real trace: upload the 51,787-event H200 transformer step in headless
Chromium and time each view until it is drawn (one run; prints one line).

    python bench/bench_page_large_trace.py

Starts `streamlit run app.py` on port 8677, uploads bench/data/transformer_step_h200.json.gz
through the real file widget, then times: upload → Summary metrics; → Timeline chart drawn
(canvas/svg present); → Table with the kernel table; → Timeline again (parse and analysis
cached). Screenshot: artifacts/large_trace_timeline.png.
"""
from __future__ import annotations

import sys
import time

from browser_harness import CHROMIUM, CHROMIUM_ARGS, ROOT, streamlit_server  # bench/ is on sys.path

TRACE = ROOT / "bench/data/transformer_step_h200.json.gz"
PORT = 8677
UI_MS = 120_000


def drawn_chart(main):
    return main.locator('[data-testid="stVegaLiteChart"]').locator("canvas, svg").first


def time_views(page) -> str:
    """Upload the trace, open each view, and say how long each took until drawn."""
    from playwright.sync_api import expect

    main = page.locator('[data-testid="stMain"]')
    expect(main.get_by_text("Device:")).to_be_visible(timeout=UI_MS)
    time.sleep(2)
    main.get_by_text("Open your own trace").click()
    t0 = time.perf_counter()
    main.locator('input[type="file"]').set_input_files(str(TRACE))
    expect(page.locator('[data-testid="stMain"] [data-testid="stMetric"]').first).to_be_visible(timeout=UI_MS)
    expect(main.get_by_text("Events")).to_be_visible(timeout=UI_MS)
    t_summary = time.perf_counter() - t0
    t1 = time.perf_counter()
    page.get_by_role("tab", name="Timeline").click()
    expect(drawn_chart(main)).to_be_visible(timeout=UI_MS)
    t_timeline = time.perf_counter() - t1
    time.sleep(1)
    (ROOT / "artifacts").mkdir(exist_ok=True)
    page.screenshot(path=str(ROOT / "artifacts/large_trace_timeline.png"), full_page=False)
    t2 = time.perf_counter()
    page.get_by_role("tab", name="Table").click()
    expect(main.get_by_text("GPU kernels")).to_be_visible(timeout=UI_MS)
    t_table = time.perf_counter() - t2
    t3 = time.perf_counter()
    page.get_by_role("tab", name="Timeline").click()
    expect(drawn_chart(main)).to_be_visible(timeout=UI_MS)
    t_timeline2 = time.perf_counter() - t3
    return (f"upload→summary {t_summary:.2f} s; summary→timeline drawn {t_timeline:.2f} s; "
            f"timeline→table {t_table:.2f} s; table→timeline again {t_timeline2:.2f} s")


def main() -> int:
    from playwright.sync_api import sync_playwright

    (ROOT / "artifacts").mkdir(exist_ok=True)
    with streamlit_server(ROOT / "artifacts/bench_page_large_trace_server.log", PORT) as (url, _process):
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(url)
            print(time_views(page))
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

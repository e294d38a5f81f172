"""The page on a large real trace: upload the 51,787-event H200 transformer step in headless
Chromium and time each view until it is drawn (one run; prints one line).

    python bench/bench_page_large_trace.py

Starts `streamlit run app.py` on port 8677, uploads bench/data/transformer_step_h200.json.gz
through the real file widget, then times: upload → Summary metrics; → Timeline chart drawn
(canvas/svg present); → Table with the kernel table; → Timeline again (parse and analysis
cached). Screenshot: artifacts/large_trace_timeline.png.
"""
import subprocess, sys, time, os, signal, urllib.request
from pathlib import Path
from playwright.sync_api import sync_playwright, expect
ROOT = Path(__file__).resolve().parents[1]; TRACE = ROOT / "bench/data/transformer_step_h200.json.gz"
port = 8677
env = {**os.environ, "KINETO_LOG_LEVEL": "6"}
proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true"],
                        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
try:
    for _ in range(120):
        try:
            if urllib.request.urlopen(f"http://localhost:{port}/_stcore/health").read() == b"ok": break
        except Exception: time.sleep(0.5)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless=new","--no-sandbox","--disable-gpu","--disable-dev-shm-usage","--disable-background-networking"])
        page = b.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(f"http://localhost:{port}"); main = page.locator('[data-testid="stMain"]')
        expect(main.get_by_text("Device:")).to_be_visible(timeout=120000)
        time.sleep(2)
        main.get_by_text("Open your own trace").click()
        t0 = time.perf_counter()
        main.locator('input[type="file"]').set_input_files(str(TRACE))
        expect(page.locator('[data-testid="stMain"] [data-testid="stMetric"]').first).to_be_visible(timeout=120000)
        expect(main.get_by_text("Events")).to_be_visible(timeout=120000)
        t_summary = time.perf_counter() - t0
        t1 = time.perf_counter()
        page.get_by_role("tab", name="Timeline").click()
        expect(main.locator('[data-testid="stVegaLiteChart"]').locator("canvas, svg").first).to_be_visible(timeout=120000)
        t_timeline = time.perf_counter() - t1
        time.sleep(1)
        (ROOT / "artifacts").mkdir(exist_ok=True)
        page.screenshot(path=str(ROOT / "artifacts/large_trace_timeline.png"), full_page=False)
        t2 = time.perf_counter()
        page.get_by_role("tab", name="Table").click()
        expect(main.get_by_text("GPU kernels")).to_be_visible(timeout=120000)
        t_table = time.perf_counter() - t2
        t3 = time.perf_counter()
        page.get_by_role("tab", name="Timeline").click()
        expect(main.locator('[data-testid="stVegaLiteChart"]').locator("canvas, svg").first).to_be_visible(timeout=120000)
        t_timeline2 = time.perf_counter() - t3
        print(f"upload→summary {t_summary:.2f} s; summary→timeline drawn {t_timeline:.2f} s; timeline→table {t_table:.2f} s; table→timeline again {t_timeline2:.2f} s")
        b.close()
finally:
    os.killpg(proc.pid, signal.SIGTERM)

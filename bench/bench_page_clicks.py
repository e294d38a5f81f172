"""Click → result on the page (AppTest, after the worker is warm), the first click of each dtype
included, with where each click's time went.

``app.py`` runs in Streamlit's AppTest in this process: the first page run starts the profiling
worker and the trace readers and waits for the worker's warm-up (``ui.run.await_worker``). Then
each click sets the run form (M=K=N, dtype, device) and presses "Run profile"; click → result is
the wall time of that page run (``AppTest.run``: the run in the worker, its trace read in a
reader, the Summary drawn). Parts timed inside it by wrapping the page's own functions:
``run_configs`` (submit → the worker's ``RunResult``), ``cache.load`` (the trace read by a
reader, or found), and the rest (views, the lesson panels, …).

    python bench/bench_page_clicks.py --device cuda --out clicks.json
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
# Sizes and dtypes in the order clicked: each dtype's first click is one of them.
CUDA_CLICKS = ((1024, "bfloat16"), (4096, "bfloat16"), (8192, "bfloat16"), (2048, "bfloat16"),
               (4096, "tf32"), (8192, "tf32"), (1024, "float32"), (4096, "float32"),
               (1024, "float16"), (4096, "float16"), (1024, "bfloat16"), (4096, "tf32"))
CPU_CLICKS = ((256, "float32"), (512, "float32"), (256, "bfloat16"), (512, "bfloat16"))
PARTS = (("ui.run", "run_configs"), ("ui.cache", "load"), ("ui.cache", "job_result"), ("ui.views", "summary_view"))


def _wrap(spent: dict[str, float]) -> None:
    """Each part's wall time, summed per page run into ``spent``."""
    for module_name, name in PARTS:
        module = importlib.import_module(module_name)
        original = getattr(module, name)

        @functools.wraps(original)
        def timed(*args, _original=original, _key=f"{module_name}.{name}", **kwargs):
            start = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                took = time.perf_counter() - start
                spent[_key] = spent.get(_key, 0.0) + took
                if _key.endswith("job_result") and args:  # which job: its kind
                    spent[f"job:{args[0].kind}"] = spent.get(f"job:{args[0].kind}", 0.0) + took

        setattr(module, name, timed)


def click(at, size: int, dtype: str, device: str) -> float:
    """Set the form and press "Run profile"; the page run's wall seconds."""
    values = {"cfg_m": size, "cfg_k": size, "cfg_n": size, "cfg_dtype": dtype, "cfg_device": device,
              "cfg_exact": "", "cfg_step_label": "matmul_add"}
    widgets = {w.key: w for kind in ("select_slider", "radio", "text_input") for w in at.get(kind)}
    for key, value in values.items():
        widgets[key].set_value(value)
    button = next(b for b in at.form_submit_button if b.label == "Run profile")
    start = time.perf_counter()
    button.click()
    at.run()
    wall = time.perf_counter() - start
    problems = [e.value for e in at.exception] + [e.value for e in at.error]
    if problems:
        raise RuntimeError(f"{size}³ {dtype}: {problems}")
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    from streamlit.testing.v1 import AppTest

    spent: dict[str, float] = {}
    _wrap(spent)
    at = AppTest.from_file(str(APP), default_timeout=600)
    start = time.perf_counter()
    at.run()  # starts the worker and the readers; waits for the worker's warm-up
    first_page = time.perf_counter() - start
    print(f"first page run (worker warm-up included): {first_page:.2f} s", flush=True)
    rows = []
    seen: set[str] = set()
    for size, dtype in CUDA_CLICKS if args.device == "cuda" else CPU_CLICKS:
        spent.clear()
        wall = click(at, size, dtype, args.device)
        run = at.session_state["runs"][-1].run
        row = {"size": size, "dtype": dtype, "first_of_dtype": dtype not in seen, "click_to_result_s": wall,
               "worker_s": spent.get("ui.run.run_configs", 0.0), "read_s": spent.get("ui.cache.load", 0.0),
               "jobs_s": spent.get("ui.cache.job_result", 0.0), "summary_s": spent.get("ui.views.summary_view", 0.0),
               "jobs": {k[4:]: round(v, 4) for k, v in spent.items() if k.startswith("job:")},
               "stage_s": {k: round(v, 4) for k, v in run.stage_s.items()}}
        seen.add(dtype)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("| M=K=N | dtype | first of its dtype | click → result s | worker s | read s | jobs s | Summary s |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['size']} | {r['dtype']} | {'yes' if r['first_of_dtype'] else ''} | {r['click_to_result_s']:.3f} | "
              f"{r['worker_s']:.3f} | {r['read_s']:.3f} | {r['jobs_s']:.3f} | {r['summary_s']:.3f} |")
    if args.out is not None:
        args.out.write_text(json.dumps({"first_page_s": first_page, "clicks": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

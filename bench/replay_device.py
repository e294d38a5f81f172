"""On the GPU machine (torch only): replay every spec in ./specs with the exported script's
``replay`` in this one process, one after another, and write one JSON line per case.

    python3 replay_device.py RESULTS.jsonl [--calls N] [--warmup N]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    a = p.parse_args()
    loader = importlib.util.spec_from_file_location("replay_op", HERE / "replay_op.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    specs = [json.loads(path.read_text()) for path in sorted((HERE / "specs").glob("*.json"))]
    runs = [(s["case"], s, {}) for s in specs]
    by_case = {s["case"]: s for s in specs}
    runs += [(f"{case}+{name}", by_case[case], options) for case, name, options in VARIANTS if case in by_case]
    with a.out.open("w", encoding="utf-8") as out:
        for case, spec, options in runs:
            start = time.perf_counter()
            try:
                result = module.replay(spec, device="cuda", calls=a.calls, warmup=a.warmup, **options)
                row = {"case": case, **result, "inputs": spec["inputs"], "original": spec["original"]}
            except Exception as exc:  # one case's failure is a row of the table, not the end of the run
                row = {"case": case, "error": f"{type(exc).__name__}: {exc}"[:300],
                       "trace": traceback.format_exc()[-1500:]}
            row["wall_s"] = time.perf_counter() - start
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(case, f"{row['wall_s']:.1f} s", row.get("kernel_us_per_call", row.get("error")), flush=True)
    return 0


# A few variants, as the page's one-click ones would run them: (case, name, replay keywords).
VARIANTS = (
    ("linear_4096", "float16", {"dtype_name": "float16"}),
    ("gt_mm_fp32", "tf32", {"tf32": True}),
    ("gt_conv", "contiguous", {"layout": "contiguous"}),
    ("tf_layer_norm", "bfloat16", {"dtype_name": "bfloat16"}),
    ("mm_8192", "compiled", {"compile_op": True}),
)


if __name__ == "__main__":
    sys.exit(main())

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
    with a.out.open("w", encoding="utf-8") as out:
        for path in sorted((HERE / "specs").glob("*.json")):
            spec = json.loads(path.read_text())
            start = time.perf_counter()
            try:
                result = module.replay(spec, device="cuda", calls=a.calls, warmup=a.warmup)
                row = {"case": spec["case"], **result, "inputs": spec["inputs"], "original": spec["original"]}
            except Exception as exc:  # one case's failure is a row of the table, not the end of the run
                row = {"case": spec["case"], "error": f"{type(exc).__name__}: {exc}"[:300],
                       "trace": traceback.format_exc()[-1500:]}
            row["wall_s"] = time.perf_counter() - start
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(spec["case"], f"{row['wall_s']:.1f} s", row.get("kernel_us_per_call", row.get("error")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Write tests/data/golden_trace_1024.json: aggregate facts about matmul_add_1024_fp32.json.gz.

How it was produced: ``python tests/make_golden.py`` run once, then the output was checked by
eye against the raw trace (20 kernels = 10 steps x (matmul + add), 22 cuda_runtime calls =
20 launches + 2 cudaDeviceSynchronize). It deliberately does NOT import ``lab``: every number is
counted by brute force from ``json.loads`` of the raw file, with the naming rules of
``lab/trace/lanes.py`` written out again here, so that test_trace.py compares two
independent derivations. Re-run it only if the sample trace itself changes.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

DATA = Path(__file__).parent / "data"
SOURCE = DATA / "matmul_add_1024_fp32.json.gz"
GOLDEN = DATA / "golden_trace_1024.json"


def golden_facts(raw_events: list[dict]) -> dict:
    complete = [e for e in raw_events if e.get("ph") == "X"]
    per_cat = Counter(e.get("cat", "") for e in complete)
    kernel_total_us = sum(e["dur"] for e in complete if e.get("cat") == "kernel")

    # Lanes with metadata, named by the spec: CPU "CPU thread <tid> (<process part>)",
    # GPU "GPU <device> stream <stream>" where the process label says "GPU <n>".
    labels = {e["pid"]: e["args"]["labels"] for e in raw_events
              if e.get("ph") == "M" and e.get("name") == "process_labels"}
    thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in raw_events
                    if e.get("ph") == "M" and e.get("name") == "thread_name"}
    used = {(e["pid"], e["tid"]) for e in complete}
    named_lanes = []
    for (pid, tid), tname in sorted(thread_names.items(), key=str):
        if (pid, tid) not in used:
            continue
        label = labels.get(pid, "")
        if label.startswith("GPU"):
            stream = int(tname.split()[1])
            named_lanes.append(f"GPU {int(label.split()[1])} stream {stream}")
        else:
            process_part = re.search(r"\((.*)\)", tname).group(1)
            named_lanes.append(f"CPU thread {tid} ({process_part})")

    # ac2g flow pairs whose start sits on a CPU launch and whose end on a kernel.
    starts = {e["id"]: (e["pid"], e["tid"], e["ts"]) for e in raw_events
              if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = {e["id"]: (e["pid"], e["tid"], e["ts"]) for e in raw_events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    at = {(e["pid"], e["tid"], e["ts"]): e for e in complete}
    linked = sorted(i for i in starts if i in ends and starts[i] in at and ends[i] in at)

    return {
        "source": SOURCE.name,
        "complete_events": len(complete),
        "per_category": dict(sorted(per_cat.items())),
        "kernel_total_us": round(kernel_total_us, 3),
        "distinct_lanes": len(used),
        "named_lanes": sorted(named_lanes),
        "ac2g_linked_correlations": linked,
    }


def main() -> None:
    raw = json.loads(gzip.decompress(SOURCE.read_bytes()))
    GOLDEN.write_text(json.dumps(golden_facts(raw["traceEvents"]), indent=1) + "\n")
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    main()

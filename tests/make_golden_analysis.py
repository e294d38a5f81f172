"""Write tests/data/golden_analysis_4096_bf16.json: aggregate facts of the 4096³ bf16 trace.

Brute force on the raw JSON (gzip + json, plain Python loops, no lab code), so that
tests/test_analysis.py can compare lab/analysis with numbers derived independently.
Run: python tests/make_golden_analysis.py
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

DATA = Path(__file__).parent / "data"
SOURCE = DATA / "matmul_add_4096_bf16.json.gz"
TARGET = DATA / "golden_analysis_4096_bf16.json"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
SYNC = ("cudaDeviceSynchronize", "cudaStreamSynchronize")


def union_us(intervals):
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def self_times(events):
    """Self time of each event of one thread: duration minus its direct children's durations."""
    out = []
    for e in events:
        s, end = e["ts"], e["ts"] + e["dur"]
        inside = [c for c in events if c is not e and s <= c["ts"] and c["ts"] + c["dur"] <= end
                  and (c["ts"], -c["dur"]) > (s, -e["dur"])]
        direct = [c for c in inside if not any(
            o is not c and o["ts"] <= c["ts"] and c["ts"] + c["dur"] <= o["ts"] + o["dur"]
            and (o["ts"], -o["dur"]) < (c["ts"], -c["dur"]) for o in inside)]
        out.append(e["dur"] - sum(c["dur"] for c in direct))
    return out


def facts(raw: dict) -> dict:
    xs = [e for e in raw["traceEvents"] if e.get("ph") == "X"]
    first = min(e["ts"] for e in xs)
    last = max(e["ts"] + e["dur"] for e in xs)
    gpu = [e for e in xs if e.get("cat") in GPU_CATS]
    kernels = {}
    for e in gpu:
        k = kernels.setdefault(e["name"], {"cat": e["cat"], "count": 0, "total_us": 0.0})
        k["count"] += 1
        k["total_us"] += e["dur"]
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in xs
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    delays = sorted(e["ts"] - launch_ts[e["args"]["correlation"]] for e in gpu
                    if e["args"].get("correlation") in launch_ts)
    cpu = [e for e in xs if str(e["pid"]) == "417" and str(e["tid"]) == "417"]
    cpu.sort(key=lambda e: (e["ts"], -e["dur"]))
    selfs = self_times(cpu)
    self_by_name = {}
    for e, st in zip(cpu, selfs):
        self_by_name[e["name"]] = self_by_name.get(e["name"], 0.0) + st
    steps = sorted((e for e in xs if e.get("cat") == "user_annotation" and e["name"] == "matmul_add"),
                   key=lambda e: e["ts"])
    gemm = sorted((e for e in gpu if e["name"].startswith("nvjet")), key=lambda e: e["ts"])
    flops = 2 * 4096**3
    return {
        "source": SOURCE.name,
        "complete_events": len(xs),
        "trace_span_us": last - first,
        "kernel_time_us": sum(e["dur"] for e in gpu if e["cat"] == "kernel"),
        "memset_time_us": sum(e["dur"] for e in gpu if e["cat"] == "gpu_memset"),
        "gpu_busy_us": union_us([(e["ts"], e["ts"] + e["dur"]) for e in gpu]),
        "gpu_active_span_us": max(e["ts"] + e["dur"] for e in gpu) - min(e["ts"] for e in gpu),
        "gpu_activity": kernels,
        "launch_delay_median_us": statistics.median(delays),
        "launch_delay_count": len(delays),
        "self_us_by_name": self_by_name,
        "host_work_us": sum(st for e, st in zip(cpu, selfs) if e["name"] not in SYNC),
        "steps": {"name": "matmul_add", "count": len(steps), "cpu_us": [e["dur"] for e in steps]},
        "gemm": {"flops": flops, "kernel_us": [e["dur"] for e in gemm],
                 "tflops": [flops / (e["dur"] * 1e-6) / 1e12 for e in gemm]},
    }


def main() -> None:
    raw = json.loads(gzip.decompress(SOURCE.read_bytes()))
    TARGET.write_text(json.dumps(facts(raw), indent=1, sort_keys=True) + "\n")
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()

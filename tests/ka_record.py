"""Record ``tests/ka_programs.py`` programs: trace + torch's key_averages, for the table checks.

    python tests/ka_record.py --device cuda --out /tmp/gt [--programs seed,copies]

Writes per program and with_stack setting ``<stem>.json.gz`` (the trace as torch exported it),
``<stem>.key_averages.csv``, ``<stem>.key_averages_by_shape.csv``, ``<stem>.table.txt`` and
``<stem>.table_device.txt`` (``table(row_limit=-1)`` by self CPU / self device time) and
``<stem>.events.json.gz``: torch's FunctionEvents and KinetoEvents of that profile (ids,
linked correlation ids, threads, kernels), to see how a trace event became a table row.
Also a ``manifest.json``. A program that fails is listed there and skipped.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ka_programs as kp  # noqa: E402
import torch  # noqa: E402


def dump_events(prof) -> dict:
    fes = prof.profiler.function_events
    index = {id(e): i for i, e in enumerate(fes)}
    functions = [{
        "name": e.name, "id": e.id, "thread": e.thread, "start_us": e.time_range.start,
        "end_us": e.time_range.end, "device_type": str(e.device_type).rsplit(".", 1)[-1],
        "is_async": e.is_async, "parent": index.get(id(e.cpu_parent), -1),
        "kernels": [[k.name, k.duration] for k in e.kernels],
        "self_cpu_us": e.self_cpu_time_total, "device_total_us": e.device_time_total,
    } for e in fes]
    kineto = []
    for k in prof.profiler.kineto_results.events():
        kineto.append({
            "name": k.name(), "correlation_id": k.correlation_id(),
            "linked_correlation_id": k.linked_correlation_id(),
            "device_type": str(k.device_type()).rsplit(".", 1)[-1], "start_ns": k.start_ns(),
            "end_ns": k.end_ns(), "thread": k.start_thread_id(), "end_thread": k.end_thread_id(),
            "is_async": k.is_async(), "user_annotation": bool(k.is_user_annotation()),
            "python": bool(getattr(k, "is_python_function", lambda: False)()),
            "activity_type": str(getattr(k, "activity_type", lambda: "")()),
            "external_id": int(getattr(k, "external_id", lambda: -1)()),
        })
    return {"function_events": functions, "kineto_events": kineto,
            "trace_start_ns": prof.profiler.kineto_results.trace_start_ns()}


def record_all(device: str, out: Path, programs: list[str]) -> dict:
    manifest = {"torch": torch.__version__, "device": device, "traces": [], "failed": []}
    for program in programs:
        for with_stack in (False, True):
            stem = f"{program}_{device}{'_stack' if with_stack else ''}"
            try:
                rec, prof = kp.record(program, device, out, with_stack=with_stack, with_flops=True,
                                      keep_profile=True)
                kp.save(rec)
                (out / f"{stem}.events.json.gz").write_bytes(gzip.compress(json.dumps(dump_events(prof)).encode()))
                manifest["traces"].append({"stem": stem, "program": program, "with_stack": with_stack})
                print("recorded", stem, flush=True)
            except Exception:  # noqa: BLE001 - record the rest
                manifest["failed"].append({"stem": stem, "error": traceback.format_exc()[-2000:]})
                print("FAILED", stem, traceback.format_exc()[-600:], flush=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--programs", default="")
    args = parser.parse_args()
    table = kp.GPU_PROGRAMS if args.device == "cuda" else kp.PROGRAMS
    programs = [p for p in args.programs.split(",") if p] or list(table)
    args.out.mkdir(parents=True, exist_ok=True)
    record_all(args.device, args.out, programs)


if __name__ == "__main__":
    main()

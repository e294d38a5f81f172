"""Make large Kineto traces by repeating a real trace's profiled steps.

The bundled H200 trace holds 10 steps of ``torch.add(torch.matmul(x, w), b)``. Copy k of the
trace is that trace with every ts shifted by k x (its span + 100 µs) and its ids renumbered
(``correlation``, ``External id``, the ac2g flow ``id``), so launch ↔ kernel pairs stay
unique and distinct, as in a long profiling session. Metadata events (``ph: "M"``) and the
top-level keys are kept once. The events list is cut to exactly N events.

    python bench/make_large_trace.py --events 1000 10000 100000 1000000 --out /tmp/profiler_lab_bench
    python bench/make_large_trace.py --megabytes 20 --out /tmp/profiler_lab_bench

Writes ``trace_<N>.json`` (plain JSON, the way export_chrome_trace writes ``.json``) and, with
``--gzip``, a ``.json.gz`` beside it. Prints one line per file: path, events, bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT / "tests" / "data" / "matmul_add_4096_bf16.json.gz"
GAP_US = 100.0  # idle time between two copies, like the gap between profiling windows


def load_source(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def _ids_span(events: list[dict]) -> tuple[int, int, int]:
    """Largest correlation, External id and flow id in one copy: the renumbering strides."""
    corr = ext = flow = 0
    for e in events:
        args = e.get("args") or {}
        corr = max(corr, int(args.get("correlation", 0) or 0))
        ext = max(ext, int(args.get("External id", 0) or 0))
        if e.get("ph") in ("s", "f"):
            flow = max(flow, int(e.get("id", 0)))
    return corr + 1, ext + 1, flow + 1


def repeated_events(doc: dict, n_events: int) -> list[dict]:
    """Metadata once, then shifted, renumbered copies of the other events: n_events in all."""
    meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    body = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
    timed = [e for e in body if "ts" in e]
    start = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - start
    stride_us = span + GAP_US
    corr_stride, ext_stride, flow_stride = _ids_span(body)
    out = list(meta[:n_events])
    copies = math.ceil(max(n_events - len(out), 0) / len(body))
    for k in range(copies):
        shift = k * stride_us
        for e in body:
            c = dict(e)
            if "ts" in c:
                # 3 decimals: Kineto writes ns-resolution µs
                c["ts"] = round(c["ts"] + shift, 3)
            if c.get("ph") in ("s", "f"):
                c["id"] = c["id"] + k * flow_stride
            args = c.get("args")
            if args:
                args = dict(args)
                if "correlation" in args:
                    args["correlation"] += k * corr_stride
                if "External id" in args:
                    args["External id"] += k * ext_stride
                c["args"] = args
            out.append(c)
            if len(out) == n_events:
                return out
    return out


def write_trace(doc: dict, n_events: int, out_dir: Path, *, gzip_too: bool = False) -> Path:
    top = {k: v for k, v in doc.items() if k != "traceEvents"}
    top["traceEvents"] = repeated_events(doc, n_events)
    path = out_dir / f"trace_{n_events}.json"
    out_dir.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        json.dump(top, fh)
    if gzip_too:
        with gzip.open(path.with_suffix(".json.gz"), "wb", compresslevel=6) as gz:
            gz.write(path.read_bytes())
    return path


def events_for_megabytes(doc: dict, megabytes: float) -> int:
    """How many events make a file of about ``megabytes`` MB (measured on one copy)."""
    body = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
    bytes_per_event = len(json.dumps(body)) / len(body)
    return int(megabytes * 1e6 / bytes_per_event)


def tile_trace(trace, copies: int):
    """``copies`` back-to-back repeats of an already parsed ``trace`` (same lanes, depths, flows),
    shifted in time: a large Trace without writing or parsing its JSON (timeline bench and tests)."""
    from dataclasses import replace

    import numpy as np
    import pandas as pd

    from lab.trace.load import Trace

    ev = trace.events
    span = float((ev["ts_us"] + ev["dur_us"]).max()) + 1.0
    n = len(ev)
    big = ev.iloc[np.tile(np.arange(n), copies)].reset_index(drop=True)
    big["ts_us"] = big["ts_us"].to_numpy() + np.repeat(np.arange(copies), n) * span
    order = np.lexsort((big["ts_us"].to_numpy(), big["lane_order"].to_numpy()))
    big = big.iloc[order].reset_index(drop=True)
    new_pos = np.empty(len(order), dtype=np.int64)
    new_pos[order] = np.arange(len(order))
    f = trace.flows
    k = np.repeat(np.arange(copies), len(f))
    flows = pd.DataFrame({
        "correlation": np.tile(f["correlation"].to_numpy(), copies) + k * 10**9,
        "launch_row": new_pos[np.tile(f["launch_row"].to_numpy(), copies) + k * n],
        "gpu_row": new_pos[np.tile(f["gpu_row"].to_numpy(), copies) + k * n],
        "delay_us": np.tile(f["delay_us"].to_numpy(), copies),
    })
    return Trace(events=big, flows=flows, meta=replace(trace.meta, span_us=span * copies))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--events", type=int, nargs="*", default=[])
    ap.add_argument("--megabytes", type=float, nargs="*", default=[])
    ap.add_argument("--out", type=Path, default=Path("/tmp/profiler_lab_bench"))
    ap.add_argument("--gzip", action="store_true", help="also write .json.gz")
    args = ap.parse_args()
    doc = load_source(args.source)
    counts = list(args.events) + [events_for_megabytes(doc, mb) for mb in args.megabytes]
    for n in counts:
        path = write_trace(doc, n, args.out, gzip_too=args.gzip)
        print(f"{path}\t{n}\t{path.stat().st_size}")


if __name__ == "__main__":
    main()

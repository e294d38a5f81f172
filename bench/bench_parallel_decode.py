"""Would decoding a large trace's events on two cores pay? (a measurement, not adopted code)

    python bench/bench_parallel_decode.py /tmp/profiler_lab_bench/real/small_ops_114mb.json --rounds 3
    python bench/bench_parallel_decode.py /tmp/profiler_lab_bench/large/trace_3494195.json --rounds 1

``load_trace``'s decode stages run on one core: locate every event's raw JSON (one msgspec
pass), then type 8k events at a time and turn them into column pieces (``columns.EventParts``).
The second stage is split here: a forked child takes the second half of the batches, the
parent the first half, at the same time; the child's column pieces (numpy arrays, small next
to the events) come back pickled through a pipe and are appended after the parent's, so the
merged pieces are the ones one core makes, in the same order, and ``_build`` (lanes, sort,
depth, flows) runs unchanged. The result is checked against ``load_trace``'s.

Timed, interleaved per round: ``load_trace(path)`` (one core) against the same load with the
split decode (two processes). Wall clock: the figure that would change; CPU of the parent only
(the child's is not counted by ``process_time``). Not run in CI.
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.trace import decode as decode_mod  # noqa: E402
from lab.trace import load as load_mod  # noqa: E402
from lab.trace.columns import EventParts, FlowParts, MemoryParts  # noqa: E402
from lab.trace.load import load_trace  # noqa: E402

_LIMITS = {"max_decompressed_bytes": 4 << 30, "max_events": 50_000_000}


def _collect_range(raws: list) -> tuple:
    parts, flow_parts, memory_parts = EventParts(), FlowParts(), MemoryParts()
    metas: list = []
    skipped = 0
    for records, dropped in decode_mod._typed_batches(raws):
        skipped += dropped + parts.add(records, metas, flow_parts, memory_parts)
    return parts, metas, flow_parts, memory_parts, skipped


def _merge(a: tuple, b: tuple) -> tuple:
    parts, metas, flow_parts, memory_parts, skipped = a
    parts.parts += b[0].parts
    parts.n += b[0].n
    metas += b[1]
    flow_parts.parts += b[2].parts
    memory_parts.parts += b[3].parts
    memory_parts.oom_parts += b[3].oom_parts
    return parts, metas, flow_parts, memory_parts, skipped + b[4]


def load_split(path: str):
    """load_trace with the typed decode of the second half of the batches in a forked child."""
    gc.disable()
    try:
        buf = decode_mod.read_json_bytes(path, _LIMITS["max_decompressed_bytes"])
        doc = decode_mod.RAW_DOC_DECODER.decode(buf)
        raws = doc.traceEvents
        half = (len(raws) // 2 // decode_mod._BATCH_EVENTS) * decode_mod._BATCH_EVENTS
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: the second half, pickled back
            os.close(read_fd)
            data = pickle.dumps(_collect_range(raws[half:]), protocol=5)
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
            os._exit(0)
        os.close(write_fd)
        first = _collect_range(raws[:half])
        with os.fdopen(read_fd, "rb") as inp:
            second = pickle.loads(inp.read())
        os.waitpid(pid, 0)
        merged = _merge(first, second)
        top = {f: getattr(doc, f) for f in doc.__struct_fields__ if f != "traceEvents"}
        src = decode_mod.Source(top, len(raws), iter(()))
        del raws, doc, buf
        original = load_mod._collect
        load_mod._collect = lambda _src: merged  # type: ignore[assignment]
        try:
            return load_mod._build(src, 0)
        finally:
            load_mod._collect = original
    finally:
        gc.enable()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    import pandas.testing as pdt

    one, two = load_trace(args.path, **_LIMITS), load_split(args.path)
    for frame in ("events", "flows", "memory"):
        pdt.assert_frame_equal(getattr(one, frame), getattr(two, frame))
    del one, two
    print(f"same Trace: yes; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    walls: dict[str, list[float]] = {"one core": [], "two processes": []}
    for k in range(args.rounds):
        for name in (["one core", "two processes"] if k % 2 == 0 else ["two processes", "one core"]):
            gc.collect()
            t0 = time.perf_counter()
            result = load_trace(args.path, **_LIMITS) if name == "one core" else load_split(args.path)
            walls[name].append(time.perf_counter() - t0)
            del result
    a, b = statistics.median(walls["one core"]), statistics.median(walls["two processes"])
    print(f"| {Path(args.path).name} | {a:.2f} | {b:.2f} | {a / b:.2f}× | {os.getloadavg()[0]:.2f} |")
    print("rounds (s): " + "; ".join(f"{n}: " + ", ".join(f"{t:.2f}" for t in v) for n, v in walls.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

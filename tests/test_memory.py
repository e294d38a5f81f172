"""profile_memory: ``Trace.memory`` (the "[memory]" instants), the memory analysis and its
insights, the CLI's ``memory`` command.

Expectations come from ``json.loads`` of the raw files and brute-force loops here, never from
the code under test.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
import tracebuild as tb

from lab.trace import load_trace
from lab.trace.model import MEMORY_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
GROUNDTRUTH = ROOT / "tests" / "data" / "groundtruth"
MEMORY_TRACES = [GROUNDTRUTH / "cuda" / "seed_mem.json.gz", GROUNDTRUTH / "cuda" / "llama_train_mem.json.gz",
                 ROOT / "bench" / "data" / "transformer_step_h200.json.gz"]
DEVICE_TYPES = {0: "cpu", 1: "cuda"}


def _raw(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _ns(ts: float) -> int:
    return round(ts * 1000)


# --------------------------------------------------------------------------- Trace.memory


@pytest.mark.parametrize("path", MEMORY_TRACES, ids=lambda p: p.name)
def test_memory_frame_equals_the_raw_records(path):
    """Every "[memory]" instant, in time order, on the events' clock (ns-exact), every column."""
    raw = _raw(path)
    events = raw["traceEvents"]
    start_ns = min(_ns(e["ts"]) for e in events if e.get("ph") == "X")
    records = [e for e in events if e.get("ph") == "i" and e.get("name") == "[memory]"]
    records.sort(key=lambda e: _ns(e["ts"]))  # stable: file order within a tie
    tr = load_trace(path)
    m = tr.memory
    assert list(m.columns) == list(MEMORY_COLUMNS)
    assert len(m) == len(records) > 0 and tr.skipped_events == 0 and tr.has_memory
    assert (np.rint(m["ts_us"].to_numpy() * 1000).astype(np.int64) == [_ns(e["ts"]) - start_ns for e in records]).all()
    for column, key in (("bytes", "Bytes"), ("addr", "Addr"), ("total_allocated_bytes", "Total Allocated"),
                        ("total_reserved_bytes", "Total Reserved"), ("device_id", "Device Id")):
        assert m[column].tolist() == [e["args"][key] for e in records], column
    assert m["device_type"].astype(str).tolist() == [DEVICE_TYPES[e["args"]["Device Type"]] for e in records]
    # The allocating thread's lane: the lane of the events with the same (pid, tid).
    lanes = {(str(p), str(t)): int(o) for p, t, o in tr.events[["pid", "tid", "lane_order"]].drop_duplicates()
             .itertuples(index=False)}
    assert m["lane_order"].tolist() == [lanes.get((str(e["pid"]), str(e["tid"])), -1) for e in records]


def test_trace_without_profile_memory_has_an_empty_memory_frame():
    tr = load_trace(ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz")
    assert len(tr.memory) == 0 and not tr.has_memory
    assert list(tr.memory.columns) == list(MEMORY_COLUMNS)


def test_bad_memory_records_are_dropped_and_counted():
    good = tb.memory(1010.0, 4096, 4096)
    no_bytes = tb.memory(1020.0, 0, 4096)
    del no_bytes["args"]["Bytes"]
    text_bytes = tb.memory(1030.0, 0, 4096)
    text_bytes["args"]["Bytes"] = "4096"  # typed decoding refuses it: the Python checks drop it
    no_args = {k: v for k, v in tb.memory(1040.0, 1, 1).items() if k != "args"}
    other_instant = {"ph": "i", "cat": "", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": 100,
                     "tid": 100, "ts": 1000.0}
    host = tb.memory(1050.5, -512, 0, device_type=0, device_id=-1, total_reserved=0)
    tr = tb.build([tb.op("aten::empty", 1000.0, 100.0), good, no_bytes, text_bytes, no_args, other_instant, host])
    assert tr.skipped_events == 3
    assert tr.memory["ts_us"].tolist() == [10.0, 50.5]
    assert tr.memory["bytes"].tolist() == [4096, -512]
    assert tr.memory["device_type"].astype(str).tolist() == ["cuda", "cpu"]
    assert tr.memory["device_id"].tolist() == [0, -1]


def test_memory_records_survive_the_stdlib_route():
    """A NaN token sends the whole document through json.loads and the Python checks: the
    memory records come out the same."""
    doc = tb.document([tb.op("aten::empty", 1000.0, 100.0, weird=1), tb.memory(1010.0, 4096, 4096),
                       tb.memory(1005.0, 8, 4104, device_type=0)])
    text = json.dumps(doc).replace('"weird": 1', '"weird": NaN')
    assert "NaN" in text
    tr = load_trace(text.encode())
    assert tr.memory["ts_us"].tolist() == [5.0, 10.0]
    assert tr.memory["total_allocated_bytes"].tolist() == [4104, 4096]
    assert not math.isnan(tr.memory["addr"].iloc[0])

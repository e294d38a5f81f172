"""A large real trace: one GPT-style training step on an H200 (torch 2.11), recorded with
record_shapes, profile_memory and with_stack by scripts/make_transformer_trace.py — tens of
thousands of events. The lab must read it with the same results as a brute-force pass over
the raw JSON, and the timeline must stay within its mark budget at every zoom."""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

import pytest

from lab.analysis import analyze
from lab.trace.load import load_trace
from lab.views.timeline import DEFAULT_MAX_MARKS, build_timeline

PATH = Path(__file__).resolve().parents[1] / "bench" / "data" / "transformer_step_h200.json.gz"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


@pytest.fixture(scope="module")
def raw() -> list[dict]:
    return json.loads(gzip.decompress(PATH.read_bytes()))["traceEvents"]


@pytest.fixture(scope="module")
def trace():
    return load_trace(PATH)


def test_it_is_large_and_every_complete_event_is_read(raw, trace):
    complete = [e for e in raw if e.get("ph") == "X"]
    assert len(complete) > 40_000
    assert len(trace.events) == len(complete) and trace.skipped_events == 0
    expected = collections.Counter(e.get("cat", "") for e in complete)
    assert dict(trace.events["cat"].astype(str).value_counts()) == dict(expected)


def test_kernel_time_equals_a_brute_force_sum(raw, trace):
    brute = sum(e["dur"] for e in raw if e.get("ph") == "X" and e.get("cat") == "kernel")
    ev = trace.events
    assert float(ev.loc[ev["cat"] == "kernel", "dur_us"].sum()) == pytest.approx(brute, rel=1e-9)


def test_gpu_busy_time_equals_a_naive_interval_union(raw, trace):
    intervals = sorted((e["ts"], e["ts"] + e["dur"]) for e in raw if e.get("ph") == "X" and e.get("cat") in GPU_CATS)
    busy, cur_start, cur_end = 0.0, None, None
    for start, end in intervals:
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                busy += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    busy += cur_end - cur_start
    assert analyze(trace).utilization.busy_us == pytest.approx(busy, rel=1e-6)


def test_every_gpu_activity_is_linked_to_its_launch(raw, trace):
    gpu = [e for e in raw if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    launch_ids = {e["args"]["correlation"] for e in raw if e.get("ph") == "X"
                  and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    linkable = sum(1 for e in gpu if e["args"].get("correlation") in launch_ids)
    assert linkable == len(gpu)  # the recording is complete: every kernel has its launch
    assert len(trace.flows) == linkable


@pytest.mark.parametrize("fraction", [1.0, 0.1, 0.01, 0.001])
def test_timeline_stays_within_the_mark_budget(trace, fraction):
    span = float((trace.events["ts_us"] + trace.events["dur_us"]).max())
    start = span * (1 - fraction) / 2
    data = build_timeline(trace, start_us=start, end_us=start + span * fraction)
    assert data.mark_count <= DEFAULT_MAX_MARKS
    assert data.shown_events + data.merged_events + data.hidden_events + data.left_out_events == data.total_events
    if fraction == 1.0:
        assert data.merged_events > 0 and data.note  # the full view of 50k events must merge

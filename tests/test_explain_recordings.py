"""tests/data/explain (scripts/record_explain_programs.py): the manifest's truths against the
files beside them, and the recorder itself on a --quick CPU run.

The lab's table against torch's on these traces is tests/test_key_averages.py's corpus test
(it walks tests/data/explain too). Here every expectation is recomputed from the raw trace JSON
or from the manifest's own raw values; nothing is hard-coded but the recorder's option names.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import corpus
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPLAIN = ROOT / "tests" / "data" / "explain"
SCRIPT = ROOT / "scripts" / "record_explain_programs.py"
MANIFEST = EXPLAIN / "manifest.json"

_spec = importlib.util.spec_from_file_location("check_groundtruth", ROOT / "scripts" / "check_groundtruth.py")
check = importlib.util.module_from_spec(_spec)
sys.modules["check_groundtruth"] = check
_spec.loader.exec_module(check)

pytestmark = pytest.mark.skipif(not MANIFEST.exists(), reason="tests/data/explain is not in this branch")


def _manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def _entries() -> list:
    if not MANIFEST.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason="no tests/data/explain"))]
    return [pytest.param(e, id=e["stem"]) for e in _manifest()["entries"]]


def _events(path: Path) -> list[dict]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _step_labels(events: list[corpus.Span]) -> list[corpus.Span]:
    """The step labels of a trace: ProfilerStep#N, or a plain profile's record_function("step")."""
    return sorted((e for e in events if e.ph == "X" and e.cat == "user_annotation"
                   and (e.name.startswith("ProfilerStep#") or e.name == "step")), key=lambda e: e.ts)


@pytest.mark.parametrize("entry", _entries())
def test_entry_files_and_profiled_steps_are_the_traces(entry):
    """Every file named exists; the trace's size and event count are the manifest's; the profiled
    step times are the step labels' durations in the trace, and their median."""
    for name in entry["files"].values():
        assert (EXPLAIN / name).is_file(), name
    path = EXPLAIN / entry["files"]["trace"]
    assert path.stat().st_size == entry["trace_bytes"]
    events = corpus.spans(gzip.decompress(path.read_bytes()))
    assert len(events) == entry["events"]
    labels = _step_labels(events)
    steps = entry["profiled"]["steps"]
    assert list(steps.values()) == [pytest.approx(e.dur / 1e3, abs=1e-4) for e in labels]
    assert entry["profiled"]["median_step_ms"] == pytest.approx(statistics.median(steps.values()), abs=1e-4)
    options = entry["options"]
    expected = options["schedule"]["active"] if options["schedule"] else options["steps"]
    assert len(labels) == expected


@pytest.mark.parametrize("entry", _entries())
def test_truth_summaries_are_their_samples(entry):
    truth = entry["truth"]
    each = truth["step_ms"]
    assert truth["median_step_ms"] == pytest.approx(statistics.median(each), abs=1e-3)
    assert truth["first_step_ms"] == each[0]
    assert truth["median_after_first_ms"] == pytest.approx(statistics.median(each[1:]), abs=1e-3)
    assert truth["profiled_median_step_ms"] == entry["profiled"]["median_step_ms"]
    for op in truth.get("ops", {}).values():
        assert op["min_us"] <= op["median_us"] <= op["max_us"]
        if "gbs" in op:  # bytes by hand over the CUDA-event time
            assert op["gbs"] == pytest.approx(op["bytes"] / (op["median_us"] * 1e-6) / 1e9, rel=1e-3)
        if "tflops" in op:
            assert op["tflops"] == pytest.approx(op["flops"] / (op["median_us"] * 1e-6) / 1e12, rel=1e-2)


def test_pairs_name_recorded_programs_and_their_fix():
    m = _manifest()
    stems = {e["stem"]: e for e in m["entries"]}
    assert m["pairs"]
    for pair in m["pairs"]:
        assert pair["base"] in stems and pair["fixed"] in stems
        fixed = stems[pair["fixed"]]
        assert fixed["fix_of"] == pair["base"] and fixed["fix"] == pair["fix"]
        assert stems[pair["base"]]["fix_of"] is None


def test_memory_bound_bytes_match_the_traced_shapes():
    """The bytes counted by hand for the add, GELU and softmax are their tensors' sizes as the
    trace records them: (inputs + one output of the first input's shape) × the dtype's size."""
    entry = next(e for e in _manifest()["entries"] if e["stem"] == "memory_bound_ops")
    events = [e for e in _events(EXPLAIN / entry["files"]["trace"]) if e.get("cat") == "cpu_op"]
    itemsize = {"c10::BFloat16": 2, "float": 4}
    ops = {"add": "aten::add", "gelu": "aten::gelu", "softmax": "aten::_softmax"}
    for op, aten in ops.items():
        ev = next(e for e in events if e["name"] == aten)
        dims, types = ev["args"]["Input Dims"], ev["args"]["Input type"]
        tensors = [(d, t) for d, t in zip(dims, types, strict=True) if d and t in itemsize]
        numel = [math.prod(d) for d, _ in tensors]
        inputs = sum(n * itemsize[t] for n, (_, t) in zip(numel, tensors, strict=True))
        by_trace = inputs + numel[0] * itemsize[tensors[0][1]]
        assert entry["truth"]["ops"][op]["bytes"] == by_trace, op


def test_slow_step_is_the_slowest_in_trace_and_truth():
    entry = next(e for e in _manifest()["entries"] if e["stem"] == "slow_step")
    slow = entry["program"]["slow_step"]
    steps = entry["profiled"]["steps"]
    assert max(steps, key=steps.get) == f"ProfilerStep#{slow}"
    each = entry["truth"]["step_ms"]
    assert max(range(len(each)), key=each.__getitem__) == slow


# --------------------------------------------------------------------------- the recorder


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("explain")
    env = {**os.environ, "KINETO_LOG_LEVEL": "6"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--only",
                           "slow_step,sync_in_loop,sync_hoisted,memory_bound_ops", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, json.loads((out / "manifest.json").read_text())


@pytest.mark.subprocess
def test_recorder_runs_on_a_cpu_and_the_lab_table_is_torchs(quick_run):
    out, manifest = quick_run
    assert [e["stem"] for e in manifest["entries"]] == ["slow_step", "sync_in_loop", "sync_hoisted",
                                                          "memory_bound_ops"]
    assert manifest["failed"] == [] and manifest["pairs"] == [
        {"base": "sync_in_loop", "fixed": "sync_hoisted", "fix": manifest["entries"][2]["fix"]}]
    for trace, csv_path in check.find_pairs(out, False):
        result = check.compare_trace(trace, csv_path, tables=True)
        assert result.ok and all(result.tables.values()), (trace.name, result.mismatching[:5])
    # The slow step holds its host work in both (a shared CPU makes other steps slow at times,
    # so "slowest" is checked on the H200 recording only).
    slow = manifest["entries"][0]
    k, host_ms = slow["program"]["slow_step"], slow["program"]["slow_step_host_ms"]
    assert slow["truth"]["step_ms"][k] >= host_ms
    assert slow["profiled"]["steps"][f"ProfilerStep#{k}"] >= host_ms
    assert len(slow["profiled"]["steps"]) == slow["options"]["schedule"]["active"]

"""Measures: every figure of a trace computed once, and a second definition of one is caught.

* The definitions that must exist once (the interval union, the GPU-activity categories, "which
  step holds this instant") are found by reading lab/'s source (AST): a function named like a
  union or a busy-time computation, or a literal list of the GPU activity categories, anywhere
  but its one place fails here.
* ``Measures``' figures (the steps' windows, the GPU busy µs in each, the launches) are recomputed
  by brute force from the raw JSON of corpus traces: events and flows read by hand, no lab code.
"""

from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path

import corpus
import numpy as np
import pytest
import sources

from lab.measure import Measures, measure

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "lab"
DATA = ROOT / "tests" / "data"
# Brute-force twins of lab.vocab's lists: written out here on purpose (the test reads no lab code).
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")

# ProfilerStep traces (their windows brute-forced here) and one whose steps are an annotation
# (its windows are the lab's; the GPU busy µs in them is still recomputed from the JSON).
TRACES = [DATA / "matmul_add_4096_bf16.json.gz",
          *(DATA / "explain" / f"{n}.json.gz" for n in ("slow_step", "sync_in_loop", "input_bound", "adam_per_param",
                                                         "copies_pageable", "launch_bound_graphed"))]


# --- one definition, found in the source ---------------------------------------------------------

# Where each shared figure is defined, and the only functions whose names say "union" or "busy".
UNION_HOME = "lab/analysis/intervals.py"  # merge_intervals: the union of intervals
BUSY_NAMES = {  # (module, name): why it is no second GPU-busy union
    ("lab/analysis/diagnoses/common.py", "GpuBusy"): "the diagnoses' record of gpu_utilization's union",
    ("lab/analysis/diagnoses/common.py", "gpu_busy"): "merge_intervals over gpu_activity_rows",
    ("lab/analysis/figures/steps.py", "gpu_busy_pct"): "reads Analysis.utilization",
    ("lab/lessons/tiny_vs_large.py", "_gpu_busy"): "a question's answer reading the figure",
    ("lab/measure/measures.py", "busy_us"): "reads Analysis.utilization",
    ("lab/run/protocol.py", "ServiceBusy"): "a refusal: the run service is busy, no GPU time",
    ("lab/teach/own_trace.py", "_gpu_busy"): "a question's answer reading the figure",
}
CATS_HOME = "lab/vocab.py"
# A copy that cannot import lab: the replay script runs on a user's machine with torch alone.
CATS_EXEMPT = {"lab/replay/standalone.py"}
STEP_OF_HOME = "lab/analysis/intervals.py"
# The modules that may read lab.vocab.GPU_ACTIVITY_CATS: everyone else asks gpu_activity_mask /
# gpu_activity_rows (lab.analysis.columns) or Measures.gpu_rows.
CATS_READERS = {
    "lab/vocab.py": "its definition",
    "lab/analysis/columns.py": "gpu_activity_mask: the one selection",
    "lab/trace/load.py": "the loader pairs launches with GPU rows before a Trace exists",
    "lab/analysis/table/key_averages.py": "torch's device role per category, not a selection of rows",
}


def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): sources.tree(p) for p in sorted(LAB.rglob("*.py"))}


def _defs(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node


def _calls(node: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            out.add(f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else "")
    return out


def union_definitions(modules: dict[str, ast.Module]) -> list[str]:
    """Functions named like an interval union outside its home."""
    return [f"{path}:{d.lineno} {d.name}" for path, tree in modules.items() if path != UNION_HOME
            for d in _defs(tree) if "union" in d.name.lower()]


def busy_definitions(modules: dict[str, ast.Module]) -> list[str]:
    """Functions or classes named like GPU busy time that are not the known ones."""
    return [f"{path}:{d.lineno} {d.name}" for path, tree in modules.items()
            for d in _defs(tree) if "busy" in d.name.lower() and (path, d.name) not in BUSY_NAMES]


def activity_cat_lists(modules: dict[str, ast.Module]) -> list[str]:
    """Literal tuples, lists or sets that list the GPU activity categories again (all of them),
    outside lab.vocab. A subset is a selection (("kernel", "gpu_memcpy"): kernels and copies)."""
    out = []
    for path, tree in modules.items():
        if path == CATS_HOME or path in CATS_EXEMPT:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                words = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                if set(GPU_CATS) <= words:
                    out.append(f"{path}:{node.lineno}")
    return out


def activity_cat_readers(modules: dict[str, ast.Module]) -> list[str]:
    """Modules that select GPU activity by reading GPU_ACTIVITY_CATS themselves."""
    out = []
    for path, tree in modules.items():
        used = [n.lineno for n in ast.walk(tree) if (isinstance(n, ast.Name) and n.id == "GPU_ACTIVITY_CATS")
                or (isinstance(n, ast.Attribute) and n.attr == "GPU_ACTIVITY_CATS")]
        if used and path not in CATS_READERS:
            out.append(f"{path}:{used[0]}")
    return out


def step_of_definitions(modules: dict[str, ast.Module]) -> list[str]:
    """Functions named "which step holds this" (step_of, in_steps, window_of …) that neither are
    the one definition nor call it."""
    names = ("step_of", "in_step", "window_of", "steps_of")
    return [f"{path}:{d.lineno} {d.name}" for path, tree in modules.items() for d in _defs(tree)
            if any(n in d.name.lower() for n in names) and path != STEP_OF_HOME
            and not any("step_of" in c or "in_steps" in c for c in _calls(d))]


def test_the_interval_union_is_defined_once():
    modules = _modules()
    assert "merge_intervals" in {d.name for d in _defs(modules[UNION_HOME])}
    assert union_definitions(modules) == []
    assert busy_definitions(modules) == []


def test_the_gpu_activity_categories_are_listed_once():
    assert activity_cat_lists(_modules()) == []


def test_gpu_activity_is_selected_in_one_place():
    assert activity_cat_readers(_modules()) == []


def test_which_step_holds_an_instant_is_defined_once():
    assert step_of_definitions(_modules()) == []


def test_the_scans_find_a_second_definition():
    planted = ast.parse("def _union(a, b):\n    pass\n\n"
                        "def host_busy_us(x):\n    pass\n\n"
                        "CATS = ('kernel', 'gpu_memcpy', 'gpu_memset')\n\n"
                        "def window_of(t):\n    return t\n\n"
                        "rows = mask_in(ev['cat'], vocab.GPU_ACTIVITY_CATS)\n")
    modules = {"lab/analysis/planted.py": planted}
    assert union_definitions(modules) == ["lab/analysis/planted.py:1 _union"]
    assert busy_definitions(modules) == ["lab/analysis/planted.py:4 host_busy_us"]
    assert activity_cat_lists(modules) == ["lab/analysis/planted.py:7"]
    assert step_of_definitions(modules) == ["lab/analysis/planted.py:9 window_of"]
    assert activity_cat_readers(modules) == ["lab/analysis/planted.py:12"]


# --- Measures against the raw JSON ----------------------------------------------------------------


def _raw(path: Path) -> list[dict]:
    """The complete events, their ts in µs since the first one's (the lab's time origin)."""
    ev = [dict(e) for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    origin = min(float(e["ts"]) for e in ev)
    for e in ev:
        e["ts"] = float(e["ts"]) - origin
        e["dur"] = float(e.get("dur", 0.0))
    return ev


def _union_us(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Covered µs of [lo, hi) by the intervals, by a sweep over the sorted, clipped intervals."""
    covered, reach = 0.0, lo
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi):
        if b > reach:
            covered += b - max(a, reach)
            reach = b
    return covered


def _brute_windows(ev: list[dict]) -> list[tuple[float, float]]:
    """Step windows by hand: ProfilerStep#N labels; a step completes when the next has begun and
    the GPU work launched in its host period has ended; windows run completion to completion."""
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                   if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    if not steps:
        return []
    starts = [a for a, _ in steps]
    period_end = starts[1:] + [steps[-1][1]]
    calls = {e["args"]["correlation"]: e["ts"] for e in ev
             if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    done = list(period_end)
    for g in (e for e in ev if e.get("cat") in GPU_CATS):
        at = calls.get(g.get("args", {}).get("correlation"))
        for i, (a, b) in enumerate(zip(starts, period_end)):
            if at is not None and a <= at < b:
                done[i] = max(done[i], g["ts"] + g["dur"])
    for i in range(1, len(done)):
        done[i] = max(done[i], done[i - 1])
    return list(zip([_brute_first_start(ev, calls, starts[0], period_end[0], done[0])] + done[:-1], done))


def _brute_first_start(ev: list[dict], calls: dict, start: float, period_end: float, done: float) -> float:
    """The first window starts at the first step's start, or where the GPU finishes the work queued
    before the window (kernels launched before it, or without a recorded launch) that runs ahead of
    the first kernel the step launched."""
    gpu = [(calls.get(g.get("args", {}).get("correlation")), g) for g in ev if g.get("cat") in GPU_CATS]
    own = [g["ts"] for at, g in gpu if at is not None and start <= at < period_end]
    if not own:
        return start
    before = [g["ts"] + g["dur"] for at, g in gpu if (at is None or at < start) and g["ts"] < min(own)]
    return min(max(start, max(before)), done) if before else start


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.name)
def measured(request) -> tuple[Measures, list[dict]]:
    path = request.param
    return measure(corpus.trace(path)), _raw(path)


def test_step_windows_equal_the_raw_jsons(measured):
    m, ev = measured
    windows = _brute_windows(ev)
    if not windows:
        assert m.spans.source != "ProfilerStep"
        return
    assert len(m.window_start_us) == len(windows) == len(m.steps)
    assert m.window_start_us == pytest.approx([a for a, _ in windows], abs=1e-3)
    assert m.window_end_us == pytest.approx([b for _, b in windows], abs=1e-3)
    assert m.steps["wall_us"].to_numpy() == pytest.approx([b - a for a, b in windows], abs=1e-3)


def test_gpu_busy_per_step_and_overall_equal_the_raw_jsons(measured):
    m, ev = measured
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") in GPU_CATS]
    assert len(m.gpu_rows) == len(gpu)
    everything = (min(a for a, _ in gpu), max(b for _, b in gpu))
    assert m.busy_us == pytest.approx(_union_us(gpu, *everything), rel=1e-9, abs=1e-3)
    from lab.analysis.intervals import covered_us

    per_window = covered_us(m.busy_start_us, m.busy_end_us, m.window_start_us, m.window_end_us)
    windows = _brute_windows(ev) or list(zip(m.window_start_us, m.window_end_us))
    assert len(windows) == len(per_window) > 0
    assert per_window == pytest.approx([_union_us(gpu, a, b) for a, b in windows], abs=1e-3)


def test_step_of_puts_each_launch_in_the_raw_jsons_step(measured):
    m, ev = measured
    windows = _brute_windows(ev) or list(zip(m.window_start_us, m.window_end_us))
    launches = sorted(e["ts"] for e in ev if e.get("cat") in LAUNCH_CATS)
    want = [next((i for i, (a, b) in enumerate(windows) if a <= t < b), -1) for t in launches]
    assert m.step_of(np.array(launches)).tolist() == want
    calls = {e["args"]["correlation"] for e in ev
             if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    launched = [e for e in ev if e.get("cat") in GPU_CATS and e.get("args", {}).get("correlation") in calls]
    assert int((m.links.launch[m.gpu_rows] >= 0).sum()) == len(launched)

"""The reveal's window and the Timeline it opens: "Open this window in the Timeline"
used to open a step's CPU window stretched to the next step's start, which cut the proving GEMM
kernel at its right edge (the GPU runs behind the CPU: a step's last kernel ends after the next
step began, or after the trace's last CPU event). Now a step's window (``steps.window_end_us``,
computed once in the reader) reaches the end of every GPU activity the step launched, and the
reveal and the Timeline's "Zoom to: step N" both use it.

Checked in data terms against the raw JSON on every lesson's H200 recording: each event the reveal
outlines ends inside its window, and the window is the one the Timeline opens for that step.
"""

from __future__ import annotations

import gzip
import json

import pytest

from lab.analysis import Run, analyze, step_window
from lab.lessons import LESSONS, questions_for
from lab.samples import lesson_samples
from lab.trace.load import load_trace


def _runs(key: str):
    lesson = LESSONS[key]
    out = []
    for run, sample in zip(lesson.runs, lesson_samples(lesson.runs) or []):
        data = sample.read_bytes()
        trace = load_trace(data)
        raw = json.loads(gzip.decompress(data))["traceEvents"]
        out.append((Run(run.name, trace, analyze(trace)), raw))
    return out


@pytest.mark.parametrize("key", list(LESSONS))
def test_the_reveal_window_holds_its_evidence_and_is_the_timeline_step(key):
    pairs = _runs(key)
    if not pairs:
        pytest.skip(f"{key} has no H200 recording")
    runs = [r for r, _ in pairs]
    for q in questions_for(key, "cuda"):
        where = q.answer(runs).where
        if not where.window_us:
            continue
        run, raw = pairs[where.run]
        xs = [e for e in raw if e.get("ph") == "X"]
        t0 = min(e["ts"] for e in xs)  # the trace's start: µs since it, as the page's axis
        ev = run.trace.events
        for i in where.event_ids:  # the outlined events, by their raw JSON times
            name, cat, ts_rel = str(ev["name"].iloc[i]), str(ev["cat"].iloc[i]), float(ev["ts_us"].iloc[i])
            match = min((e for e in xs if e["name"] == name and e.get("cat") == cat),
                        key=lambda e: abs(e["ts"] - t0 - ts_rel))
            end = match["ts"] - t0 + match.get("dur", 0)
            assert end <= where.window_us[1] + 1e-3, (q.key, name[:60], end, where.window_us)
        if where.step is not None:  # "Open this window" opens the step's window: it holds this one
            a, b = step_window(run.analysis.steps, where.step, run.analysis.utilization.trace_span_us)
            assert a <= where.window_us[0] + 1e-6 and b >= where.window_us[1] - 1e-6, (q.key, (a, b), where.window_us)
        kernels = [e for e in xs if e.get("cat") == "kernel"
                   and where.window_us[0] <= e["ts"] - t0 <= where.window_us[1]]
        for k in kernels:  # no kernel that starts in the window is cut off by it
            assert k["ts"] - t0 + k["dur"] <= where.window_us[1] + 1e-3, (q.key, k["name"][:60])


def test_the_memory_reveal_points_to_the_memory_view_that_marks_the_peak():
    """The peak's op and label are marked on the Memory view's chart: the reveal sends you there,
    not to the Table (whose memory columns sum allocations, and show no peak)."""
    runs = [r for r, _ in _runs("memory_peak")]
    if not runs:
        pytest.skip("memory_peak has no H200 recording")
    wheres = [q.answer(runs).where for q in questions_for("memory_peak", "cuda")]
    peak = [w for w in wheres if "peak" in w.text]
    assert peak and all(w.view == "Memory" for w in peak)

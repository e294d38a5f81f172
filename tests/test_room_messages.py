"""The page's run messages, as data: dtype labels before the device is known, the sliders'
nearest stop, a sample's per-iteration time from its trace, and the compiled-step check."""

from __future__ import annotations

import gzip
import json
import statistics

import pytest
import tracebuild as tb

from lab.analysis import Run, analyze
from lab.lessons import lesson_signals
from lab.samples import list_samples
from lab.trace.load import load_trace
from lab.views import summarize

pytest.importorskip("streamlit")
from ui.controls import dtype_labels, nearest_stop  # noqa: E402


def test_dtypes_before_the_worker_reports_the_device():
    # A CPU-only host knows at once (no GPU listed): tf32 and float16 are not here.
    assert dtype_labels(None, "cpu") == {"float32": "float32", "tf32": "tf32 (not here)",
                                         "bfloat16": "bfloat16", "float16": "float16 (not here)"}
    # A GPU host waits for its GPU: those an older GPU refuses are "checking", none "not here".
    assert dtype_labels(None, "cuda") == {"float32": "float32", "tf32": "tf32 (checking…)",
                                          "bfloat16": "bfloat16 (checking…)", "float16": "float16"}


def test_nearest_stop_is_nearest_on_the_log_scale():
    assert [nearest_stop(n) for n in (1000, 3000, 500, 5, 16384, 20000, 1400)] == [1024, 4096, 512, 16, 16384,
                                                                                   16384, 1024]


def _step_windows(doc: dict, name: str) -> list[tuple[float, float]]:
    """Each step's window per step annotation ``name``, from the raw JSON: from the previous step's
    completion to its own, a step completing when the next has begun and the GPU work launched
    from inside its host period (to the next step's start) has ended."""
    events = doc["traceEvents"]
    launches = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("ph") == "X" and e.get("name") == name and e.get("cat") in ("user_annotation", "cpu_op"))
    starts = [a for a, _ in steps]
    period_end = starts[1:] + [steps[-1][1]]
    done = list(period_end)
    for k in gpu:
        at = launches.get(k["args"].get("correlation"))
        for i, (a, b) in enumerate(zip(starts, period_end)):
            if at is not None and a <= at < b:
                done[i] = max(done[i], k["ts"] + k["dur"])
    for i in range(1, len(done)):
        done[i] = max(done[i], done[i - 1])
    return list(zip([starts[0]] + done[:-1], done))


def test_a_sample_without_timings_shows_its_per_iteration_time_from_the_trace():
    sample = next(s for s in list_samples() if not s.timing)
    data = sample.read_bytes()
    trace = load_trace(data)
    analysis = analyze(trace)
    metrics = {m.label: m for m in summarize(trace, analysis, timing=sample.timing).metrics}
    doc = json.loads(gzip.decompress(data))
    step_name = str(analysis.steps["name"].iloc[0])
    windows = _step_windows(doc, step_name)
    expected = statistics.median(end - start for start, end in windows)
    metric = metrics["Per iteration, profiled"]
    from lab.units import fmt_us

    assert metric.value == fmt_us(expected), (metric.value, expected)
    assert f"its {len(windows)} steps" in metric.help and "no timing without the profiler" in metric.help


def _cpu_run(name: str, step_us: list[float]) -> tuple[Run, list[float]]:
    events, ts = [], 1000.0
    for i, dur in enumerate(step_us):
        events.append(tb.op(f"ProfilerStep#{i}", ts, dur, cat="user_annotation"))
        events.append(tb.op("aten::mm", ts + 5, dur * 0.6))
        ts += dur  # back to back: a step runs to the next one's start
    trace = tb.build(events)
    return Run(name, trace, analyze(trace)), step_us


def test_geglu_on_a_cpu_says_the_compiled_step_was_slower_and_why():
    eager, eager_us = _cpu_run("eager", [2900.0, 2847.0, 2810.0])
    compiled, compiled_us = _cpu_run("compiled", [4008.0, 4100.0, 3990.0])
    signal = next(s for s in lesson_signals("geglu", [eager, compiled]) if "step is faster" in s.title)
    before, after = statistics.median(eager_us), statistics.median(compiled_us)
    pct = round(100 * (after - before) / before)
    assert (pct, f"{before:,.0f}", f"{after:,.0f}") == (41, "2,847", "4,008")  # the figures
    assert signal.evidence.startswith(f"the compiled step was {pct} % slower here ({before:,.0f} → {after:,.0f} µs")
    assert ": on a CPU" in signal.evidence and "H200 recording" in signal.evidence
    assert not signal.present and not signal.expected  # information (ⓘ), never a ✓
    # The other way round it is faster, and a ✓.
    faster = next(s for s in lesson_signals("geglu", [compiled, eager]) if "step is faster" in s.title)
    assert faster.present and "% faster here" in faster.evidence and "on a CPU" not in faster.evidence

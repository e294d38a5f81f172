"""The three lessons that read the explain model, checked on programs nobody wrote for them: the
explain corpus's H200 recordings (tests/data/explain/, recorded by scripts/record_explain_programs.py
with torch alone, a ResNet-18 for the input pipeline) carry the same cause, so each lesson's check
must find it there as on the lesson's own recording, and not find it on the fixed program.

Each expectation is read from the corpus's manifest (its ``cause`` and ``truth``), never from the
lab: the input-bound program's DataLoader, the compile in the window, the ops' bytes over their
CUDA-event times.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from lab.analysis import Run, analyze
from lab.lessons import LESSONS
from lab.lessons.checks import cause_share_pct, roof_row
from lab.lessons.memory_roofs import OPS
from lab.trace.load import load_trace

CORPUS = Path(__file__).parent / "data" / "explain"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())


@functools.cache
def corpus_run(stem: str) -> Run:
    trace = load_trace((CORPUS / f"{stem}.json.gz").read_bytes())
    return Run(stem, trace, analyze(trace))


def _signals(key: str, *stems: str) -> dict[str, bool]:
    return {s.title: s.present for s in LESSONS[key].check([corpus_run(s) for s in stems])}


def _entry(stem: str) -> dict:
    return next(e for e in MANIFEST["entries"] if e["stem"] == stem)


def test_input_pipeline_check_finds_the_starved_resnet_and_not_its_fix():
    assert _entry("input_bound")["cause"] == "input_pipeline" and _entry("input_bound_workers")["fix_of"]
    signals = _signals("input_pipeline", "input_bound", "input_bound_workers")
    assert all(signals.values()), signals
    # The fix halves nothing by chance: its truth (no profiler) is the faster loop.
    truth = _entry("input_bound")["truth"], _entry("input_bound_workers")["truth"]
    assert truth[1]["loop_ms_per_step"] < truth[0]["loop_ms_per_step"]
    assert cause_share_pct(corpus_run("input_bound"), "input") > cause_share_pct(corpus_run("input_bound_workers"),
                                                                                 "input")


def test_compile_check_finds_the_compile_in_the_window_and_not_after_warm_up():
    assert _entry("compile_in_window")["cause"] == "compilation"
    signals = _signals("compile_first_call", "compile_in_window", "compile_warmed")
    assert all(signals.values()), signals


# The roof's bandwidth the truths are divided by: the H200 datasheet's HBM3e rate (the same
# 4.8 TB/s the lesson's text quotes), in GB/s.
H200_HBM_GBS = 4800.0


def test_memory_roofs_check_and_the_roof_table_agree_with_cuda_event_truths():
    entry = _entry("memory_bound_ops")
    assert entry["cause"] == "memory_bandwidth"
    run = corpus_run("memory_bound_ops")
    assert all(s.present for s in LESSONS["memory_roofs"].check([run]))
    truth = entry["truth"]["ops"]
    names = dict(zip([op for op, _ in OPS], ["layer_norm", "softmax", "gelu", "add", "row_sum"], strict=True))
    lab_pct = {op: float(roof_row(run, op)["pct_of_roof"]) for op in names}
    true_pct = {op: 100.0 * truth[name]["gbs"] / H200_HBM_GBS for op, name in names.items()}
    assert max(lab_pct, key=lab_pct.get) == max(true_pct, key=true_pct.get)
    assert min(lab_pct, key=lab_pct.get) == min(true_pct, key=true_pct.get)

"""Programs nobody in the lab's code saw (H200, scripts/record_explain_programs.py): the verdict
names the cause the program was written to have, and each fix's advice is gone from the trace
of the program with the fix applied. The savings against the measured ones: BENCHMARKS.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lab.analysis.gemm.analyze import peak_for
from lab.explain import explain
from lab.judge import judge
from lab.trace import load_trace

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "explain"
sys.path.insert(0, str(REPO / "bench"))
from bench_whatif import FIX_RULE  # noqa: E402  (the pairs' rules, named once)

MANIFEST = json.loads((DATA / "manifest.json").read_text())
# The recorder's cause tag → the lab's rule that names it (tags the recorder gave programs whose
# planted cause is one thing; "gpu", "launch", "copies", "gemm" and "table_fidelity" are not).
CAUSE_RULE = {"input_pipeline": "input_pipeline", "compilation": "compilation", "outlier_step": "slow_step",
              "sync": "sync_waits", "memory_bandwidth": "below_roof", "optimizer_launches": "optimizer_loop",
              "pageable_copies": "pageable_copies", "fp32_gemm": "tf32_gemms", "attention_unfused":
              "attention_written_out", "sdpa_plan_per_length": "slow_host_op", "launch": "launch_bound"}
PLANTED = [e["stem"] for e in MANIFEST["entries"] if e.get("cause") in CAUSE_RULE]
# A fix leaves at most this share of the saving its finding promised (CUDA graphs keep one
# replay's host work per step: 161 µs of the launch-bound loop's 3.54 ms).
LEFT_AFTER_FIX = 0.10


def _judged(stem: str):
    trace = load_trace((DATA / f"{stem}.json.gz").read_bytes())
    return judge(explain(trace, peak=peak_for(trace)))


@pytest.mark.parametrize("stem", PLANTED)
def test_the_verdict_names_the_planted_cause(stem):
    cause = next(e["cause"] for e in MANIFEST["entries"] if e["stem"] == stem)
    judged = _judged(stem)
    assert judged.verdict_finding is not None, judged.verdict
    assert judged.verdict_finding.rule == CAUSE_RULE[cause], judged.verdict


@pytest.mark.parametrize("pair", MANIFEST["pairs"], ids=lambda p: f"{p['base']}->{p['fixed']}")
def test_the_advice_is_gone_once_the_fix_is_applied(pair):
    rule = FIX_RULE[pair["base"]]
    before = next(f for f in _judged(pair["base"]).findings if f.rule == rule)
    after = next((f for f in _judged(pair["fixed"]).findings if f.rule == rule), None)
    assert before.saving_pct >= 5.0
    assert after is None or after.saving_us <= LEFT_AFTER_FIX * before.saving_us


def test_the_slow_step_is_named_with_its_cause_as_recorded():
    raw = json.loads(__import__("gzip").decompress((DATA / "slow_step.json.gz").read_bytes()))
    steps = [e for e in raw["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"
             and e.get("cat") == "user_annotation"]
    slowest = max(steps, key=lambda e: e["dur"])
    finding = next(f for f in _judged("slow_step").findings if f.rule == "slow_step")
    assert slowest["name"] in finding.title

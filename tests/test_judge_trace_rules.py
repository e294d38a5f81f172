"""The older insight rules, judged: each now a ``lab.judge.Finding`` (``trace_rules.py``: the bias
add, the profiler's lane, the annotation's row over 100 %), or covered by a judge rule it was a
symptom of (overhead-bound and many tiny kernels → ``launch_bound`` / ``slow_host_op``, the cold
first step → ``slow_step``, long synchronize → ``sync_waits``, CUPTI missing → ``no_gpu_events``).
Each fires on a trace that shows its pattern and stays silent on one that does not; expectations
are re-derived from the raw JSON where a threshold is involved.
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from tracebuild import H200_PROPS, build, gpu_annotation, kernel, launch, matmul_add_steps, op

from lab.analysis import analyze
from lab.judge import judge_trace
from lab.judge.rules import TINY_KERNEL_US
from lab.judge.trace_rules import steps_overlapping
from lab.trace.load import load_trace
from lab.units import fmt_us

DATA = Path(__file__).parent / "data"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _raw(name: str) -> list[dict]:
    doc = json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes()))
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture(scope="module")
def real():
    out = {}
    for name in ("matmul_add_1024_fp32", "matmul_add_4096_bf16", "matmul_add_4096_bf16_compiled"):
        trace = load_trace(DATA / f"{name}.json.gz")
        out[name] = judge_trace(trace, analyze(trace))
    return out


def judged(trace):
    return judge_trace(trace, analyze(trace))


def rule(judgement, name: str):
    return next((f for f in judgement.findings if f.rule == name), None)


# ---- host work far above GPU work: launch_bound / slow_host_op -----------------------------


@pytest.mark.parametrize("name", ["matmul_add_1024_fp32", "matmul_add_4096_bf16"])
def test_launch_bound_silent_where_kernels_are_not_tiny(real, name):
    """Both H200 runs spend more host than GPU time per step (the 1024³ one with the profiler's
    2.7 ms buffer request inside aten::mm), but their median kernel is far above a launch's cost:
    "overhead-bound" fired on the profiler's time here before."""
    assert statistics.median(e["dur"] for e in _raw(name) if e.get("cat") == "kernel") >= TINY_KERNEL_US
    assert rule(real[name], "launch_bound") is None


def test_one_long_host_op_is_named_like_the_64x64_case():
    # 2.3 ms of CPU for 23 µs of GPU (100×): the op itself is slow on the host, and it has no caveat
    # (one 2.3 ms op: the profiler's per-op cost is noise against it).
    j = judged(build([op("aten::mm", 0, 2300), launch(100, 10, 1), kernel("gemm", 200, 23, 1)]))
    found = rule(j, "slow_host_op")
    assert found is j.verdict_finding and found.severity == "critical" and "aten::mm" in found.title
    assert found.caveat == ""


def _tiny_kernels(n: int, dur: float, every: float):
    events = []
    for i in range(n):
        events += [launch(i * every, 8, i + 1), kernel("void tiny_kernel", i * every + 10, dur, i + 1)]
    return build(events, device_properties=[H200_PROPS])


def test_many_tiny_kernels_are_launch_bound_with_the_profiler_caveat():
    found = rule(judged(_tiny_kernels(40, 3.0, 20.0)), "launch_bound")
    assert found is not None and "median kernel 3.0 µs over 40 GPU activities" in found.evidence
    assert "CUPTI" in found.caveat and "profiler" in found.caveat


def test_tiny_kernels_back_to_back_save_only_the_lead_in():
    # The GPU runs kernel after kernel: only the first launch (10 µs before the first kernel) waits.
    found = rule(judged(_tiny_kernels(40, 3.0, 3.0)), "launch_bound")
    assert found is None or found.saving_us <= 10.0 + 1e-6


# ---- the cold first step: slow_step --------------------------------------------------------


def test_cold_first_step_is_the_slow_step_on_the_cold_fp32_trace(real):
    steps = sorted((e for e in _raw("matmul_add_1024_fp32") if e["name"] == "matmul_add"
                    and e.get("cat") == "user_annotation"), key=lambda e: e["ts"])
    assert steps[0]["dur"] >= 2 * statistics.median(e["dur"] for e in steps[1:])
    found = rule(real["matmul_add_1024_fp32"], "slow_step")
    assert found is not None and "first step" in found.title and "matmul_add #1" in found.title
    assert "run to run" in found.caveat


def test_slow_step_silent_when_steps_are_even():
    assert rule(judged(matmul_add_steps(5)), "slow_step") is None


def test_slow_step_on_a_hand_made_cold_start():
    found = rule(judged(matmul_add_steps(5, first_extra_us=400.0)), "slow_step")
    assert found is not None and found.saving_us == pytest.approx(400.0) and "run to run" in found.caveat


def test_slow_step_needs_three_steps():
    assert rule(judged(matmul_add_steps(2, first_extra_us=1000.0)), "slow_step") is None


# ---- long synchronize: sync_waits ----------------------------------------------------------


def test_a_long_sync_with_the_gpu_idle_is_sync_waits():
    events = [op("aten::mm", 0, 30), launch(5, 10, 1), kernel("tiny", 20, 10, 1),
              op("cudaDeviceSynchronize", 40, 500, cat="cuda_runtime")]
    found = rule(judged(build(events, device_properties=[H200_PROPS])), "sync_waits")
    assert found is not None and "cudaDeviceSynchronize 500 µs" in found.evidence


def test_sync_waits_silent_when_the_gpu_is_busy_during_the_sync(real):
    # bf16: the 545 µs cudaDeviceSynchronize waits for kernels that run during all of it.
    xs = _raw("matmul_add_4096_bf16")
    sync = max((e for e in xs if e["name"] == "cudaDeviceSynchronize"), key=lambda e: e["dur"])
    busy = sum(min(k["ts"] + k["dur"], sync["ts"] + sync["dur"]) - max(k["ts"], sync["ts"])
               for k in xs if k.get("cat") in GPU_CATS and k["ts"] < sync["ts"] + sync["dur"]
               and k["ts"] + k["dur"] > sync["ts"])
    assert busy >= 0.5 * sync["dur"]
    assert rule(real["matmul_add_4096_bf16"], "sync_waits") is None


# ---- CUPTI missing: no_gpu_events ----------------------------------------------------------


def test_launches_without_gpu_activity_point_at_cupti():
    j = judged(build([op("aten::mm", 0, 50), launch(10, 5, 1)], device_properties=[H200_PROPS]))
    found = rule(j, "no_gpu_events")
    assert found is not None and j.named is found and "CUPTI" in found.suggestion
    assert "1 launch calls among 1 CUDA runtime/driver call(s) (cudaLaunchKernel ×1)" in found.evidence


def test_no_gpu_events_silent_on_real_and_cpu_only(real):
    assert rule(real["matmul_add_4096_bf16"], "no_gpu_events") is None
    assert rule(judged(build([op("aten::mm", 0, 50)])), "no_gpu_events") is None


# ---- unfused bias add ----------------------------------------------------------------------


def _bias_adds(name: str) -> list[dict]:
    """Add kernels right after a GEMM kernel on the same stream, by brute force from the raw JSON."""
    ks = sorted((e for e in _raw(name) if e.get("cat") == "kernel"), key=lambda e: (e["tid"], e["ts"]))
    return [b for a, b in zip(ks, ks[1:]) if a["tid"] == b["tid"] and "elementwise" in b["name"]
            and ("gemm" in a["name"].lower() or "nvjet" in a["name"])]


def test_unfused_add_fires_on_eager_bf16_with_its_time_as_the_saving(real):
    adds = _bias_adds("matmul_add_4096_bf16")
    found = rule(real["matmul_add_4096_bf16"], "unfused_bias_add")
    n_steps = sum(e["name"] == "matmul_add" and e.get("cat") == "user_annotation" for e in _raw("matmul_add_4096_bf16"))
    assert found is not None
    assert found.evidence.startswith(f"{len(adds)} add kernel(s) ({fmt_us(sum(a['dur'] for a in adds))}")
    assert found.saving_us == pytest.approx(sum(a["dur"] for a in adds) / n_steps, rel=1e-6)
    assert found.caveat == ""  # the shapes were recorded: a bias for sure


def test_unfused_add_silent_on_compiled(real):
    assert rule(real["matmul_add_4096_bf16_compiled"], "unfused_bias_add") is None
    assert any("bias" in e["name"] for e in _raw("matmul_add_4096_bf16_compiled") if e.get("cat") == "kernel")


# ---- notes: the profiler's lane, the annotation over 100 % ---------------------------------


def test_profiler_overhead_is_a_note_on_the_real_trace(real):
    total = sum(e["dur"] for e in _raw("matmul_add_4096_bf16") if e.get("cat") == "overhead")
    found = rule(real["matmul_add_4096_bf16"], "profiler_overhead_event")
    assert found is not None and found.is_note and found.saving_us == 0.0
    assert "Activity Buffer Request" in found.evidence and fmt_us(total) in found.evidence
    assert "step 0" in found.evidence


def test_profiler_overhead_silent_without_overhead_events():
    assert rule(judged(matmul_add_steps(3)), "profiler_overhead_event") is None


def test_annotation_over_100_is_a_note_on_bf16(real):
    xs = _raw("matmul_add_4096_bf16")
    pct = 100 * sum(e["dur"] for e in xs if e.get("cat") == "gpu_user_annotation") / sum(
        e["dur"] for e in xs if e.get("cat") in GPU_CATS)
    assert pct > 100
    found = rule(real["matmul_add_4096_bf16"], "annotation_over_100_pct")
    assert found is not None and found.is_note and f"{pct:.0f} %" in found.evidence


def test_annotation_over_100_silent_without_gpu_annotations_or_when_shorter():
    assert rule(judged(matmul_add_steps(3)), "annotation_over_100_pct") is None
    events = [launch(0, 5, 1), kernel("k", 10, 50, 1), gpu_annotation("label", 10, 30)]
    assert rule(judged(build(events)), "annotation_over_100_pct") is None


def test_notes_come_last_and_are_never_the_verdict(real):
    for j in real.values():
        notes = [f.is_note for f in j.findings]
        assert notes == sorted(notes)  # False (with a saving) before True (a note)
        assert j.verdict_finding is None or not j.verdict_finding.is_note
        for f in j.findings:
            assert f.evidence and f.suggestion and f.premise


def test_steps_overlapping_matches_brute_force():
    """The binary-search overlap used by the profiler-overhead note equals the all-pairs check."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        starts = np.cumsum(rng.uniform(1, 5, 25))
        gaps = np.diff(np.append(starts, starts[-1] + 5))
        ends = starts + rng.uniform(0.1, 0.9, 25) * gaps
        a = rng.uniform(0, starts[-1] + 5, 9)
        b = a + rng.uniform(0, 10, 9)
        brute = np.flatnonzero(((starts[:, None] < b[None, :]) & (ends[:, None] > a[None, :])).any(axis=1))
        assert list(steps_overlapping(starts, ends, a, b)) == list(brute)


def test_profiler_options_is_a_note_only_where_with_stack_or_profile_memory_was_on(real):
    from tests import diagbuild as b

    doc = b.with_stack(n_steps=3)
    py = sum(e.get("cat") == "python_function" for e in doc["traceEvents"])
    note = rule(judged(b.load(doc)), "profiler_options")
    assert note is not None and note.is_note and f"{py:,} python_function events" in note.evidence
    # the seed recordings: no python_function frames, no memory records: silent
    assert all(rule(j, "profiler_options") is None for j in real.values())


def test_a_finding_scope_is_one_of_three():
    from lab.judge import Finding

    with pytest.raises(ValueError, match="scope"):
        Finding("r", "other_work", "t", premise="p", evidence="e", suggestion="s", saving_us=0.0, base_us=1.0,
                scope="sometimes")

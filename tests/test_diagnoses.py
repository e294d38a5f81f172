"""The diagnoses of lab/analysis/diagnoses/findings.py: each fires on a trace that has its problem and
stays silent on the seed's matmul samples.

Expectations are computed by brute force from the raw JSON events (plain loops over the
dicts, time measured on elementary segments between event boundaries), never written in.
Firing cases use hand-made traces (tests/diagbuild.py); the real H200 traces of the same
problems are tested in tests/test_diagnoses_real.py.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import corpus
import numpy as np
import pytest

from lab.analysis import analyze
from lab.analysis.diagnoses.capture import (
    EMPTY_MAX_OPS,
    capture_explains_missing_gpu,
    find_empty_capture,
    find_profiler_inflation,
)
from lab.analysis.diagnoses.comm import find_collectives
from lab.analysis.diagnoses.graphs import find_graph_replays, graph_replay_rows
from lab.analysis.diagnoses.steps import STEP_MIN_COVER_PCT, step_spans
from lab.explain.unrecorded import LONG_HOST_GAP_US
from lab.judge import SEVERITIES, judge_trace
from lab.trace import load_trace
from tests import diagbuild as b
from tests import tracebuild

ROOT = Path(__file__).resolve().parents[1]
SEED_SAMPLES = sorted([*(ROOT / "tests/data").glob("matmul_add_*.json.gz"),
                       *(ROOT / "lab/samples").glob("matmul_add_*.json.gz")])
# The seed exercise on an H200 recorded with profile_memory: 3 steps, memory records, no OOM.
GROUNDTRUTH_MEM = ROOT / "tests/data/groundtruth/cuda/seed_mem.json.gz"
FINDERS = (find_graph_replays, find_collectives,
           find_empty_capture, find_profiler_inflation)

# The rules of the findings that name a diagnosed cause (what the old weighed verdict named).
_DIAGNOSED = ("empty_window", "pageable_copies", "communication", "sync_waits", "host_unrecorded", "graph_replays")


def _named_finding(trace):
    """The finding the judged verdict names (``lab.judge.Judgement.named``)."""
    return judge_trace(trace, analyze(trace)).named


def _named(trace) -> str | None:
    found = _named_finding(trace)
    return found.rule if found is not None else None


def _judged(trace, rule: str):
    """The judged finding of ``rule`` on the trace (None: it did not fire)."""
    return next((f for f in judge_trace(trace, analyze(trace)).findings if f.rule == rule), None)


# --- brute force over raw events ---------------------------------------------------------------


def complete(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def span(e: dict) -> tuple[float, float]:
    return e["ts"], e["ts"] + e["dur"]


def is_gpu(e: dict) -> bool:
    return e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")


def measure(a: float, b_: float, *conds) -> float:
    """Time in [a, b_) where every condition holds; each condition is (intervals, wanted)."""
    points = {a, b_}
    for intervals, _ in conds:
        points.update(t for iv in intervals for t in iv if a < t < b_)
    pts = sorted(points)
    total = 0.0
    for lo, hi in zip(pts, pts[1:], strict=False):
        mid = (lo + hi) / 2
        if all(any(s <= mid < e for s, e in ivs) == wanted for ivs, wanted in conds):
            total += hi - lo
    return total


def steps_of(doc: dict) -> list[tuple[float, float]]:
    """The CPU-side ProfilerStep#N spans (Kineto writes a GPU-side twin of each, too)."""
    return sorted(span(e) for e in complete(doc)
                  if e["name"].startswith("ProfilerStep#") and e.get("cat") in ("cpu_op", "user_annotation"))


def uncovered_stretches(lo: float, hi: float, covering: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Maximal stretches of [lo, hi] that no interval covers (elementary segments, merged)."""
    pts = sorted({lo, hi, *(t for iv in covering for t in iv if lo < t < hi)})
    out: list[list[float]] = []
    for lo_, hi_ in zip(pts, pts[1:], strict=False):
        mid = (lo_ + hi_) / 2
        if not any(s <= mid < e for s, e in covering):
            if out and out[-1][1] == lo_:
                out[-1][1] = hi_
            else:
                out.append([lo_, hi_])
    return [(s, e) for s, e in out]


def periods(steps: list[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(s, steps[i + 1][0] if i + 1 < len(steps) else e) for i, (s, e) in enumerate(steps)]


HOST_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")


def annotation_steps(doc: dict) -> list[dict]:
    """The step label of a trace without ProfilerStep, by the rule in words: the one repeated
    user annotation that no other annotation contains, holding at least half of its thread's
    host events (phases — two such labels — make no step)."""
    ann = [e for e in complete(doc) if e.get("cat") == "user_annotation"]
    top = {e["name"] for e in ann if not any(o is not e and o["tid"] == e["tid"] and o["ts"] <= e["ts"]
                                             and span(o)[1] >= span(e)[1] for o in ann)}
    top = [n for n in top if sum(e["name"] == n for e in ann) >= 2]
    if len(top) != 1:
        return []
    mine = sorted((e for e in ann if e["name"] == top[0]), key=lambda e: e["ts"])
    host = [e for e in complete(doc) if e.get("cat") in HOST_CATS and e["tid"] == mine[0]["tid"] and e not in mine]
    inside = [h for h in host if any(m["ts"] <= h["ts"] < span(m)[1] for m in mine)]
    return mine if 2 * len(inside) >= len(host) else []


def step_periods(doc: dict) -> list[tuple[float, float]]:
    """Each step's period: to the next step's start, the last one to its own end."""
    if steps_of(doc):
        return periods(steps_of(doc))
    return periods(sorted(span(e) for e in annotation_steps(doc)))


def load_raw(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


# --- silent on the seed's samples ------------------------------------------------------------


@pytest.mark.parametrize("path", SEED_SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_diagnosis_is_silent_on_the_seed_samples(path):
    trace = corpus.trace(path)
    assert [f.__name__ for f in FINDERS if f(trace) is not None] == []
    assert _named(trace) not in _DIAGNOSED  # the judged verdict names none of the diagnoses' causes
    assert not capture_explains_missing_gpu(trace, find_empty_capture(trace))
    assert len(graph_replay_rows(trace)) == 0


@pytest.mark.parametrize("path", SEED_SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_steps_of_the_seed_samples(path):
    doc = load_raw(path)
    steps = step_spans(corpus.trace(path))
    t0 = min(e["ts"] for e in complete(doc))
    marked = sorted(e["ts"] - t0 for e in complete(doc) if e["name"].startswith("ProfilerStep#"))
    if marked:
        assert steps.source == "ProfilerStep"
        np.testing.assert_allclose(steps.start_us, marked, atol=1e-3)
        return
    # No ProfilerStep: the step is the one top-level annotation; brute force: the user_annotation
    # names that repeat and that no other user_annotation contains.
    ann = [e for e in complete(doc) if e.get("cat") == "user_annotation"]
    top = {e["name"] for e in ann if not any(o is not e and o["ts"] <= e["ts"] and span(o)[1] >= span(e)[1]
                                             for o in ann)}
    top = {n for n in top if sum(e["name"] == n for e in ann) >= 2}
    assert steps.source == "annotation" and {steps.name} == top
    np.testing.assert_allclose(steps.start_us, sorted(e["ts"] - t0 for e in ann if e["name"] == steps.name), atol=1e-3)


# --- steps -------------------------------------------------------------------------------------


def test_profiler_step_comes_first_even_when_an_annotation_repeats():
    steps = step_spans(b.load(b.item_sync()))
    assert steps.source == "ProfilerStep" and len(steps) == len(steps_of(b.item_sync()))


def test_phases_are_not_steps():
    # 'd2h' covers most of the thread but 'compute' runs between its instances: no step.
    doc = b.phases(label="d2h")
    ann = [e for e in complete(doc) if e["name"] == "d2h"]
    ops = [e for e in complete(doc) if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime")]
    lane_span = max(span(e)[1] for e in ops) - min(e["ts"] for e in ops)
    assert sum(e["dur"] for e in ann) / lane_span > STEP_MIN_COVER_PCT / 100
    assert step_spans(b.load(doc)).source == ""


def test_the_outer_annotation_is_the_step_not_the_repeated_inner_one():
    steps = step_spans(b.load(b.nested_steps(inner="d2h")))
    assert (steps.source, steps.name, len(steps)) == ("annotation", "train_step", 3)


def test_a_short_repeated_annotation_does_not_cover_the_trace():
    # One repeated label over a small part of a long thread is not a step.
    events = [tracebuild.annotation("d2h", 1000 + 10 * i, 5) for i in range(3)]
    events.append(tracebuild.op("aten::mm", 1100, 1000))
    assert step_spans(tracebuild.build(events)).source == ""


# --- host syncs, host work outside ops, pageable copies: the judge's, from the attribution ---------
# (the diagnoses that measured them apart are gone: the time attribution holds each as a cause)


def test_item_every_step_is_sync_waits_named_by_its_op():
    doc = b.item_sync(n_steps=4, host_work_us=2000)
    found = _judged(b.load(doc), "sync_waits")
    assert found is not None and "aten::_local_scalar_dense" in found.evidence


def test_two_ms_of_python_per_step_is_unrecorded_host_time():
    found = _judged(b.load(b.item_sync(n_steps=4, host_work_us=2000)), "host_unrecorded")
    assert found is not None and found.severity in ("warning", "critical")


def test_short_host_work_between_ops_is_not_unrecorded_host_time():
    # Stretches under LONG_HOST_GAP_US are Python between ops, not time nothing explains.
    assert _judged(b.load(b.item_sync(n_steps=4, host_work_us=LONG_HOST_GAP_US / 4)), "host_unrecorded") is None


def test_host_work_right_after_a_large_copy_off_the_gpu_is_put_on_the_copy():
    doc = b.copy_then_host_work(mb=32.0, host_work_us=5000.0)
    found = _judged(b.load(doc), "host_unrecorded")
    assert found.title == "The host works on tensors copied off the GPU" and "(aten::to)" in found.evidence
    copies = [e["dur"] for e in complete(doc) if e.get("cat") == "gpu_memcpy"]
    # The stretch after the copy, and the copy that fed it (both go with the fix), per step.
    assert found.saving_us == pytest.approx(5000.0 + sum(copies) / len(copies), rel=0.01)


def test_host_work_after_a_copy_stays_the_copys_when_a_sync_drained_its_start():
    """A copy whose op waits in cudaStreamSynchronize for 4 ms of GEMMs and the copy (0.3 ms), then
    5 ms of host work: the sync's drain takes the stretch's first 4 ms (the host work would have
    run while the GPU worked), and what is left still began right after the copy."""
    trace = b.load(b.copy_then_host_work(mb=32.0, host_work_us=5000.0, gemm_us=1000.0, gbps=100.0,
                                         wait_in_sync=True))
    judged = {f.rule: f for f in judge_trace(trace, analyze(trace)).findings}
    assert judged["sync_waits"].saving_us > 3000.0
    found = judged["host_unrecorded"]
    assert found.title == "The host works on tensors copied off the GPU" and "(aten::to)" in found.evidence


@pytest.mark.parametrize("case", ["small copy", "op between"])
def test_host_work_not_fed_by_a_large_copy_keeps_the_general_words(case):
    """A scalar's copy (under HOST_WORK_COPY_BYTES) feeds no milliseconds of host work; nor does a
    copy that ended more than AFTER_COPY_US before the stretch began (an op ran between)."""
    from lab.explain.unrecorded import AFTER_COPY_US, HOST_WORK_COPY_BYTES

    doc = (b.copy_then_host_work(mb=0.5 * HOST_WORK_COPY_BYTES / 2**20) if case == "small copy"
           else b.copy_then_host_work(op_between_us=2 * AFTER_COPY_US))
    found = _judged(b.load(doc), "host_unrecorded")
    assert found.title == "Host time no recorded event explains"
    assert found.evidence.endswith("begins right after " + ("aten::to" if case == "small copy" else "aten::add"))
    assert found.saving_us == pytest.approx(5000.0, rel=0.01)


def test_host_work_after_a_scalar_item_is_not_put_on_its_copy():
    """loss.item(), its sync's drain, then 2 ms of Python: the .item() copies 4 bytes, so the
    words stay general, and name the op the stretch follows."""
    found = _judged(b.load(b.item_sync(n_steps=4, host_work_us=2000)), "host_unrecorded")
    assert found.title == "Host time no recorded event explains"
    assert found.evidence.endswith("begins right after aten::item")


def brute_copies(doc: dict, kind: str) -> dict:
    x = complete(doc)
    mine = [e for e in x if e.get("cat") == "gpu_memcpy" and kind in e["name"]]
    nbytes = sum(e["args"]["bytes"] for e in mine)
    return dict(count=len(mine), us=sum(e["dur"] for e in mine), bytes=nbytes,
                gbps=nbytes / sum(e["dur"] for e in mine) / 1e3)


def test_pageable_copies_are_named_with_their_achieved_bandwidth():
    doc = b.pageable_copies(mb=64, pageable_gbps=6.0, pinned_gbps=50.0)
    page = brute_copies(doc, "Pageable")
    named = _named_finding(b.load(doc))
    assert named.rule == "pageable_copies" and "pin_memory()" in named.suggestion
    assert "non_blocking=True" in named.suggestion and f"{page['gbps']:,.1f} GB/s" in named.evidence


# --- 4. CUDA graphs ----------------------------------------------------------------------------


def test_graph_replays_per_replay_not_per_kernel():
    doc = b.graph_decode(n_steps=3, replays_per_step=4, kernels_per_replay=20)
    x = complete(doc)
    launches = [e for e in x if e["name"] == "cudaGraphLaunch"]
    per = [[k for k in x if k.get("cat") == "kernel" and k["args"]["correlation"] == g["args"]["correlation"]]
           for g in launches]
    delays = [min(k["ts"] for k in ks) - g["ts"] for g, ks in zip(launches, per, strict=True)]
    trace = b.load(doc)
    f = find_graph_replays(trace)
    assert (f.launches, f.replays, f.activities) == (len(launches), len(launches), sum(map(len, per)))
    assert f.kernels_per_replay_median == np.median([len(ks) for ks in per])
    assert f.launch_delay_median_us == pytest.approx(np.median(delays))
    assert f.launch_delay_max_us == pytest.approx(max(delays))
    assert f.replays_per_step == len(launches) / len(steps_of(doc))
    # the rows to leave out of per-kernel launch delays: exactly the replayed kernels
    t0 = min(e["ts"] for e in x)
    rows = graph_replay_rows(trace)
    want = sorted(round(k["ts"] - t0, 3) for ks in per for k in ks)
    assert sorted(np.round(trace.events["ts_us"].to_numpy()[rows], 3)) == want
    judged = judge_trace(trace, analyze(trace))
    # Replays rule out a launch-bound reading; they are no saving, so any material cause still leads.
    assert judged.named.rule == "graph_replays" and "launch_bound" not in [x.rule for x in judged.findings]
    assert judged.verdict_finding is None or judged.verdict_finding.rule != "graph_replays"


# --- 5. collectives ----------------------------------------------------------------------------


def test_nccl_share_overlap_and_the_job():
    doc = b.ddp_nccl(comm_us=400, compute_us=300, overlap_us=100, rank=1, world_size=2)
    x = complete(doc)
    comm = [span(e) for e in x if e["name"].startswith("ncclDevKernel")]
    compute = [span(e) for e in x if e.get("cat") == "kernel" and not e["name"].startswith("nccl")]
    gpu = [span(e) for e in x if is_gpu(e)]
    lo, hi = min(s for s, _ in gpu), max(z for _, z in gpu)
    f = find_collectives(b.load(doc))
    assert (f.rank, f.world_size, f.backend) == (1, 2, "nccl")
    assert f.comm_kernels == len(comm)
    assert f.comm_busy_pct == pytest.approx(100 * measure(lo, hi, (comm, True)) / measure(lo, hi, (gpu, True)))
    assert f.overlap_pct == pytest.approx(100 * measure(lo, hi, (comm, True), (compute, True))
                                          / measure(lo, hi, (comm, True)))
    assert dict(f.calls)["c10d::allreduce_"] == sum(e["name"] == "c10d::allreduce_" for e in x)
    judged = judge_trace(b.load(doc), analyze(b.load(doc)))
    assert judged.named.rule == "communication" and "rank 1 of 2" in judged.verdict
    assert "c10d::allreduce_ ×" in judged.named.evidence


def test_distributed_info_alone_names_the_job():
    doc = tracebuild.document([tracebuild.op("aten::mm", 1000, 10)])
    doc["distributedInfo"] = {"backend": "gloo", "rank": 0, "world_size": 2}
    f = find_collectives(load_trace(json.dumps(doc).encode()))
    assert (f.rank, f.world_size, f.backend, f.comm_kernels) == (0, 2, "gloo", 0)


# --- 6. empty capture window -------------------------------------------------------------------


def test_empty_window_is_a_warning_and_explains_the_missing_gpu_activity():
    doc = b.empty_window()
    x = complete(doc)
    f = find_empty_capture(b.load(doc))
    ops = [e for e in x if e.get("cat") in ("cpu_op", "user_annotation") and not e["name"].startswith("ProfilerStep")]
    assert f.ops == len(ops) <= EMPTY_MAX_OPS
    assert f.profiler_steps == tuple(e["name"] for e in x if e["name"].startswith("ProfilerStep"))
    assert f.runtime_calls == sum(e.get("cat") == "cuda_runtime" for e in x)
    assert capture_explains_missing_gpu(b.load(doc), f)
    named = _named_finding(b.load(doc))
    assert named.rule == "empty_window" and "ProfilerStep#3" in named.evidence


def test_ops_without_gpu_activity_are_not_an_empty_window():
    # The CUPTI-missing case: ops and launches were recorded, kernels were not.
    events = [tracebuild.op("aten::mm", 1000 + 50 * i, 40) for i in range(4)]
    events += [tracebuild.launch(1010 + 50 * i, 10, i + 1) for i in range(4)]
    trace = tracebuild.build(events, device_properties=[tracebuild.H200_PROPS])
    assert not capture_explains_missing_gpu(trace, find_empty_capture(trace))


# --- 8. with_stack / profile_memory ------------------------------------------------------------


def test_with_stack_is_named_with_its_measured_share():
    doc = b.with_stack(n_steps=3)
    x = complete(doc)
    py = [span(e) for e in x if e.get("cat") == "python_function"]
    ops = [span(e) for e in x if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime")]
    lo, hi = min(s for s, _ in ops + py), max(z for _, z in ops + py)
    f = find_profiler_inflation(b.load(doc))
    assert f.with_stack and f.python_events == len(py)
    assert f.python_per_op == len(py) / sum(e.get("cat") == "cpu_op" for e in x)
    assert f.python_only_pct == pytest.approx(100 * measure(lo, hi, (py, True), (ops, False)) / (hi - lo))
    assert f.profile_memory is None  # the trace has neither the flag nor [memory] events
    note = _judged(b.load(doc), "profiler_options")
    assert note is not None and note.is_note and f"{len(py):,} python_function events" in note.evidence


def test_profile_memory_flag_is_read_once_the_meta_carries_it():
    trace = b.load(b.pageable_copies())

    @dataclasses.dataclass(frozen=True)
    class Meta:
        profile_memory: bool = True

    f = find_profiler_inflation(dataclasses.replace(trace, meta=Meta()))
    assert f.profile_memory and not f.with_stack


# --- 9. verdict ----------------------------------------------------------------------------------


def test_item_every_step_is_sync_bound_not_overhead_bound():
    trace = b.load(b.item_sync(host_work_us=2000))
    judged = judge_trace(trace, analyze(trace))
    # The sync and the host work it keeps from overlapping are named; no launch-bound reading.
    assert judged.named.rule in ("sync_waits", "host_unrecorded")
    rules = [x.rule for x in judged.findings]
    assert "sync_waits" in rules and "launch_bound" not in rules
    # .item() by its op: aten::_local_scalar_dense is what .item() dispatches to.
    assert "aten::_local_scalar_dense" in next(x for x in judged.findings if x.rule == "sync_waits").evidence


def test_findings_on_the_diagnosed_traces_are_valid():
    for doc in (b.item_sync(), b.pageable_copies(), b.graph_decode(), b.ddp_nccl(), b.empty_window(), b.with_stack()):
        found = judge_trace(b.load(doc), analyze(b.load(doc))).findings
        assert found and all(f.severity in SEVERITIES for f in found)
        assert all(any(ch.isdigit() for ch in f.evidence) for f in found)


# --- computed once -----------------------------------------------------------------------------


def test_analyze_and_the_rules_find_the_step_spans_once(monkeypatch):
    # Every module that looks step spans up gets a counting step_spans: analyze + judge
    # on a profile_memory trace (steps, memory, OOM-free) must call it once, in diagnose.
    import sys

    calls = []

    def counted(trace):
        calls.append(1)
        return step_spans(trace)

    users = [m for name, m in sys.modules.items() if name.startswith("lab.analysis") and
             getattr(m, "step_spans", None) is step_spans]
    assert len(users) >= 4  # diagnoses (findings, host, graphs, comm), steps, memory, ranks
    for module in users:
        monkeypatch.setattr(module, "step_spans", counted)
    trace = corpus.trace(GROUNDTRUTH_MEM)
    analysis = analyze(trace)
    assert trace.has_memory and len(analysis.steps) > 0 and analysis.memory is not None
    judge_trace(trace, analysis)
    assert len(calls) == 1

"""The diagnoses on real H200 traces of the problems they name (the ground-truth corpus).

The traces and their manifest come from scripts/record_groundtruth.py (branch gt-recorder) in
tests/data/groundtruth/cuda/; each manifest entry tags the problems its trace shows. Every
expectation is computed by brute force from the raw JSON (loops over the event dicts, time
measured on elementary segments), none is written in. Skipped where the corpus is absent.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from lab.analysis import analyze
from lab.analysis.diagnoses import findings as dx
from lab.analysis.diagnoses.capture import find_empty_capture, find_profiler_inflation
from lab.analysis.diagnoses.comm import COMM_OP_PREFIXES, find_collectives
from lab.analysis.diagnoses.copies import find_pageable_copies
from lab.analysis.diagnoses.graphs import find_graph_replays, graph_replay_rows
from lab.analysis.diagnoses.host import HOST_GAP_MIN_STRETCH_US, HOST_SYNC_CALLS, find_host_gaps, find_host_syncs
from lab.judge import judge_trace
from lab.trace import load_trace
from tests.test_diagnoses import (
    _DIAGNOSED,
    HOST_CATS,
    _named,
    complete,
    is_gpu,
    measure,
    span,
    step_periods,
    uncovered_stretches,
)

GT = Path(__file__).resolve().parent / "data" / "groundtruth" / "cuda"
pytestmark = pytest.mark.skipif(not (GT / "manifest.json").exists(),
                                reason="ground-truth corpus (tests/data/groundtruth/cuda, branch gt-recorder) absent")
GPU_SIDE = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")


def entries() -> list[dict]:
    if not (GT / "manifest.json").exists():
        return []
    listed = json.loads((GT / "manifest.json").read_text())["entries"]
    return [e for e in listed if (GT / f"{e['stem']}.json.gz").exists()]


def tagged(*problems: str) -> list[str]:
    return [e["stem"] for e in entries() if set(problems) & set(e["problems"])]


def raw(stem: str) -> dict:
    return json.loads(gzip.decompress((GT / f"{stem}.json.gz").read_bytes()))


def trace(stem: str):
    return load_trace(GT / f"{stem}.json.gz")


def inside(e: dict, outer: list[dict]) -> bool:
    return any(o["tid"] == e["tid"] and o["pid"] == e["pid"] and o["ts"] <= e["ts"] and span(e)[1] <= span(o)[1]
               for o in outer)


# --- 1. host syncs -----------------------------------------------------------------------------


def brute_syncs(doc: dict) -> dict:
    x = complete(doc)
    win = step_periods(doc)
    if not win:  # no steps: the whole trace, syncs that more GPU work follows
        win = [(min(e["ts"] for e in x), max(span(e)[1] for e in x))]
    gpu = [span(e) for e in x if is_gpu(e)]
    comm = [e for e in x if e["name"].startswith(COMM_OP_PREFIXES) and e.get("cat") not in GPU_SIDE]
    syncs, idle = [], []
    for e in x:
        if e["name"] not in HOST_SYNC_CALLS or not any(a <= e["ts"] < z for a, z in win) or inside(e, comm):
            continue
        end = span(e)[1]
        later = [s for s, _ in gpu if s >= end]
        if not step_periods(doc) and not later:
            continue
        syncs.append(e)
        idle.append(0.0 if any(s <= end < z for s, z in gpu) or not later else min(later) - end)
    items = [e for e in x if e["name"] == "aten::item" and any(inside(s, [e]) for s in syncs)]
    return dict(count=len(syncs), idle=sum(idle), items=len(items), window=win[-1][1] - win[0][0],
                blocked=sum(e["dur"] for e in syncs))


@pytest.mark.parametrize("stem", tagged("host_sync_item", "host_sync_device"))
def test_host_syncs_fire_on_the_real_sync_traces(stem):
    doc = raw(stem)
    want = brute_syncs(doc)
    f = find_host_syncs(trace(stem))
    assert f is not None and f.count == want["count"] > 0
    assert f.blocked_us == pytest.approx(want["blocked"], abs=1e-2)
    assert f.idle_after_us == pytest.approx(want["idle"], abs=1e-2)
    assert f.idle_pct == pytest.approx(100 * want["idle"] / want["window"], abs=1e-3)
    assert f.item_calls == want["items"]
    e = next(e for e in entries() if e["stem"] == stem)
    if "host_sync_item" in e["problems"]:
        assert f.item_calls > 0 and f.by_source[0][0] == ".item()"
        assert _named(trace(stem)) in ("sync_waits", "host_unrecorded")


# --- 2. host work outside any op --------------------------------------------------------------


def brute_gaps(doc: dict) -> dict:
    x = complete(doc)
    cover = [span(e) for e in x if e.get("cat") in HOST_CATS and not e["name"].startswith("ProfilerStep#")]
    win = step_periods(doc) or [(min(s for s, _ in cover), max(z for _, z in cover))]
    gaps = [g for g in uncovered_stretches(win[0][0], win[-1][1], cover) if g[1] - g[0] >= HOST_GAP_MIN_STRETCH_US]
    gpu = [span(e) for e in x if is_gpu(e)]
    per = [measure(a, z, (gaps, True)) for a, z in win]
    idle = sum(measure(a, z, (gaps, True), (gpu, False)) for a, z in win)
    return dict(total=sum(per), median=float(np.median(per)), idle=idle, stretches=len(gaps))


@pytest.mark.parametrize("stem", tagged("host_gap"))
def test_host_gaps_fire_on_the_real_host_work_traces(stem):
    want = brute_gaps(raw(stem))
    f = find_host_gaps(trace(stem))
    assert f is not None and f.stretches == want["stretches"]
    assert f.uncovered_us == pytest.approx(want["total"], abs=1e-2)
    assert f.uncovered_median_us == pytest.approx(want["median"], abs=1e-2)
    assert f.gpu_idle_us == pytest.approx(want["idle"], abs=1e-2)


# --- 3. pageable copies ------------------------------------------------------------------------


def without_bytes_column(stem: str):
    """The trace as an older Kineto writes it: no memcpy args["bytes"]."""
    t = trace(stem)
    return dataclasses.replace(t, events=t.events.assign(copy_bytes=np.nan))


@pytest.mark.parametrize("stem", tagged("pageable_copies"))
def test_pageable_copies_fire_on_the_real_copy_traces(stem):
    x = complete(raw(stem))
    gpu = [span(e) for e in x if is_gpu(e)]
    lo, hi = min(s for s, _ in gpu), max(z for _, z in gpu)
    page = [e for e in x if e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"]]
    pin = [e for e in x if e.get("cat") == "gpu_memcpy" and "Pinned" in e["name"]]
    f = find_pageable_copies(trace(stem))
    assert f is not None and (f.count, f.pinned_count) == (len(page), len(pin))
    assert f.pageable_busy_pct == pytest.approx(100 * measure(lo, hi, ([span(e) for e in page], True))
                                                / measure(lo, hi, (gpu, True)))
    assert _named(trace(stem)) == "pageable_copies"
    assert find_pageable_copies(without_bytes_column(stem)).pageable_gbps is None  # no bytes, no claim
    g = find_pageable_copies(trace(stem))
    assert g.pageable_gbps == pytest.approx(sum(e["args"]["bytes"] for e in page) / sum(e["dur"] for e in page) / 1e3)
    if pin:
        assert g.pinned_gbps == pytest.approx(sum(e["args"]["bytes"] for e in pin) / sum(e["dur"] for e in pin) / 1e3)
        assert g.pinned_gbps > g.pageable_gbps


# --- 4. CUDA graphs ----------------------------------------------------------------------------


@pytest.mark.parametrize("stem", tagged("cuda_graphs"))
def test_graph_replays_fire_on_the_real_decode_trace(stem):
    x = complete(raw(stem))
    launches = [e for e in x if e["name"].startswith("cudaGraphLaunch")]
    per = [[k for k in x if is_gpu(k) and k["args"].get("correlation") == g["args"]["correlation"]] for g in launches]
    per = [(g, ks) for g, ks in zip(launches, per, strict=True) if ks]
    t = trace(stem)
    f = find_graph_replays(t)
    assert f is not None and f.replays == len(per)
    assert f.kernels_per_replay_median == np.median([len(ks) for _, ks in per])
    assert f.launch_delay_median_us == pytest.approx(np.median([min(k["ts"] for k in ks) - g["ts"] for g, ks in per]),
                                                     abs=1e-2)
    assert len(graph_replay_rows(t)) == sum(len(ks) for _, ks in per)
    # named, and no launch-bound reading; a material cause (a slow first step) may still lead
    rules = [f.rule for f in judge_trace(t, analyze(t)).findings]
    assert "graph_replays" in rules and "launch_bound" not in rules


# --- 5. collectives ----------------------------------------------------------------------------


@pytest.mark.parametrize("stem", tagged("collective"))
def test_collectives_fire_on_the_real_gloo_ranks(stem):
    doc = raw(stem)
    x = complete(doc)
    comm_ops = [e for e in x if e["name"].startswith(COMM_OP_PREFIXES) and e.get("cat") not in GPU_SIDE]
    launched = {e["args"]["correlation"] for e in x if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and "correlation" in e.get("args", {}) and inside(e, comm_ops)}
    comm_gpu = [span(e) for e in x if is_gpu(e) and (e["args"].get("correlation") in launched
                                                       or e["name"].startswith("nccl"))]
    gpu = [span(e) for e in x if is_gpu(e)]
    lo, hi = min(s for s, _ in gpu), max(z for _, z in gpu)
    f = find_collectives(trace(stem))
    info = doc["distributedInfo"]
    assert (f.rank, f.world_size, f.backend) == (info["rank"], info["world_size"], info["backend"])
    assert f.comm_gpu_us == pytest.approx(measure(lo, hi, (comm_gpu, True)), abs=1e-2)
    assert f.comm_busy_pct == pytest.approx(100 * measure(lo, hi, (comm_gpu, True)) / measure(lo, hi, (gpu, True)))
    assert dict(f.calls)["gloo:all_reduce"] == sum(e["name"] == "gloo:all_reduce" and e.get("cat") == "user_annotation"
                                                   for e in x)
    assert _named(trace(stem)) == "communication"


# --- 6. empty capture window -------------------------------------------------------------------


@pytest.mark.parametrize("stem", tagged("empty_window"))
def test_empty_window_fires_on_the_real_empty_schedules(stem):
    x = complete(raw(stem))
    f = find_empty_capture(trace(stem))
    assert f is not None and f.ops == sum(e.get("cat") in ("cpu_op", "user_annotation")
                                          and not e["name"].startswith("ProfilerStep#") for e in x)
    assert f.profiler_steps == tuple(sorted((e["name"] for e in x if e["name"].startswith("ProfilerStep#")),
                                            key=lambda n: int(n.split("#")[1])))
    assert f.severity != "critical" and dx.capture_explains_missing_gpu(trace(stem), find_empty_capture(trace(stem)))
    assert _named(trace(stem)) == "empty_window"


# --- 8. with_stack / profile_memory ------------------------------------------------------------


@pytest.mark.parametrize("stem", tagged("with_stack_inflation"))
def test_with_stack_fires_on_the_real_stack_traces(stem):
    x = complete(raw(stem))
    f = find_profiler_inflation(trace(stem))
    assert f is not None and f.with_stack
    assert f.python_events == sum(e.get("cat") == "python_function" for e in x)


@pytest.mark.parametrize("stem", tagged("profile_memory")[:1])
def test_profile_memory_fires_on_the_real_memory_traces(stem):
    assert raw(stem).get("profile_memory") == 1
    f = find_profiler_inflation(trace(stem))
    assert f is not None and f.profile_memory


# --- silent where the problem is absent ------------------------------------------------------

QUIET = ("seed", "seed_flops", "gemm_fp32", "gemm_tf32", "multistream", "sdpa_backends", "llama_train",
         "swiglu_compile")


@pytest.mark.parametrize("stem", [s for s in QUIET if s in {e["stem"] for e in entries()}])
def test_diagnoses_stay_silent_on_real_traces_without_those_problems(stem):
    t = trace(stem)
    fired = [f.__name__ for f in (find_host_syncs, find_host_gaps, find_pageable_copies, find_graph_replays,
                                  find_collectives, find_empty_capture, find_profiler_inflation) if f(t) is not None]
    assert fired == [] and _named(t) not in _DIAGNOSED
    assert not dx.capture_explains_missing_gpu(t, find_empty_capture(t))

"""The diagnoses on real H200 traces of the problems they name (the ground-truth corpus).

The traces and their manifest come from scripts/record_groundtruth.py (branch gt-recorder) in
tests/data/groundtruth/cuda/; each manifest entry tags the problems its trace shows. Every
expectation is computed by brute force from the raw JSON (loops over the event dicts, time
measured on elementary segments), none is written in. Skipped where the corpus is absent.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import corpus
import numpy as np
import pytest

from lab.analysis import analyze
from lab.analysis.diagnoses import findings as dx
from lab.analysis.diagnoses.capture import find_empty_capture, find_profiler_inflation
from lab.analysis.diagnoses.comm import COMM_OP_PREFIXES, find_collectives
from lab.analysis.diagnoses.graphs import find_graph_replays, graph_replay_rows
from lab.judge import judge_trace
from tests.test_diagnoses import (
    _DIAGNOSED,
    _named,
    complete,
    is_gpu,
    measure,
    span,
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
    return corpus.trace(GT / f"{stem}.json.gz")


def inside(e: dict, outer: list[dict]) -> bool:
    return any(o["tid"] == e["tid"] and o["pid"] == e["pid"] and o["ts"] <= e["ts"] and span(e)[1] <= span(o)[1]
               for o in outer)


# --- host syncs, host work outside ops, pageable copies: judged from the attribution ---------------


@pytest.mark.parametrize("stem", tagged("host_sync_item"))
def test_item_syncs_on_the_real_traces_are_named(stem):
    assert _named(trace(stem)) in ("sync_waits", "host_unrecorded")


@pytest.mark.parametrize("stem", tagged("pageable_copies"))
def test_pageable_copies_on_the_real_copy_traces_are_named_with_their_rate(stem):
    page = [e for e in complete(raw(stem)) if e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"]]
    t = trace(stem)
    named = judge_trace(t, analyze(t)).named
    assert named.rule == "pageable_copies"
    gbps = sum(e["args"]["bytes"] for e in page) / sum(e["dur"] for e in page) / 1e3
    assert f"{gbps:,.1f} GB/s" in named.evidence


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
    fired = [f.__name__ for f in (find_graph_replays, find_collectives, find_empty_capture, find_profiler_inflation)
             if f(t) is not None]
    assert fired == [] and _named(t) not in _DIAGNOSED
    assert not dx.capture_explains_missing_gpu(t, find_empty_capture(t))

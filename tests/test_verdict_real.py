"""The verdict and insights on the real H200 corpus traces name the real cause:
pageable copies, .item() syncs, gloo communication, CUDA graph replays and an empty capture
window, and stay as they were on the seed's matmul samples."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import corpus
import numpy as np
import pytest

from lab.analysis import analyze
from lab.judge import judge_trace

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "groundtruth" / "cuda"
SEEDS = [ROOT / "tests" / "data" / "matmul_add_4096_bf16.json.gz",
         ROOT / "tests" / "data" / "matmul_add_4096_bf16_compiled.json.gz"]


def _load(stem: str):
    path = CORPUS / f"{stem}.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    trace = corpus.trace(path)
    return trace, analyze(trace), json.loads(gzip.decompress(path.read_bytes()))


@pytest.mark.parametrize(("stem", "rules"), [
    ("copies_pageable", ("pageable_copies",)), ("copies_mixed", ("pageable_copies",)),
    # .item()'s sync, and the host work after it that the sync keeps from overlapping the GPU
    ("item_sync", ("sync_waits", "host_unrecorded")), ("gloo_ddp_rank0", ("communication",)),
    ("gloo_ddp_rank1", ("communication",)), ("empty_window", ("empty_window",)),
    ("empty_window_warmup", ("empty_window",)), ("decode_cudagraphs", ("graph_replays",)),
])
def test_verdict_names_the_cause(stem, rules):
    trace, analysis, _ = _load(stem)
    judged = judge_trace(trace, analysis)
    assert judged.named is not None and judged.named.rule in rules
    assert judged.named.evidence in judged.verdict  # the numbers behind it travel with the verdict
    assert "launch_bound" not in [f.rule for f in judged.findings]


@pytest.mark.parametrize("stem", ["empty_window", "empty_window_warmup"])
def test_an_empty_window_is_not_a_critical_cupti_problem(stem):
    trace, analysis, _ = _load(stem)
    findings = judge_trace(trace, analysis).findings
    assert not [f for f in findings if f.severity == "critical"]
    assert findings and all("CUPTI" not in f.title for f in findings)


def test_graph_kernels_get_no_per_kernel_launch_delay():
    trace, analysis, raw = _load("decode_cudagraphs")
    x = [e for e in raw["traceEvents"] if e.get("ph") == "X"]
    graph_corr = {e["args"]["correlation"] for e in x if e.get("name") == "cudaGraphLaunch"}
    graph_kernels = [e for e in x if e.get("cat") == "kernel" and e["args"].get("correlation") in graph_corr]
    assert graph_kernels  # the replays are there …
    # … and only the flows of kernels launched one by one count as launches.
    corr = trace.events["correlation"].to_numpy()[trace.flows["gpu_row"].to_numpy()]
    assert analysis.launches.count == int((~np.isin(corr, list(graph_corr))).sum())
    assert "cudaGraphLaunch" not in set(analysis.launches.per_launch["launch_name"].astype(str))


@pytest.mark.parametrize("path", SEEDS, ids=[p.name for p in SEEDS])
def test_seed_samples_keep_their_generic_verdict(path):
    trace = corpus.trace(path)
    analysis = analyze(trace)
    named = judge_trace(trace, analysis).named
    # none of the causes above: the seed's matmuls have no copies, syncs, collectives or graphs
    assert named is None or named.rule not in ("pageable_copies", "sync_waits", "communication", "empty_window",
                                               "graph_replays", "no_gpu_events", "no_gpu_work", "cpu_only")
    assert np.isfinite(analysis.utilization.active_busy_pct)


def _adds_after_gemms(raw: dict) -> list[dict]:
    """aten::add/add_ ops whose kernel directly follows a GEMM kernel on the same stream (raw JSON)."""
    x = [e for e in raw["traceEvents"] if e.get("ph") == "X"]
    kernels = sorted((e for e in x if e.get("cat") == "kernel"),
                     key=lambda e: (e["args"].get("device"), e["args"].get("stream"), e["ts"]))
    ops = {e["args"].get("External id"): e for e in x if e.get("name") in ("aten::add", "aten::add_")}
    found = []
    for prev, k in zip(kernels, kernels[1:]):
        where = ("stream", "device")
        same = [prev["args"].get(w) for w in where] == [k["args"].get(w) for w in where]
        if same and any(w in prev["name"].lower() for w in ("gemm", "nvjet", "cutlass")):
            op = ops.get(k["args"].get("External id"))
            if op is not None:
                found.append(op)
    return found


@pytest.mark.parametrize("stem", ["llama_train_mem", "seed"])
def test_bias_add_is_named_only_when_the_add_adds_a_bias(stem):
    """A residual add after a GEMM (a transformer's h + f(h)) is no bias add: with shapes
    recorded the lab tells them apart (brute force: a [N] input matching the GEMM output's N)."""
    trace, analysis, raw = _load(stem)
    adds = _adds_after_gemms(raw)
    assert adds  # both programs have adds right after GEMM kernels
    biases = [a for a in adds if any(len(s) == 1 and s[0] == a["args"]["Input Dims"][0][-1]
                                     for s in a["args"]["Input Dims"][1:] if a["args"]["Input Dims"][0])]
    rules = [f.rule for f in judge_trace(trace, analysis).findings]
    assert ("unfused_bias_add" in rules) == bool(biases)


def test_without_shapes_a_bias_add_is_only_a_possibility():
    trace, analysis, _ = _load("llama_train_stack")  # record_shapes off
    assert not trace.meta.record_shapes
    found = [f for f in judge_trace(trace, analysis).findings if f.rule == "unfused_bias_add"]
    assert found and "record_shapes=True" in found[0].caveat

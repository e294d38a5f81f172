"""The bundled GPU samples (lab/samples) and the script that records them; GEMM figures on every
real trace (samples, the shared traces in tests/data, the ground-truth corpus).

Every sample in the manifest must be a real GPU trace the lab can read: kernels, at least one
GPU stream lane, and launch → kernel links. ``scripts/record_samples.py --device cpu --quick``
must write a manifest and traces in the same format (CPU traces: no kernels, so only the
format and the loading are checked there).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import corpus
import numpy as np
import pandas as pd
import pytest

from lab.analysis import Run, analyze
from lab.analysis.gemm.analyze import ABOVE_PEAK_NOTE, NO_SHAPE_NOTE, gemm_figures
from lab.analysis.gemm.kinds import GEMM_LEAF_OPS, is_gemm_kernel
from lab.core.config import RunConfig
from lab.lessons import LESSONS, lesson_signals
from lab.samples import MANIFEST, SAMPLES_DIR, Sample, list_samples, sample_for
from lab.trace.load import load_trace

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = json.loads(MANIFEST.read_text(encoding="utf-8"))["samples"]
CONFIG_FIELDS = {f.name for f in dataclasses.fields(RunConfig)}
TIMING_KEYS = {"profiled_median_us", "unprofiled_median_us", "method", "compile_s"}
SHARED_TRACES = sorted((ROOT / "tests" / "data").glob("*.json.gz"))
# Real programs recorded on the H200 with torch's key_averages beside each trace
# (scripts/record_groundtruth.py): the committed subset, and the whole corpus where
# LAB_GROUNDTRUTH_DIR points at it.
GROUNDTRUTH_DIRS = [ROOT / "tests" / "data" / "groundtruth",
                    *([Path(os.environ["LAB_GROUNDTRUTH_DIR"])] if os.environ.get("LAB_GROUNDTRUTH_DIR") else [])]
GROUNDTRUTH = sorted({p for d in GROUNDTRUTH_DIRS for p in d.rglob("*.json.gz")})
# Lab TFLOP/s vs torch's flops over the GEMM kernels' time, where the trace was recorded with_flops.
GEMM_TFLOPS_REL_TOL = 0.03


def check_entry(entry: dict, folder: Path) -> None:
    """The manifest contract ``lab.samples.Sample`` and the page rely on."""
    assert isinstance(entry.get("file"), str) and entry["file"].endswith(".json.gz"), entry
    assert "/" not in entry["file"] and "\\" not in entry["file"], "a file name, not a path"
    assert (folder / entry["file"]).is_file(), f"{entry['file']} is listed but missing"
    assert isinstance(entry.get("title"), str) and entry["title"].strip()
    for key in ("device", "torch", "recorded", "note"):
        assert isinstance(entry.get(key, ""), str), key
    assert entry.get("device"), "which device recorded it"
    lesson = entry.get("lesson", "")
    assert lesson == "" or lesson in LESSONS, f"unknown lesson {lesson!r}"
    for key in entry.get("lessons", []):
        assert key in LESSONS, f"unknown lesson {key!r}"
    config = entry.get("config", {})
    assert isinstance(config, dict) and set(config) <= CONFIG_FIELDS, set(config) - CONFIG_FIELDS
    RunConfig.from_dict(config)  # every value valid (raises ConfigError otherwise)
    timing = entry.get("timing")
    if timing:
        assert set(timing) >= TIMING_KEYS, TIMING_KEYS - set(timing)
        assert timing["profiled_median_us"] > 0 and timing["unprofiled_median_us"] > 0
        assert timing["method"] in ("cuda events", "wall clock")
        assert timing["compile_s"] is None or timing["compile_s"] > 0
        assert (timing["compile_s"] is not None) == bool(config.get("compile")), "compile time iff compiled"
    # Sample() accepts it as list_samples does (unknown keys are ignored there).
    Sample(**{k: v for k, v in entry.items() if k in Sample.__dataclass_fields__})


def test_manifest_lists_unique_files_and_every_listed_file_is_shipped():
    files = [e["file"] for e in ENTRIES]
    assert files and len(files) == len(set(files))
    assert [s.file for s in list_samples()] == files  # none dropped for a missing file


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_manifest_entry_is_well_formed(entry):
    check_entry(entry, SAMPLES_DIR)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_sample_is_a_gpu_trace_with_kernels_streams_and_launch_links(entry):
    trace = corpus.trace(SAMPLES_DIR / entry["file"])
    ev = trace.events
    assert trace.skipped_events == 0
    # Kernels, or (the copy lesson's samples) host-device copies: GPU work either way.
    assert ev["cat"].isin(["kernel", "gpu_memcpy"]).sum() > 0
    gpu = ev[ev["lane_kind"] == "gpu"]
    assert (gpu["stream"] >= 0).any() and gpu["lane"].nunique() >= 1
    assert len(trace.flows) > 0
    # Flows join a CPU launch call to GPU work, as their definition says.
    launch_cats = set(ev["cat"].astype(str).to_numpy()[trace.flows["launch_row"].to_numpy()])
    gpu_lanes = set(ev["lane_kind"].astype(str).to_numpy()[trace.flows["gpu_row"].to_numpy()])
    assert launch_cats <= {"cuda_runtime", "cuda_driver"} and gpu_lanes == {"gpu"}
    # The trace's own metadata agrees with the manifest's device.
    names = {p.get("name", "") for p in trace.meta.device_properties}
    assert not names or entry["device"] in names


def _record_samples_module():
    spec = importlib.util.spec_from_file_location("record_samples", ROOT / "scripts" / "record_samples.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("record_samples", module)  # dataclasses look their module up there
    spec.loader.exec_module(sys.modules["record_samples"])
    return sys.modules["record_samples"]


@pytest.mark.subprocess
def test_record_samples_quick_cpu_writes_a_valid_manifest_and_traces(tmp_path):
    out = tmp_path / "samples"
    # The cold runs (a lesson's and an extra one) and the tf32 run, which the CPU refuses:
    # it must land in "failed", not stop the others.
    only = ["_cpu_cold", "_tf32_"]
    script = _record_samples_module()
    items = script.select(script.build_grid("cpu", quick=True), only, "cpu")
    refused = {it.stem for it in items if it.config.dtype in ("tf32", "float16")}  # dtype_refusal on CPU
    expected = {it.stem + ".json.gz" for it in items if it.stem not in refused}
    assert refused and len(expected) >= 2 and all(f.endswith("_cold.json.gz") for f in expected)

    cmd = [sys.executable, str(ROOT / "scripts" / "record_samples.py"), "--device", "cpu", "--quick",
           "--out", str(out), "--only", ",".join(only), "--tar", str(tmp_path / "s.tar.gz")]
    env = dict(os.environ, KINETO_LOG_LEVEL="6")
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    seeds = [e["file"] for e in ENTRIES]
    files = [e["file"] for e in manifest["samples"]]
    assert files[: len(seeds)] == seeds  # the bundled entries are kept, in order
    new = [e for e in manifest["samples"] if e["file"] not in seeds]
    assert {e["file"] for e in new} == expected
    for entry in new:
        check_entry(entry, out)
        assert entry["timing"]["method"] == "wall clock"
        assert entry["config"]["warmup_iters"] == 0 and entry["config"]["device"] == "cpu"
        trace = load_trace(out / entry["file"])
        labels = set(trace.events.loc[trace.events["cat"] == "user_annotation", "name"].astype(str))
        assert entry["config"]["step_label"] in labels
        # Cold: all five steps recorded, from the first iteration on.
        steps = labels & {f"ProfilerStep#{i}" for i in range(10)}
        assert len(steps) == entry["config"]["active"]
    assert any(e["lesson"] == "cold_vs_warm" for e in new)
    assert {f["name"] for f in manifest["failed"]} == refused
    assert all("tf32" in f["error"] for f in manifest["failed"])

    with tarfile.open(tmp_path / "s.tar.gz") as tar:
        assert sorted(tar.getnames()) == sorted(expected | {"manifest.json"})


@pytest.mark.parametrize("key", [k for k, lesson in LESSONS.items() if not lesson.host_only])
def test_lesson_signals_fire_on_the_h200_samples(key):
    """Each lesson's GPU runs were recorded on an H200; the lab detects the lesson in them."""
    runs = []
    for lesson_run in LESSONS[key].runs:
        sample = sample_for(lesson_run.gpu.to_dict())
        assert sample is not None, f"no recorded sample for {key}/{lesson_run.name}: run scripts/record_samples.py"
        trace = corpus.trace(sample.path)
        timing = (sample.timing["profiled_median_us"], sample.timing["unprofiled_median_us"]) if sample.timing else None
        runs.append(Run(lesson_run.name, trace, corpus.analysis(sample.path), timing=timing))
    signals = lesson_signals(key, runs)
    # A signal marked not expected is information (the host_sync recording's step times), not a miss.
    assert signals and all(s.present or not s.expected for s in signals), [(s.title, s.evidence) for s in signals]


# ---- GEMM figures on real traces ---------------------------------------------------------------


def _check_gemm_figures(trace, config=None):
    """No GEMM figure above the device's peak, none even needing to be dropped, and every row a
    GEMM kernel's; returns the rows."""
    analysis = analyze(trace, config=config)
    figures = gemm_figures(trace, peak=analysis.peak, config=config, links=analysis.links)
    assert figures.above_peak == 0, figures.notes
    gemm = analysis.gemm
    assert not [n for n in analysis.gemm_notes if n.startswith(ABOVE_PEAK_NOTE)]
    # A GEMM without a rate is said to be one (what to record), never shown as a rate of 0.
    unrated = int(gemm["flops"].isna().sum())
    assert (unrated > 0) == any(n.startswith(NO_SHAPE_NOTE) for n in analysis.gemm_notes)
    assert not (gemm["tflops"] == 0).any()
    assert all(is_gemm_kernel(k) for k in gemm["kernel"]), set(gemm["kernel"])
    rated = gemm.dropna(subset=["tflops", "peak_tflops"])
    assert (rated["tflops"] <= rated["peak_tflops"]).all()
    return gemm


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_sample_gemm_figures_come_from_gemm_kernels_below_peak(entry):
    trace = corpus.trace(SAMPLES_DIR / entry["file"])
    kernels = set(trace.events.loc[trace.events["cat"] == "kernel", "name"].astype(str))
    for config in (None, *([RunConfig.from_dict(entry["config"])] if entry.get("config") else [])):
        gemm = _check_gemm_figures(trace, config)
        # Every GEMM kernel of these single-op programs is some row's, and nothing else is.
        assert set(gemm["kernel"]) == {k for k in kernels if is_gemm_kernel(k)}


@pytest.mark.parametrize("path", SHARED_TRACES, ids=[p.name for p in SHARED_TRACES])
def test_shared_trace_gemm_figures_come_from_gemm_kernels_below_peak(path):
    gemm = _check_gemm_figures(corpus.trace(path))
    assert len(gemm) == 10


def _torch_gemm_tflops(key_averages: pd.DataFrame) -> float:
    """torch's answer: the GEMM ops' flops over the GEMM kernels' device time (NaN without flops)."""
    ops = key_averages[(key_averages["device_type"] == "CPU") & key_averages["name"].isin(GEMM_LEAF_OPS)]
    labels = key_averages.get("is_user_annotation", pd.Series(False, index=key_averages.index)).astype(bool)
    kernels = key_averages[(key_averages["device_type"] != "CPU") & ~labels & key_averages["name"].map(is_gemm_kernel)]
    flops, kernel_us = float(ops["flops"].sum()), float(kernels["self_device_us"].sum())
    return flops / kernel_us / 1e6 if flops > 0 and kernel_us > 0 else float("nan")


@pytest.mark.parametrize("path", GROUNDTRUTH, ids=[p.name for p in GROUNDTRUTH])
def test_groundtruth_gemm_figures_below_peak_and_as_torch_counts_them(path):
    trace = corpus.trace(path)
    gemm = _check_gemm_figures(trace)
    csv = path.with_name(path.name.removesuffix(".json.gz") + ".key_averages.csv")
    expected = _torch_gemm_tflops(pd.read_csv(csv)) if csv.exists() else float("nan")
    if np.isnan(expected):
        return  # recorded without with_flops: torch has no FLOPs to compare with
    got = float(gemm["flops"].sum() / gemm["kernel_us"].sum() / 1e6)
    assert got == pytest.approx(expected, rel=GEMM_TFLOPS_REL_TOL)

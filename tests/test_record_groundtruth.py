"""scripts/record_groundtruth.py: a real --quick CPU recording in a subprocess, then its files.

The recorder is standalone (no ``lab`` import), so this test only runs it and reads what it
wrote: traces, torch's key_averages CSVs, tables, manifest, tar.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "record_groundtruth.py"
COLUMNS = ["name", "device_type", "count", "self_cpu_us", "cpu_total_us", "self_device_us",
           "device_total_us", "self_cpu_memory_bytes", "cpu_memory_bytes",
           "self_device_memory_bytes", "device_memory_bytes", "flops", "is_user_annotation"]
CORPUS = REPO / "tests" / "data" / "groundtruth"


def _rows(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _by_name(rows: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in rows}


@pytest.fixture(scope="module")
def quick_corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("gt")
    tar = out.parent / "gt.tar.gz"
    env = {**os.environ, "KINETO_LOG_LEVEL": "6"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--only",
         "seed,empty_window", "--out", str(out), "--tar", str(tar)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    return out, tar, manifest, proc.stdout


@pytest.mark.subprocess
def test_manifest_lists_every_variant_and_nothing_failed(quick_corpus):
    out, _, manifest, stdout = quick_corpus
    stems = [e["stem"] for e in manifest["entries"]]
    assert stems == ["seed", "seed_stack", "seed_flops", "seed_mem", "empty_window",
                     "empty_window_warmup"]
    assert manifest["failed"] == [] and manifest["skipped"] == []
    assert manifest["device"] == "cpu" and manifest["quick"] is True
    assert manifest["torch"].startswith(("2.", "3."))
    assert manifest["columns"] == COLUMNS
    for e in manifest["entries"]:
        assert e["problem"] == e["problems"][0]
        assert e["options"].keys() >= {"with_stack", "profile_memory", "record_shapes",
                                       "with_flops", "schedule", "steps"}
        assert e["device_name"] and e["python"] and e["description"]
    assert "seed_stack" in stdout and "done in" in stdout  # the summary table


@pytest.mark.subprocess
def test_traces_match_their_manifest_entries(quick_corpus):
    out, _, manifest, _ = quick_corpus
    for e in manifest["entries"]:
        path = out / e["files"]["trace"]
        assert path.name == f"{e['stem']}.json.gz"
        raw = path.read_bytes()
        assert len(raw) == e["trace_bytes"]
        doc = json.loads(gzip.decompress(raw))
        assert len(doc["traceEvents"]) == e["events"]
        assert (out / e["files"]["table"]).exists()
        assert "table_device" not in e["files"]  # CPU: no device table


@pytest.mark.subprocess
def test_key_averages_csvs_have_torch_columns(quick_corpus):
    out, _, manifest, _ = quick_corpus
    for e in manifest["entries"]:
        header, rows = _rows(out / e["files"]["key_averages"])
        assert header == COLUMNS
        assert len(rows) == e["key_averages_rows"]
        assert all(r["device_type"] == "CPU" for r in rows)
        if e["options"]["record_shapes"]:
            sheader, srows = _rows(out / e["files"]["key_averages_by_shape"])
            assert sheader == COLUMNS + ["input_shapes"]
            assert len(srows) >= len(rows)
        else:
            assert "key_averages_by_shape" not in e["files"]


@pytest.mark.subprocess
def test_seed_rows_are_torchs_answer(quick_corpus):
    out, _, manifest, _ = quick_corpus
    entries = {e["stem"]: e for e in manifest["entries"]}
    seed = _by_name(_rows(out / "seed.key_averages.csv")[1])
    # schedule wait=1 warmup=1 active=3: three steps in one ProfilerStep* row
    assert seed["ProfilerStep*"]["count"] == "3"
    assert seed["ProfilerStep*"]["is_user_annotation"] == "True"
    for name in ("matmul_add", "matmul", "bias_add", "aten::mm", "aten::add"):
        assert seed[name]["count"] == "3", name
    assert float(seed["matmul_add"]["cpu_total_us"]) >= float(seed["matmul"]["cpu_total_us"])
    # with_flops: torch's FLOPs for the GEMM are 2·n³ per call
    n = entries["seed_flops"]["program"]["n"]
    flops = _by_name(_rows(out / "seed_flops.key_averages.csv")[1])
    assert int(flops["aten::mm"]["flops"]) == 3 * 2 * n ** 3
    assert "ProfilerStep*" not in flops  # a plain profile has no steps
    # with_stack adds python_function events and rows
    stack = entries["seed_stack"]
    assert stack["categories"].get("python_function", 0) > 0
    assert stack["key_averages_rows"] > entries["seed"]["key_averages_rows"]
    shapes = _rows(out / "seed.key_averages_by_shape.csv")[1]
    assert f"[[{n}, {n}], [{n}, {n}]]" in {r["input_shapes"] for r in shapes
                                            if r["name"] == "aten::mm"}


@pytest.mark.subprocess
def test_empty_window_records_what_torch_gives(quick_corpus):
    out, _, manifest, _ = quick_corpus
    entries = {e["stem"]: e for e in manifest["entries"]}
    for stem in ("empty_window", "empty_window_warmup"):
        assert entries[stem]["problem"] == "empty_window"
        rows = _rows(out / f"{stem}.key_averages.csv")[1]
        assert not any(r["name"].startswith("aten::") for r in rows), stem
        assert entries[stem]["categories"].get("cpu_op", 0) == 0
    assert entries["empty_window_warmup"]["key_averages_rows"] == 0


@pytest.mark.subprocess
def test_profile_memory_adds_memory_events(quick_corpus):
    _, _, manifest, _ = quick_corpus
    entries = {e["stem"]: e for e in manifest["entries"]}
    assert entries["seed_mem"]["options"]["profile_memory"] is True
    assert entries["seed_mem"]["categories"].get("cpu_instant_event", 0) > 0
    assert "cpu_instant_event" not in entries["seed"]["categories"]


@pytest.mark.subprocess
def test_retag_rewrites_only_the_tags(quick_corpus, tmp_path):
    out, _, manifest, _ = quick_corpus
    copy = tmp_path / "corpus"
    copy.mkdir()
    edited = json.loads(json.dumps(manifest))
    edited["entries"][0]["problems"] = ["stale"]
    (copy / "manifest.json").write_text(json.dumps(edited))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--retag", str(copy)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    again = json.loads((copy / "manifest.json").read_text())
    assert again.pop("retagged")
    assert again == manifest


@pytest.mark.subprocess
def test_tar_holds_the_corpus(quick_corpus):
    out, tar, manifest, _ = quick_corpus
    with tarfile.open(tar) as tf:
        names = set(tf.getnames())
    assert "manifest.json" in names
    for e in manifest["entries"]:
        assert set(e["files"].values()) <= names


# What the committed subset must cover so each diagnosis has a trace to fire on.
REQUIRED_PROBLEMS = {
    "cuda": {"baseline", "pageable_copies", "host_sync_item", "host_sync_device", "cuda_graphs",
             "collective", "empty_window", "with_stack_inflation", "autocast_nesting",
             "tf32_gemm", "fp32_gemm", "gemm_flops", "profile_memory", "amp_grad_scaler",
             "torch_compile", "sdpa_backends", "multi_stream"},
    "cpu": {"baseline", "host_gap", "collective", "empty_window", "with_stack_inflation",
            "fp32_gemm", "torch_compile", "sdpa_backends", "cnn_training", "autocast_nesting"},
}


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_committed_corpus_is_consistent(device):
    folder = CORPUS / device
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["device"] == device and manifest["entries"]
    assert manifest["failed"] == []
    total = 0
    problems = set()
    for e in manifest["entries"]:
        for f in e["files"].values():
            assert (folder / f).exists(), f
            total += (folder / f).stat().st_size
        header, rows = _rows(folder / e["files"]["key_averages"])
        assert header == COLUMNS and len(rows) == e["key_averages_rows"]
        doc = json.loads(gzip.decompress((folder / e["files"]["trace"]).read_bytes()))
        assert len(doc["traceEvents"]) == e["events"]
        assert ("distributedInfo" in doc) == (e["problem"] == "collective")
        problems.update(e["problems"])
    assert REQUIRED_PROBLEMS[device] <= problems
    assert total < 4 * 2 ** 20  # the committed subset stays compact


def test_committed_gloo_ranks_name_their_rank():
    manifest = json.loads((CORPUS / "cuda" / "manifest.json").read_text())
    ranks = {e["stem"]: e["distributed_info"] for e in manifest["entries"]
             if e["problem"] == "collective"}
    assert {s: (i["backend"], i["rank"], i["world_size"]) for s, i in ranks.items()} == {
        "gloo_ddp_rank0": ("gloo", 0, 2), "gloo_ddp_rank1": ("gloo", 1, 2)}

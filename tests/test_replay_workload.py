"""The replay as a run of the queue (``lab.replay.workload``) and the Table's side by side
(``lab.views.replay``): the run rebuilds the row's inputs as the raw trace recorded them, its
variants change what they say and nothing else, and a real replay run read back is put beside
the row it replays."""

from __future__ import annotations

import ast
import gzip
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lab import views as lv
from lab.core.config import RunConfig
from lab.explain import explain
from lab.replay.workload import REPLAY_WORKLOAD, ReplayRequest, replay_inputs
from lab.trace import load_trace

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "lab" / "samples"
# Traces with shapes whose hottest replayable op rebuilds on a CPU (GEMM, attention, norm, add).
TRACES = [ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz",
          SAMPLES / "matmul_add_4096x4096x4096_bfloat16_cuda.json.gz",
          SAMPLES / "attention_sdpa_4096x64x16_bfloat16_cuda.json.gz",
          ROOT / "tests" / "data" / "heldout" / "layernorm_by_hand.json.gz"]
TRACES = [p for p in TRACES if p.exists()]
_TORCH_DTYPE = {"float": "float32", "c10::BFloat16": "bfloat16", "c10::Half": "float16", "long int": "int64",
                "double": "float64", "bool": "bool"}


def _config(path: Path, variant: str = "as recorded") -> tuple[RunConfig, dict]:
    trace = load_trace(path.read_bytes())
    choice = lv.replay_choices(trace)[0]
    config = lv.replay_config(trace, choice.hot, explain(trace), source=path.name, device="cpu", variant=variant)
    return config, ReplayRequest.from_json(config.replay).spec


def _raw_calls(path: Path, op: str) -> set[str]:
    """Every (tensor shapes, dtypes, strides) the raw JSON recorded for ``op``'s calls."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    out = set()
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") == op:
            a = e["args"]
            keep = [i for i, (d, t) in enumerate(zip(a["Input Dims"], a["Input type"])) if d and t in _TORCH_DTYPE]
            strides = [a["Input Strides"][i] for i in keep] if "Input Strides" in a else None
            out.add(json.dumps([[a["Input Dims"][i] for i in keep], [_TORCH_DTYPE[a["Input type"][i]] for i in keep],
                                strides]))
    return out


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_the_replay_run_rebuilds_the_rows_inputs_as_the_raw_json_recorded_them(path):
    config, spec = _config(path)
    dtype = getattr(torch, config.dtype.replace("tf32", "float32"))
    tensors = [a for a in replay_inputs(config, torch.device("cpu"), dtype) if isinstance(a, torch.Tensor)]
    rebuilt = [[list(t.shape) for t in tensors], [str(t.dtype).removeprefix("torch.") for t in tensors],
               [list(t.stride()) for t in tensors]]
    recorded = {json.loads(c)[2] is not None for c in _raw_calls(path, spec["op"])}
    if recorded == {False}:  # no "Input Strides": contiguous ones are what the replay assumes
        rebuilt[2] = None
    assert json.dumps(rebuilt) in _raw_calls(path, spec["op"])


@pytest.mark.parametrize("path", TRACES[:2], ids=lambda p: p.name)
def test_each_variant_changes_what_it_names(path):
    base, spec = _config(path)
    assert lv.variant_of(base) == "as recorded"
    for name, change in lv.VARIANTS.items():
        v = lv.variant_config(base, name)
        assert lv.variant_of(v) == ("as recorded" if v == base else name)  # bfloat16 of a bfloat16 row: itself
        assert v.compile is bool(change.get("compile"))
        assert ReplayRequest.from_json(v.replay).spec == spec  # the same op, shapes and original figures
        if "dtype" in change:
            assert v.dtype == change["dtype"]
    bf16 = lv.variant_config(base, "bfloat16")
    tensors = [a for a in replay_inputs(bf16, torch.device("cpu"), torch.bfloat16) if isinstance(a, torch.Tensor)]
    assert {t.dtype for t in tensors if t.is_floating_point()} == {torch.bfloat16}
    contiguous = lv.variant_config(base, "contiguous inputs")
    tensors = [a for a in replay_inputs(contiguous, torch.device("cpu"), torch.float32)
               if isinstance(a, torch.Tensor)]
    assert all(t.is_contiguous() for t in tensors)


def test_a_run_that_replays_nothing_keeps_its_old_dict_and_a_replay_run_keeps_its_op():
    assert "replay" not in RunConfig().to_dict()
    config, _ = _config(TRACES[0])
    assert RunConfig.from_dict(config.to_dict()) == config
    assert config.workload == REPLAY_WORKLOAD


def test_a_trace_without_shapes_offers_nothing_to_replay():
    trace = load_trace((ROOT / "tests" / "data" / "groundtruth" / "cpu" / "module_dataloader.json.gz").read_bytes())
    assert not trace.meta.record_shapes
    assert lv.replay_choices(trace) == []


@pytest.mark.subprocess
def test_a_replay_run_of_the_queue_is_put_beside_the_row(tmp_path):
    """``python -m lab profile`` runs the replay workload like any run; its trace, read back, holds
    the op with the row's shapes, and the side by side compares them call for call."""
    path = TRACES[0]
    config, spec = _config(path)
    env = {**os.environ, "KINETO_LOG_LEVEL": "6"}
    done = subprocess.run([sys.executable, "-m", "lab", "profile", "--workload", REPLAY_WORKLOAD, "--replay",
                           config.replay, "--dtype", config.dtype, "--device", "cpu", "--label", "replay",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    trace_path = tmp_path / "trace.json.gz"
    events = json.loads(gzip.decompress(trace_path.read_bytes()))["traceEvents"]
    calls = [e for e in events if e.get("name") == spec["op"] and e.get("cat") == "cpu_op"]
    want = [i["shape"] for i in spec["inputs"] if i["kind"] == "tensor"]
    assert calls and all([d for d in ast.literal_eval(str(e["args"]["Input Dims"])) if d] == want for e in calls)
    trace = load_trace(trace_path.read_bytes())
    title, frame, notes = lv.replay_comparison(config, trace, explain(trace), device_name="cpu")
    assert spec["op"] in title
    per_call = frame.iloc[1]  # the compared time per call: the trace's row, and the run's median
    # A CPU replay launches no kernels: both sides are the op's CPU time per call.
    assert float(per_call.iloc[1].replace(",", "")) == pytest.approx(spec["original"]["median_op_us"], rel=0.01)
    assert float(per_call.iloc[2].replace(",", "")) == pytest.approx(
        statistics.median(float(e["dur"]) for e in calls), rel=0.01)
    assert any("NVIDIA" in n or "ratio" in n or "replay / trace" in n for n in notes)

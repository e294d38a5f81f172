"""The replay of one op row: its spec against the trace's raw JSON (``Input Dims``, ``Input type``,
``Input Strides``, ``Concrete Inputs``), the refusals, the rates, and the exported script run in a
fresh interpreter on CPU."""

from __future__ import annotations

import ast
import gzip
import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import corpus
import numpy as np
import pytest

from lab.replay import (
    OP_CLASSES,
    ReplayRefusal,
    build_spec,
    device_refusal,
    export_script,
    find_row,
    op_bytes,
    op_flops,
    row_figures,
    spec_of_row,
)
from lab.replay.spec import DTYPE_OF_SPELLING

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted((ROOT / "lab" / "samples").glob("*.json.gz"))
CORPUS = sorted((ROOT / "tests" / "data" / "groundtruth").glob("*/*.json.gz"))
REPLAYED = {op for ops in OP_CLASSES.values() for op in ops}


def _raw(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _shaped(path: Path) -> bool:
    return any("Input Dims" in e.get("args", {}) for e in _raw(path)["traceEvents"] if e.get("cat") == "cpu_op")


SHAPED = [p for p in SAMPLES + CORPUS if _shaped(p)]


def _raw_rows(raw: dict) -> dict:
    """name → the raw events of that replayed op, by start (longer first)."""
    out = defaultdict(list)
    for e in raw["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") in REPLAYED:
            out[e["name"]].append(e)
    return {name: sorted(es, key=lambda e: (float(e["ts"]), -float(e["dur"]))) for name, es in out.items()}


def _refusal_expected(args: dict) -> bool:
    types = args.get("Input type", [])
    sparse = any(d and s == [] for d, s in zip(args.get("Input Dims", []), args.get("Input Strides", [])))
    return sparse or (not args.get("Input Dims") or any(t in ("TensorList", "GenericList") for t in types)
            or any(t not in ("", "Scalar", "ScalarList") and t not in DTYPE_OF_SPELLING for t in types))


@pytest.mark.parametrize("path", SHAPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_spec_reproduces_every_replayed_row_of_the_raw_json(path):
    """Every row of a replayed op: the spec's tensors have the raw event's dims, dtype and strides
    (built on torch's meta device too), its scalars the Concrete Inputs; a refusal only where the
    raw event lists what the replay cannot rebuild."""
    torch = pytest.importorskip("torch")
    from lab.replay.standalone import make_tensor

    trace = corpus.trace(path)
    raw = _raw_rows(_raw(path))
    ev = trace.events
    rows = [r for r in range(len(ev)) if ev["name"].iat[r] in REPLAYED and ev["lane_kind"].iat[r] == "cpu"]
    assert len(rows) == sum(len(v) for v in raw.values())
    rows.sort(key=lambda r: (float(ev["ts_us"].iat[r]), -float(ev["dur_us"].iat[r])))
    seen: dict[str, int] = defaultdict(int)
    for row in rows:
        key = str(ev["name"].iat[row])
        event = raw[key][seen[key]]
        seen[key] += 1
        assert float(event["dur"]) == pytest.approx(float(ev["dur_us"].iat[row]), abs=1e-3)
        args = event["args"]
        try:
            spec = spec_of_row(trace, row)
        except ReplayRefusal:
            assert _refusal_expected(args), (key, args)
            continue
        assert not _refusal_expected(args)
        assert spec.shapes_text == str(args["Input Dims"])
        for i, item in enumerate(spec.inputs):
            kind = args["Input type"][i]
            if item.kind == "tensor":
                assert kind == item.type_text and list(item.shape) == args["Input Dims"][i]
                assert list(item.strides) == args["Input Strides"][i]
                t = make_tensor(item.to_dict(), "meta")
                assert (list(t.shape), list(t.stride())) == (args["Input Dims"][i], args["Input Strides"][i])
                assert t.dtype == getattr(torch, DTYPE_OF_SPELLING[kind])
            else:
                assert kind in ("", "Scalar", "ScalarList")
                text = args["Concrete Inputs"][i]
                assert (item.value is None) == (text == "")
                if text not in ("",) and item.value is not None and not isinstance(item.value, str):
                    assert item.value == _brute_value(text)


def _brute_value(text: str):
    if text in ("True", "False"):
        return text == "True"
    if text.startswith("["):
        return tuple(int(x) for x in text.strip("[]").split(",") if x.strip())
    return float(text) if any(c in text for c in ".eE") or text in ("inf", "-inf") else int(text)


def test_a_trace_without_shapes_is_refused_naming_record_shapes():
    path = ROOT / "tests/data/groundtruth/cuda/llama_train.json.gz"
    trace = corpus.trace(path)
    assert not any("Input Dims" in e.get("args", {}) for e in _raw(path)["traceEvents"])
    with pytest.raises(ReplayRefusal, match=r"record_shapes=True"):
        spec_of_row(trace, find_row(trace, "aten::mm"))


@pytest.mark.parametrize(("op", "dims", "types", "match"), [
    ("aten::cat", "[[[1], [1]], []]", "['TensorList', 'Scalar']", "OP_CLASSES"),
    ("aten::where", "[[4], [4]]", "['TensorList', 'float']", "TensorList"),
    ("aten::mm", "[[2, 2], [2, 2]]", "['c10::ComplexFloat', 'float']", "does not know"),
    ("aten::mm", "[[2, 2]]", "['float', 'float']", "same inputs"),
])  # fmt: skip
def test_ops_it_cannot_rebuild_are_refused_with_what_they_would_need(op, dims, types, match):
    with pytest.raises(ReplayRefusal, match=match):
        build_spec(op, dims, types)


def test_dtypes_the_device_cannot_run_are_said_before_running():
    fp8 = build_spec("aten::_scaled_mm", "[[16, 16], [16, 16], [], []]",
                     "['c10::Float8_e4m3fn', 'c10::Float8_e4m3fn', 'float', 'float']")
    assert "8.9" in device_refusal(fp8, kind="cuda", compute_capability=(8, 0))
    assert device_refusal(fp8, kind="cuda", compute_capability=(9, 0)) is None
    bf16 = build_spec("aten::mm", "[[16, 16], [16, 16]]", "['c10::BFloat16', 'c10::BFloat16']")
    assert "float16" in device_refusal(bf16, kind="cuda", compute_capability=(7, 5))
    flash = build_spec("aten::_scaled_dot_product_flash_attention", "[[1, 2, 8, 4], [1, 2, 8, 4], [1, 2, 8, 4]]",
                       "['c10::BFloat16', 'c10::BFloat16', 'c10::BFloat16']")
    assert "--device cuda" in device_refusal(flash, kind="cpu", compute_capability=None)


@pytest.mark.parametrize("path", [p for p in SHAPED if "cuda" in p.name or p.parent.name == "cuda"][:12],
                         ids=lambda p: p.name)
def test_gemm_and_attention_flops_from_the_raw_dims(path):
    """2·M·K·N per GEMM (batch × for bmm / baddbmm, N from the weight for linear), attention's
    two GEMMs 2·B·H·L·S·(D+Dv), brute-forced from the raw event's Input Dims."""
    trace = corpus.trace(path)
    ev = trace.events
    for row in range(len(ev)):
        name = str(ev["name"].iat[row])
        if name not in OP_CLASSES["gemm"] + OP_CLASSES["sdpa"] or ev["lane_kind"].iat[row] != "cpu":
            continue
        try:
            spec = spec_of_row(trace, row)
        except ReplayRefusal:
            continue
        dims = ast.literal_eval(str(ev["input_dims"].iat[row]))
        assert op_flops(spec) == _brute_flops(name, dims, spec), (name, dims)
        assert op_bytes(spec) > sum(math.prod(d) for d, t in zip(dims, spec.inputs) if t.kind == "tensor")


def _brute_flops(name: str, dims: list, spec) -> int:
    if name in ("aten::mm", "aten::_scaled_mm", "aten::_int_mm", "aten::matmul") and len(dims[0]) == 2:
        return 2 * dims[0][0] * dims[0][1] * dims[1][-1]
    if name in ("aten::addmm", "aten::_addmm_activation"):
        return 2 * dims[1][0] * dims[1][1] * dims[2][1]
    if name == "aten::bmm" or (name == "aten::matmul" and len(dims[0]) == 3):
        return 2 * dims[0][0] * dims[0][1] * dims[0][2] * dims[1][2]
    if name == "aten::baddbmm":
        return 2 * dims[1][0] * dims[1][1] * dims[1][2] * dims[2][2]
    if name == "aten::linear":
        return 2 * math.prod(dims[0][:-1]) * dims[0][-1] * dims[1][0]
    if name == "aten::matmul":
        return 2 * math.prod(dims[0][:-1]) * dims[0][-1] * dims[1][-1]
    q, k, v = dims[:3]
    causal = any(i.value is True for i in spec.inputs[3:] if i.type_text == "Scalar") and name.endswith("attention")
    flops = 2 * math.prod(q[:-2]) * q[-2] * k[-2] * (q[-1] + v[-1])
    return flops // 2 if causal and _causal_flag(name, spec) else flops


def _causal_flag(name: str, spec) -> bool:
    at = {"aten::scaled_dot_product_attention": 5, "aten::_scaled_dot_product_flash_attention": 4}.get(name, 6)
    return at < len(spec.inputs) and spec.inputs[at].value is True


def test_row_figures_are_the_kernels_the_op_launched():
    """The linear sample: the row's kernels are the GPU events whose correlation matches a
    launch on the op's thread inside its span, brute-forced from the raw JSON."""
    path = ROOT / "lab/samples/linear_4096x4096x4096_bfloat16_cuda.json.gz"
    trace = corpus.trace(path)
    row = find_row(trace, "aten::linear", index=1)
    figures = row_figures(trace, row)
    raw = _raw(path)["traceEvents"]
    ops = sorted((e for e in raw if e.get("name") == "aten::linear"), key=lambda e: e["ts"])
    op = ops[1]
    launches = ("cuda_runtime", "cuda_driver")
    corr = {e["args"]["correlation"] for e in raw if e.get("cat") in launches and e["tid"] == op["tid"]
            and op["ts"] <= e["ts"] <= op["ts"] + op["dur"]}
    gpu = sorted((e for e in raw if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")
                  and e.get("args", {}).get("correlation") in corr), key=lambda e: e["ts"])
    assert [k for k, _ in figures.kernels] == [e["name"] for e in gpu]
    assert figures.kernel_us == pytest.approx(sum(e["dur"] for e in gpu))
    assert figures.op_us == pytest.approx(op["dur"])
    # every call at once (the listing's path): each call's kernels summed the same way
    from lab.replay.rows import kernel_us_of_rows

    rows = np.array([find_row(trace, "aten::linear", index=i) for i in range(len(ops))])
    each = [sum(e["dur"] for e in raw if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")
                and e.get("args", {}).get("correlation") in {
                    c["args"]["correlation"] for c in raw if c.get("cat") in launches and c["tid"] == o["tid"]
                    and o["ts"] <= c["ts"] <= o["ts"] + o["dur"]}) for o in ops]
    assert kernel_us_of_rows(trace, rows).tolist() == pytest.approx(each)


@pytest.mark.parametrize(("trace_name", "op"), [
    ("cpu/seed.json.gz", "aten::mm"),
    ("cpu/conv_channels_last.json.gz", "aten::conv2d"),
    ("cpu/fp8_scaled_mm.json.gz", "aten::_scaled_mm"),
    ("cpu/sdpa_backends.json.gz", "aten::scaled_dot_product_attention"),
])  # fmt: skip
@pytest.mark.subprocess
def test_the_exported_script_replays_the_row_in_a_fresh_interpreter(tmp_path, trace_name, op):
    """The script (torch only) rebuilds the row's inputs: the shapes, strides and dtypes it
    built, and those its own profile recorded for the op, are the raw event's."""
    path = ROOT / "tests/data/groundtruth" / trace_name
    trace = corpus.trace(path)
    row = find_row(trace, op)
    spec = spec_of_row(trace, row)
    script = tmp_path / "replay_op.py"
    script.write_text(export_script(spec, row_figures(trace, row), source=trace_name))
    assert "import lab" not in script.read_text() and "from lab" not in script.read_text()
    done = subprocess.run([sys.executable, str(script), "--device", "cpu", "--calls", "2", "--warmup", "1", "--json"],
                          capture_output=True, text=True, timeout=300, check=True, cwd=tmp_path)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    raw = next(e for e in _raw(path)["traceEvents"] if e.get("name") == op and e.get("cat") == "cpu_op"
               and abs(e["ts"] - trace.meta.start_ts_us - float(trace.events["ts_us"].iat[row])) < 1e-3)
    args = raw["args"]
    tensors = [i for i, t in enumerate(args["Input type"]) if t not in ("", "Scalar", "ScalarList")]
    assert result["input_shapes"] == [args["Input Dims"][i] for i in tensors]
    assert result["input_strides"] == [args["Input Strides"][i] for i in tensors]
    assert result["input_dtypes"] == [DTYPE_OF_SPELLING[args["Input type"][i]] for i in tensors]
    assert result["shapes"] == [args["Input Dims"]] and result["types"] == [args["Input type"]]
    assert result["strides"] == [args["Input Strides"]]
    assert result["op_calls_seen"] == 2 and result["time_per_call_us"] > 0
    assert result["flops"] == op_flops(spec) and result["bytes"] == op_bytes(spec)


@pytest.mark.parametrize(("trace_name", "tf32"), [("gemm_tf32", True), ("gemm_fp32", False)])
def test_a_float32_gemm_traced_on_tf32_kernels_replays_with_tf32(trace_name, tf32):
    """The trace records no TF32 flag; its GEMM kernel's name does ("tf32" in the raw kernel
    names of the op's calls). Its same-shape calls are the raw mm events with its dims."""
    from lab.replay import script_spec

    path = ROOT / "tests/data/groundtruth/cuda" / f"{trace_name}.json.gz"
    trace = corpus.trace(path)
    row = find_row(trace, "aten::mm")
    figures = row_figures(trace, row)
    raw = _raw(path)["traceEvents"]
    raw_kernels = [e["name"] for e in raw if e.get("cat") == "kernel"]
    assert any("tf32" in k for k in raw_kernels) == tf32
    assert script_spec(spec_of_row(trace, row), figures)["tf32"] == tf32
    dims = str(trace.events["input_dims"].iat[row])
    same = [e for e in raw if e.get("name") == "aten::mm" and e.get("cat") == "cpu_op"
            and str(e["args"]["Input Dims"]) == dims]
    assert figures.same_shape_calls == len(same)
    assert figures.median_op_us == pytest.approx(float(np.median([e["dur"] for e in same])), abs=1e-3)


@pytest.mark.subprocess
def test_the_h200_bench_exports_its_cases_and_tables_the_committed_results(tmp_path):
    """bench/replay_h200.py: ``export`` writes a spec per case and a runnable script; ``table``
    prints one row per result line, its ratio the replay's kernel time over the trace's median."""
    bench = ROOT / "bench" / "replay_h200.py"
    subprocess.run([sys.executable, str(bench), "export", str(tmp_path)], check=True, capture_output=True,
                   timeout=600, cwd=ROOT)
    specs = sorted((tmp_path / "specs").glob("*.json"))
    assert specs and (tmp_path / "replay_op.py").exists() and (tmp_path / "replay_device.py").exists()
    results = ROOT / "bench" / "data" / "replay_h200_results.jsonl"
    done = subprocess.run([sys.executable, str(bench), "table", str(results)], check=True, capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and not line.startswith("| case")]
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == len(lines)
    for row, r in zip(rows, lines, strict=True):
        ratio = r["kernel_us_per_call"] / r["original"]["median_kernel_us"]
        assert row.startswith(f"| {r['case']} |") and f"| {ratio:.3f} |" in row


def test_a_replays_rate_is_put_against_the_devices_roof():
    """% of roof beside the replay: a 4096³ bf16 GEMM against the H200's bf16 peak (compute-bound,
    right of the ridge), an 8192² bf16 add against its HBM bandwidth; none on a CPU."""
    from lab.core.devices import lookup_peak
    from lab.replay.report import _rate

    peak = lookup_peak("NVIDIA H200")
    flops, moved, us = 2 * 4096**3, 3 * 4096 * 4096 * 2, 175.0
    gemm = _rate(flops, moved, us, device="NVIDIA H200", dtype="bfloat16")
    roof = min(peak.tflops["bfloat16"], flops / moved * peak.memory_bandwidth_gbs / 1e3)
    assert gemm["pct_of_roof"] == pytest.approx(100 * flops / us / 1e6 / roof)
    add = _rate(0, 3 * 8192 * 8192 * 2, 94.4, device="NVIDIA H200", dtype="bfloat16")
    assert add["pct_of_roof"] == pytest.approx(100 * (3 * 8192 * 8192 * 2 / 94.4 / 1e3) / peak.memory_bandwidth_gbs)
    assert _rate(flops, moved, us, device="cpu", dtype="bfloat16")["pct_of_roof"] is None


def test_a_replays_rates_divide_by_the_same_work_as_the_trace_ops_roofs():
    """One op model: a replayable op's FLOPs and bytes per call are the ones its row in explain's
    op roofs carries (flops / calls, bytes / calls), wherever the roof row knows them."""
    compared = [_compare_with_roofs(p) for p in SHAPED if "cuda" in p.name or p.parent.name == "cuda"]
    assert len({c for _, cs in compared for c in cs}) >= 4, compared  # GEMM, softmax, norm, ...: every class


def _compare_with_roofs(path: Path) -> tuple[int, set]:
    trace = corpus.trace(path)
    ev = trace.events
    compared, classes = 0, set()
    for _, roof in corpus.explanation(path).roofs.iterrows():
        if roof["name"] not in REPLAYED or roof["op_class"] == "copy":  # a copy's roof bytes: its memcpys'
            continue
        same = np.flatnonzero((ev["name"] == roof["name"]).to_numpy() & (ev["input_dims"] == roof["input_dims"])
                              .to_numpy() & (ev["input_type"] == roof["input_type"]).to_numpy())
        try:
            spec = spec_of_row(trace, int(same[0]))
        except ReplayRefusal:
            continue
        for figure, mine in (("flops", op_flops(spec)), ("bytes", op_bytes(spec))):
            theirs = float(roof[figure]) / int(roof["calls"])
            if math.isfinite(theirs):
                assert mine == pytest.approx(theirs, rel=1e-9), (path.name, roof["name"], roof["input_dims"], figure)
                compared, classes = compared + 1, classes | {roof["op_class"]}
    return compared, classes

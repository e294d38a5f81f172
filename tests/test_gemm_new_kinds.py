"""GEMM kinds beyond tests/test_gemm_kinds.py's, recorded on the H200 (torch 2.11): grouped GEMMs (MoE,
bf16 and FP8), FP8 row-wise scaling, a cuBLASLt epilogue, baddbmm / einsum, a backward pass's
transposed GEMMs, a nested (jagged) tensor, GEMMs replayed from a CUDA graph, a sparse CSR
matmul and a convolution's backward.

Expectations come from the manifest (each call's shape, FLOPs and CUDA-event timings, written by
scripts/record_groundtruth.py) and the raw trace JSON (kernels by correlation, the ops around
their launches), never from the lab's code.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path

import pytest

from lab.analysis import analyze
from lab.analysis.gemm.analyze import GRAPH_REPLAY_SOURCE, NO_SHAPE_NOTE
from lab.analysis.gemm.kinds import gemm_shape, is_gemm_kernel
from lab.core.devices import PEAKS
from lab.judge import judge_trace
from lab.trace import load_trace

CUDA = Path(__file__).resolve().parent / "data" / "groundtruth" / "cuda"
MANIFEST = {e["stem"]: e for e in json.loads((CUDA / "manifest.json").read_text())["entries"]}
RATE_TOLERANCE = 0.05  # the lab's rate within 5 % of a CUDA-event timing of the same call
ATTENTION_WORDS = re.compile(r"flash|fmha|attention|sdpa", re.IGNORECASE)
H200 = PEAKS["H200 SXM"]

# (stem, call label, the op the lab names, its dtype): the op is the one around the GEMM kernel's
# launch (einsum lowers to aten::bmm; nn.Linear to aten::addmm, on a jagged tensor's values too).
CALLS = [
    ("grouped_mm", "grouped_mm", "aten::_grouped_mm", "bfloat16"),
    ("fp8_grouped_mm", "fp8_grouped_mm", "aten::_scaled_grouped_mm", "float8_e4m3fn"),
    ("fp8_rowwise", "fp8_rowwise", "aten::_scaled_mm", "float8_e4m3fn"),
    ("addmm_activation", "addmm_gelu", "aten::_addmm_activation", "bfloat16"),
    ("batched_gemms", "baddbmm", "aten::baddbmm", "bfloat16"),
    ("batched_gemms", "einsum", "aten::bmm", "bfloat16"),
    ("linear_backward", "forward", "aten::addmm", "bfloat16"),
    ("linear_backward", "grad_input", "aten::mm", "bfloat16"),
    ("linear_backward", "grad_weight", "aten::mm", "bfloat16"),
    ("njt_linear", "njt_linear", "aten::addmm", "bfloat16"),
]


def _raw(stem: str) -> list[dict]:
    return json.loads(gzip.decompress((CUDA / f"{stem}.json.gz").read_bytes()))["traceEvents"]


def _call(stem: str, label: str) -> dict:
    return next(c for c in MANIFEST[stem]["program"]["gemm_calls"] if c["label"] == label)


def _gpu_work_by_op(raw: list[dict]) -> list[tuple[dict, list[dict]]]:
    """Each cpu_op with the GPU activities whose launch call lies inside it and inside none of its
    children (same thread), by brute force over correlation ids."""
    launches = [e for e in raw
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})]
    gpu = {}
    for e in raw:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu.setdefault(e["args"].get("correlation"), []).append(e)
    ops = [e for e in raw if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    owned: dict[int, list[dict]] = {}
    for call in launches:
        around = [o for o in ops if o["tid"] == call["tid"] and o["ts"] <= call["ts"] <= o["ts"] + o["dur"]]
        if around:
            innermost = min(around, key=lambda o: o["dur"])
            owned.setdefault(id(innermost), []).extend(gpu.get(call["args"]["correlation"], []))
    return [(o, owned.get(id(o), [])) for o in ops]


def _rows(stem: str, op: str, call: dict):
    gemm = analyze(load_trace(CUDA / f"{stem}.json.gz")).gemm
    rows = gemm[gemm["op"] == op]
    return rows[(rows["m"] == call["m"]) & (rows["k"] == call["k"]) & (rows["n"] == call["n"])]


@pytest.mark.parametrize("stem, label, op, dtype", CALLS, ids=[f"{s}:{c}" for s, c, _, _ in CALLS])
def test_new_gemm_kinds_have_their_rate(stem, label, op, dtype):
    call = _call(stem, label)
    rows = _rows(stem, op, call)
    # One row per call: 2 per step for one-call programs, 1 per step each in the others.
    steps = MANIFEST[stem]["options"]["steps"]
    per_step = len(MANIFEST[stem]["program"]["gemm_calls"])
    assert len(rows) == steps * (2 if per_step == 1 else 1)
    assert (rows["flops"] == call["flops"]).all() and set(rows["dtype"]) == {dtype}
    # The kernel time is the raw JSON's: per instance of the op whose A operand is M×K, its
    # longest GEMM-named kernel.
    a_index = 1 if op in ("aten::addmm", "aten::baddbmm", "aten::_addmm_activation") else 0
    raw_us = sorted(max(k["dur"] for k in work if k["cat"] == "kernel" and is_gemm_kernel(k["name"]))
                    for o, work in _gpu_work_by_op(_raw(stem))
                    if o["name"] == op and o["args"]["Input Dims"][a_index][-2:] == [call["m"], call["k"]])
    assert sorted(rows["kernel_us"]) == pytest.approx(raw_us)
    assert list(rows["tflops"]) == pytest.approx(list(call["flops"] / rows["kernel_us"] / 1e6), rel=1e-9)
    peak = H200.peak_tflops(dtype)
    assert (rows["peak_tflops"] == peak).all() and (rows["pct_of_peak"] <= 100).all()
    lab = statistics.median(rows["tflops"])
    steady = call["flops"] / call["steady_event_timing"]["median_us"] / 1e6
    if label == "baddbmm":
        # baddbmm copies C into its output first (a 64 MiB device-to-device memcpy under the op):
        # the call's event time is that copy plus the GEMM kernel, the lab's rate the kernel's.
        pairs = _gpu_work_by_op(_raw(stem))
        work = [[a for inner, w in pairs if inner["tid"] == o["tid"] and o["ts"] <= inner["ts"] <= o["ts"] + o["dur"]
                 for a in w] for o, _ in pairs if o["name"] == op]  # the op's and its children's
        gpu_us = statistics.median(sum(a["dur"] for a in w) for w in work)
        assert any(a["cat"] == "gpu_memcpy" for w in work for a in w)
        assert abs(gpu_us / call["steady_event_timing"]["median_us"] - 1) <= RATE_TOLERANCE
        assert lab > steady * (1 + RATE_TOLERANCE)
    else:
        assert abs(lab / steady - 1) <= RATE_TOLERANCE, (lab, steady)


def test_grouped_shapes_count_every_group():
    """2·M·K·N over all groups, per layout of torch._grouped_mm's operands (T tokens split by offs)."""
    t, g, k, n, m = 96, 4, 32, 48, 24
    assert gemm_shape("aten::_grouped_mm", [[t, k], [g, k, n], [g]])[:4] == (1, t, k, n)
    assert gemm_shape("aten::_grouped_mm", [[g, m, k], [g, k, n], []])[:4] == (g, m, k, n)
    assert gemm_shape("aten::_grouped_mm", [[g, m, k], [k, t], [g]])[:4] == (1, m, k, t)
    assert gemm_shape("aten::_grouped_mm", [[m, t], [t, n], [g]])[:4] == (1, m, t, n)
    assert gemm_shape("aten::_scaled_grouped_mm", [[t, k], [g, k, n], [t], [g, n], [g]])[:4] == (1, t, k, n)


@pytest.mark.parametrize("stem", ["cudagraph_gemm", "decode_cudagraphs"])
def test_gemms_replayed_from_a_cuda_graph_say_so(stem):
    """The GEMM kernels a cudaGraphLaunch ran are GEMM rows without a rate, and the note says why
    (no shapes at replay), not "record_shapes=True" (which cannot help)."""
    raw = _raw(stem)
    graph = {e["args"]["correlation"] for e in raw if e.get("name", "").startswith("cudaGraphLaunch")}
    replayed = [e for e in raw if e.get("cat") == "kernel" and is_gemm_kernel(e["name"])
                and e["args"].get("correlation") in graph]
    trace = load_trace(CUDA / f"{stem}.json.gz")
    analysis = analyze(trace)
    assert len(replayed) == len(analysis.gemm) > 0
    assert set(analysis.gemm["shape_source"]) == {GRAPH_REPLAY_SOURCE} and analysis.gemm["tflops"].isna().all()
    (note,) = analysis.gemm_notes
    assert note.startswith(f"{NO_SHAPE_NOTE}: {len(replayed)} replayed from a CUDA graph")
    assert "record_shapes cannot help" in note
    assert not any("record_shapes=True" in f.suggestion for f in judge_trace(trace, analysis).findings)


@pytest.mark.parametrize("stem", ["conv_backward", "conv_channels_last"])
def test_a_convolutions_kernels_are_no_gemms(stem):
    """cuDNN runs convolutions as implicit GEMMs, a 1x1 one or a weight gradient as an nvjet GEMM
    kernel: all launched by a convolution op, none a GEMM row (kinds.NOT_GEMM_OP_PATTERN)."""
    work = _gpu_work_by_op(_raw(stem))
    conv_kernels = [k["name"] for o, w in work if "conv" in o["name"] for k in w if k["cat"] == "kernel"]
    assert any("implicit_gemm" in k for k in conv_kernels)
    assert any(k.startswith("nvjet") for k in conv_kernels)  # a GEMM kernel by name, under a convolution
    gemm = analyze(load_trace(CUDA / f"{stem}.json.gz")).gemm
    assert not set(conv_kernels) & set(gemm["kernel"]) and gemm.empty


def test_a_sparse_matmul_is_no_dense_gemm():
    """torch.sparse.mm on CSR runs cuSPARSE kernels: no GEMM row (a dense rate would be 100× off)."""
    kernels = {e["name"] for e in _raw("sparse_csr_mm") if e.get("cat") == "kernel"}
    assert any(k.startswith("void cusparse::csrmm") for k in kernels)
    assert analyze(load_trace(CUDA / "sparse_csr_mm.json.gz")).gemm.empty


NEW_STEMS = sorted({s for s, *_ in CALLS} | {"cudagraph_gemm", "sparse_csr_mm", "conv_backward"})


@pytest.mark.parametrize("stem", NEW_STEMS)
def test_new_kinds_list_no_attention_kernel_and_no_rate_above_peak(stem):
    trace = load_trace(CUDA / f"{stem}.json.gz")
    analysis = analyze(trace)
    assert not any(ATTENTION_WORDS.search(k) for k in analysis.gemm["kernel"])
    rated = analysis.gemm.dropna(subset=["tflops"])
    assert (rated["pct_of_peak"] <= 100).all()
    assert not any("above peak" in n for n in analysis.gemm_notes)


def test_gemm_words_live_in_the_kinds_table_not_in_the_vocabulary():
    """What a GEMM is (ops, kernel libraries, dtypes in names) is lab/analysis/gemm/kinds.py's;
    the shared vocabulary names no GEMM op, kernel or library."""
    from lab.analysis.gemm.kinds import GEMM_OP_KINDS

    text = (Path(__file__).resolve().parents[1] / "lab" / "vocab.py").read_text()
    assert not re.search(r"gemm|nvjet|cutlass|cublas", text, re.IGNORECASE)
    assert not [name for name in GEMM_OP_KINDS if f'"{name}"' in text]

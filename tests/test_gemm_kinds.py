"""GEMMs found by their kernels, whichever op launched them, on the H200 corpus.

Expectations come from the raw trace JSON (each kernel's launch by correlation id, the innermost
op around that launch, its recorded Input Dims and Input type) and from the manifest's CUDA-event
timings of the same calls (scripts/record_groundtruth.py), never from the lab's code.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import statistics
from pathlib import Path

import pytest

from lab.analysis import analyze
from lab.analysis.gemm.analyze import NO_SHAPE_NOTE
from lab.analysis.gemm.kinds import GEMM_KERNEL_FAMILIES, TORCH_FLOP_GEMMS, gemm_shape, is_gemm_kernel
from lab.analysis.table.flops import _op_flops
from lab.core.config import RunConfig
from lab.core.devices import PEAKS
from lab.judge import judge_trace
from lab.samples import SAMPLES_DIR
from lab.teach.roofline import run_summary
from lab.trace import load_trace
from lab.views import summarize

ROOT = Path(__file__).resolve().parents[1]
CUDA = ROOT / "tests" / "data" / "groundtruth" / "cuda"
MANIFEST = {e["stem"]: e for e in json.loads((CUDA / "manifest.json").read_text())["entries"]}
RATE_TOLERANCE = 0.05  # the lab's rate within 5 % of a CUDA-event timing of the same call
# How torch's traces spell the input types of these ops (c10's ScalarType names).
SPELLED = {"c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2", "signed char": "int8",
           "c10::BFloat16": "bfloat16"}
ATTENTION_WORDS = re.compile(r"flash|fmha|attention|sdpa", re.IGNORECASE)


def _raw(path: Path) -> list[dict]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _launching_ops(events: list[dict]) -> list[tuple[dict, dict | None]]:
    """Each kernel with the innermost cpu_op around its launch call (same pid/tid), by brute force."""
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    out = []
    for k in (e for e in events if e.get("cat") == "kernel"):
        call = launches.get(k.get("args", {}).get("correlation"))
        around = [] if call is None else [
            o for o in ops if (o["pid"], o["tid"]) == (call["pid"], call["tid"])
            and o["ts"] <= call["ts"] and call["ts"] + call["dur"] <= o["ts"] + o["dur"]]
        out.append((k, min(around, key=lambda o: o["dur"]) if around else None))
    return out


def _expected_rates(stem: str, op_name: str) -> list[tuple[float, str, float]]:
    """(ts, dtype, 2·M·K·N / kernel µs / 1e6) of every kernel the op ``op_name`` launched."""
    out = []
    for k, op in _launching_ops(_raw(CUDA / f"{stem}.json.gz")):
        if op is None or op["name"] != op_name:
            continue
        (m, kk), (_, n) = op["args"]["Input Dims"][0], op["args"]["Input Dims"][1]
        dtype = SPELLED[op["args"]["Input type"][0]]
        out.append((k["ts"], dtype, 2.0 * m * kk * n / k["dur"] / 1e6))
    return sorted(out)


def _event_rate(stem: str) -> float:
    program = MANIFEST[stem]["program"]
    n = program["n"]
    return 2.0 * program["m"] * program["k"] * n / program["event_timing"]["median_us"] / 1e6


@pytest.mark.parametrize("stem, op_name, unit", [
    ("fp8_scaled_mm", "aten::_scaled_mm", "TFLOP/s"),
    ("int8_int_mm", "aten::_int_mm", "TOPS"),
    ("compiled_gemm", "triton_tem_fused_add_mm_relu_0", "TFLOP/s"),
])
def test_gemms_of_other_entry_points_have_their_rate(stem, op_name, unit):
    trace = load_trace(CUDA / f"{stem}.json.gz")
    analysis = analyze(trace)
    gemm = analysis.gemm.sort_values("ts_us")
    expected = _expected_rates(stem, op_name)
    assert len(expected) == MANIFEST[stem]["program"]["gemms_per_step"] * MANIFEST[stem]["options"]["steps"]
    # Every kernel of the op is a GEMM row, with the op's dtype and the raw JSON's rate.
    assert list(gemm["op"]) == [op_name] * len(expected)
    assert list(gemm["dtype"]) == [d for _, d, _ in expected]
    assert list(gemm["tflops"]) == pytest.approx([r for _, _, r in expected], rel=1e-9)
    assert set(gemm["rate_unit"]) == {unit}
    peak = PEAKS["H200 SXM"].peak_tflops(expected[0][1])
    assert (gemm["peak_tflops"] == peak).all() and (gemm["pct_of_peak"] <= 100).all()
    # The lab's rate within 5 % of the CUDA-event timing of the same call on fresh inputs.
    lab = statistics.median(gemm["tflops"])
    assert abs(lab / _event_rate(stem) - 1) <= RATE_TOLERANCE, (lab, _event_rate(stem))
    assert not analysis.gemm_notes


@pytest.mark.parametrize("stem, words", [
    ("fp8_scaled_mm", ("TFLOP/s", "float8_e4m3fn peak")),
    ("int8_int_mm", ("TOPS", "int8 peak")),
    ("compiled_gemm", ("TFLOP/s", "bfloat16 peak")),
])
def test_summary_card_shows_the_gemm(stem, words):
    trace = load_trace(CUDA / f"{stem}.json.gz")
    analysis = analyze(trace)
    card = next(m for m in summarize(trace, analysis).metrics
                if m.label == "GEMM kernel")
    # A typical instance: the middle one by kernel time (equal FLOPs: the upper median rate).
    rates = [r for _, _, r in _expected_rates(stem, str(analysis.gemm["op"].iloc[0]))]
    assert card.value.endswith(words[0]) and words[1] in (card.delta or "")
    assert float(card.value.split()[0].replace(",", "")) == pytest.approx(statistics.median_high(rates), abs=0.5)


def test_roofline_point_is_the_fp8_gemm():
    trace = load_trace(CUDA / "fp8_scaled_mm.json.gz")
    point = run_summary(RunConfig(), analyze(trace), "NVIDIA H200")
    # The Summary card's instance (the upper median rate), not a median of its own.
    expected = statistics.median_high(r for _, _, r in _expected_rates("fp8_scaled_mm", "aten::_scaled_mm"))
    assert point is not None and point.tflops == pytest.approx(expected)


def test_int8_gemm_far_below_its_peak_says_so_in_tops():
    trace = load_trace(CUDA / "int8_int_mm.json.gz")
    analysis = analyze(trace)
    insight = next(f for f in judge_trace(trace, analysis).findings if f.rule == "gemm_below_roof")
    worst = min(r for _, _, r in _expected_rates("int8_int_mm", "aten::_int_mm"))
    assert f"{worst:.1f} TOPS" in insight.evidence and "sm80" in insight.evidence


ATTENTION_TRACES = sorted(SAMPLES_DIR.glob("attention_*.json.gz")) + [
    CUDA / "sdpa_backends.json.gz", CUDA / "flex_attention.json.gz"]


@pytest.mark.parametrize("path", ATTENTION_TRACES, ids=[p.name for p in ATTENTION_TRACES])
def test_no_attention_kernel_is_a_gemm(path):
    """Kernels launched by an attention op (flash, efficient, cuDNN, flex) are no GEMM rows; the
    math backend's aten::bmm kernels are."""
    pairs = _launching_ops(_raw(path))
    attention = {k["name"] for k, op in pairs if op is not None and ATTENTION_WORDS.search(op["name"])}
    attention |= {k["name"] for k, _ in pairs if ATTENTION_WORDS.search(k["name"])}
    bmm = {k["name"] for k, op in pairs if op is not None and op["name"] == "aten::bmm"}
    gemm = analyze(load_trace(path)).gemm
    fused = any(word in path.name for word in ("flash", "sdpa", "flex"))  # math / naive: bmm + softmax
    assert bool(attention) is fused
    assert not attention & set(gemm["kernel"])
    assert bmm <= set(gemm["kernel"])


def test_gemms_without_shapes_say_what_to_record():
    """multistream was profiled without record_shapes: no rate (never 0), a note and an insight."""
    trace = load_trace(CUDA / "multistream.json.gz")
    assert MANIFEST["multistream"]["options"]["record_shapes"] is False
    analysis = analyze(trace)
    gemm_kernels = [e for e in _raw(CUDA / "multistream.json.gz")
                    if e.get("cat") == "kernel" and is_gemm_kernel(e["name"])]
    assert len(analysis.gemm) == len(gemm_kernels) and analysis.gemm["tflops"].isna().all()
    assert any(n.startswith(NO_SHAPE_NOTE) and "record_shapes=True" in n for n in analysis.gemm_notes)
    note = next(f for f in judge_trace(trace, analysis).findings if f.rule == "gemm_without_rate")
    assert "record_shapes=True" in note.suggestion and note.scope == "note"
    card = next(m for m in summarize(trace, analysis).metrics if m.label == "GEMM kernel")
    assert card.value == "no rate" and "record_shapes=True" in card.help


def test_gemms_no_op_launched_say_so():
    """two_threads: the worker threads' ops are not in the trace (torch records the profiling
    thread's ops), their GEMM kernels are: GEMM rows without a rate, and a note why."""
    raw = _raw(CUDA / "two_threads.json.gz")
    assert not [e for e in raw if e.get("cat") == "cpu_op"]
    analysis = analyze(load_trace(CUDA / "two_threads.json.gz"))
    assert len(analysis.gemm) == sum(1 for e in raw if e.get("cat") == "kernel" and is_gemm_kernel(e["name"])) > 0
    assert any("launched by no op" in n for n in analysis.gemm_notes)


def test_every_family_example_is_a_gemm():
    for family in GEMM_KERNEL_FAMILIES:
        assert family.examples and all(is_gemm_kernel(e) for e in family.examples), family.library


@pytest.mark.parametrize("seed", range(3))
def test_shape_table_agrees_with_torchs_flop_count(seed):
    """The one operand table: 2·batch·M·K·N from ``gemm_shape`` equals torch's computeFlops
    (``lab.analysis.table.flops``) for each op torch counts, on random shapes."""
    rng = random.Random(seed)
    for name in TORCH_FLOP_GEMMS:
        b, m, k, n = (rng.randint(1, 64) for _ in range(4))
        batched = "bmm" in name
        a_dims, b_dims = ([b, m, k], [b, k, n]) if batched else ([m, k], [k, n])
        dims = [a_dims, b_dims] if name in ("aten::mm", "aten::bmm") else [[n], a_dims, b_dims]
        types = ["c10::BFloat16"] * len(dims)
        batch, mm, kk, nn, _ = gemm_shape(name, dims)
        assert 2 * batch * mm * kk * nn == _op_flops(name, str(dims), str(types), "") == (
            2 * (b if batched else 1) * m * k * n)

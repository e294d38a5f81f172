"""build_report's keys and values against brute force on the raw JSON; the CLI entry points."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import corpus
import pytest
from tracebuild import matmul_add_steps

from lab import cli
from lab.views import report as R

DATA = Path(__file__).parent / "data"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
TRACES = ["matmul_add_1024_fp32", "matmul_add_4096_bf16", "matmul_add_4096_bf16_compiled"]


def _xs(name: str) -> list[dict]:
    raw = json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes()))
    return [e for e in raw["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture(scope="module", params=TRACES)
def report(request):
    name = request.param
    return name, _xs(name), R.build_report(corpus.trace(DATA / f"{name}.json.gz"))


def test_report_is_strict_json(report):
    _, _, rep = report
    text = json.dumps(rep, allow_nan=False)
    assert json.loads(text) == rep
    for key in ("events", "by_category", "gpu", "top_kernels", "top_ops", "launch_delay_us", "explained",
                "verdict", "steps", "gemm", "gemm_notes"):
        assert key in rep


def test_counts_and_categories_against_brute_force(report):
    _, xs, rep = report
    assert rep["events"] == len(xs)
    cats = {}
    for e in xs:
        entry = cats.setdefault(e.get("cat", ""), {"count": 0, "dur_us": 0.0})
        entry["count"] += 1
        entry["dur_us"] += e["dur"]
    assert rep["by_category"].keys() == cats.keys()
    for cat, entry in cats.items():
        assert rep["by_category"][cat]["count"] == entry["count"]
        assert rep["by_category"][cat]["dur_us"] == pytest.approx(entry["dur_us"], abs=1e-6)


def test_gpu_numbers_against_brute_force(report):
    _, xs, rep = report
    gpu = rep["gpu"]
    assert gpu["kernel_time_us"] == pytest.approx(sum(e["dur"] for e in xs if e.get("cat") == "kernel"), abs=1e-6)
    assert gpu["memset_time_us"] == pytest.approx(sum(e["dur"] for e in xs if e.get("cat") == "gpu_memset"), abs=1e-6)
    assert gpu["memcpy_time_us"] == pytest.approx(sum(e["dur"] for e in xs if e.get("cat") == "gpu_memcpy"), abs=1e-6)
    busy, end = 0.0, None
    for s, e in sorted((e["ts"], e["ts"] + e["dur"]) for e in xs if e.get("cat") in GPU_CATS):
        if end is None or s > end:
            busy += e - s
            end = e
        elif e > end:
            busy += e - end
            end = e
    span = max(e["ts"] + e["dur"] for e in xs) - min(e["ts"] for e in xs)
    assert gpu["busy_us"] == pytest.approx(busy, abs=0.01)
    assert gpu["span_us"] == pytest.approx(span, abs=0.01)
    assert gpu["busy_pct"] == pytest.approx(100 * busy / span, abs=1e-3)


def test_launch_delay_against_brute_force(report):
    _, xs, rep = report
    launches = {e["args"]["correlation"]: e["ts"] for e in xs
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    delays = [e["ts"] - launches[e["args"]["correlation"]] for e in xs
              if e.get("cat") in GPU_CATS and e["args"].get("correlation") in launches]
    assert rep["launch_delay_us"]["median"] == pytest.approx(statistics.median(delays), abs=0.01)
    assert rep["launch_delay_us"]["p90"] == pytest.approx(
        statistics.quantiles(delays, n=10, method="inclusive")[-1], abs=0.01)


def test_top_tables_against_brute_force(report):
    _, xs, rep = report
    totals = {}
    for e in xs:
        if e.get("cat") in GPU_CATS:
            totals[e["name"]] = totals.get(e["name"], 0.0) + e["dur"]
    top = max(totals, key=totals.get)
    assert rep["top_kernels"][0]["name"] == top
    assert rep["top_kernels"][0]["total_us"] == pytest.approx(totals[top], abs=1e-6)
    shown = [row["total_us"] for row in rep["top_kernels"]]
    assert shown == sorted(shown, reverse=True)
    self_us = [row["self_us"] for row in rep["top_ops"]]
    assert self_us == sorted(self_us, reverse=True) and len(rep["top_ops"]) <= R.TOP_ROWS


def test_findings_listed_with_title_severity_and_notes_last(report):
    name, _, rep = report
    assert "insights" not in rep  # one list: the judged findings
    found = rep["explained"]["findings"]
    titles = [f["title"] for f in found]
    assert all(f["severity"] in ("critical", "warning", "info") for f in found)
    notes = [f["scope"] == "note" for f in found]
    assert notes == sorted(notes)
    assert ("Bias add runs as a separate kernel after the GEMM" in titles) == (name != "matmul_add_4096_bf16_compiled")


def test_gemm_summary_of_the_bf16_trace():
    rep = R.build_report(corpus.trace(DATA / "matmul_add_4096_bf16.json.gz"))
    durs = sorted(e["dur"] for e in _xs("matmul_add_4096_bf16") if e["name"].startswith("nvjet"))
    (row,) = rep["gemm"]
    assert row["count"] == 10 and (row["m"], row["k"], row["n"]) == (4096, 4096, 4096)
    assert row["tflops_median"] == pytest.approx(statistics.median(2 * 4096**3 / (d * 1e-6) / 1e12 for d in durs))
    assert rep["device"] == "NVIDIA H200" and rep["peak"] == "H200 SXM"
    assert rep["gemm_notes"] == []


def test_gemm_figure_above_peak_is_a_note_not_a_line():
    # 4096³ bf16 in 40 µs would be 3,436 TFLOP/s, 347 % of the H200's peak: left out, and said so.
    rep = R.build_report(matmul_add_steps(3, gemm_us=40, dims=((4096, 4096), (4096, 4096))))
    assert rep["gemm"] == []
    (note,) = rep["gemm_notes"]
    assert note.startswith("GEMM figure above peak — shape or kernel unrecognised") and "347 % of peak" in note
    text = R.format_report(rep)
    assert f"Note: {note}" in text and "TFLOP/s" not in text


def test_format_report_mentions_the_essentials():
    rep = R.build_report(corpus.trace(DATA / "matmul_add_4096_bf16.json.gz"))
    text = R.format_report(rep)
    assert rep["verdict"]["explanation"] in text
    assert "nvjet_sm90" in text and "aten::mm" in text
    for finding in rep["explained"]["findings"]:
        assert finding["title"] in text and finding["evidence"] in text
        assert not finding["caveat"] or finding["caveat"] in text


def test_analyze_main_prints_json_and_text(capsys):
    path = str(DATA / "matmul_add_1024_fp32.json.gz")
    assert cli.analyze_main(path, as_json=True) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["events"] == len(_xs("matmul_add_1024_fp32"))
    assert cli.analyze_main(path, as_json=False) == 0
    assert "Verdict:" in capsys.readouterr().out


def test_analyze_main_bad_input(tmp_path, capsys):
    missing = tmp_path / "missing.json"
    assert cli.analyze_main(str(missing), as_json=False) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and captured.err.count("\n") == 1
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [')
    assert cli.analyze_main(str(broken), as_json=True) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_compare_main(tmp_path, capsys):
    a = str(DATA / "matmul_add_4096_bf16.json.gz")
    b = str(DATA / "matmul_add_4096_bf16_compiled.json.gz")
    assert cli.compare_main(a, b, as_json=True) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["label_a"] == "matmul_add_4096_bf16" and data["label_b"] == "matmul_add_4096_bf16_compiled"
    assert "Bias add runs as a separate kernel after the GEMM" in data["findings_gone"]
    assert cli.compare_main(a, b, as_json=False) == 0
    assert "gone" in capsys.readouterr().out
    assert cli.compare_main(a, str(tmp_path / "nope.json"), as_json=False) == 2
    assert capsys.readouterr().err.startswith("error: cannot read")

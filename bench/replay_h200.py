"""Replay GEMM, SDPA and LayerNorm rows of recorded H200 traces on an H200 and compare.

    python bench/replay_h200.py export DIR        # specs + exported script + device runner into DIR
    (on the GPU machine)  cd DIR && python3 replay_device.py $OUT/results.jsonl
    python bench/replay_h200.py table RESULTS.jsonl   # the BENCHMARKS.md table

``export`` builds each case's spec through ``lab.replay`` (the row of median duration among the
op's calls of the given shapes) with the trace's figures for the row: the median kernel time
over the op's calls of those shapes and dtypes, and the kernels' names. ``replay_device.py``
(torch only) loads the exported script as a module and replays every spec in one process, one
after another. ``table`` prints the replay's kernel time beside the trace's, their ratio, and
whether the kernels are named the same (as sets of names; a "Memset (Device)" that cuBLAS
issues only on some calls is left out of the comparison and said so).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.replay import export_script, find_row, row_figures, script_spec, spec_of_row  # noqa: E402
from lab.trace import load_trace  # noqa: E402

TRANSFORMER = "bench/data/transformer_step_h200.json.gz"
# (case name, trace, op, Input Dims of the calls to replay)
CASES = (
    ("tf_layer_norm", TRANSFORMER, "aten::layer_norm", "[[8, 512, 768], [], [768], [768], [], []]"),
    ("tf_addmm_qkv", TRANSFORMER, "aten::addmm", "[[2304], [4096, 768], [768, 2304], [], []]"),
    ("tf_addmm_fc2", TRANSFORMER, "aten::addmm", "[[768], [4096, 3072], [3072, 768], [], []]"),
    ("tf_mm_grad", TRANSFORMER, "aten::mm", "[[768, 4096], [4096, 3072]]"),
    ("tf_sdpa_cudnn", TRANSFORMER, "aten::_scaled_dot_product_cudnn_attention", None),
    ("tf_log_softmax", TRANSFORMER, "aten::_log_softmax", None),
    ("linear_4096", "lab/samples/linear_4096x4096x4096_bfloat16_cuda.json.gz", "aten::linear", None),
    ("mm_8192", "lab/samples/matmul_add_8192x8192x8192_bfloat16_cuda.json.gz", "aten::mm", None),
    ("add_8192", "lab/samples/matmul_add_8192x8192x8192_bfloat16_cuda.json.gz", "aten::add", None),
    ("flash_4096", "lab/samples/attention_flash_4096x64x16_bfloat16_cuda.json.gz",
     "aten::_scaled_dot_product_flash_attention", None),
    ("sdpa_4096", "lab/samples/attention_sdpa_4096x64x16_bfloat16_cuda.json.gz",
     "aten::scaled_dot_product_attention", None),
    ("gt_mm_tf32", "tests/data/groundtruth/cuda/gemm_tf32.json.gz", "aten::mm", None),
    ("gt_mm_fp32", "tests/data/groundtruth/cuda/gemm_fp32.json.gz", "aten::mm", None),
    ("gt_bmm", "tests/data/groundtruth/cuda/batched_gemms.json.gz", "aten::bmm", None),
    ("gt_baddbmm", "tests/data/groundtruth/cuda/batched_gemms.json.gz", "aten::baddbmm", None),
    ("gt_flash", "tests/data/groundtruth/cuda/sdpa_backends.json.gz", "aten::_scaled_dot_product_flash_attention",
     None),
    ("gt_efficient", "tests/data/groundtruth/cuda/sdpa_backends.json.gz",
     "aten::_scaled_dot_product_efficient_attention", None),
    ("gt_cudnn", "tests/data/groundtruth/cuda/sdpa_backends.json.gz", "aten::_scaled_dot_product_cudnn_attention",
     None),
    ("gt_fp8", "tests/data/groundtruth/cuda/fp8_scaled_mm.json.gz", "aten::_scaled_mm", None),
    ("gt_conv", "tests/data/groundtruth/cuda/conv_channels_last.json.gz", "aten::conv2d",
     "[[32, 128, 56, 56], [256, 128, 3, 3], [256], [], [], [], []]"),
)  # fmt: skip
# Replays within this of the trace's kernel time count as reproduced (the bar).
WITHIN = 0.10
SPORADIC = ("Memset (Device)",)  # issued by cuBLAS/cuDNN on some calls only (workspace clears)


def export(out: Path) -> None:
    (out / "specs").mkdir(parents=True, exist_ok=True)
    script_written = False
    for name, trace_path, op, shapes in CASES:
        trace = load_trace(ROOT / trace_path)
        row = find_row(trace, op, shapes=shapes)
        spec, figures = spec_of_row(trace, row), row_figures(trace, row)
        data = script_spec(spec, figures, source=trace_path)
        (out / "specs" / f"{name}.json").write_text(json.dumps({"case": name, **data}), encoding="utf-8")
        if name in ("tf_layer_norm", "linear_4096"):  # two as standalone files, run as a user would
            (out / f"replay_{name}.py").write_text(export_script(spec, figures, source=trace_path))
        if not script_written:
            (out / "replay_op.py").write_text(export_script(spec, figures, source=trace_path))
            script_written = True
        print(f"{name}: {op} {spec.shapes_text} trace {figures.median_kernel_us:.1f} µs "
              f"({figures.same_shape_calls} calls)")
    shutil.copy(Path(__file__).with_name("replay_device.py"), out / "replay_device.py")


def _names(kernels) -> set[str]:
    return {k for k in kernels if k not in SPORADIC}


def table(results: Path) -> None:
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.startswith("{")]
    print("| case | op | shapes | dtype | trace kernel µs (median, calls) | replay kernel µs | replay/trace | "
          "within 10 % | kernels the same | replay TFLOP/s or GB/s | kernel |")
    print("|---|---|---|---|---:|---:|---:|---|---|---:|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['case']} | | | | | | | | | | error: {r['error']} |")
            continue
        o = r["original"]
        ratio = r["kernel_us_per_call"] / o["median_kernel_us"]
        same = _names(k for k, _ in o["kernels"]) == _names(k["name"] for k in r["kernels"])
        variant = "+" in r["case"]  # a variant: not the traced op, so neither bar applies
        rate = f"{r['tflops']:.0f} TFLOP/s" if r.get("tflops") else f"{r['gbs']:.0f} GB/s" if r.get("gbs") else "—"
        main = max(r["kernels"], key=lambda k: k["us_per_call"])["name"] if r["kernels"] else ""
        dims = json.dumps([i["shape"] for i in r["inputs"] if i["kind"] == "tensor"])
        print(f"| {r['case']} | `{r['op']}` | {dims} | {', '.join(sorted(set(r['input_dtypes'])))}"
              f"{' (TF32)' if r['tf32'] else ''} | {o['median_kernel_us']:.1f} ({o['same_shape_calls']}) | "
              f"{r['kernel_us_per_call']:.1f} | {ratio:.3f} | {_yes(abs(ratio - 1) <= WITHIN, variant)} | "
              f"{_yes(same, variant)} | {rate} | `{main[:70]}` |")


def _yes(ok: bool, variant: bool) -> str:
    return "(variant)" if variant else "yes" if ok else "**no**"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("export", "table"))
    p.add_argument("path", type=Path)
    a = p.parse_args()
    export(a.path) if a.what == "export" else table(a.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

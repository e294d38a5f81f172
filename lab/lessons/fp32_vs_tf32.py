"""The lesson “FP32 vs TF32 on tensor cores”, whole: its text and explanation, its runs (in the
workload's own sizes), its check (``_fp32_vs_tf32``: what the lab looks for in the runs, a pure
function of their analyses), its questions (``QUESTIONS``: each answer computed from the runs) and
its claims (each checked on the H200 recording or a CPU run by tests/test_claims.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.analysis.bundle import Run
from lab.analysis.figures import gemm_kernel_us, top_self_cpu_row
from lab.analysis.gemm.kinds import is_gemm_kernel
from lab.core.workloads import GemmShape
from lab.lessons.answers import cat_rows
from lab.lessons.checks import kernel_events, name_set
from lab.lessons.schema import (
    GPU,
    Answer,
    Band,
    Lesson,
    Question,
    Signal,
    Where,
    band_of,
    claim_between,
    claim_equals,
    lesson_run,
    question,
)
from lab.units import fmt_us

__all__ = ["LESSON"]


def _fp32_vs_tf32(runs: list[Run]) -> list[Signal]:
    fp32, tf32 = runs
    k32 = [n for n in name_set(kernel_events(fp32.trace)) if is_gemm_kernel(n)]
    ktf = [n for n in name_set(kernel_events(tf32.trace)) if is_gemm_kernel(n)]
    if not k32 or not ktf:
        return [Signal("GEMM kernels recorded", False, "no GEMM kernel in one of the traces (CPU run?)")]
    t32 = float(fp32.analysis.kernels["total_us"].max())
    ttf = float(tf32.analysis.kernels["total_us"].max())
    return [
        Signal("the TF32 kernel says tf32, the FP32 one does not",
               any("tf32" in n.lower() for n in ktf) and not any("tf32" in n.lower() for n in k32),
               f"FP32: {k32[0][:60]}…  TF32: {ktf[0][:60]}…"),
        Signal("TF32 is faster", ttf < t32, f"GEMM time {fmt_us(t32)} (FP32) vs {fmt_us(ttf)} (TF32)"),
    ]


_SYNC_ROWS = ("aten::mm", "cudaLaunchKernel", "cudaDeviceSynchronize", "another row")


def _sync_row(runs: Sequence[Run]) -> Answer:
    run = runs[0]
    top = top_self_cpu_row(run)
    ka = run.analysis.key_averages
    share = float(ka.loc[ka["name"].astype(str) == top, "self_cpu_us"].sum()) / float(ka["self_cpu_us"].sum())
    choice = top if top in _SYNC_ROWS else _SYNC_ROWS[-1]
    return Answer(choice=choice, measured=100.0 * share,
                  measured_text=(f"{top} holds {100.0 * share:.0f} % of the table's Self CPU: the host launched "
                                 f"every step quickly, then waited there for the GPU's GEMMs to finish"),
                  where=Where(text="the FP32 run's table sorted by Self CPU: its first row", row=top, run=0))


_SPEEDUP = (Band(label="under 2×", below=2.0), Band(label="2–6×", below=6.0), Band(label="over 6×"))


def _gemm_kernel_name(run: Run) -> str:
    """The GEMM kernel with the largest total time (its table row)."""
    ev = run.trace.events
    rows = cat_rows(run, "kernel")
    names = ev["name"].astype(str).to_numpy()[rows]
    dur = ev["dur_us"].to_numpy(dtype=float)[rows]
    by_name: dict[str, float] = {}
    for name, d in zip(names, dur):
        if is_gemm_kernel(name):
            by_name[name] = by_name.get(name, 0.0) + float(d)
    return max(by_name, key=lambda n: by_name[n]) if by_name else ""


def _tf32_speedup(runs: Sequence[Run]) -> Answer:
    fp32_us, tf32_us = gemm_kernel_us(runs[0]), gemm_kernel_us(runs[1])
    name = _gemm_kernel_name(runs[1])
    ratio = fp32_us / tf32_us if tf32_us > 0 else float("nan")
    return Answer(choice=band_of(ratio, _SPEEDUP), measured=ratio,
                  measured_text=(f"GEMM kernel {fp32_us:,.0f} µs (FP32) vs {tf32_us:,.0f} µs (TF32): "
                                 f"{ratio:.1f}× faster"),
                  where=Where(text="the GEMM kernel's row in each table (its name says tf32 in the TF32 run)",
                              row=name, run=1))


QUESTIONS: tuple[Question, ...] = (
    question("fp32_vs_tf32.speedup", "How much faster will the TF32 GEMM kernel be than the FP32 one?",
       [b.label for b in _SPEEDUP], _tf32_speedup, (GPU,), "TF32 is a tensor-core mode of NVIDIA GPUs",
       tells={"over 6×": ("8.0×", "8×", "eight times"), "2–6×": ("several times faster", "a few times faster")}),
    question("fp32_vs_tf32.sync_row", "In the FP32 run's table sorted by Self CPU, which row will come first?",
        _SYNC_ROWS,
       _sync_row, (GPU,), "a CPU run has no GPU to wait for",
       tells={"cudaDeviceSynchronize": ("the host waits", "waited there")}),
)

LESSON = Lesson(
    key="fp32_vs_tf32",
    title="FP32 vs TF32 on tensor cores",
    text=(
        "By default PyTorch computes float32 matmuls in full FP32 on the CUDA cores. Ampere and "
        "newer GPUs can run them on tensor cores in TF32 (inputs rounded to a 10-bit mantissa, FP32 "
        "accumulation). Since torch 2.9 the switch is `torch.backends.cuda.matmul.fp32_precision = "
        "\"tf32\"`; before it, `torch.backends.cuda.matmul.allow_tf32 = True` or "
        "`torch.set_float32_matmul_precision(\"high\")` — use one style in a program, as torch 2.9 "
        "and later refuse a mix of the two. The lab calls `torch.cuda.synchronize()` once after the "
        "last recorded step, so every kernel ends inside the profile. **Look at** the GEMM kernel's "
        "name and duration in both runs, the achieved TFLOP/s against the peak, and the top rows "
        "of each table sorted by Self CPU."
    ),
    look_for="the FP32 run is flagged 'FP32 matmul without TF32'; the TF32 kernel is faster",
    explain=(
        "The TF32 kernel's name carries `tf32` and the FP32 one's does not (it runs on `ffma`, the "
        "CUDA cores). On the H200 the TF32 GEMM kernel ran 8.0× faster at 4096³. In both tables the "
        "top Self CPU row is `cudaDeviceSynchronize`: the host launched every step's kernels ahead "
        "of the GPU and then waited there for it — a sync's wait is counted as the CPU time of the "
        "call that waits."
    ),
    claims=(
        claim_between("ran 8.0× faster", "gemm_kernel_us", "float32", 7.5, 8.5, over="tf32"),
        claim_equals("The TF32 kernel's name carries `tf32`", "kernels_matching_per_step", "tf32", 1.0,
                     args=("tf32",)),
        claim_equals("the FP32 one's does not", "kernels_matching_per_step", "float32", 0.0,
                     args=("tf32",)),
        claim_equals("it runs on `ffma`", "kernels_matching_per_step", "float32", 1.0, args=("ffma",)),
        claim_equals("the top Self CPU row is `cudaDeviceSynchronize`", "top_self_cpu_row", "float32",
                     "cudaDeviceSynchronize"),
        claim_equals("In both tables the", "top_self_cpu_row", "tf32", "cudaDeviceSynchronize"),
    ),
    runs=(
        lesson_run("float32", "matmul_add", "matmul_add", gpu=GemmShape(m=4096, k=4096, n=4096), cpu=None,
                   gpu_dtype="float32"),
        lesson_run("tf32", "matmul_add", "matmul_add", gpu=GemmShape(m=4096, k=4096, n=4096), cpu=None,
                   gpu_dtype="tf32"),
    ),
    cpu_refusal=(
        "TF32 is a tensor-core mode of NVIDIA GPUs (Ampere or newer); this host has none. "
        "Open the H200 samples fp32 and tf32 to see the difference."
    ),
    check=_fp32_vs_tf32,
    questions=QUESTIONS,
    order=3,
)

"""Fidelity: does the lab report the GEMM kernel time that the GPU really takes?

For each GEMM of a grid, two numbers from the same process, one after the other:

* **profiled kernel µs** — what the lab reports: ``run_profile`` (matmul_add workload) →
  ``lab.trace.load_trace`` → ``lab.analysis.gemm_efficiency`` → median duration of the GEMM
  kernel over the recorded steps (CUPTI timestamps, profiler on).
* **event-timed µs** — the same ``torch.matmul`` (same shapes, dtype, TF32 setting, random data
  made the same way) timed with CUDA events and no profiler: median of ``--reps`` reps after
  warm-up. Before each rep a ``torch.cuda._sleep`` spacer keeps the GPU busy so that the CPU
  queues the start event, the matmul and the end event ahead of it: the events then bracket the
  kernel alone, not the CPU's launch latency (a 1024³ bf16 GEMM is shorter than its launch).

error % = (profiled − event) / event. TFLOP/s = 2·M·K·N / event-timed time; % of peak is
against ``lab.devices.lookup_peak`` (datasheet, dense).

Usage::

    python scripts/fidelity.py --device cuda --json fidelity.json --out fidelity.md   # on the GPU
    python scripts/fidelity.py --from-results fidelity.json --write-benchmarks         # here, later
    python scripts/fidelity.py --device cpu --quick --out /tmp/f.md                    # CPU rehearsal

On CPU there are no kernels: the lab's number is the ``aten::mm`` op's duration in the trace
and the reference is ``time.perf_counter`` around ``torch.matmul``; both are labelled so.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from benchmarks_md import write_section  # noqa: E402  (shared with the benches)

os.environ.setdefault("KINETO_LOG_LEVEL", "6")

SECTION = "## Fidelity"
BENCHMARKS = ROOT / "BENCHMARKS.md"
RESULTS_SCHEMA = 1

# (m, k, n, dtype) — square GEMMs across dtypes and sizes.
GRID = (
    (4096, 4096, 4096, "bfloat16"),
    (4096, 4096, 4096, "float16"),
    (4096, 4096, 4096, "tf32"),
    (4096, 4096, 4096, "float32"),
    (8192, 8192, 8192, "bfloat16"),
    (2048, 2048, 2048, "bfloat16"),
    (1024, 1024, 1024, "bfloat16"),
)
# CPU rehearsal: small enough for a loaded 2-core box; float16/tf32 are refused on CPU.
QUICK_GRID = (
    (128, 128, 128, "float32"),
    (256, 256, 256, "bfloat16"),
    (64, 128, 32, "float32"),
)
# Profiled run: more recorded steps than the lab's default 3 → a steadier kernel median.
PROFILE_SCHEDULE = dict(wait=1, warmup=1, active=10, warmup_iters=3)
EVENT_WARMUP_REPS = 10
DEFAULT_REPS = 50
# torch.cuda._sleep spins this many GPU cycles (~50 µs at H200's ~1.98 GHz): longer than the CPU
# needs to enqueue event, matmul and event, so the events time the kernel alone.
SPACER_CYCLES = 100_000
# Measured on the lent H200 box (the lead's notes): the best dense bf16 GEMM reaches ≈ 790 TFLOP/s,
# ~80 % of the 989.5 TFLOP/s datasheet figure: the practical ceiling for "% of peak".
H200_MEASURED_BF16_TFLOPS = 790.0


def shape_text(m: int, k: int, n: int) -> str:
    return f"{m}³" if m == k == n else f"{m}×{k}×{n}"


# ----------------------------------------------------------------------------- measuring


def profiled_gemm_us(config, result) -> dict:
    """The lab's own reading of its trace: GEMM kernel durations (GPU) or aten::mm ops (CPU)."""
    from lab.analysis.gemm.analyze import gemm_efficiency
    from lab.trace.load import load_trace

    trace = load_trace(result.trace_gz)
    if result.device.kind == "cuda":
        gemm = gemm_efficiency(trace, config=config)
        values = gemm["kernel_us"].dropna().tolist()
        kernel = str(gemm["kernel"].iloc[0]) if len(gemm) else ""
        source = "GEMM kernel in the trace (lab.analysis.gemm_efficiency, CUPTI timestamps)"
    else:
        ev = trace.events
        rows = ev[(ev["name"] == "aten::mm") & (ev["lane_kind"] == "cpu")]
        values = rows["dur_us"].tolist()
        kernel = "aten::mm"
        source = "aten::mm op in the trace (CPU: no kernels)"
    return {"values_us": values, "kernel": kernel, "source": source}


# An event pair costs a few µs of its own, which CUPTI's kernel durations do not include
# (seen on an H200: ~5–8 µs, i.e. -4 % at 4096³ bf16 and -36 % at 1024³). Timing batches of
# back-to-back GEMMs per pair was tried and dropped: small GEMMs then measure the CPU's launch
# rate instead. So the median cost of an empty pair (same spacer before it) is measured in the
# same loop and subtracted.
def time_matmul(m: int, k: int, n: int, dtype: str, *, cuda: bool, reps: int) -> dict:
    """The same torch.matmul without the profiler: per-rep times in µs."""
    import torch

    device = torch.device("cuda") if cuda else torch.device("cpu")
    storage = torch.float32 if dtype in ("float32", "tf32") else getattr(torch, dtype)
    # As lab.core.workloads makes them: float32 randn, then cast (never zeros: zeros run faster).
    x = torch.randn(m, k, device=device, dtype=torch.float32).to(storage)
    w = torch.randn(k, n, device=device, dtype=torch.float32).to(storage)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        for _ in range(EVENT_WARMUP_REPS):
            torch.matmul(x, w)
        if cuda:
            torch.cuda.synchronize()
            sleep = getattr(torch.cuda, "_sleep", None)
            pairs, empty = [], []
            for _ in range(reps):
                for bucket, work in ((pairs, True), (empty, False)):
                    if sleep is not None:
                        sleep(SPACER_CYCLES)
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    if work:
                        torch.matmul(x, w)
                    end.record()
                    bucket.append((start, end))
            torch.cuda.synchronize()
            pair_us = statistics.median(s.elapsed_time(e) * 1000.0 for s, e in empty)
            values = [s.elapsed_time(e) * 1000.0 - pair_us for s, e in pairs]  # ms → µs, pair cost out
            method = (f"CUDA events around torch.matmul, no profiler, minus the median empty event pair "
                      f"({pair_us:.1f} µs)"
                      + (f"; GPU kept ahead by torch.cuda._sleep({SPACER_CYCLES}) before each pair" if sleep else
                         "; torch.cuda._sleep missing: launch latency may be included"))
        else:
            values = []
            for _ in range(reps):
                t0 = time.perf_counter()
                torch.matmul(x, w)
                values.append((time.perf_counter() - t0) * 1e6)
            method = "wall clock (time.perf_counter) around torch.matmul on CPU, no profiler"
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
        del x, w
        if cuda:
            torch.cuda.empty_cache()
    return {"values_us": values, "method": method}


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), without numpy."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def measure_one(m: int, k: int, n: int, dtype: str, *, device: str, reps: int):
    """(row, DeviceInfo) for one GEMM: the lab's profiled reading and the event-timed one."""
    from lab.core.config import RunConfig
    from lab.run.runner import run_profile

    row = {"m": m, "k": k, "n": n, "dtype": dtype, "label": f"{shape_text(m, k, n)} {dtype}", "error": None}
    config = RunConfig(workload="matmul_add", m=m, k=k, n=n, dtype=dtype, device=device, **PROFILE_SCHEDULE)
    row["config"] = config.to_dict()
    result = run_profile(config)
    cuda = result.device.kind == "cuda"
    prof = profiled_gemm_us(config, result)
    ev = time_matmul(m, k, n, dtype, cuda=cuda, reps=reps)
    p, e = prof["values_us"], ev["values_us"]
    if not p:
        raise RuntimeError("the trace holds no GEMM kernel (was CUPTI available?)")
    flops = 2.0 * m * k * n
    peak = result.device.peak.tflops.get(dtype) if result.device.peak else None
    event_us = percentile(e, 50)
    tflops = flops / event_us / 1e6
    row.update(
        profiled_kernel_us=percentile(p, 50), profiled_n=len(p),
        profiled_min_us=min(p), profiled_max_us=max(p), profiled_source=prof["source"], kernel=prof["kernel"],
        event_us=event_us, event_p10_us=percentile(e, 10), event_p90_us=percentile(e, 90),
        event_min_us=min(e), event_max_us=max(e), event_reps=len(e), event_method=ev["method"],
        error_pct=100.0 * (percentile(p, 50) - event_us) / event_us,
        tflops=tflops, peak_tflops=peak, pct_of_peak=100.0 * tflops / peak if peak else None,
        # The lab's whole-step timing (matmul + add), for reference.
        lab_step_unprofiled_us=_finite(result.timing.unprofiled_median_us),
        lab_step_profiled_us=_finite(result.timing.profiled_median_us),
        timing_method=result.timing.method,
    )
    return row, result.device


def _finite(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def measure(grid, *, device: str, reps: int, command: str) -> dict:
    import torch

    from lab.run.runner import warm_up

    info = warm_up(device)
    rows = []
    for m, k, n, dtype in grid:
        t0 = time.perf_counter()
        try:
            row, info = measure_one(m, k, n, dtype, device=device, reps=reps)
        except Exception as exc:  # noqa: BLE001 - one failed size must not lose the others
            first = (str(exc).strip().splitlines() or [""])[0]
            row = {"m": m, "k": k, "n": n, "dtype": dtype, "label": f"{shape_text(m, k, n)} {dtype}",
                   "error": f"{type(exc).__name__}: {first}"[:300]}
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        row["wall_s"] = time.perf_counter() - t0
        print(_progress(row), flush=True)
        rows.append(row)
    peak = info.peak
    return {
        "schema": RESULTS_SCHEMA,
        "date": datetime.date.today().isoformat(),
        "command": command,
        "device": info.label,
        "device_name": info.name,
        "device_kind": info.kind,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "peak_model": peak.model if peak else None,
        "peak_source": peak.source if peak else None,
        "profile_schedule": dict(PROFILE_SCHEDULE),
        "rows": rows,
    }


def _progress(row: dict) -> str:
    if row.get("error"):
        return f"{row['label']:>16}: FAILED {row['error']}"
    return (f"{row['label']:>16}: profiled {row['profiled_kernel_us']:9.1f} µs  event {row['event_us']:9.1f} µs  "
            f"error {row['error_pct']:+6.1f} %  {row['tflops']:7.1f} TFLOP/s  ({row['wall_s']:.1f} s)")


# ----------------------------------------------------------------------------- reporting


def _num(value, fmt: str, empty: str = "—") -> str:
    return empty if value is None or (isinstance(value, float) and not math.isfinite(value)) else format(value, fmt)


def render_markdown(results: dict) -> str:
    """The "## Fidelity" section of BENCHMARKS.md, from a results dict (``measure`` or its JSON)."""
    rows = results["rows"]
    cuda = results.get("device_kind") == "cuda"
    ok = [r for r in rows if not r.get("error")]
    lines = [
        SECTION,
        "",
        f"Command: `{results['command']}` — {results['date']}, {results['device']}, torch {results['torch']}"
        + (f", CUDA {results['cuda']}" if results.get("cuda") else "") + f", Python {results['python']}.",
        "",
        "Question: is the GEMM kernel time the lab reports (profiler on) the time the GPU really takes "
        "(profiler off)? Per GEMM, in one process, one after the other:",
        "",
        f"- **profiled kernel** — the lab's number: `run_profile` of matmul_add (schedule wait "
        f"{results['profile_schedule']['wait']} / warmup {results['profile_schedule']['warmup']} / active "
        f"{results['profile_schedule']['active']}, {results['profile_schedule']['warmup_iters']} warm-up "
        "iterations) → `load_trace` → `gemm_efficiency`: median GEMM kernel duration over the recorded steps."
        if cuda else
        "- **profiled** — the lab's number: `run_profile` of matmul_add → `load_trace` → median `aten::mm` "
        "op duration (a CPU trace has no kernels).",
        f"- **event-timed** — {ok[0]['event_method'] if ok else 'see the script'}; median of "
        f"{ok[0]['event_reps'] if ok else '?'} reps after {EVENT_WARMUP_REPS} warm-up reps; spread = 10th–90th "
        "percentile. Same shapes, dtype, TF32 setting and random data as the lab's run.",
        "- error % = (profiled − event-timed) / event-timed. TFLOP/s = 2·M·K·N / event-timed time; % of peak "
        f"against the datasheet's dense peak ({results.get('peak_model') or 'no peak known for this device'}).",
        "",
        "| GEMM | profiled kernel µs | event-timed µs (p10–p90) | error % | TFLOP/s | % of peak |"
        if cuda else
        "| GEMM | profiled aten::mm µs | wall-clock µs (p10–p90) | error % | GFLOP/s | % of peak |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['label']} | failed: {r['error']} | | | | |")
            continue
        rate = r["tflops"] if cuda else r["tflops"] * 1000.0
        lines.append(
            f"| {r['label']} | {r['profiled_kernel_us']:,.1f} | {r['event_us']:,.1f} "
            f"({r['event_p10_us']:,.1f}–{r['event_p90_us']:,.1f}) | {r['error_pct']:+.1f} | "
            f"{rate:,.1f} | {_num(r.get('pct_of_peak'), '.0f')} |")
    lines.append("")
    lines += _reading(results, ok, cuda)
    return "\n".join(lines).rstrip("\n") + "\n"


def _reading(results: dict, ok: list[dict], cuda: bool) -> list[str]:
    out = []
    if ok:
        errors = [abs(r["error_pct"]) for r in ok]
        worst = max(ok, key=lambda r: abs(r["error_pct"]))
        out.append(f"Reading: across {len(ok)} GEMMs the profiled time is within {max(errors):.1f} % of the "
                   f"un-profiled one (median |error| {percentile(errors, 50):.1f} %; largest at {worst['label']}, "
                   f"{worst['error_pct']:+.1f} %).")
    if not cuda:
        out.append("This is a CPU rehearsal (`--quick`): wall-clock numbers on a shared CPU, not GPU figures.")
    elif "H200" in (results.get("device_name") or "").upper():
        bf16 = [r for r in ok if r["dtype"] == "bfloat16"]
        best = max(bf16, key=lambda r: r["tflops"]) if bf16 else None
        text = (f"For scale: on this machine type the best dense bf16 GEMM measured ≈ {H200_MEASURED_BF16_TFLOPS:.0f} "
                f"TFLOP/s against the datasheet's 989.5, so ~80 % of peak is the practical ceiling")
        if best:
            text += (f"; here the best bf16 row ({best['label']}) reached {best['tflops']:.0f} TFLOP/s "
                     f"({100 * best['tflops'] / H200_MEASURED_BF16_TFLOPS:.0f} % of that ceiling)")
        out.append(text + ".")
    failed = [r for r in results["rows"] if r.get("error")]
    if failed:
        out.append(f"{len(failed)} GEMM(s) failed; their error is in the table.")
    return [" ".join(out)] if out else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Profiled GEMM kernel time vs CUDA-event time without the profiler.")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny CPU-sized grid (for testing)")
    parser.add_argument("--reps", type=int, default=DEFAULT_REPS, help="event-timed reps per GEMM (≥ 50 on GPU)")
    parser.add_argument("--json", type=Path, default=None, help="write the results (re-render them with --from-results)")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown section to this file")
    parser.add_argument("--from-results", type=Path, default=None, help="render a results JSON instead of measuring")
    parser.add_argument("--write-benchmarks", action="store_true", help="replace the Fidelity section of BENCHMARKS.md")
    parser.add_argument("--benchmarks", type=Path, default=BENCHMARKS, help="the file --write-benchmarks edits")
    args = parser.parse_args(argv)

    if args.from_results is not None:
        results = json.loads(args.from_results.read_text(encoding="utf-8"))
        if results.get("schema") != RESULTS_SCHEMA:
            print(f"error: {args.from_results} is not a fidelity results file (schema {results.get('schema')!r})",
                  file=sys.stderr)
            return 2
    else:
        command = "python " + " ".join([f"scripts/{Path(sys.argv[0]).name}"] + (sys.argv[1:] if argv is None else argv))
        grid = QUICK_GRID if args.quick else GRID
        results = measure(grid, device=args.device, reps=args.reps, command=command)
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
            print(f"wrote {args.json}")
    text = render_markdown(results)
    print()
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    if args.write_benchmarks:
        write_section(text, args.benchmarks)
        print(f"{args.benchmarks} updated (section '{SECTION[3:]}')")
    return 0 if any(not r.get("error") for r in results["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())

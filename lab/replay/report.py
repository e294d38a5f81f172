"""A replay beside the trace's row: the checks before it runs (dtypes, memory) and the
side-by-side figures (time per call, kernels, achieved rate) as data and as text."""

from __future__ import annotations

from lab.analysis.gemm.bound import pct_of_roof
from lab.core.config import MEMORY_HEADROOM
from lab.core.devices import DeviceInfo, lookup_peak
from lab.replay.rates import footprint_bytes, op_bytes, op_flops
from lab.replay.rows import RowFigures, find_row, row_figures
from lab.replay.spec import ReplayRefusal, ReplaySpec, device_refusal
from lab.trace import Trace
from lab.vocab import ELEMENT_BYTES

__all__ = ["check_replay", "format_side_by_side", "run_side_by_side", "side_by_side"]


def check_replay(spec: ReplaySpec, info: DeviceInfo) -> None:
    """Refuse, before anything is allocated, a replay the device cannot run or hold."""
    reason = device_refusal(spec, kind=info.kind, compute_capability=info.compute_capability)
    if reason:
        raise ReplayRefusal(reason)
    need, budget = footprint_bytes(spec), int(info.free_memory_bytes * MEMORY_HEADROOM)
    if need > budget:
        where = f"the GPU ({info.name})" if info.kind == "cuda" else "this machine's RAM"
        raise ReplayRefusal(f"{spec.op} {spec.shapes_text} needs about {need / 2**30:.2f} GiB but {where} has "
                            f"{budget / 2**30:.2f} GiB usable; replay a smaller call (--shapes, --index)")


def _rate(flops: int, moved: int, us: float, *, device: str = "", dtype: str = "") -> dict:
    """Achieved TFLOP/s and GB/s, and % of the device's roof at the op's intensity (the one roofline,
    ``lab.analysis.gemm.bound``; a memory-bound op's roof is the HBM bandwidth); None where unknown."""
    tflops = flops / us / 1e6 if flops and us > 0 else None
    gbs = moved / us / 1e3 if moved and us > 0 else None
    peak = lookup_peak(device) if device and device != "cpu" else None
    pct = None
    if peak is not None and gbs is not None:
        compute = peak.peak_tflops(dtype) if flops else None
        if compute and tflops is not None:
            pct = float(pct_of_roof(tflops, flops / moved, compute, peak.memory_bandwidth_gbs))
        elif not flops:
            pct = 100.0 * gbs / peak.memory_bandwidth_gbs
    return {"tflops": tflops, "gbs": gbs, "pct_of_roof": pct}


def side_by_side(spec: ReplaySpec, original: RowFigures, result: dict) -> dict:
    """The row and its replay, the same figures for both. The time compared is the kernels' on a
    GPU (both sides launched kernels), else the op's CPU time per call; the trace's is the median
    over its calls of the same shapes and dtypes. The trace's rate is its kernels' wherever it ran
    kernels (a GPU trace replayed on a CPU: not its launch calls' time)."""
    flops, moved = op_flops(spec), op_bytes(spec)
    on_gpu = bool(original.kernels) and bool(result.get("kernels"))
    trace_us = original.median_kernel_us if on_gpu else original.median_op_us
    replay_us = float(result["kernel_us_per_call"]) if on_gpu else float(result["cpu_op_us_per_call"])
    notes = []
    if not on_gpu and not result.get("op_calls_seen"):
        replay_us = float(result["time_per_call_us"])
        notes.append(f"the replay ran no {spec.op} call (compiled away): its wall time per call is compared")
    if original.device_name and result.get("device_name") and original.device_name != result["device_name"]:
        notes.append(f"the trace ran on {original.device_name}, the replay on {result['device_name']}")
    variant = [f"{k} {result[k]}" for k in ("dtype", "layout") if result.get(k) not in (None, "as recorded")]
    variant += [k for k in ("compiled",) if result.get(k)]
    if variant:
        notes.append(f"a variant: {', '.join(variant)} (the trace ran the op as recorded)")
    if not original.kernels and result.get("kernels"):
        notes.append("the trace's row launched no GPU work (a CPU trace): its op time is compared")
    trace_kernels = [name for name, _ in original.kernels]
    replay_kernels = [k["name"] for k in result.get("kernels", [])]
    return {
        "op": spec.op, "op_class": spec.op_class, "shapes": spec.shapes_text, "dtypes": list(spec.dtypes),
        "layouts": [t.layout for t in spec.tensors], "compared": "kernel time" if on_gpu else "op CPU time",
        "trace": {"row": original.row, "device": original.device_name or "cpu", "op_us": original.op_us,
                  "kernel_us": original.kernel_us, "kernels": trace_kernels, "us": trace_us,
                  "same_shape_calls": original.same_shape_calls,
                  **_rate(flops, moved, original.median_kernel_us if original.kernels else trace_us,
                           device=original.device_name, dtype=_roof_dtype(spec, result))},
        "replay": {"device": result.get("device_name", ""), "time_per_call_us": result["time_per_call_us"],
                   "op_us": result["cpu_op_us_per_call"], "kernel_us": result["kernel_us_per_call"],
                   "kernels": replay_kernels, "us": replay_us, "calls": result["calls"], "tf32": result.get("tf32"),
                   "input_shapes": result.get("input_shapes"), "input_strides": result.get("input_strides"),
                   "input_dtypes": result.get("input_dtypes"),
                   # the script's bytes: the lab's count scaled to the inputs it built (a dtype variant)
                   **_rate(flops, int(result.get("bytes", moved)), replay_us, device=result.get("device_name", ""),
                           dtype=_roof_dtype(spec, result))},
        "ratio": replay_us / trace_us if trace_us > 0 else None,
        "same_kernels": sorted(set(trace_kernels)) == sorted(set(replay_kernels)),
        "flops": flops, "bytes": moved, "notes": notes,
    }


def format_side_by_side(data: dict) -> str:
    t, r = data["trace"], data["replay"]
    rows = [("", "trace", "replay"), ("device", t["device"], r["device"]),
            ("op (CPU) µs, this call", f"{t['op_us']:.1f}", f"{r['op_us']:.1f}"),
            ("kernels µs, this call", f"{t['kernel_us']:.1f}", f"{r['kernel_us']:.1f}"),
            ("TFLOP/s", _num(t["tflops"]), _num(r["tflops"])), ("GB/s", _num(t["gbs"]), _num(r["gbs"])),
            ("% of roof", _num(t.get("pct_of_roof")), _num(r.get("pct_of_roof")))]
    width = max(len(a) for a, _, _ in rows) + 2
    lines = [f"{data['op']} {data['shapes']} ({', '.join(data['dtypes'])}; {', '.join(data['layouts'])})"]
    lines += [f"{a:<{width}}{b:>14}  {c:>14}" for a, b, c in rows]
    ratio, n = data["ratio"], t["same_shape_calls"]
    lines.append(f"{data['compared']}: trace {t['us']:.1f} µs (median of its {n} calls of these shapes), "
                 f"replay {r['us']:.1f} µs" + (f", ratio {ratio:.3f}" if ratio else ""))
    lines.append("kernels: " + ("the same" if data["same_kernels"] else "differ"))
    for side in ("trace", "replay"):
        lines += [f"  {side}: {name}" for name in dict.fromkeys(data[side]["kernels"])]
    lines += [f"note: {n}" for n in data["notes"]]
    return "\n".join(lines) + "\n"


def _roof_dtype(spec: ReplaySpec, result: dict) -> str:
    """The dtype whose peak is the roof: TF32 when the GEMM ran on TF32 tensor cores."""
    dtype = next((d for d in spec.dtypes if d), "")
    return "tf32" if dtype == "float32" and result.get("tf32") else dtype


def _num(value) -> str:
    return "—" if value is None else f"{value:.2f}"


def original_figures(spec: dict) -> RowFigures:
    """What the traced row measured, as ``script_spec`` stored it beside the spec."""
    o = spec["original"]
    return RowFigures(row=int(o["row"]), op=spec["op"], op_us=float(o["op_us"]), kernel_us=float(o["kernel_us"]),
                      kernels=tuple((str(n), float(d)) for n, d in o["kernels"]), device_name=o["device_name"],
                      same_shape_calls=int(o["same_shape_calls"]), median_op_us=float(o["median_op_us"]),
                      median_kernel_us=float(o["median_kernel_us"]))


def run_side_by_side(spec: dict, trace: Trace, *, device_name: str, dtype: str, layout: str, compiled: bool,
                     step_us: float, calls_per_step: int) -> dict:
    """A replay run (a run of the queue, ``lab.replay.workload``) beside the row it replays: the
    run's trace read for the same op as the trace's row was (``row_figures``: median over its calls
    of these shapes), in ``side_by_side``'s terms. A compiled variant whose op was traced away is
    compared by its step time over its calls."""
    replay_spec = ReplaySpec.from_dict(spec)
    try:
        fig: RowFigures | None = row_figures(trace, find_row(trace, spec["op"]))
    except ReplayRefusal:
        fig = None
    per_call = step_us / calls_per_step if calls_per_step else float("nan")
    result = {
        "kernel_us_per_call": fig.median_kernel_us if fig else 0.0,
        "cpu_op_us_per_call": fig.median_op_us if fig else 0.0, "time_per_call_us": per_call,
        "op_calls_seen": fig.same_shape_calls if fig else 0, "device_name": device_name,
        "dtype": dtype, "layout": layout, "compiled": compiled, "tf32": dtype == "tf32",
        "kernels": [{"name": n} for n, _ in (fig.kernels if fig else ())], "calls": fig.same_shape_calls if fig else 0,
        "bytes": _variant_bytes(replay_spec, dtype),
    }
    return side_by_side(replay_spec, original_figures(spec), result)


def _variant_bytes(spec: ReplaySpec, dtype: str) -> int:
    """The op's bytes (``op_bytes``) with its floating-point tensors in ``dtype`` (a dtype variant;
    "as recorded" and "tf32" keep them)."""
    moved = op_bytes(spec)
    size = ELEMENT_BYTES.get(dtype)
    recorded = next((d for d in spec.dtypes if d in ELEMENT_BYTES), None)
    if dtype in ("as recorded", "tf32") or not size or recorded is None:
        return moved
    return int(moved * size / ELEMENT_BYTES[recorded])

"""Replay one op of a trace: rebuild its inputs, call it under ``torch.profiler``, print what ran.

Imports torch and the standard library only: this file is also the body of the script
``lab.replay.export`` writes (its ``SPEC`` filled in), for a user to run on their own machine.
The lab runs it the same way, in a child process (two profilers in one process crash it).

Usage: ``python replay_op.py [--device cpu|cuda] [--calls N] [--warmup N] [--dtype D] [--tf32]
[--contiguous] [--channels-last] [--compile] [--json]``. It prints the time per call, the
kernels and the achieved TFLOP/s or GB/s; with ``--json`` one JSON line instead.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import statistics
import sys
import tempfile
import time

SPEC: dict = {}  # filled in by the export: {"op", "op_class", "inputs", "flops", "bytes", …}

# c10::ScalarType codes, as a Concrete Input records a dtype argument (_scaled_mm's out_dtype "15").
SCALAR_TYPE_CODES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
                     7: "float64", 11: "bool", 15: "bfloat16", 23: "float8_e5m2", 24: "float8_e4m3fn"}
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
TIMING_ROUNDS = 5  # median of this many timed rounds of ``calls`` back-to-back calls
# Tensor-core GEMMs repeated back to back for tens of milliseconds slow down on an H200 (its power
# cap, we take it; clocks not read per call): replays of 360 calls (bench/replay_h200.py, "Replay
# of trace rows") read an 8192³ bf16 mm at 1,668 µs against 1,349 µs traced over 3 steps, and a
# 4096³ bf16 linear at 196 µs against 175 µs, while 145 calls of the same linear (the exported
# script, rounds of 20) read 174.8 µs.
# So a GPU round holds at most this much GPU work, and the GPU rests as long between rounds:
# the traced programs ran a few calls in a row, not hundreds.
ROUND_BUDGET_US = 20_000.0
MIN_ROUND_CALLS = 3


class ReplayError(RuntimeError):
    """The replay cannot run as asked; the message says why."""


def _torch():
    import torch

    return torch


def make_tensor(item: dict, device: str, *, dtype_name: str | None = None, layout: str = "as recorded"):
    """A tensor of the recorded shape, dtype and strides, filled with random values (never zeros:
    some GPUs run GEMMs on zeros measurably faster). ``layout`` "contiguous" / "channels_last"
    replace the recorded strides; ``dtype_name`` the dtype of floating-point inputs."""
    torch = _torch()
    shape = list(item["shape"])
    dtype = getattr(torch, dtype_name if dtype_name and _is_float(item["dtype"]) else item["dtype"])
    strides = item.get("strides")
    if layout == "contiguous" or strides is None or len(strides) != len(shape):
        strides = _contiguous(shape)
    elif layout == "channels_last" and len(shape) == 4:
        n, c, h, w = shape
        strides = [h * w * c, 1, w * c, c]
    span = 1 + sum((s - 1) * st for s, st in zip(shape, strides)) if all(shape) else 0
    if device == "meta":
        return torch.empty_strided(shape, strides, dtype=dtype, device="meta")
    base = _random(torch, max(span, 0), dtype, device)
    return base.as_strided(shape, strides)


def _is_float(name: str) -> bool:
    return name in ("float32", "float16", "bfloat16", "float64")


def _contiguous(shape: list) -> list:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return list(reversed(strides))


def _random(torch, n: int, dtype, device: str):
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), device=device).bool()
    if not (dtype.is_floating_point or dtype.is_complex):
        return torch.randint(0, 2, (n,), device=device, dtype=dtype)  # small ints: valid indices and counts
    return torch.randn(n, device=device, dtype=torch.float32).to(dtype)


def build_args(spec: dict, device: str, *, dtype_name: str | None = None, layout: str = "as recorded") -> list:
    """The op's inputs in schema order: tensors, scalars, None."""
    args = []
    for item in spec["inputs"]:
        if item["kind"] == "tensor":
            args.append(make_tensor(item, device, dtype_name=dtype_name, layout=layout))
        elif item["kind"] == "scalar":
            value = item["value"]
            args.append(list(value) if isinstance(value, (list, tuple)) else value)
        else:
            args.append(None)
    return args


def resolve(op: str, args: list):
    """(overload, positional args, keyword args) of ``torch.ops.aten`` for ``op`` called with
    ``args`` in schema order: the overload with as many arguments, tensors where it takes
    tensors; keyword-only arguments passed by name, dtype codes turned into dtypes."""
    torch = _torch()
    packet = getattr(torch.ops.aten, op.split("::", 1)[1])
    for name in sorted(packet.overloads(), key=lambda n: (n != "default", n)):
        overload = getattr(packet, name)
        schema = overload._schema.arguments
        if len(schema) != len(args) or not all(_fits(a, x, torch) for a, x in zip(schema, args)):
            continue
        positional, keywords = [], {}
        for a, x in zip(schema, args):
            x = _as_type(a, x, torch)
            if a.kwarg_only:
                keywords[a.name] = x
            else:
                positional.append(x)
        return overload, positional, keywords
    raise ReplayError(f"no overload of {op} takes the recorded inputs {[type(a).__name__ for a in args]}")


def _fits(arg, value, torch) -> bool:
    text = str(arg.type)
    is_tensor = isinstance(value, torch.Tensor)
    if text in ("Tensor", "Optional[Tensor]") or text.startswith("Tensor("):
        return is_tensor or (value is None and text.startswith("Optional"))
    if is_tensor:
        return text in ("Scalar", "Optional[Scalar]")  # a 0-d tensor may stand for a number
    return value is not None or text.startswith("Optional")


def _as_type(arg, value, torch):
    if "ScalarType" in str(arg.type) and isinstance(value, int) and not isinstance(value, bool):
        return getattr(torch, SCALAR_TYPE_CODES.get(value, "float32"))
    return value


def _sync(torch, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_calls(fn, torch, device: str, calls: int) -> float:
    """µs per call: the median over ``TIMING_ROUNDS`` rounds of ``calls`` calls back to back
    (CUDA events on a GPU, resting as long as a round took between rounds; the wall clock on a
    CPU), the profiler off."""
    rounds = []
    for _ in range(TIMING_ROUNDS):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            rounds.append(start.elapsed_time(end) * 1000.0 / calls)
            time.sleep(rounds[-1] * calls / 1e6)
        else:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            rounds.append((time.perf_counter() - t0) * 1e6 / calls)
    return statistics.median(rounds)


def profile_calls(fn, torch, device: str, calls: int, op: str) -> dict:
    """``calls`` calls under torch.profiler (after as many traced and dropped); from its exported
    trace, per call: the op's CPU time and each GPU activity's name, launches and time."""
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    # One traced-and-dropped round first: the profiler's first recorded calls pay its start-up.
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=1)
    with torch.profiler.profile(activities=acts, record_shapes=True, schedule=schedule) as prof:
        for step in range(2):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            _sync(torch, device)
            if step == 0:
                if device == "cuda":
                    time.sleep(time.perf_counter() - start)  # rest, as between timed rounds
                prof.step()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "replay.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            events = json.load(f).get("traceEvents", [])
    ops = [e for e in events if e.get("ph") == "X" and e.get("name") == op and e.get("cat") == "cpu_op"]
    kernels: dict[str, list[float]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            kernels.setdefault(e["name"], []).append(float(e.get("dur", 0.0)))
    rows = [{"name": n, "launches_per_call": len(d) / calls, "us_per_call": sum(d) / calls}
            for n, d in kernels.items()]
    return {"cpu_op_us_per_call": sum(float(e.get("dur", 0.0)) for e in ops) / max(len(ops), 1),
            "op_calls_seen": len(ops), "kernels": sorted(rows, key=lambda r: -r["us_per_call"]),
            "kernel_us_per_call": sum(r["us_per_call"] for r in rows),
            "shapes": [a.get("args", {}).get("Input Dims") for a in ops[:1]],
            "types": [a.get("args", {}).get("Input type") for a in ops[:1]],
            "strides": [a.get("args", {}).get("Input Strides") for a in ops[:1]]}


def replay(spec: dict, *, device: str = "cpu", calls: int = 20, warmup: int = 5, dtype_name: str | None = None,
           layout: str = "as recorded", tf32: bool | None = None, compile_op: bool = False) -> dict:
    """Rebuild the inputs, warm up, time rounds of ``calls`` calls, then profile ``calls`` more
    (on a GPU, rounds of at most ``ROUND_BUDGET_US`` of work). ``tf32`` None: as the spec says
    (the traced program's GEMM kernel ran TF32)."""
    torch = _torch()
    tf32 = bool(spec.get("tf32")) if tf32 is None else tf32
    if device == "cuda" and not torch.cuda.is_available():
        raise ReplayError("--device cuda was asked for but torch sees no CUDA GPU; use --device cpu")
    _check_dtypes(torch, spec, device, dtype_name)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    args = build_args(spec, device, dtype_name=dtype_name, layout=layout)
    overload, positional, keywords = resolve(spec["op"], args)

    def call():
        return overload(*positional, **keywords)

    fn = torch.compile(call) if compile_op else call
    with torch.no_grad():
        for _ in range(max(warmup, 1)):
            fn()
        _sync(torch, device)
        round_calls = _round_calls(fn, torch, device, calls)
        per_call_us = time_calls(fn, torch, device, round_calls)
        profiled = profile_calls(fn, torch, device, round_calls, spec["op"])
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    rated_us = profiled["kernel_us_per_call"] if device == "cuda" and profiled["kernel_us_per_call"] > 0 \
        else per_call_us
    flops, moved = int(spec.get("flops", 0)), _scaled_bytes(torch, spec, tensors)
    return {
        "op": spec["op"], "op_class": spec.get("op_class", ""), "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
        "calls": round_calls, "calls_asked": calls, "warmup": warmup, "dtype": dtype_name or "as recorded",
        "layout": layout, "tf32": tf32,
        "compiled": compile_op,
        "input_shapes": [list(t.shape) for t in tensors], "input_strides": [list(t.stride()) for t in tensors],
        "input_dtypes": [str(t.dtype).replace("torch.", "") for t in tensors],
        "time_per_call_us": per_call_us, "flops": flops, "bytes": moved,
        "tflops": flops / rated_us / 1e6 if flops and rated_us > 0 else None,
        "gbs": moved / rated_us / 1e3 if moved and rated_us > 0 else None,
        **profiled,
    }


def _round_calls(fn, torch, device: str, calls: int) -> int:
    """``calls``, or on a GPU as many as fit ``ROUND_BUDGET_US`` of GPU work (one call timed)."""
    if device != "cuda":
        return calls
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    one_us = max(start.elapsed_time(end) * 1000.0, 1.0)
    return max(MIN_ROUND_CALLS, min(calls, int(ROUND_BUDGET_US // one_us)))


def _check_dtypes(torch, spec: dict, device: str, dtype_name: str | None) -> None:
    """Refuse, before allocating, dtypes this GPU cannot run: FP8 below compute capability 8.9,
    bfloat16 below 8.0 (the lab's ``lab.replay.spec.device_refusal`` says the same before it
    starts this script)."""
    if device != "cuda":
        return
    dtypes = {dtype_name if dtype_name and _is_float(i["dtype"]) else i["dtype"]
              for i in spec["inputs"] if i["kind"] == "tensor"}
    cc = torch.cuda.get_device_capability()
    if any(d.startswith("float8") for d in dtypes) and cc < (8, 9):
        raise ReplayError(f"float8 needs compute capability 8.9 or newer; this GPU is {cc[0]}.{cc[1]}")
    if "bfloat16" in dtypes and cc < (8, 0):
        raise ReplayError(f"bfloat16 needs compute capability 8.0 or newer; this GPU is {cc[0]}.{cc[1]}")


def _scaled_bytes(torch, spec: dict, tensors: list) -> int:
    """The spec's bytes per call (counted by the lab for the recorded dtypes), scaled by how many
    bytes the inputs built here hold against the recorded ones (a dtype variant halves a bf16 op)."""
    recorded = sum(math.prod(i["shape"]) * getattr(torch, i["dtype"]).itemsize
                   for i in spec["inputs"] if i["kind"] == "tensor")
    built = sum(t.numel() * t.element_size() for t in tensors)
    return round(int(spec.get("bytes", 0)) * built / recorded) if recorded else int(spec.get("bytes", 0))


def format_result(r: dict, original: dict | None = None) -> str:
    """The replay in a few lines: time per call, kernels, rate; and the trace's row, if given."""
    lines = [f"{r['op']} on {r['device_name']} ({r['calls']} calls after {r['warmup']} warm-up): "
             f"{r['time_per_call_us']:.1f} µs per call, the op {r['cpu_op_us_per_call']:.1f} µs on the CPU"]
    if r["kernels"]:
        lines.append(f"kernels {r['kernel_us_per_call']:.1f} µs per call:")
        lines += [f"  {k['us_per_call']:10.1f} µs  x{k['launches_per_call']:g}  {k['name']}" for k in r["kernels"]]
    if r["tflops"]:
        lines.append(f"achieved {r['tflops']:.1f} TFLOP/s ({r['flops']:,} FLOPs per call)")
    if r["gbs"]:
        lines.append(f"achieved {r['gbs']:.1f} GB/s ({r['bytes']:,} bytes per call)")
    if original:
        where = original.get("device_name") or "a CPU"
        lines.append(f"the trace, on {where}: op {original['median_op_us']:.1f} µs, kernels "
                     f"{original['median_kernel_us']:.1f} µs (medians of its {original['same_shape_calls']} calls "
                     f"of these shapes)")
    return "\n".join(lines)


def main(argv: list[str] | None = None, spec: dict | None = None) -> int:
    p = argparse.ArgumentParser(description=f"Replay {(spec or SPEC).get('op', 'an op')} under torch.profiler")
    p.add_argument("--device", default="cuda" if _has_cuda() else "cpu", choices=("cpu", "cuda"))
    p.add_argument("--calls", type=int, default=20, help="profiled (and timed) calls (default %(default)s)")
    p.add_argument("--warmup", type=int, default=5, help="un-profiled calls first (default %(default)s)")
    p.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                   help="the dtype of floating-point inputs (default: as recorded)")
    p.add_argument("--tf32", action=argparse.BooleanOptionalAction, default=None,
                   help="allow TF32 tensor-core math for float32 (default: as the trace's kernels ran)")
    p.add_argument("--contiguous", action="store_true", help="contiguous inputs instead of the recorded strides")
    p.add_argument("--channels-last", action="store_true", help="4-D inputs in channels_last")
    p.add_argument("--compile", action="store_true", help="call the op through torch.compile")
    p.add_argument("--spec", default=None, help="a JSON spec file instead of the one in this script")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    a = p.parse_args(argv)
    if a.spec:
        with (gzip.open if a.spec.endswith(".gz") else open)(a.spec, "rt", encoding="utf-8") as f:
            spec = json.load(f)
    spec = spec or SPEC
    layout = "contiguous" if a.contiguous else "channels_last" if a.channels_last else "as recorded"
    try:
        result = replay(spec, device=a.device, calls=max(a.calls, 1), warmup=a.warmup, dtype_name=a.dtype,
                        layout=layout, tf32=a.tf32, compile_op=a.compile)
    except ReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result) if a.json else format_result(result, spec.get("original")))
    return 0


def _has_cuda() -> bool:
    return bool(_torch().cuda.is_available())


if __name__ == "__main__":
    sys.exit(main())

"""A replay as a standalone script (torch and the standard library only), and the spec with the
figures its rates divide by: what the lab's child process and a user's own machine both run."""

from __future__ import annotations

import json
from pathlib import Path

from lab.analysis.gemm.kinds import gemm_kernel_dtype, is_gemm_kernel
from lab.replay.rates import op_bytes, op_flops
from lab.replay.rows import RowFigures
from lab.replay.spec import ReplaySpec

__all__ = ["SCRIPT_BODY", "export_script", "script_spec", "traced_tf32"]

SCRIPT_BODY = Path(__file__).with_name("standalone.py")
_SPEC_LINE = "SPEC: dict = {}"


def script_spec(spec: ReplaySpec, original: RowFigures | None = None, *, source: str = "") -> dict:
    """The spec as the script reads it: inputs, the op's FLOPs and bytes per call, and (for the
    reader's comparison) what the trace recorded for the row."""
    data = {**spec.to_dict(), "flops": op_flops(spec), "bytes": op_bytes(spec), "source": source,
            "tf32": original is not None and traced_tf32(spec, original)}
    if original is not None:
        data["original"] = {"row": original.row, "op_us": original.op_us, "kernel_us": original.kernel_us,
                            "kernels": [list(k) for k in original.kernels], "device_name": original.device_name,
                            "same_shape_calls": original.same_shape_calls, "median_op_us": original.median_op_us,
                            "median_kernel_us": original.median_kernel_us}
    return data


def traced_tf32(spec: ReplaySpec, original: RowFigures) -> bool:
    """The trace ran this float32 op's GEMM on TF32 tensor cores (its kernel's name says so):
    the replay allows TF32 too, as the traced program did (the trace records no flag for it)."""
    return "float32" in spec.dtypes and any(is_gemm_kernel(name) and gemm_kernel_dtype(name) == "tf32"
                                            for name, _ in original.kernels)


def export_script(spec: ReplaySpec, original: RowFigures | None = None, *, source: str = "") -> str:
    """The text of a Python file that replays ``spec`` under torch.profiler when run."""
    body = SCRIPT_BODY.read_text(encoding="utf-8")
    if body.count(_SPEC_LINE) != 1:
        raise RuntimeError(f"{SCRIPT_BODY} must hold the line {_SPEC_LINE!r} exactly once")
    data = json.dumps(script_spec(spec, original, source=source), indent=1)
    header = (f"# Replay of {spec.op} {spec.shapes_text} exported by Profiler Lab"
              f"{f' from {source}' if source else ''}.\n# Needs torch only: python this_file.py --help\n")
    return header + body.replace(_SPEC_LINE, f"SPEC: dict = json.loads({data!r})")

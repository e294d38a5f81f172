"""A run's artifacts on disk, as ``python -m lab profile --out DIR`` writes them: the trace
(``trace.json.gz``), torch's table (``key_averages.csv``), a JSON summary of what ran and how long
each part took (``summary.json``), and a distributed run's rank traces under
tensorboard_trace_handler's names."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

__all__ = ["summary", "write_artifacts", "write_rank_traces"]


def write_rank_traces(result, out: Path) -> list[Path]:
    """A distributed run's traces in ``out`` under tensorboard_trace_handler's names; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in result.rank_traces:
        (out / name).write_bytes(data)
        paths.append(out / name)
    return paths


def write_artifacts(result, out: Path, *, trace: bool = True) -> None:
    """trace.json.gz (``trace``), key_averages.csv and summary.json for one ``RunResult`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    if trace:
        (out / "trace.json.gz").write_bytes(result.trace_gz)
    result.key_averages.to_csv(out / "key_averages.csv", index=False)
    (out / "summary.json").write_text(json.dumps(summary(result), indent=2) + "\n", encoding="utf-8")


def summary(result) -> dict:
    """Plain-JSON description of a run: what ran, where, how long each part took."""
    t = result.timing
    return {
        "config": result.config.to_dict(),
        "device": dataclasses.asdict(result.device),
        "timing": {
            "method": t.method,
            "profiled_us": list(t.profiled_us),
            "unprofiled_us": list(t.unprofiled_us),
            "profiled_median_us": _finite(t.profiled_median_us),
            "unprofiled_median_us": _finite(t.unprofiled_median_us),
            "overhead_pct": _finite(t.overhead_pct),
            "compile_s": t.compile_s,
        },
        "stage_s": dict(result.stage_s),
        "warnings": list(result.warnings),
        "trace_stem": result.trace_stem,
    }


def _finite(value: float) -> float | None:
    # JSON has no NaN: an empty timing becomes null.
    return value if math.isfinite(value) else None

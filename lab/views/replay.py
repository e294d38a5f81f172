"""The Table's "Replay here", as data: which ops of a trace can be replayed, the run that replays
one (or a variant of a replay), and a replay beside the row it replays.

The replay runs through the lab's queue like any run (``lab.replay.workload``); its figures come
from its own trace, read like every trace, and the original's from the traced row, kept in the
run's config. The achieved rate and % of roof on both sides are the explain op model's
(``lab.explain.roofs``: the same rows as the Table's "ops against their roof").
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lab.core.config import RunConfig
from lab.explain import Explanation
from lab.replay import HotOp, find_row, hot_ops, row_figures, spec_of_row
from lab.replay.report import run_side_by_side
from lab.replay.workload import CALLS_PER_STEP, REPLAY_WORKLOAD, ReplayRequest, recorded_dtype
from lab.trace import Trace

__all__ = ["VARIANTS", "ReplayChoice", "is_replay", "replay_choices", "replay_comparison", "replay_config",
           "replay_title", "variant_config", "variant_of"]

# One click each: the variant's change to the run (dtype, inputs' layout, torch.compile).
VARIANTS: dict[str, dict] = {
    "as recorded": {}, "TF32": {"dtype": "tf32"}, "bfloat16": {"dtype": "bfloat16"},
    "float16": {"dtype": "float16"}, "contiguous inputs": {"layout": "contiguous"},
    "channels_last": {"layout": "channels_last"}, "torch.compile": {"compile": True},
}
_ROOF_FIGURES = ("us_per_call", "tflops", "gbs", "pct_of_roof", "bound", "kernel")


@dataclass(frozen=True)
class ReplayChoice:
    """One replayable (op, shapes, dtypes) of a trace, as the form lists it."""

    label: str
    hot: HotOp


def replay_choices(trace: Trace) -> list[ReplayChoice]:
    """The trace's replayable ops by total time (an empty list: nothing to replay, or no shapes)."""
    out = []
    for h in hot_ops(trace):
        if h.refusal is None:
            label = f"{h.op} {h.shapes} {h.types} · {h.calls} calls, median {h.median_us:,.1f} µs ({h.basis})"
            out.append(ReplayChoice(label=label, hot=h))
    return out


def _roof_row(explanation: Explanation | None, op: str, dims: str | None = None) -> dict:
    roofs = explanation.roofs if explanation is not None else pd.DataFrame()
    if not len(roofs):
        return {}
    rows = roofs[(roofs["name"] == op) & ((roofs["input_dims"] == dims) if dims is not None else True)]
    if not len(rows):
        return {}
    row = rows.iloc[0]
    return {k: (None if pd.isna(row[k]) else row[k]) if k != "bound" else str(row[k]) for k in _ROOF_FIGURES}


def replay_config(trace: Trace, hot: HotOp, explanation: Explanation | None, *, source: str, device: str,
                  variant: str = "as recorded") -> RunConfig:
    """The run that replays ``hot``'s typical call (``ConfigError`` / ``ReplayRefusal`` say why not)."""
    row = find_row(trace, hot.op, shapes=hot.shapes)
    request = ReplayRequest.of_row(spec_of_row(trace, row), row_figures(trace, row), source=source)
    spec = {**request.spec, "original_roof": _roof_row(explanation, hot.op, hot.shapes)}
    base = RunConfig(workload=REPLAY_WORKLOAD, replay=ReplayRequest(spec=spec, source=source).to_json(),
                     dtype=recorded_dtype(spec), device=device, step_label="replay")
    return variant_config(base, variant)


def variant_config(config: RunConfig, variant: str) -> RunConfig:
    """A replay run's ``variant`` (a key of ``VARIANTS``), from the as-recorded one's config."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    request = ReplayRequest.from_json(config.replay)
    change = VARIANTS[variant]
    layout = change.get("layout", "as recorded")
    replay = ReplayRequest(spec=request.spec, layout=layout, source=request.source).to_json()
    return config.replace(replay=replay, dtype=change.get("dtype", recorded_dtype(request.spec)),
                          compile=bool(change.get("compile", False)))


def replay_title(config: RunConfig) -> str:
    """``op [shapes]`` of a replay run."""
    return ReplayRequest.from_json(config.replay).title


def is_replay(config: RunConfig | None) -> bool:
    return config is not None and config.workload == REPLAY_WORKLOAD and bool(config.replay)


def variant_of(config: RunConfig) -> str:
    """The ``VARIANTS`` key a replay run's config is."""
    request = ReplayRequest.from_json(config.replay)
    for name, change in VARIANTS.items():
        if (change.get("dtype", recorded_dtype(request.spec)) == config.dtype
                and change.get("layout", "as recorded") == request.layout
                and bool(change.get("compile", False)) == config.compile):
            return name
    return "a variant"


def replay_comparison(config: RunConfig, trace: Trace, explanation: Explanation | None, *,
                      device_name: str) -> tuple[str, pd.DataFrame, list[str]]:
    """(title, the figures side by side, notes) of a replay run against the row it replays."""
    request = ReplayRequest.from_json(config.replay)
    spec = request.spec
    variant = variant_of(config)
    step_us = explanation.attribution.step_us if explanation is not None else float("nan")
    dtype = "as recorded" if config.dtype == recorded_dtype(spec) else config.dtype
    data = run_side_by_side(spec, trace, device_name=device_name, dtype=dtype, layout=request.layout,
                            compiled=config.compile, step_us=step_us, calls_per_step=CALLS_PER_STEP)
    original = spec.get("original_roof", {})
    replayed = _roof_row(explanation, spec["op"])
    t, r = data["trace"], data["replay"]
    rows = [
        ("Device", t["device"], r["device"]),
        (f"{data['compared'][0].upper()}{data['compared'][1:]} per call (µs, median)", _num(t["us"]), _num(r["us"])),
        ("TFLOP/s", _num(original.get("tflops", t["tflops"])), _num(replayed.get("tflops", r["tflops"]))),
        ("GB/s", _num(original.get("gbs", t["gbs"])), _num(replayed.get("gbs", r["gbs"]))),
        ("% of roof", _num(original.get("pct_of_roof", t.get("pct_of_roof"))),
         _num(replayed.get("pct_of_roof", r.get("pct_of_roof")))),
        ("Bound", original.get("bound") or "—", replayed.get("bound") or "—"),
        ("Kernels", ", ".join(dict.fromkeys(t["kernels"])) or "—", ", ".join(dict.fromkeys(r["kernels"])) or "—"),
    ]
    frame = pd.DataFrame(rows, columns=["Figure", f"Trace ({request.source or 'the row'})", f"Replay ({variant})"])
    notes = list(data["notes"])
    if data["ratio"]:
        notes.insert(0, f"replay / trace: {data['ratio']:.3f}× ({data['compared']}, median over "
                        f"{t['same_shape_calls']} traced and {r['calls']} replayed calls); kernels "
                        + ("the same" if data["same_kernels"] else "differ"))
    return f"Replay of {request.title}", frame, notes


def _num(value) -> str:
    if value is None:
        return "—"
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    return "—" if value != value else f"{value:,.2f}"


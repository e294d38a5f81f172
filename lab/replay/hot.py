"""The ops of a trace worth replaying: its calls of the replayed op classes grouped by op, input
shapes and dtypes, largest total time first (GPU time on a GPU trace, else the op's own), with
whether each group can be rebuilt."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.analysis.columns import codes
from lab.replay.rows import kernel_us_of_rows, spec_of_row
from lab.replay.spec import OP_CLASSES, ReplayRefusal
from lab.trace import Trace

__all__ = ["HotOp", "hot_ops"]

_REPLAYED = tuple(op for ops in OP_CLASSES.values() for op in ops)


@dataclass(frozen=True)
class HotOp:
    op: str
    shapes: str  # "Input Dims" as the trace writes it
    types: str  # "Input type"
    calls: int
    total_us: float  # summed over the calls: kernel time on a GPU trace, else the op's CPU time
    median_us: float
    basis: str  # "kernel time" or "op CPU time"
    refusal: str | None  # why it cannot be replayed, None when it can

    def to_dict(self) -> dict:
        return {"op": self.op, "shapes": self.shapes, "types": self.types, "calls": self.calls,
                "total_us": self.total_us, "median_us": self.median_us, "basis": self.basis,
                "replayable": self.refusal is None, "refusal": self.refusal}


def hot_ops(trace: Trace, *, top: int = 20) -> list[HotOp]:
    """The ``top`` groups of (op, shapes, dtypes) of the replayed op classes by total time."""
    ev = trace.events
    name_codes, names = codes(ev["name"])
    cpu = ev["lane_kind"].eq("cpu").to_numpy()
    rows = np.flatnonzero(cpu & np.isin(names, _REPLAYED)[name_codes])
    if not len(rows):
        return []
    on_gpu = trace.has_gpu and len(trace.flows) > 0
    times = kernel_us_of_rows(trace, rows) if on_gpu else ev["dur_us"].to_numpy()[rows]
    keys = np.stack([name_codes[rows], codes(ev["input_dims"])[0][rows], codes(ev["input_type"])[0][rows]], axis=1)
    _, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.reshape(-1)
    totals = np.bincount(group, weights=times)
    out = []
    for g in np.argsort(-totals, kind="stable")[:top]:
        members = rows[group == g]
        first = int(members[0])
        try:
            spec_of_row(trace, first)
            refusal = None
        except ReplayRefusal as exc:
            refusal = str(exc)
        out.append(HotOp(op=str(ev["name"].iat[first]), shapes=str(ev["input_dims"].iat[first]),
                         types=str(ev["input_type"].iat[first]), calls=len(members), total_us=float(totals[g]),
                         median_us=float(np.median(times[group == g])),
                         basis="kernel time" if on_gpu else "op CPU time", refusal=refusal))
    return out

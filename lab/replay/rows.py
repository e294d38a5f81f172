"""A trace's op rows for the replay: finding one (by name, index, shapes), its spec, and what the
trace measured for it (the op's time, the kernels it launched, their time)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from lab.replay.spec import ReplayRefusal, ReplaySpec, build_spec
from lab.trace import Trace

__all__ = ["RowFigures", "find_row", "kernel_us_of_rows", "row_figures", "spec_of_row"]

_OP_CATS = ("cpu_op", "user_annotation", "")


@dataclass(frozen=True)
class RowFigures:
    """What the trace recorded for one op row."""

    row: int
    op: str
    op_us: float  # the op's CPU-side duration
    kernel_us: float  # its kernels' summed GPU time (0 on a CPU trace)
    kernels: tuple[tuple[str, float], ...]  # (name, µs) of each GPU activity it launched, in order
    device_name: str = ""
    # The op's calls with the same input shapes and dtypes (this one included): how many, and
    # their median op and kernel times (one call can run cold or beside other work).
    same_shape_calls: int = 1
    median_op_us: float = float("nan")
    median_kernel_us: float = float("nan")


def _text(trace: Trace, column: str, row: int) -> str:
    value = trace.events[column].iat[row] if column in trace.events.columns else ""
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def spec_of_row(trace: Trace, row: int) -> ReplaySpec:
    """The replay spec of ``trace.events`` row ``row`` (``ReplayRefusal`` if it cannot be rebuilt)."""
    texts = [_text(trace, c, row) for c in ("input_dims", "input_type", "input_strides", "concrete_inputs")]
    return build_spec(_text(trace, "name", row), *texts, record_shapes=trace.meta.record_shapes)


def find_row(trace: Trace, op: str, *, index: int | None = None, shapes: str | None = None) -> int:
    """The events row of op ``op``: the ``index``-th call (0 = first) among those whose
    "Input Dims" equal ``shapes`` when given (compared as lists, spacing aside); without an
    index, the call of median duration among them."""
    ev = trace.events
    rows = np.flatnonzero((ev["name"] == op).to_numpy() & ev["lane_kind"].eq("cpu").to_numpy())
    if not len(rows):
        raise ReplayRefusal(f"the trace has no {op} op; name one of its CPU ops (as the Table lists them)")
    if shapes is not None:
        want = _dims(shapes)
        rows = np.array([r for r in rows if _dims(_text(trace, "input_dims", int(r))) == want], dtype=np.int64)
        if not len(rows):
            raise ReplayRefusal(f"no {op} call has input shapes {shapes}; leave out --shapes to list them")
    if index is None:  # the typical call: the first of median duration (the first call often runs cold)
        dur = ev["dur_us"].to_numpy()[rows]
        order = np.argsort(dur, kind="stable")
        return int(rows[order[(len(rows) - 1) // 2]])
    if not -len(rows) <= index < len(rows):
        raise ReplayRefusal(f"{op} has {len(rows)} matching calls; choose an index from 0 to {len(rows) - 1}")
    return int(rows[index])


def _dims(text: str):
    try:
        return ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        raise ReplayRefusal(f"shapes {text!r} are not a list like [[4096, 4096], [4096, 4096]]") from None


def row_figures(trace: Trace, row: int) -> RowFigures:
    """The op's duration and the GPU work launched from its lane while it ran (its own launches
    and its children's), through the trace's launch → kernel flows; and the same figures'
    medians over the op's calls of the same shapes and dtypes."""
    ev = trace.events
    peers = _same_shape_rows(trace, row)
    kernels = _launched(trace, row)
    per_call = kernel_us_of_rows(trace, peers)
    props = trace.meta.device_properties
    device = str(props[0].get("name", "")) if props and isinstance(props[0], dict) else ""
    op_us = float(ev["dur_us"].iat[row])
    return RowFigures(row=row, op=_text(trace, "name", row), op_us=op_us,
                      kernel_us=float(sum(d for _, d in kernels)), kernels=tuple(kernels), device_name=device,
                      same_shape_calls=len(peers), median_op_us=float(np.median(ev["dur_us"].to_numpy()[peers])),
                      median_kernel_us=float(np.median(per_call)))


def _same_shape_rows(trace: Trace, row: int) -> np.ndarray:
    ev = trace.events
    same = (ev["name"] == ev["name"].iat[row]).to_numpy() & ev["lane_kind"].eq("cpu").to_numpy()
    for column in ("input_dims", "input_type"):
        same &= (ev[column] == ev[column].iat[row]).to_numpy()
    return np.flatnonzero(same)


def _launched(trace: Trace, row: int) -> list[tuple[str, float]]:
    """(name, µs) of the GPU activities launched from ``row``'s lane inside its span, by start."""
    ev, flows = trace.events, trace.flows
    if not len(flows):
        return []
    start = float(ev["ts_us"].iat[row])
    end = start + float(ev["dur_us"].iat[row])
    launch, gpu = flows["launch_row"].to_numpy(), flows["gpu_row"].to_numpy()
    lane, ts = ev["lane_order"].to_numpy(), ev["ts_us"].to_numpy()
    inside = (lane[launch] == lane[row]) & (ts[launch] >= start) & (ts[launch] <= end)
    picked = gpu[inside]
    picked = picked[np.argsort(ts[picked], kind="stable")]
    names, durs = ev["name"].to_numpy()[picked], ev["dur_us"].to_numpy()[picked]
    return [(str(n), float(d)) for n, d in zip(names, durs, strict=True)]


def kernel_us_of_rows(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Each row's GPU time: the summed durations of the GPU activities launched from its lane
    inside its span (``_launched``'s sum, for many rows at once: one sort per lane)."""
    ev, flows = trace.events, trace.flows
    out = np.zeros(len(rows), dtype=np.float64)
    if not len(flows) or not len(rows):
        return out
    launch, gpu = flows["launch_row"].to_numpy(), flows["gpu_row"].to_numpy()
    lane, ts, dur = ev["lane_order"].to_numpy(), ev["ts_us"].to_numpy(), ev["dur_us"].to_numpy()
    for lane_id in np.unique(lane[rows]):
        mine = lane[launch] == lane_id
        order = np.argsort(ts[launch[mine]], kind="stable")
        starts = ts[launch[mine]][order]
        total = np.concatenate([[0.0], np.cumsum(dur[gpu[mine]][order])])
        at = np.flatnonzero(lane[rows] == lane_id)
        begin, end = ts[rows[at]], ts[rows[at]] + dur[rows[at]]
        out[at] = total[np.searchsorted(starts, end, side="right")] - total[np.searchsorted(starts, begin, side="left")]
    return out

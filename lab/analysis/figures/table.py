"""Figures of the key_averages table and of the op tree: a row's Self vs Total, its device time,
the rows by input shape, which op a call goes through, which implementation ran."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lab.analysis.bundle import Run
from lab.analysis.figures.steps import event_rows, in_steps, step_count

__all__ = [
    "child_calls_per_step", "child_op", "on_other_thread", "op_device_us", "ops_present", "self_cuda_over_self_cpu",
    "self_share_pct", "shape_row_count", "shape_rows", "top_self_cpu_row", "top_shape",
]  # fmt: skip


def _row(run: Run, name: str):
    ka = run.analysis.key_averages
    return ka[ka["name"].astype(str) == name]


def op_device_us(run: Run, name: str) -> float:
    """GPU time of the kernels launched under the operator ``name`` (its key_averages row's
    device total), in µs: 0 for an op that only changes a view."""
    rows = _row(run, name)
    return float(rows["device_total_us"].sum()) if len(rows) else 0.0


def self_cuda_over_self_cpu(run: Run, name: str) -> float:
    """The key_averages row ``name``: Self CUDA over Self CPU."""
    rows = _row(run, name)
    cpu = float(rows["self_cpu_us"].sum())
    return float(rows["self_device_us"].sum()) / cpu if cpu > 0 else float("nan")


def self_share_pct(run: Run, op: str) -> float:
    """``op``'s Self CPU over its CPU total in the key_averages table, in %."""
    rows = _row(run, op)
    total = float(rows["cpu_total_us"].sum())
    return 100.0 * float(rows["self_cpu_us"].sum()) / total if total > 0 else float("nan")


def top_self_cpu_row(run: Run) -> str:
    """The key_averages row with the largest Self CPU time (the table's default sort)."""
    ka = run.analysis.key_averages
    return str(ka.loc[ka["self_cpu_us"].idxmax(), "name"]) if len(ka) else ""


def shape_rows(run: Run, op: str) -> list[tuple[str, int, float]]:
    """``op``'s rows grouped by input shape: (input shapes, calls, Self CUDA µs on a GPU trace
    else Self CPU µs), the largest time first."""
    by = run.analysis.key_averages_by_shape
    rows = by[by["name"].astype(str) == op]
    col = "self_device_us" if run.trace.has_gpu else "self_cpu_us"
    out = [(str(s), int(c), float(t)) for s, c, t in zip(rows["input_shapes"], rows["count"], rows[col])]
    return sorted(out, key=lambda r: -r[2])


def shape_row_count(run: Run, op: str) -> float:
    """How many rows ``op`` has grouped by input shape."""
    return float(len(shape_rows(run, op)))


def top_shape(run: Run, op: str) -> str:
    """The input shapes of ``op``'s by-shape row with the most time ("" if none)."""
    rows = shape_rows(run, op)
    return rows[0][0] if rows else ""


def on_other_thread(run: Run, prefix: str, label: str) -> float:
    """1.0 when the CPU operators whose name starts with ``prefix`` (autograd's
    ``evaluate_function: …Backward0``) run on other lanes (threads) than the annotation
    ``label``, 0.0 when on the same one, NaN when either is missing."""
    ev = run.trace.events
    names, lanes = ev["name"].astype(str).to_numpy(), ev["lane"].astype(str).to_numpy()
    ops = event_rows(run, ("cpu_op",))
    mine = {lanes[i] for i in ops if names[i].startswith(prefix)}
    where = {lanes[i] for i in event_rows(run, ("user_annotation",), (label,))}
    if not mine or not where:
        return float("nan")
    return 0.0 if mine & where else 1.0


def child_op(run: Run, name: str) -> str:
    """The op most often called directly by ``name`` (its child in the trace), "" if none."""
    parent = run.analysis.links.parent
    names = run.trace.events["name"].astype(str).to_numpy()
    kids = [names[i] for i in event_rows(run, ("cpu_op",)) if parent[i] >= 0 and names[parent[i]] == name]
    return max(set(kids), key=kids.count) if kids else ""


def child_calls_per_step(run: Run, parent: str, child: str) -> float:
    """Per active step: calls of the CPU operator ``child`` nested (at any depth) under ``parent``."""
    names = run.trace.events["name"].astype(str).to_numpy()
    rows = event_rows(run, ("cpu_op",), (child,), lane_kind="cpu")
    rows = rows[in_steps(run, run.trace.events["ts_us"].to_numpy(dtype=float)[rows])]
    up = run.analysis.links.parent
    found = 0
    for row in rows:
        cur = up[row]
        while cur >= 0 and names[cur] != parent:
            cur = up[cur]
        found += cur >= 0
    return found / step_count(run)


def ops_present(run: Run, names: Sequence[str]) -> str:
    """The first of ``names`` that the trace calls as a CPU operator ("" if none): which
    implementation ran (e.g. SDPA's backend op)."""
    called = set(np.unique(run.trace.events["name"].astype(str).to_numpy()))
    return next((n for n in names if n in called), "")

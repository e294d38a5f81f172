"""The TensorBoard plugin's Kernel view: per kernel name, and per kernel and the op that launched
it, the calls, durations, "Tensor Cores used", and the launch figures CUPTI wrote into each
kernel event's args (est. achieved occupancy, blocks per SM, registers per thread, shared memory).

As the plugin computes them (kineto ``tb_plugin/torch_tb_profiler/profiler/`` at 041e7ce9):

* **by name** (``kernel_parser.py`` L20-47): every ``kernel`` event, grouped by name; calls, total,
  mean, max, min of the durations; ``blocks_per_sm`` and ``occupancy_pct`` are duration-weighted
  means of the args "blocks per SM" and "est. achieved occupancy %", a missing value counted as
  0 (``x.fillna(0)``, L28-30); a group of zero total duration gets 0.
* **by kernel and op** (``op_agg.py`` ``aggregate_kernels``, L97-116): one row per (kernel name, op
  name, grid, block, registers per thread, shared memory); the same sums, weighted means
  ``Σ value·dur / Σ dur``. The op is the CPU op whose External id the kernel carries (the
  plugin reaches it through the launch call's External id: ``event_parser.py`` L92-99); "N/A"
  when there is none.
* **Tensor Cores**: ``lab.analysis.tensor_cores`` (the plugin's name list, and the lab's rule).

Registers and shared memory on the by-name rows are the most common value of its launches (the
plugin shows them only on the by-op rows, where they are part of the key).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.columns import mask_in, texts
from lab.analysis.tensor_cores import op_tensor_core_eligible, plugin_uses_tensor_cores, uses_tensor_cores
from lab.trace.load import Trace

__all__ = ["KERNEL_BY_NAME_COLUMNS", "KERNEL_BY_OP_COLUMNS", "NO_OP", "KernelView", "kernel_view"]

NO_OP = "N/A"  # op_agg.py L101: a kernel whose launch no op owns
KERNEL_BY_NAME_COLUMNS = (
    "name", "calls", "total_us", "mean_us", "max_us", "min_us", "share_pct", "tensor_cores",
    "tensor_cores_plugin", "occupancy_pct", "blocks_per_sm", "registers_per_thread", "shared_memory_bytes",
    "occupancy_missing",
)  # fmt: skip
KERNEL_BY_OP_COLUMNS = (
    "name", "op", "grid", "block", "registers_per_thread", "shared_memory_bytes", "tensor_cores",
    "tensor_cores_plugin", "op_tensor_core_eligible", "calls", "total_us", "mean_us", "max_us", "min_us",
    "occupancy_pct", "blocks_per_sm",
)  # fmt: skip


@dataclass(frozen=True)
class KernelView:
    """``by_name`` and ``by_op`` (columns above, largest total first); the share of kernel time
    on Tensor Cores by the lab's rule and by the plugin's (its "Tensor Cores" pie, L405-408 of
    ``run_generator.py``); NaN without kernels."""

    by_name: pd.DataFrame
    by_op: pd.DataFrame
    tensor_core_pct: float
    tensor_core_plugin_pct: float

    @property
    def has_kernels(self) -> bool:
        return len(self.by_name) > 0


def kernel_view(trace: Trace) -> KernelView:
    ev = trace.events
    rows = np.flatnonzero(mask_in(ev["cat"], ("kernel",)))
    if not len(rows):
        empty_name = pd.DataFrame({c: pd.Series(dtype=float) for c in KERNEL_BY_NAME_COLUMNS})
        empty_op = pd.DataFrame({c: pd.Series(dtype=float) for c in KERNEL_BY_OP_COLUMNS})
        return KernelView(empty_name, empty_op, float("nan"), float("nan"))
    op_name, op_types = _launching_ops(trace, rows)
    k = pd.DataFrame({
        "name": texts(ev["name"], rows), "op": op_name, "op_input_type": op_types,
        "grid": texts(ev["grid"], rows), "block": texts(ev["block"], rows),
        "registers_per_thread": np.nan_to_num(ev["registers_per_thread"].to_numpy(dtype=float)[rows]),
        "shared_memory_bytes": np.nan_to_num(ev["shared_memory_bytes"].to_numpy(dtype=float)[rows]),
        "dur_us": ev["dur_us"].to_numpy(dtype=float)[rows],
        "occupancy_pct": np.nan_to_num(ev["occupancy_pct"].to_numpy(dtype=float)[rows]),
        "blocks_per_sm": np.nan_to_num(ev["blocks_per_sm"].to_numpy(dtype=float)[rows]),
    })
    # Once per distinct name (and op input types), not per launch: kernel names run to thousands
    # of characters, and the regexes per launch took 0.5 s of 0.74 s on the 2,984 kernels of
    # bench/data/transformer_step_h200.json.gz — inside every analyze().
    pairs = list(zip(k["name"], k["op_input_type"]))
    lab_rule = {pair: uses_tensor_cores(*pair) for pair in dict.fromkeys(pairs)}
    plugin_rule = {name: plugin_uses_tensor_cores(name) for name in dict.fromkeys(k["name"])}
    k["tensor_cores"] = [lab_rule[pair] for pair in pairs]
    k["tensor_cores_plugin"] = [plugin_rule[name] for name in k["name"]]
    total = float(k["dur_us"].sum())
    by_name = _grouped(k, ["name"])
    by_name["share_pct"] = 100.0 * by_name["total_us"] / total if total > 0 else 0.0
    modes = k.groupby("name", sort=False)[["registers_per_thread", "shared_memory_bytes"]].agg(
        lambda s: s.mode().iloc[0])
    by_name = by_name.join(modes, on="name")
    by_op = _grouped(k, ["name", "op", "grid", "block", "registers_per_thread", "shared_memory_bytes"])
    launched_tc = set(k.loc[k["tensor_cores"], "op"])
    by_op["op_tensor_core_eligible"] = [op_tensor_core_eligible(op, launched_tensor_core_kernel=op in launched_tc)
                                        for op in by_op["op"]]
    tc = 100.0 * float(k.loc[k["tensor_cores"], "dur_us"].sum()) / total if total > 0 else float("nan")
    tc_plugin = 100.0 * float(k.loc[k["tensor_cores_plugin"], "dur_us"].sum()) / total if total > 0 else float("nan")
    return KernelView(by_name=by_name[list(KERNEL_BY_NAME_COLUMNS)].reset_index(drop=True),
                      by_op=by_op[list(KERNEL_BY_OP_COLUMNS)].reset_index(drop=True),
                      tensor_core_pct=tc, tensor_core_plugin_pct=tc_plugin)


def _grouped(k: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Calls, durations and the duration-weighted launch figures per group (sorted by total)."""
    weighted = k.assign(occ_x_dur=k["occupancy_pct"] * k["dur_us"], bps_x_dur=k["blocks_per_sm"] * k["dur_us"])
    g = weighted.groupby(keys, sort=False, dropna=False).agg(
        calls=("dur_us", "size"), total_us=("dur_us", "sum"), mean_us=("dur_us", "mean"),
        max_us=("dur_us", "max"), min_us=("dur_us", "min"), occ=("occ_x_dur", "sum"), bps=("bps_x_dur", "sum"),
        tensor_cores=("tensor_cores", "first"), tensor_cores_plugin=("tensor_cores_plugin", "first"),
        occ_max=("occupancy_pct", "max"))
    positive = g["total_us"] > 0
    g["occupancy_pct"] = np.where(positive, g["occ"] / g["total_us"].where(positive, 1.0), 0.0)
    g["blocks_per_sm"] = np.where(positive, g["bps"] / g["total_us"].where(positive, 1.0), 0.0)
    g["occupancy_missing"] = g["occ_max"] <= 0  # CUPTI wrote 0 (or nothing) for every launch
    return g.drop(columns=["occ", "bps", "occ_max"]).reset_index().sort_values("total_us", ascending=False,
                                                                             kind="stable")


def _launching_ops(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel row: the name and input types of the ``cpu_op`` with its External id."""
    ev = trace.events
    ext = ev["external_id"].to_numpy()
    ops = np.flatnonzero(mask_in(ev["cat"], ("cpu_op",)) & (ext >= 0))
    names = np.full(len(rows), NO_OP, dtype=object)
    types = np.full(len(rows), "", dtype=object)
    if not len(ops):
        return names, types
    op_ext, first = np.unique(ext[ops], return_index=True)
    j = np.searchsorted(op_ext, ext[rows])
    hit = (ext[rows] >= 0) & (j < len(op_ext)) & (op_ext[np.minimum(j, len(op_ext) - 1)] == ext[rows])
    op_rows = ops[first[j[hit]]]
    names[hit] = texts(ev["name"], op_rows)
    types[hit] = texts(ev["input_type"], op_rows)
    return names, types

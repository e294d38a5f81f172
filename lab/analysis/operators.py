"""Who launched what, and the two per-name tables: operators (key_averages-like) and kernels.

Every function reads only ``Trace.events``, ``Trace.flows`` and ``Trace.meta`` (see
``lab/trace/load.py`` for the columns) and works the same on a fresh run and on an uploaded trace.

* *self time* — an event's duration minus the durations of its direct children in the same
  lane (nesting from the ``depth`` column), as key_averages' "Self CPU".
* *owner* of GPU activity — the CPU op that launched it: the parent of the launching runtime
  call (``cudaLaunchKernel`` …) found through ``Trace.flows``, or, when a trace has no flows,
  the CPU op carrying the same "External id".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.columns import (
    codes,
    frame,
    gpu_activity_mask,
    gpu_activity_rows,
    group_ids,
    group_min_max,
    group_mode,
    group_mode_values,
    mask_in,
    parent_rows,
    texts,
)
from lab.analysis.table.key_averages import trace_key_averages
from lab.trace.load import Trace
from lab.vocab import (
    COMPILE_PATTERN,
    LAUNCH_CATS,
    PROFILER_STEP_NAME,
    PROFILER_STEP_PREFIX,
    SYNC_NAMES,
)

__all__ = ["KERNEL_COLUMNS", "OPERATOR_COLUMNS", "Links", "build_links", "host_work_us", "kernel_summary",
           "operator_summary"]

# --------------------------------------------------------------------------- links


@dataclass(frozen=True)
class Links:
    """Who contains whom and who launched what, as positions into ``trace.events``.

    ``parent[i]``: direct parent of event i in its lane (-1 at the top).
    ``launch[i]``: for GPU activity i, the CPU row that launched it (-1 if unknown).
    ``owner[i]``: for GPU activity i, the CPU op it belongs to (parent of the launch call), -1 if none.
    """

    parent: np.ndarray
    launch: np.ndarray
    owner: np.ndarray


def build_links(trace: Trace) -> Links:
    ev = trace.events
    n = len(ev)
    parent = parent_rows(ev["depth"].to_numpy(), ev["lane_order"].to_numpy())
    launch = np.full(n, -1, dtype=np.int64)
    flows = trace.flows
    if len(flows):
        launch[flows["gpu_row"].to_numpy(dtype=np.int64)] = flows["launch_row"].to_numpy(dtype=np.int64)
    is_launch_call = mask_in(ev["cat"], LAUNCH_CATS)
    owner = launch.copy()
    has = owner >= 0
    # The op that owns GPU work is the one around its launch call, not the call itself.
    via_call = has & is_launch_call[np.where(has, owner, 0)]
    owner[via_call] = parent[owner[via_call]]
    # Traces without flows (older Kineto, stripped uploads): fall back to the shared External id.
    is_gpu = gpu_activity_mask(trace)
    orphan = np.flatnonzero(is_gpu & (launch < 0) & (ev["external_id"].to_numpy() >= 0))
    if len(orphan):
        is_op = mask_in(ev["cat"], ("cpu_op", "user_annotation")) & mask_in(ev["lane_kind"], ("cpu",))
        op_ids = pd.Series(np.flatnonzero(is_op), index=ev["external_id"].to_numpy()[is_op])
        op_ids = op_ids[~op_ids.index.duplicated(keep="last")]  # innermost op wins on ties
        found = op_ids.reindex(ev["external_id"].to_numpy()[orphan]).to_numpy()
        ok = ~np.isnan(found)
        owner[orphan[ok]] = found[ok].astype(np.int64)
    return Links(parent=parent, launch=launch, owner=owner)


# --------------------------------------------------------------------------- operators

OPERATOR_COLUMNS = ("name", "cat", "count", "self_us", "total_us", "mean_us", "self_share_pct",
                    "device_us", "self_device_us")


def operator_summary(trace: Trace, *, group_by_shape: bool = False,
                     key_averages: pd.DataFrame | None = None) -> pd.DataFrame:
    """The CPU-side rows of torch's ``key_averages()`` rebuilt from the trace
    (``lab.analysis.table.key_averages``: python frames are call stacks, not ops; same-name nesting
    collapsed; ``ProfilerStep*``; device time through torch's links), plus each row's category.

    Columns: name, cat, [input_dims], count, self_us, total_us, mean_us, self_share_pct
    (of all rows' self time, like "Self CPU %"), device_us (torch's device total: GPU activity
    launched by the op or its descendants), self_device_us (launched by the op itself).
    Sorted by self_us, largest first. ``key_averages``: that table, when already computed
    (grouped by input shape when ``group_by_shape``).
    """
    keys = ["name", "cat"] + (["input_dims"] if group_by_shape else [])
    columns = list(OPERATOR_COLUMNS[:2]) + keys[2:] + list(OPERATOR_COLUMNS[2:])
    ka = key_averages if key_averages is not None else trace_key_averages(trace, group_by_input_shape=group_by_shape)
    cpu = ka[ka["device_type"] == "cpu"]
    if cpu.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in keys else float) for c in columns})
    self_us = cpu["self_cpu_us"].to_numpy(dtype=float)
    total_self = self_us.sum()
    count = cpu["count"].to_numpy(dtype=np.int64)
    total_us = cpu["cpu_total_us"].to_numpy(dtype=float)
    out = {
        "name": cpu["name"].to_numpy(dtype=object), "cat": _category_of(trace, cpu["name"]),
        "input_dims": cpu["input_shapes"].to_numpy(dtype=object),
        "count": count, "self_us": self_us, "total_us": total_us, "mean_us": total_us / np.maximum(count, 1),
        "self_share_pct": 100.0 * self_us / total_self if total_self > 0 else np.zeros(len(cpu)),
        "device_us": cpu["device_total_us"].to_numpy(dtype=float),
        "self_device_us": cpu["self_device_us"].to_numpy(dtype=float),
    }
    return frame({c: out[c] for c in columns}, sort_by="self_us")


def _category_of(trace: Trace, names: pd.Series) -> np.ndarray:
    """Each row name's trace category (its CPU events' most common one; ``ProfilerStep*`` is the
    steps' own). Counted on integer codes: a groupby over strings took 115 ms of 150 on the
    52k-event transformer trace."""
    ev = trace.events
    rows = np.flatnonzero(mask_in(ev["lane_kind"], ("cpu",)) & ~mask_in(ev["cat"], ("python_function",)))
    name_codes, name_text = codes(ev["name"])
    cat_codes, cat_text = codes(ev["cat"])
    ids: dict[str, int] = {}  # each name's row key (ProfilerStep#N → ProfilerStep*), numbered as first seen
    key_of_code = np.array([ids.setdefault(PROFILER_STEP_NAME if t.startswith(PROFILER_STEP_PREFIX) else t, len(ids))
                            for t in map(str, name_text)], dtype=np.int64)
    keys = list(ids)
    pair = key_of_code[name_codes[rows]] * len(cat_text) + cat_codes[rows]
    counts = np.bincount(pair, minlength=len(keys) * len(cat_text)).reshape(len(keys), len(cat_text))
    best = dict(zip(keys, cat_text[np.argmax(counts, axis=1)].tolist(), strict=True))
    return np.array([best.get(n, "") for n in names.tolist()], dtype=object)


# --------------------------------------------------------------------------- kernels

KERNEL_COLUMNS = ("name", "cat", "count", "total_us", "mean_us", "min_us", "max_us", "share_pct",
                  "grid", "block", "registers_per_thread", "shared_memory_bytes", "occupancy_pct")


def kernel_summary(trace: Trace) -> pd.DataFrame:
    """One row per GPU activity name: kernels, memcpys and memsets.

    Columns: name, cat, count, total_us, mean_us, min_us, max_us, share_pct (of the summed
    duration of all GPU activity), and the most common grid, block, registers_per_thread,
    shared_memory_bytes, occupancy_pct of its launches. Sorted by total_us, largest first.
    """
    ev = trace.events
    rows = gpu_activity_rows(trace)
    if not len(rows):
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("name", "cat", "grid", "block") else float)
                             for c in KERNEL_COLUMNS})
    name_codes, name_text = codes(ev["name"])
    gid, first = group_ids(name_codes[rows])
    n_groups = len(first)
    dur = ev["dur_us"].to_numpy()[rows]
    out = {"name": name_text[name_codes[rows[first]]], "cat": texts(ev["cat"], rows[first])}
    count = np.bincount(gid, minlength=n_groups)
    total_us = np.bincount(gid, weights=dur, minlength=n_groups)
    total = total_us.sum()
    min_us, max_us = group_min_max(gid, dur, n_groups)
    out.update(count=count, total_us=total_us, mean_us=total_us / count, min_us=min_us, max_us=max_us,
               share_pct=100.0 * total_us / total if total > 0 else np.zeros(n_groups))
    for col in ("grid", "block"):
        col_codes, text = codes(ev[col])
        out[col] = text[group_mode(gid, col_codes[rows], n_groups)]
    for col in ("registers_per_thread", "shared_memory_bytes", "occupancy_pct"):
        out[col] = group_mode_values(gid, ev[col].to_numpy(dtype=float)[rows], n_groups)
    return frame({c: out[c] for c in KERNEL_COLUMNS}, sort_by="total_us")


def host_work_us(operators: pd.DataFrame) -> float:
    """Self time of CPU-side rows of ``operator_summary`` minus time spent waiting in synchronize
    calls, torch.compile's own compile events (``lab.vocab.COMPILE_PATTERN``) and the profiler's
    own rows (cat "overhead": Activity Buffer Request, Lazy Function Loading, Runtime Triggered
    Module Loading — 53.7 ms of the 214 ms "host work" of the H200 cuda_oom trace, none of it the
    program's)."""
    if operators.empty:
        return 0.0
    waiting = operators["name"].isin(SYNC_NAMES) | (operators["cat"].astype(str) == "overhead")
    # torch.compile compiling inside the window is a one-off, not the program's per-launch host work
    # (a first call's 4.0 s of Dynamo/Inductor read as "3,435× more host time than device time").
    compiling = operators["name"].astype(str).str.contains(COMPILE_PATTERN)
    return float(operators.loc[~(waiting | compiling), "self_us"].sum())

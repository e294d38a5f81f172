"""The TensorBoard plugin's Module view: per ``nn.Module``, how often it ran, its host time (total
and self) and the GPU time of the work its ops launched (total and self), as a hierarchy.

Its source is torch's Python tracer: with ``with_stack=True`` every ``nn.Module`` call is a
``python_function`` event named ``nn.Module: <Class>_<id>`` (args "Python module id"). On torch
2.13 (CPU, measured here) ``with_modules=True`` alone writes no such event — the option serves
TorchScript — so the view needs ``with_stack=True``.

As the plugin computes it (kineto ``tb_plugin/torch_tb_profiler/profiler/`` at 041e7ce9):

* **the tree** (``op_tree.py`` ``_build_tree_internal``, L96-143; ``node.py``
  ``create_operator_node``, L310-323): per thread, nested by time: ``cpu_op`` events, the
  ``nn.Module`` events, ``ProfilerStep#N``, and of the user annotations only DataLoader,
  ``Optimizer.step*`` and ``nccl:*``/``gloo:*`` ones (``record_function`` labels and plain Python
  frames are not nodes: what is inside them hangs from the node around them). A runtime call
  belongs to the op with its External id; its GPU time is the kernels, memcpys and memsets of its
  correlation id (``RuntimeNode.fill_stats``, L246-258).
* **per module** (``module_op.py`` ``_aggregate_modules``, L175-196; ``node.py`` ``fill_stats``,
  L98-127 and ``ModuleNode.fill_stats``, L162-164): occurrences; host total = Σ durations; host
  self = duration − its direct children's durations; device total = the GPU time of every runtime
  call in its subtree; device self = the device total of its direct children that are plain
  ``cpu_op`` nodes (``is_operator_node``, L326-328: not DataLoader, not ``Optimizer.*``, not
  ``DataParallel.forward``); operators = how many such children.
* **the hierarchy** (``_build_module_hierarchy``, L111-172): a module's parent is the nearest
  module above it. The plugin follows the Python ids ("Python parent id"); here the time nesting on
  the thread is used, which is the same relation for a well-formed trace (the test checks it
  against the ids on real recordings). Top-level modules sorted by name (L242), children in the
  order they first ran.

Left out: modules that run inside backward ops when the trace has forward→backward links (the
plugin moves backward roots out of the tree, L186-201, so e.g. activation-checkpoint recomputation
is not counted there; here it is), and PyTorch Lightning's ``[pl][module]`` annotations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.columns import gpu_activity_mask, mask_in, texts
from lab.analysis.step_time import COMM_OP_NAMES, RUNTIME_CATS
from lab.trace.load import Trace
from lab.vocab import PROFILER_STEP_PREFIX

__all__ = ["MODULE_COLUMNS", "MODULE_PREFIX", "NO_MODULES", "ModuleView", "module_view"]

MODULE_PREFIX = "nn.Module: "  # torch's Python tracer (python_tracer.cpp) names module calls so
MODULE_COLUMNS = ("path", "depth", "module", "occurrences", "operators", "host_total_us", "host_self_us",
                  "device_total_us", "device_self_us", "mean_us")
NO_MODULES = ("This trace has no nn.Module events. The Module view needs torch's Python tracer: record with "
              "torch.profiler.profile(..., with_stack=True) — with_modules=True alone writes none for an "
              "eager model (it serves TorchScript; measured on torch 2.13).")
EXCLUDED_OPS = ("DataParallel.forward", "DistributedDataParallel.forward")  # node.py L17


@dataclass(frozen=True)
class ModuleView:
    """``rows``: one per module in the hierarchy (columns ``MODULE_COLUMNS``; ``path`` joins the
    names from the top with " › "; ``mean_us``: the mean device time per occurrence, or the mean
    host time when it launched no GPU work, as the plugin's "avg_duration", module_op.py L239).
    ``reason``: why there are no rows."""

    rows: pd.DataFrame
    reason: str = ""

    @property
    def available(self) -> bool:
        return len(self.rows) > 0


def module_view(trace: Trace) -> ModuleView:
    ev = trace.events
    names = ev["name"]
    is_module = mask_in(ev["cat"], ("python_function",)) & _starts(names, MODULE_PREFIX)
    if not is_module.any():
        return ModuleView(rows=pd.DataFrame({c: pd.Series(dtype=float) for c in MODULE_COLUMNS}), reason=NO_MODULES)
    nodes, kind = _tree_nodes(trace, is_module)
    parent = _nest(trace, nodes)
    device = _device_totals(trace, nodes, parent)
    return ModuleView(rows=_module_rows(trace, nodes, kind, parent, device))


def _starts(column: pd.Series, prefix: str) -> np.ndarray:
    cat = column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column)
    hit = np.array([str(c).startswith(prefix) for c in cat.categories], dtype=bool)
    row_codes = np.asarray(cat.codes)
    return np.where(row_codes >= 0, np.append(hit, False)[row_codes], False)


# node kinds: 0 a plain cpu_op (is_operator_node), 1 a module, 2 any other tree node
def _tree_nodes(trace: Trace, is_module: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ev = trace.events
    names = ev["name"]
    cpu_op = mask_in(ev["cat"], ("cpu_op", "operator"))
    ann = mask_in(ev["cat"], ("user_annotation",))
    special = (mask_in(names, COMM_OP_NAMES) | _starts(names, "Optimizer.step") | _starts(names, PROFILER_STEP_PREFIX)
               | (_starts(names, "enumerate(DataLoader)#") | _starts(names, "enumerate(DataPipe)#")))
    python = mask_in(ev["cat"], ("python",))
    nodes = np.flatnonzero(cpu_op | python | (ann & special) | is_module)
    excluded = _starts(names, "Optimizer.") | mask_in(names, EXCLUDED_OPS)
    plain = cpu_op[nodes] & ~special[nodes] & ~excluded[nodes]
    kind = np.where(is_module[nodes], 1, np.where(plain, 0, 2))
    return nodes, kind


def _nest(trace: Trace, nodes: np.ndarray) -> np.ndarray:
    """Each node's parent (an index into ``nodes``, -1 at the top), nesting by time per thread
    as ``_build_tree_internal`` does: a node that starts inside the open one but ends after it
    is dropped (-2)."""
    ev = trace.events
    tid = np.asarray(pd.Categorical(ev["tid"]).codes)[nodes]
    start = ev["ts_us"].to_numpy(dtype=float)[nodes]
    end = start + ev["dur_us"].to_numpy(dtype=float)[nodes]
    order = np.lexsort((-end, start, tid))
    parent = np.full(len(nodes), -1, dtype=np.int64)
    stack: list[int] = []
    lane = None
    for i in order.tolist():
        if tid[i] != lane:
            stack, lane = [], tid[i]
        while stack and start[i] >= end[stack[-1]]:
            stack.pop()
        if stack and end[i] > end[stack[-1]]:
            parent[i] = -2  # "ranges on the same thread should not intersect": not inserted
            continue
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return parent


def _device_totals(trace: Trace, nodes: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per node, the GPU time of the runtime calls of its subtree."""
    ev = trace.events
    ext = ev["external_id"].to_numpy()
    corr = ev["correlation"].to_numpy()
    dur = ev["dur_us"].to_numpy(dtype=float)
    runtime = np.flatnonzero(mask_in(ev["cat"], RUNTIME_CATS) & (corr >= 0))
    gpu = np.flatnonzero(gpu_activity_mask(trace) & (corr >= 0))
    own = np.zeros(len(nodes))
    if len(runtime) and len(gpu):
        rt_corr, rt_first = np.unique(corr[runtime], return_index=True)
        k = np.searchsorted(rt_corr, corr[gpu])
        ok = (k < len(rt_corr)) & (rt_corr[np.minimum(k, len(rt_corr) - 1)] == corr[gpu])
        per_call = np.bincount(rt_first[k[ok]], weights=dur[gpu[ok]], minlength=len(runtime))
        node_ext = ext[nodes]
        keyed = np.flatnonzero((node_ext >= 0) & (parent != -2))
        if len(keyed):
            ids, first = np.unique(node_ext[keyed], return_index=True)
            j = np.searchsorted(ids, ext[runtime])
            hit = (j < len(ids)) & (ids[np.minimum(j, len(ids) - 1)] == ext[runtime])
            np.add.at(own, keyed[first[j[hit]]], per_call[hit])
    total = own.copy()
    depth = np.zeros(len(nodes), dtype=np.int64)
    for i in range(len(nodes)):  # parents come first in time order: count depth, then add bottom-up
        p = parent[i]
        depth[i] = depth[p] + 1 if p >= 0 else 0
    for i in np.argsort(-depth, kind="stable").tolist():
        if parent[i] >= 0:
            total[parent[i]] += total[i]
    return total


def _module_rows(trace: Trace, nodes: np.ndarray, kind: np.ndarray, parent: np.ndarray,
                 device: np.ndarray) -> pd.DataFrame:
    ev = trace.events
    start = ev["ts_us"].to_numpy(dtype=float)[nodes]
    dur = ev["dur_us"].to_numpy(dtype=float)[nodes]
    name = np.array([n.removeprefix(MODULE_PREFIX) for n in texts(ev["name"], nodes)], dtype=object)
    inserted = parent != -2
    child = np.flatnonzero(inserted & (parent >= 0))
    children_dur = np.bincount(parent[child], weights=dur[child], minlength=len(nodes))
    plain = child[kind[child] == 0]
    self_device = np.bincount(parent[plain], weights=device[plain], minlength=len(nodes))
    operators = np.bincount(parent[plain], minlength=len(nodes))
    mods = np.flatnonzero((kind == 1) & inserted)
    # the nearest module above each module
    up = parent.copy()
    module_parent = np.full(len(nodes), -1, dtype=np.int64)
    for i in mods.tolist():
        p = up[i]
        while p >= 0 and kind[p] != 1:
            p = up[p]
        module_parent[i] = p
    stats = pd.DataFrame({
        "module": name[mods], "first_us": start[mods],
        "parent": [name[p] if p >= 0 else "" for p in module_parent[mods]],
        "host_total_us": dur[mods], "host_self_us": dur[mods] - children_dur[mods],
        "device_total_us": device[mods], "device_self_us": self_device[mods], "operators": operators[mods],
    })
    agg = stats.groupby("module", sort=False).agg(
        occurrences=("module", "size"), operators=("operators", "sum"), host_total_us=("host_total_us", "sum"),
        host_self_us=("host_self_us", "sum"), device_total_us=("device_total_us", "sum"),
        device_self_us=("device_self_us", "sum"), first_us=("first_us", "min"))
    mean_device = agg["device_total_us"] / agg["occurrences"]
    agg["mean_us"] = np.where(mean_device > 0, mean_device, agg["host_total_us"] / agg["occurrences"])
    edges = stats[["parent", "module"]].drop_duplicates()
    kids: dict[str, list[str]] = {}
    for p, m in zip(edges["parent"], edges["module"]):
        kids.setdefault(p, []).append(m)
    first = agg["first_us"].to_dict()
    out: list[dict] = []

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:  # a module inside itself (recursion): listed once on this branch
            return
        row = agg.loc[module]
        out.append({"path": " › ".join((*path, module)), "depth": len(path), "module": module,
                    **{c: row[c] for c in MODULE_COLUMNS[3:]}})
        for kid in sorted(kids.get(module, []), key=first.__getitem__):
            visit(kid, (*path, module))

    for top in sorted(kids.get("", [])):
        visit(top, ())
    rows = pd.DataFrame(out, columns=list(MODULE_COLUMNS))
    return rows.astype({"depth": np.int64, "occurrences": np.int64, "operators": np.int64})

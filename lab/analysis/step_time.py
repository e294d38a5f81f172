"""The TensorBoard plugin's step-time breakdown (its Overview page): each step's time split into
Kernel, Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec and Other.

The rules are the plugin's (kineto ``tb_plugin/torch_tb_profiler/profiler/``, last commit before
its removal, 041e7ce9):

* **What each category is** (``event_parser.py`` ``StepParser._parse_step``, L293-320): a kernel is
  *Communication* when its External id is a ``nccl:*`` / ``gloo:*`` op's, else *Kernel*; memcpy,
  memset and CUDA runtime calls are their own; ``enumerate(DataLoader)#….__next__`` and
  ``enumerate(DataPipe)#…`` ops are *DataLoader*; every other op, user annotation and ``python``
  event is *CPU Exec* (``nccl:*``/``gloo:*`` ones: *Communication*). ``python_function`` frames,
  ``cuda_driver`` calls and the profiler's ``overhead`` rows are in no category (``trace.py``'s
  ``EventTypeMap``, L40-60, has no entry that sends them there).
* **Overlap** (``overall_parser.py`` ``Statistics.create_from_range``, L41-58): an instant counts
  once, for the first category that covers it in the order above; what no category covers is
  *Other*. So the categories sum to the step time.
* **Steps** (``event_parser.py`` L312-315, L330-443): the ``ProfilerStep#N`` spans; on a GPU trace
  each is stretched to the end of the last GPU work launched inside it and starts no earlier than
  the previous one ended (``_update_steps_duration``), and trailing steps whose kernels the
  profiler may have missed are dropped (the last step with GPU work, and it too when it launched
  fewer than 80 % of the previous step's). Without ``ProfilerStep#`` events the whole CPU
  activity is one step named "0" (L267-269).

One deliberate difference: ``gpu_user_annotation`` rows (the GPU lane's copy of each
``record_function`` label, written by torch ≥ 2.0) are left out. The plugin maps them like host
annotations (``trace.py`` L59), so on a torch 2.x trace the GPU copy of ``ProfilerStep#2`` becomes
a second step "2" (its steps for the corpus's ``llama_train_stack`` are "2", "2", "3", the middle
one all zeros) and GPU-side label spans count as CPU Exec. With those rows removed from the JSON,
the plugin's own code gives this module's figures (``scripts/check_tb_plugin.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.columns import codes, gpu_activity_mask, mask_in, texts
from lab.analysis.intervals import merge_intervals
from lab.trace.load import Trace
from lab.vocab import PROFILER_STEP_PREFIX

__all__ = ["STEP_TIME_CATEGORIES", "StepTime", "step_time"]

# In the plugin's precedence order (ProfileRole, event_parser.py L25-34); "Other" is what is left.
STEP_TIME_CATEGORIES = ("Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "CPU Exec", "Other")
# The trace categories the plugin reads as each event type (trace.py EventTypeMap, L40-60).
RUNTIME_CATS = ("runtime", "cuda_runtime", "mtia_runtime", "glow_runtime", "xpu_runtime", "privateuse1_runtime")
MEMCPY_CATS = ("memcpy", "gpu_memcpy")
MEMSET_CATS = ("memset", "gpu_memset")
HOST_OP_CATS = ("cpu_op", "operator", "user_annotation")  # OPERATOR and USER_ANNOTATION, host side only
PYTHON_CATS = ("python",)  # EventTypes.PYTHON ("python_function" is another type, in no category)
# trace.py L15-16: the collectives the plugin knows by name.
COMM_OP_NAMES = tuple(f"{lib}:{op}" for lib in ("nccl", "gloo")
                      for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter"))
# event_parser.py L434: the last step is dropped when it launched fewer GPU activities than this
# share of the step before it (the profiler may have stopped before its kernels were collected).
TAIL_STEP_SHARE = 0.8


@dataclass(frozen=True)
class StepTime:
    """The breakdown. ``steps``: one row per step — ``step`` (its N), ``start_us``, ``end_us``,
    ``step_us`` and per category ``<category>_us`` and ``<category>_pct`` (of the step); the
    ``_us`` columns sum to ``step_us``. ``average``: ``category``, ``us`` (mean over the steps),
    ``pct`` (of the mean step). ``source``: "ProfilerStep" or "whole trace"; ``dropped_steps``: the
    trailing steps left out; ``gpu_adjusted``: steps were stretched to their GPU work."""

    steps: pd.DataFrame
    average: pd.DataFrame
    source: str
    dropped_steps: int = 0
    gpu_adjusted: bool = False


def column_of(category: str) -> str:
    """"CPU Exec" → "cpu_exec": the column stem of a category."""
    return category.lower().replace(" ", "_")


def step_time(trace: Trace) -> StepTime:
    """The plugin's per-step breakdown of ``trace`` (module docstring)."""
    ev = trace.events
    ts = ev["ts_us"].to_numpy(dtype=float)
    end = ts + ev["dur_us"].to_numpy(dtype=float)
    roles = _role_intervals(trace, ts, end)
    steps, names, source = _host_steps(trace, ts, end)
    steps, names, dropped, adjusted = _device_steps(trace, steps, names, ts, end)
    costs = _painted(roles, steps)
    return _frames(steps, names, costs, source, dropped, adjusted)


def _cat_mask(ev: pd.DataFrame, cats) -> np.ndarray:
    return mask_in(ev["cat"], cats)


def _name_mask(ev: pd.DataFrame, predicate) -> np.ndarray:
    row_codes, labels = codes(ev["name"])
    hit = np.fromiter((bool(predicate(str(c))) for c in labels[:-1]), dtype=bool, count=len(labels) - 1)
    return np.append(hit, False)[row_codes]


def _is_dataloader(name: str) -> bool:
    return (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__")) or \
        name.startswith("enumerate(DataPipe)#")


def _role_intervals(trace: Trace, ts: np.ndarray, end: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per category but Other, the merged intervals of its events (``StepParser._parse_step``)."""
    ev = trace.events
    host = _cat_mask(ev, HOST_OP_CATS)
    comm_name = _name_mask(ev, lambda n: n in COMM_OP_NAMES)
    step = _name_mask(ev, lambda n: n.startswith(PROFILER_STEP_PREFIX)) & host
    loader = _name_mask(ev, _is_dataloader) & host
    hostish = (host | _cat_mask(ev, PYTHON_CATS)) & ~step & ~loader
    kernel = _cat_mask(ev, ("kernel",))
    comm_ids = ev["external_id"].to_numpy()[(host | _cat_mask(ev, PYTHON_CATS)) & comm_name]
    comm_kernel = kernel & np.isin(ev["external_id"].to_numpy(), comm_ids[comm_ids >= 0])
    masks = (kernel & ~comm_kernel, _cat_mask(ev, MEMCPY_CATS), _cat_mask(ev, MEMSET_CATS),
             comm_kernel | (hostish & comm_name), _cat_mask(ev, RUNTIME_CATS), loader, hostish & ~comm_name)
    return [merge_intervals(ts[m], end[m]) for m in masks]


def _host_steps(trace: Trace, ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, list[str], str]:
    """(n × 2 step spans sorted by start, their names, the source)."""
    ev = trace.events
    rows = np.flatnonzero(_name_mask(ev, lambda n: n.startswith(PROFILER_STEP_PREFIX))
                          & _cat_mask(ev, HOST_OP_CATS))
    if len(rows):
        rows = rows[np.argsort(ts[rows], kind="stable")]
        names = [str(n).split("#", 1)[1] for n in texts(ev["name"], rows)]
        return np.column_stack([ts[rows], end[rows]]), names, "ProfilerStep"
    cpu = _cat_mask(ev, PYTHON_CATS + ("cpu_op", "operator"))  # cpu_min_ts / cpu_max_ts, L323-325
    if not cpu.any():
        return np.zeros((0, 2)), [], "whole trace"
    return np.array([[ts[cpu].min(), end[cpu].max()]]), ["0"], "whole trace"


def _device_steps(trace: Trace, steps: np.ndarray, names: list[str], ts: np.ndarray,
                  end: np.ndarray) -> tuple[np.ndarray, list[str], int, bool]:
    """``_find_device_steps`` + ``_update_steps_duration``: the steps on the GPU's clock."""
    ev = trace.events
    corr = ev["correlation"].to_numpy()
    rt = np.flatnonzero(_cat_mask(ev, RUNTIME_CATS))
    dev = np.flatnonzero(gpu_activity_mask(trace) & (corr >= 0))
    if not len(steps) or not len(rt) or not len(dev):
        return steps, names, 0, False
    # Each GPU activity's launching runtime call (same correlation id), and that call's step:
    # the one whose span holds the whole call.
    rt_corr, first = np.unique(corr[rt], return_index=True)
    k = np.searchsorted(rt_corr, corr[dev])
    has_rt = (k < len(rt_corr)) & (rt_corr[np.minimum(k, len(rt_corr) - 1)] == corr[dev])
    dev, call = dev[has_rt], rt[first[k[has_rt]]]
    i = np.searchsorted(steps[:, 0], ts[call], side="right") - 1
    inside = (i >= 0) & (end[call] <= steps[np.maximum(i, 0), 1])
    matched_dev, step_of = dev[inside], i[inside]
    n = len(steps)
    counts = np.bincount(step_of, minlength=n)
    if not len(matched_dev):
        return steps, names, 0, False
    dev_end = np.full(n, -np.inf)
    np.maximum.at(dev_end, step_of, end[matched_dev])
    dev_start = np.full(n, np.inf)
    np.minimum.at(dev_start, step_of, ts[matched_dev])
    prev = steps[0, 0]
    if np.isfinite(dev_start[0]):  # GPU work before step 0's that no step launched (L383-393)
        loose = np.setdiff1d(np.flatnonzero(gpu_activity_mask(trace)), matched_dev)
        before = end[loose][end[loose] < dev_start[0]]
        prev = max(prev, float(before.max())) if len(before) else prev
    out = steps.copy()
    for j in range(n):
        start = max(prev, steps[j, 0])
        stop = max(steps[j, 1], start) if counts[j] == 0 else max(steps[j, 1], dev_end[j], start)
        out[j] = (start, stop)
        prev = stop
    keep = n
    if n > 1:
        last = np.flatnonzero(counts > 0)[-1]
        keep = last + 1
        if last > 0 and counts[last - 1] * TAIL_STEP_SHARE > counts[last]:
            keep = last
    return out[:keep], names[:keep], n - keep, True


def _painted(roles: list[tuple[np.ndarray, np.ndarray]], steps: np.ndarray) -> np.ndarray:
    """steps × categories: each instant of a step given to the first category covering it."""
    n_cat = len(STEP_TIME_CATEGORIES)
    if not len(steps):
        return np.zeros((0, n_cat))
    points = np.unique(np.concatenate([steps.ravel(), *[np.concatenate(r) for r in roles]]))
    lo, hi = points[:-1], points[1:]
    mid = (lo + hi) / 2
    owner = np.full(len(mid), n_cat - 1)  # Other
    for index in range(n_cat - 2, -1, -1):  # the first category in the order wins: paint it last
        starts, ends = roles[index]
        if len(starts):
            j = np.searchsorted(starts, mid, side="right") - 1
            owner[(j >= 0) & (mid < ends[np.maximum(j, 0)])] = index
    step_of = np.searchsorted(steps[:, 0], mid, side="right") - 1
    in_step = (step_of >= 0) & (mid < steps[np.maximum(step_of, 0), 1])
    flat = step_of[in_step] * n_cat + owner[in_step]
    return np.bincount(flat, weights=(hi - lo)[in_step], minlength=len(steps) * n_cat).reshape(len(steps), n_cat)


def _frames(steps: np.ndarray, names: list[str], costs: np.ndarray, source: str, dropped: int,
            adjusted: bool) -> StepTime:
    step_us = steps[:, 1] - steps[:, 0] if len(steps) else np.zeros(0)
    columns: dict = {"step": np.array(names, dtype=object), "start_us": steps[:, 0], "end_us": steps[:, 1],
                     "step_us": step_us}
    safe = np.where(step_us > 0, step_us, 1.0)
    for index, category in enumerate(STEP_TIME_CATEGORIES):
        columns[f"{column_of(category)}_us"] = costs[:, index]
    for index, category in enumerate(STEP_TIME_CATEGORIES):
        columns[f"{column_of(category)}_pct"] = np.where(step_us > 0, 100.0 * costs[:, index] / safe, 0.0)
    mean = costs.mean(axis=0) if len(steps) else np.zeros(len(STEP_TIME_CATEGORIES))
    total = float(step_us.mean()) if len(steps) else 0.0
    average = pd.DataFrame({"category": list(STEP_TIME_CATEGORIES), "us": mean,
                            "pct": 100.0 * mean / total if total > 0 else np.zeros(len(mean))})
    return StepTime(steps=pd.DataFrame(columns), average=average, source=source, dropped_steps=dropped,
                    gpu_adjusted=adjusted)

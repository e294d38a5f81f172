"""torch's ``key_averages()`` table derived from a Chrome trace, with torch's own rules.

``trace_key_averages(trace)`` gives the rows torch's ``prof.key_averages()`` gives for the profile
the trace was exported from (columns ``lab.core.KEY_AVERAGES_COLUMNS``, rows in torch's
order); ``lab.tables.torch_table_text`` prints them as ``EventList.table()`` does.

How trace events become torch's objects (torch 2.11 ``_parse_kineto_results``, ``EventList``,
``FunctionEventAvg``; checked against torch's own FunctionEvents and tables on H200 recordings
with torch 2.11 and CPU recordings with 2.13, see tests/test_key_averages.py):

* FunctionEvents are the complete events of categories cpu_op, user_annotation, cuda_runtime,
  cuda_driver, overhead (the profiler's "Activity Buffer Request") and the device-side kernel,
  gpu_memcpy, gpu_memset, gpu_user_annotation, except torch's filtered names. python_function
  events (with_stack) are call-stack frames: torch 2.11 never made them FunctionEvents; 2.12
  and 2.13 do (pytorch#178168; excluded again by pytorch#188631), ``include_python_functions``
  reproduces that. The "Trace" span and instant events are no FunctionEvents.
* Ids: an op's (cpu_op, user_annotation) id is its "External id"; a runtime, driver, overhead
  or device event's id is its CUPTI "correlation". Such an event is *linked* when its "External
  id" names an op of the trace (Kineto found the op that pushed that id).
  An overhead event has no correlation: torch takes its C++ parent's id (the innermost op,
  python frame or unlinked runtime call open on the profiler's thread).
* Device time: a linked kernel/memcpy/memset adds its duration to each unlinked CPU event whose
  id equals the link: the op, an overhead event inside it ("Activity Buffer Request" inside
  aten::mm doubles aten::mm's device total), and an unlinked runtime call (cudaDeviceSynchronize,
  a launch outside any op) whose correlation has the same number: torch keys both in one dict.
  gpu_user_annotation events are never linked (their "External id" is their own id).
* Threads: a linked runtime call is moved to its op's thread; an unlinked runtime, driver or
  overhead event to the thread that stopped the profiler (torch gives it
  ``RecordFunction::currentThreadId()`` at post-processing): the ``ProfilerStep#`` thread, else
  the thread of the first op.
* Tree, per thread, events in (start, −end) order: the top of a stack is an event's parent if
  the event starts before the top ends and ends no later; else the top is popped.
  Self CPU = duration − Σ direct children's durations. c10d's collective ranges ("gloo:…") are
  async (they end on the worker thread): outside the tree, self CPU and device time 0.
* ``_remove_dup_nodes``: a child with its parent's name that is the parent's only child is
  dropped (counted once); the parent takes over its children and, replacing its own, its kernels.
* Device total = own kernels + Σ children's device totals; self device = own kernels. A device
  event's device total and self device are its duration; it has no CPU time.
* Rows: by (name, ``ProfilerStep#N`` → ``ProfilerStep*``; device type; annotation or not[; input
  shapes as ``str(FunctionEvent.input_shapes)``]), in order of first appearance. FLOPs: the
  trace's "flops" arg, else torch's ``computeFlops`` formulas over the recorded shapes (the
  JSON torch exports carries no FLOP counts) when the trace says ``with_flops``.
* Memory columns (profile_memory): ``lab.analysis.table.memory`` — each CPU event takes the
  ``Trace.memory`` records inside its interval, self = own − children's, and the records no
  event took make torch's ``[memory]`` row.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.columns import dense_ids, stable_order
from lab.analysis.intervals import innermost_open
from lab.analysis.table.flops import op_flops_of
from lab.analysis.table.memory import event_memory, memory_row, oom_row, self_memory
from lab.analysis.table.tree import nested_parents, stack_parents
from lab.core.columns import KEY_AVERAGES_COLUMNS
from lab.trace import Trace
from lab.vocab import GPU_ACTIVITY_CATS

__all__ = ["trace_key_averages"]

STEP_PREFIX, STEP_ROW = "ProfilerStep#", "ProfilerStep*"
# Roles of trace categories (torch's activity types).
_OP, _PYTHON, _RUNTIME, _DEVICE, _GPU_LABEL = 1, 2, 3, 4, 5
_ROLES = {"cpu_op": _OP, "user_annotation": _OP, "python_function": _PYTHON,
          "cuda_runtime": _RUNTIME, "cuda_driver": _RUNTIME, "overhead": _RUNTIME,
          "xpu_runtime": _RUNTIME, "privateuse1_runtime": _RUNTIME, "privateuse1_driver": _RUNTIME,
          **dict.fromkeys(GPU_ACTIVITY_CATS, _DEVICE), "cuda_sync": _DEVICE,
          "gpu_user_annotation": _GPU_LABEL}
_ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation")
# c10d Work's profiling ranges (ProcessGroupGloo/NCCL/MPI/UCC profilingTitle): async in torch.
_ASYNC_PREFIXES = ("gloo:", "nccl:", "mpi:", "ucc:")
# torch.autograd.profiler_util._filter_name: dropped before anything is built.
_FILTERED_NAMES = ("[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                   "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                   "aten::is_leaf", "aten::output_nr", "aten::_version")
# Ids up to this are matched by a lookup table (16 MB of bools at most); Kineto's external ids
# and correlations are per-process counters, far below it on every corpus trace.
_LOOKUP_MAX_ID = 1 << 24


@dataclass(frozen=True)
class _Events:
    """FunctionEvents in torch's list order (start, −end), as parallel arrays."""

    rows: np.ndarray  # positions in trace.events
    role: np.ndarray  # _OP, _PYTHON, ...
    label: np.ndarray  # user_annotation / gpu_user_annotation (torch's is_user_annotation)
    is_async: np.ndarray  # torch's FunctionEvent.is_async: outside the tree, no self/device time
    key: np.ndarray  # name code after the ProfilerStep* rewrite
    key_names: np.ndarray  # text of each key code
    start_ns: np.ndarray
    end_ns: np.ndarray
    thread: np.ndarray  # thread of CPU events (after torch's moves), -1 for device events
    fid: np.ndarray  # FunctionEvent.id
    linked: np.ndarray  # linked correlation id, 0 if none

    @property
    def cpu(self) -> np.ndarray:
        return self.role <= _RUNTIME

    @property
    def dur_us(self) -> np.ndarray:
        # As torch's Interval.elapsed_us: end and start as µs since the trace start (the file's
        # first event, the profiler span: torch's trace_start_ns), then their difference.
        return self.end_ns / 1000.0 - self.start_ns / 1000.0


def trace_key_averages(trace: Trace, *, group_by_input_shape: bool = False,
                       include_python_functions: bool = False) -> pd.DataFrame:
    """One row per FunctionEventAvg of ``key_averages(group_by_input_shape=...)``.

    ``include_python_functions``: count with_stack's python_function frames as events, as
    torch 2.12–2.13 do (their rows appear and they are children in the tree); torch 2.11 and
    the lab's default leave them out.
    """
    ev = _move_threads(_select(trace))
    if not include_python_functions:
        ev = _take(ev, ev.role != _PYTHON)
    parent = _tree(ev)
    alive, self_cpu, own, total, eff = _collapse_and_total(ev, parent, _own_device_us(ev))
    return _average(trace, ev, (alive, self_cpu, own, total), _memory(trace, ev, eff), group_by_input_shape)


# --------------------------------------------------------------------------- events


def _codes(column: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """(codes, categories) of a text column; take categories by code before turning them into
    Python strings (a with_stack trace has ~20k distinct names)."""
    cat = column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column)
    return np.asarray(cat.codes, dtype=np.int64), cat.categories


def _select(trace: Trace) -> _Events:
    """Every FunctionEvent candidate (python frames too), in torch's list order, ids linked."""
    e = trace.events
    cat_codes, cats = _codes(e["cat"])
    cats = [str(c) for c in cats]
    roles = np.array([_ROLES.get(c, 0) for c in cats] + [0], dtype=np.int8)
    labels = np.array([c in _ANNOTATION_CATS for c in cats] + [False])
    rows = np.flatnonzero(roles[cat_codes] > 0)
    name_codes, names = _codes(e["name"])
    inverse, _, used = dense_ids(name_codes[rows])  # only the names of these rows (numbered in code order)
    used_names = [str(n) for n in names.take(used)]
    kept = ~np.isin(np.array(used_names, dtype=object), _FILTERED_NAMES)[inverse]
    rows, inverse = rows[kept], inverse[kept]
    # Integer ns: Kineto writes ns-exact µs, and equal ends must compare equal (ProfilerStep's
    # python frames all close at the same ns when the profiler stops).
    start = np.rint(e["ts_us"].to_numpy()[rows] * 1000.0).astype(np.int64)
    end = start + np.rint(e["dur_us"].to_numpy()[rows] * 1000.0).astype(np.int64)
    role = roles[cat_codes[rows]]
    # Kineto exports each gpu_user_annotation 1 ns wider on both sides than the span torch keeps
    # (H200 trace vs KinetoEvent: dur 21.474 vs 21,472 ns, 1.474 vs 1,472 ns).
    pad = (role == _GPU_LABEL) & (end - start >= 2)
    start, end = start + pad, end - pad
    order = _list_order(start, end, role == _GPU_LABEL)
    rows, start, end, inverse, role = rows[order], start[order], end[order], inverse[order], role[order]
    key_of_used, key_names = pd.factorize(np.array(
        [STEP_ROW if n.startswith(STEP_PREFIX) else n for n in used_names], dtype=object))
    label = labels[cat_codes[rows]]
    ext, corr = e["external_id"].to_numpy()[rows], e["correlation"].to_numpy()[rows]
    is_op = role == _OP
    linkable = ((role == _RUNTIME) | (role == _DEVICE)) & (ext > 0)
    linked = np.where(linkable & _member(ext, ext[is_op & (ext > 0)]), ext, 0)
    fid = np.where(is_op, np.maximum(ext, 0), np.where(role == _PYTHON, 0, np.maximum(corr, 0)))
    thread = np.where(role <= _RUNTIME, e["lane_order"].to_numpy()[rows].astype(np.int64), -1)
    # c10d's collective ranges ("gloo:all_reduce") end on the worker thread: RecordFunction
    # _setAsync, so torch keeps them out of the tree (self CPU 0, no device time).
    key = key_of_used[inverse]
    asynchronous = label & ~(role == _GPU_LABEL) & np.array(
        [n.startswith(_ASYNC_PREFIXES) for n in key_names], dtype=bool)[key]
    return _Events(rows, role, label, asynchronous, key, np.asarray(key_names, dtype=object),
                   start, end, thread, fid, linked)


def _list_order(start: np.ndarray, end: np.ndarray, gpu_label: np.ndarray) -> np.ndarray:
    """torch's list order of events given in row order: by start, then the longer first; at equal
    (start, end) a gpu_user_annotation after the kernel it spans, as in torch's list; then row
    order. That is ``np.lexsort((positions, gpu_label, -end, start))``, which sorted every event
    on four keys (10 ms on the 114 MB trace); here one stable sort by start (each lane's events
    come sorted, runs the merge sort takes whole) keeps row order among equal starts, and only
    the few events sharing a start are sorted again on the other keys, within their group."""
    order = np.argsort(start, kind="stable")
    ordered = start[order]
    same = ordered[1:] == ordered[:-1]
    if same.any():
        tied = np.zeros(len(order), dtype=bool)
        tied[1:] |= same
        tied[:-1] |= same
        at = np.flatnonzero(tied)  # the groups of equal starts, each a run of positions, in start order
        sub = order[at]
        order[at] = sub[np.lexsort((sub, gpu_label[sub], -end[sub], start[sub]))]
    return order


def _member(values: np.ndarray, of: np.ndarray) -> np.ndarray:
    """``np.isin(values, of)`` for non-negative integer ids: a lookup table over the ids' range,
    O(n) where ``np.isin``'s sort or hash took 60 ms of the table's 240 on a 286k-event trace;
    ``np.isin`` itself beyond ``_LOOKUP_MAX_ID`` (external ids are small counters)."""
    if not len(of) or not len(values):
        return np.zeros(len(values), dtype=bool)
    top = int(of.max())
    if top > _LOOKUP_MAX_ID or int(of.min()) < 0:
        return np.isin(values, of)
    seen = np.zeros(top + 1, dtype=bool)
    seen[of] = True
    inside = (values >= 0) & (values <= top)
    out = np.zeros(len(values), dtype=bool)
    out[inside] = seen[values[inside]]
    return out


def _move_threads(ev: _Events) -> _Events:
    """Runtime/driver/overhead events take their op's thread, or the profiler's thread; an
    overhead event without a correlation takes the id of its C++ parent (torch's
    ``Result::correlationID()`` falls back to the parent's), which is how "Activity Buffer
    Request" inside aten::mm gets aten::mm's kernels in torch's table (H200 gemm trace: 2,684 µs)."""
    runtime = ev.role == _RUNTIME
    if not runtime.any():
        return ev
    thread, fid = ev.thread.copy(), ev.fid.copy()
    ops = np.flatnonzero((ev.role == _OP) & (ev.fid > 0))
    ids, first = np.unique(ev.fid[ops], return_index=True)
    linked = runtime & (ev.linked > 0)
    thread[linked] = ev.thread[ops[first[np.searchsorted(ids, ev.linked[linked])]]]
    steps = np.flatnonzero((ev.role == _OP) & (ev.key == _key_code(ev, STEP_ROW)))
    # Without steps, the first op's thread; never a Python frame's: with_stack's tracer records
    # every Python thread (a DataLoader's, a logger's), and one whose frame comes first took
    # "Activity Buffer Request" away from the op it ran in (+407 µs self CPU on aten::gather).
    cpu_ops = np.flatnonzero(ev.role == _OP)
    if not len(cpu_ops):
        cpu_ops = np.flatnonzero(ev.role == _PYTHON)
    main = ev.thread[steps[0]] if len(steps) else ev.thread[cpu_ops[0]] if len(cpu_ops) else -2
    thread[runtime & ~linked] = main
    orphans = np.flatnonzero(runtime & ~linked & (ev.fid == 0))
    # C++ build_tree's stack on the main thread: ops, python frames, unlinked runtime calls
    # (linked ones are finished before it runs); the innermost one still open (end ≥ start).
    stacked = np.flatnonzero((thread == main) & ((ev.role == _OP) | (ev.role == _PYTHON) | (runtime & ~linked)))
    stacked = stacked[~np.isin(stacked, orphans)]
    starts, ends = ev.start_ns[stacked], ev.end_ns[stacked]
    reach = np.maximum.accumulate(ends) if len(ends) else ends  # latest end so far: is anything open?
    for i in orphans:  # a few per step (one "Activity Buffer Request", some "Lazy Function Loading")
        k = int(np.searchsorted(starts, ev.start_ns[i], side="right"))
        at = innermost_open(starts, ends, ev.start_ns[i]) if k and reach[k - 1] >= ev.start_ns[i] else -1
        fid[i] = ev.fid[stacked[at]] if at >= 0 else 0
    return dataclasses.replace(ev, thread=thread, fid=fid)


def _take(ev: _Events, mask: np.ndarray) -> _Events:
    fields = {f.name: getattr(ev, f.name)[mask] for f in dataclasses.fields(ev) if f.name != "key_names"}
    return dataclasses.replace(ev, **fields)


def _key_code(ev: _Events, name: str) -> int:
    hit = np.flatnonzero(ev.key_names == name)
    return int(hit[0]) if len(hit) else -1


def _own_device_us(ev: _Events) -> np.ndarray:
    """Kernel time appended to each CPU event (torch's FunctionEvent.kernels), µs."""
    own = np.zeros(len(ev.rows))
    dev = np.flatnonzero((ev.role == _DEVICE) & (ev.linked > 0))
    front = np.flatnonzero(ev.cpu & ~ev.is_async & (ev.linked == 0) & (ev.fid > 0))
    if not len(dev) or not len(front):
        return own
    linked, fid = ev.linked[dev], ev.fid[front]
    top = int(linked.max())
    if top <= _LOOKUP_MAX_ID:  # ids are small counters: sum by id directly (the sums add in the same order)
        sums = np.bincount(linked, weights=ev.dur_us[dev], minlength=top + 1)
        hit = fid <= top
        hit[hit] = np.bincount(linked, minlength=top + 1)[fid[hit]] > 0
        own[front[hit]] = sums[fid[hit]]
        return own
    ids, inv = np.unique(linked, return_inverse=True)
    sums = np.bincount(inv.reshape(-1), weights=ev.dur_us[dev], minlength=len(ids))
    pos = np.minimum(np.searchsorted(ids, fid), len(ids) - 1)
    hit = ids[pos] == fid
    own[front[hit]] = sums[pos[hit]]
    return own


# --------------------------------------------------------------------------- tree


def _tree(ev: _Events) -> np.ndarray:
    """Parent of each CPU event (positions in ``ev``), -1 at the top and for device events.

    Where a thread's events nest properly (every event inside or after the ones before it) the
    stack reduces to counting open events; threads with a partial overlap (python frames that
    outlive the op they opened in, a moved runtime event) replay torch's stack.
    """
    parent = np.full(len(ev.rows), -1, dtype=np.int64)
    cpu = np.flatnonzero(ev.cpu & ~ev.is_async)
    if not len(cpu):
        return parent
    idx = cpu[stable_order(ev.thread[cpu])]  # per thread, list order kept
    thread, start, end = ev.thread[idx], ev.start_ns[idx], ev.end_ns[idx]
    local, bad = nested_parents(thread, start, end)
    for t in np.unique(thread[bad]):
        span = np.flatnonzero(thread == t)
        replayed = stack_parents(start[span].tolist(), end[span].tolist())
        local[span] = np.where(replayed >= 0, span[0] + replayed, -1)
    parent[idx] = np.where(local >= 0, idx[np.maximum(local, 0)], -1)
    return parent


def _collapse_and_total(ev: _Events, parent: np.ndarray, own: np.ndarray):
    """_remove_dup_nodes, then per event: alive, self CPU, self device, device total (µs)."""
    n = len(parent)
    has = parent >= 0
    p = np.maximum(parent, 0)
    children = np.bincount(parent[has], minlength=n)
    dropped = has & (ev.key[p] == ev.key) & (children[p] == 1)
    rep = np.where(dropped, parent, np.arange(n))
    while True:  # pointer jumping to the chain's surviving top
        nxt = rep[rep]
        if np.array_equal(nxt, rep):
            break
        rep = nxt
    alive = ~dropped
    eff = np.where(has & alive, rep[p], -1)
    # The chain's top takes the kernels of its deepest dropped node (the one with no dropped child).
    own = own.copy()
    bottom = np.flatnonzero(dropped & ~np.isin(np.arange(n), parent[dropped]))
    own[rep[bottom]] = own[bottom]
    own[dropped] = 0.0
    dur = ev.dur_us
    kids = eff >= 0
    self_cpu = np.where(ev.cpu & ~ev.is_async, dur - np.bincount(eff[kids], weights=dur[kids], minlength=n), 0.0)
    total, below = _device_totals(eff, own)
    device = ~ev.cpu
    self_device = np.where(device, dur, total - below)  # torch: total − Σ children's totals
    total[device] = dur[device]
    return alive, self_cpu, self_device, total, eff


def _device_totals(eff: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(device total, Σ children's device totals) per event, summed bottom-up as torch's
    recursive ``device_time_total`` adds them (own kernels + children in list order), so the
    floats round alike (a 4.545 µs total over 6 calls prints 0.758 only then)."""
    n = len(eff)
    depth = np.zeros(n, dtype=np.int64)
    live = np.flatnonzero(eff >= 0)  # events still below their ancestor ``up``: the walk shrinks with them
    up = eff[live]
    while len(live):
        depth[live] += 1
        up = eff[up]
        live, up = live[up >= 0], up[up >= 0]
    total, below = own.copy(), np.zeros(n)
    by_depth = stable_order(depth)  # list order within a level
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max(initial=0)) + 2))
    for d in range(len(bounds) - 2, 0, -1):
        at, upper = by_depth[bounds[d]:bounds[d + 1]], by_depth[bounds[d - 1]:bounds[d]]
        below += np.bincount(eff[at], weights=total[at], minlength=n)
        total[upper] = own[upper] + below[upper]
    return total, below


# --------------------------------------------------------------------------- rows


def _average(trace: Trace, ev: _Events, times: tuple, memory: tuple, by_shape: bool) -> pd.DataFrame:
    """FunctionEventAvg sums per (name, device type, annotation[, shapes]), first-seen order;
    torch's ``[memory]`` row where records fell inside no event."""
    alive, self_cpu, own, total = times
    per_event_memory, mem = memory
    live = np.flatnonzero(alive)
    if not len(live):
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("name", "input_shapes", "device_type")
                                          else float) for c in KEY_AVERAGES_COLUMNS})
    annotation = ev.label[live]
    device = ~ev.cpu[live]
    shape_code, shape_text = _torch_shapes(trace, ev.rows[live]) if by_shape else (np.zeros(len(live), np.int64), [""])
    parts = (ev.key[live], device, annotation, shape_code)
    key = np.zeros(len(live), dtype=np.int64)
    for part in parts:
        part = np.asarray(part, dtype=np.int64)
        key = key * (int(part.max(initial=0)) + 1) + part
    gid, _ = pd.factorize(key)  # numbered in order of first appearance
    # So each group's first row is where gid exceeds every gid before it (np.unique's
    # return_index, without its sort).
    first = np.flatnonzero(np.r_[True, gid[1:] > np.maximum.accumulate(gid)[:-1]])
    n_groups = len(first)

    def per_group(values: np.ndarray) -> np.ndarray:
        return np.bincount(gid, weights=values, minlength=n_groups)

    dur = ev.dur_us[live]
    frame = pd.DataFrame({
        "name": ev.key_names[ev.key[live][first]].astype(object),
        "input_shapes": np.asarray(shape_text, dtype=object)[shape_code[first]],
        "count": np.bincount(gid, minlength=n_groups).astype(np.int64),
        "self_cpu_us": per_group(self_cpu[live]),
        "cpu_total_us": per_group(np.where(device, 0.0, dur)),
        "self_device_us": per_group(own[live]),
        "device_total_us": per_group(total[live]),
        **{c: per_group(v[live].astype(np.float64)).astype(np.int64) for c, v in per_event_memory.items()},
        "flops": per_group(op_flops_of(trace, ev.rows[live]).astype(np.float64)).astype(np.int64),
        "is_user_annotation": annotation[first],
        "device_type": np.where(device[first], "cuda", "cpu").astype(object),
    }, columns=list(KEY_AVERAGES_COLUMNS))
    extra = [(mem.first_unmatched_ns, memory_row(mem, KEY_AVERAGES_COLUMNS))] if mem.unmatched_count else []
    if (oom := oom_row(trace.out_of_memory, KEY_AVERAGES_COLUMNS)) is not None:
        extra.append(oom)
    # torch's list is time-sorted: a [memory] / [OutOfMemory] event follows every event starting
    # at or before it, and its row stands where its name first appears.
    starts, pieces, done = ev.start_ns[live][first], [], 0
    for first_ns, row in sorted(extra, key=lambda x: x[0]):
        at = int(np.searchsorted(starts, first_ns, side="right"))
        pieces += [frame.iloc[done:at], row]
        done = at
    return pd.concat([*pieces, frame.iloc[done:]], ignore_index=True) if extra else frame


def _memory(trace: Trace, ev: _Events, eff: np.ndarray) -> tuple[dict, object]:
    """Per event: the four memory columns (bytes) by torch's rule (``table.memory``), and the
    records no CPU event took."""
    cpu_side = ev.cpu
    mem = event_memory(trace.memory, ev.start_ns, ev.end_ns, cpu_side)
    has_self = cpu_side & ~ev.is_async
    return {"self_cpu_memory_bytes": self_memory(mem.cpu, eff, has_self), "cpu_memory_bytes": mem.cpu,
            "self_device_memory_bytes": self_memory(mem.device, eff, has_self),
            "device_memory_bytes": mem.device}, mem


def _torch_shapes(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """``str(FunctionEvent.input_shapes)`` per row: "Input Dims" with each TensorList (a list of
    shapes) as [], as torch's ``KinetoEvent.shapes()`` has it; "[]" where none was recorded."""
    codes, texts = _codes(trace.events["input_dims"])
    local, used = pd.factorize(codes[rows])
    torch_texts = [_shapes_text(str(texts[c])) if c >= 0 else "[]" for c in used]
    code_of, uniques = pd.factorize(np.array(torch_texts, dtype=object))
    return code_of[local], list(uniques)


def _shapes_text(dims: str) -> str:
    try:
        shapes = ast.literal_eval(dims) if dims else []
    except (ValueError, SyntaxError, RecursionError):
        return dims  # cut at 1000 characters by lab.trace, or not a list: as written
    if not isinstance(shapes, list):
        return dims
    return str([[] if any(isinstance(d, list) for d in s) else s if isinstance(s, list) else []
                for s in shapes])

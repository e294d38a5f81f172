"""Collectives matched across ranks: each one's skew, waits, transfer, size and bandwidths.

One rank's collectives (``rank_collectives``, in the reader): the events that time a collective
on that rank — NCCL kernels when it has any, else gloo's ``gloo:*`` ranges (gloo runs the
collective on its own thread, from the moment the rank's work reaches it until every rank has
contributed), else the host's ``nccl:*`` ranges, else the ``c10d::*`` calls — with what the
trace says of each: kind, process group, sequence number, message size.

The metadata comes from torch's ``record_param_comms`` args (``Collective name``, ``dtype``,
``In/Out msg nelems``, ``Group size``, ``Process Group Name``, ``Seq``), which Kineto copies
onto NCCL kernels; a timing event without them borrows them, in order, from the rank's
``record_param_comms`` ops when both count the same; else the kind comes from the event's name
and the size from its ``Input Dims`` × ``Input type`` (gloo's ranges with ``record_shapes``).

Matching (``match_collectives``, on the server): by (process group, sequence number) when every
rank's collectives carry one; else by order within each process group (every rank of a group
issues its collectives in one order). Per collective, on the job's clock: the **start skew**
(last start − first start); each rank's **wait** (the last rank's start − its own start: the
time it spends in the collective before every rank has arrived); the **transfer** (the median
over ranks of its end − the last start); the **size** (bytes: elements × the dtype's size,
the larger of in and out as nccl-tests counts it: an all_gather's output, a reduce_scatter's
input); **algbw** = size / transfer and **busbw** = algbw × ``bus_factor``.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from lab.analysis.diagnoses.comm import COMM_KERNEL_PATTERN
from lab.analysis.diagnoses.common import ancestor_in, mask_in, mask_where, parents
from lab.trace import Trace
from lab.vocab import ELEMENT_BYTES, INPUT_TYPE_DTYPES

__all__ = [
    "COLLECTIVE_COLUMNS", "HOST_TIMING_PREFIXES", "KINDS", "RANK_COLLECTIVE_COLUMNS", "WAIT_COLUMNS", "bus_factor",
    "collective_kind", "element_bytes", "match_collectives", "rank_collectives",
]  # fmt: skip

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")
# Names as traces spell them, squeezed to letters: c10d::allreduce_, gloo:all_reduce,
# ncclDevKernel_AllReduce_Sum_f32_RING_LL, "Collective name": _allgather_base, reduce_scatter_tensor_coalesced,
# alltoall_base, all_to_allv. Longest first: "reduce" would match "allreduce" and "reducescatter".
_KIND_PATTERNS = (("reducescatter", "reduce_scatter"), ("allreduce", "all_reduce"), ("allgather", "all_gather"),
                  ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("reduce", "reduce"))
_LETTERS = re.compile(r"[^a-z]")
# Without NCCL kernels, what times a collective on the host, best first (see the module doc).
HOST_TIMING_PREFIXES = ("gloo:", "nccl:", "c10d::")
# Kineto's "dtype" is c10::toString(ScalarType): "Float", "BFloat16", … → the lab's dtype names.
_SCALAR_TYPES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16",
                 "Char": "int8", "Byte": "uint8", "Float8_e4m3fn": "float8_e4m3fn", "Float8_e5m2": "float8_e5m2"}
# Integer and boolean tensors the lab's tables do not hold (sizes from c10's ScalarType), as
# both spellings write them: ScalarType ("Int") and "Input type" ("int").
_OTHER_BYTES = {"Int": 4, "Long": 8, "Short": 2, "Bool": 1, "int": 4, "long int": 8, "short int": 2, "bool": 1}

# size_is_input: the size is the first input's (from Input Dims), which for an all_gather is a
# 1/n share of what nccl-tests counts: the matching multiplies it by the group's size.
RANK_COLLECTIVE_COLUMNS = ("kind", "group", "seq", "start_us", "end_us", "size_bytes", "group_size", "size_is_input")
COLLECTIVE_COLUMNS = ("collective", "group", "seq", "kind", "ranks", "group_size", "first_rank", "last_rank",
                      "start_skew_us", "transfer_us", "size_bytes", "algbw_gbs", "busbw_gbs", "start_us")
WAIT_COLUMNS = ("collective", "rank", "wait_us", "transfer_us", "in_window")  # in_window: its row's, else True


def bus_factor(kind: str, n: int) -> float | None:
    """busbw / algbw for a collective of ``n`` ranks, as NCCL defines it: nccl-tests'
    doc/PERFORMANCE.md ("Bus bandwidth": all_reduce 2(n−1)/n; reduce_scatter, all_gather and
    all_to_all (n−1)/n; broadcast and reduce 1). None for a kind it does not define."""
    if n < 1:
        return None
    if kind == "all_reduce":
        return 2 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if kind in ("broadcast", "reduce"):
        return 1.0
    return None


def collective_kind(name: str) -> str:
    """The collective a name states (one of ``KINDS``), else the name itself."""
    squeezed = _LETTERS.sub("", name.lower())
    return next((kind for pattern, kind in _KIND_PATTERNS if pattern in squeezed), name)


def element_bytes(dtype: str) -> float:
    """Bytes per element of a dtype as a trace spells it ("Float", "c10::BFloat16", "float"); NaN if unknown."""
    name = _SCALAR_TYPES.get(dtype) or INPUT_TYPE_DTYPES.get(dtype)
    size = ELEMENT_BYTES.get(name) if name else _OTHER_BYTES.get(dtype)
    return float(size) if size else float("nan")


def _number(text) -> float:
    try:
        return float(text) if text != "" else float("nan")
    except (TypeError, ValueError):
        return float("nan")


def _first_list(text: str) -> list:
    """The first element of an "[[8, 64], []]"-style text, as a list (Input Dims, Input type)."""
    try:
        value = ast.literal_eval(text) if text else []
    except (ValueError, SyntaxError):
        return []
    return value if isinstance(value, list) else []


def _shape_bytes(dims: str, types: str) -> float:
    """The first tensor input's bytes from its Input Dims and Input type (a TensorList: its first tensor)."""
    shapes, kinds = _first_list(dims), _first_list(types)
    if not shapes or not kinds:
        return float("nan")
    shape = shapes[0]
    if shape and isinstance(shape[0], list):  # a TensorList: [[n, m]]
        shape = shape[0]
    size = element_bytes(kinds[0]) if isinstance(kinds[0], str) else float("nan")  # a TensorList's: unknown
    return float(math.prod(shape)) * size if isinstance(shape, list) else float("nan")


def _timing_rows(trace: Trace) -> np.ndarray:
    """The events that time each collective on this rank (see the module doc), outermost, by start."""
    ev = trace.events
    ts = ev["ts_us"].to_numpy()
    nccl = np.flatnonzero(mask_in(ev["cat"], ("kernel",)) & mask_where(ev["name"], COMM_KERNEL_PATTERN.search))
    if len(nccl):
        return nccl[np.argsort(ts[nccl], kind="stable")]
    cpu = mask_in(ev["lane_kind"], ("cpu",))
    for prefix in HOST_TIMING_PREFIXES:
        mask = cpu & mask_where(ev["name"], lambda n, p=prefix: n.startswith(p))
        found = np.flatnonzero(mask)
        if len(found):
            outer = found[ancestor_in(parents(trace), mask, found) < 0] if _nested(trace, found) else found
            return outer[np.argsort(ts[outer], kind="stable")]
    return np.array([], dtype=np.int64)


def _nested(trace: Trace, rows: np.ndarray) -> bool:
    """Whether any of ``rows`` starts inside another on its lane (events are sorted by lane, then start)."""
    ev = trace.events
    lane, ts = ev["lane_order"].to_numpy()[rows], ev["ts_us"].to_numpy()[rows]
    end = ts + ev["dur_us"].to_numpy()[rows]
    return bool(((lane[1:] == lane[:-1]) & (ts[1:] < np.maximum.accumulate(end)[:-1])).any())


def _meta_rows(trace: Trace, timing: np.ndarray) -> np.ndarray:
    """For each timing row, the row whose collective args describe it (``Trace.collective_args``):
    its own when it has them, else the rank's record_param_comms ops in order (when both count
    the same), else -1."""
    described = trace.collective_args["row"].to_numpy(dtype=np.int64)
    if not len(described):
        return np.full(len(timing), -1)
    if len(timing) and np.isin(timing, described).all():
        return timing
    names = trace.events["name"].take(described).astype(str).to_numpy()
    described = described[names == "record_param_comms"]
    if len(described) == len(timing):
        return described[np.argsort(trace.events["ts_us"].to_numpy()[described], kind="stable")]
    return np.full(len(timing), -1)


def _meta(trace: Trace, m: int) -> tuple[str, str, float, float, float]:
    """(kind, process group, Seq, size in bytes, group size) from the collective args of row ``m``."""
    args = trace.collective_args
    a = args.iloc[int(np.flatnonzero(args["row"].to_numpy() == m)[0])]
    elements = np.nanmax([_number(a["in_msg_nelems"]), _number(a["out_msg_nelems"]), -1.0])
    size = elements * element_bytes(str(a["collective_dtype"])) if elements >= 0 else float("nan")
    return (collective_kind(str(a["collective"])), str(a["process_group"]), _number(a["collective_seq"]), size,
            _number(a["group_size"]))


def rank_collectives(trace: Trace) -> pd.DataFrame:
    """One row per collective this rank took part in (``RANK_COLLECTIVE_COLUMNS``; own clock, µs)."""
    timing = _timing_rows(trace)
    if not len(timing):
        return pd.DataFrame(columns=list(RANK_COLLECTIVE_COLUMNS))
    ev = trace.events
    meta = _meta_rows(trace, timing)
    text = {c: ev[c].take(timing).astype(str).to_numpy() for c in ("name", "input_dims", "input_type")}
    rows = []
    ts, dur = ev["ts_us"].to_numpy(dtype=float), ev["dur_us"].to_numpy(dtype=float)
    for i, (t, m) in enumerate(zip(timing.tolist(), meta.tolist(), strict=True)):
        if m >= 0:
            kind, group, seq, size, n = _meta(trace, m)
        else:
            kind, group, seq, n = collective_kind(text["name"][i]), "", float("nan"), float("nan")
            size = _shape_bytes(text["input_dims"][i], text["input_type"][i])
        rows.append((kind, group, seq, ts[t], ts[t] + dur[t], size, n, m < 0))
    return pd.DataFrame(rows, columns=list(RANK_COLLECTIVE_COLUMNS))


def _keyed(frames: Sequence[pd.DataFrame], ranks: Sequence[int], offsets: Sequence[float]) -> pd.DataFrame:
    """Every rank's collectives on the job's clock, with the key they are matched by."""
    by_seq = all(len(f) and f["seq"].notna().all() for f in frames)
    kept = [(f, rank, off) for f, rank, off in zip(frames, ranks, offsets, strict=True) if len(f)]
    rows = pd.concat([f for f, _, _ in kept], ignore_index=True)
    sizes = [len(f) for f, _, _ in kept]
    rows["rank"] = np.repeat([r for _, r, _ in kept], sizes)
    shift = np.repeat([o for _, _, o in kept], sizes)
    rows["start_us"] = rows["start_us"].to_numpy(dtype=float) + shift
    rows["end_us"] = rows["end_us"].to_numpy(dtype=float) + shift
    rows["key"] = rows["seq"] if by_seq else rows.groupby(["rank", "group"]).cumcount().astype(float)
    return rows


def match_collectives(frames: Sequence[pd.DataFrame], ranks: Sequence[int],
                      offsets: Sequence[float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per collective two or more ranks took part in: ``COLLECTIVE_COLUMNS``; one row
    per (collective, rank): ``WAIT_COLUMNS``). ``frames``: each rank's ``rank_collectives``;
    ``offsets``: each rank's first event on the job's clock (``job.job_offsets_us``)."""
    empty = pd.DataFrame(columns=list(COLLECTIVE_COLUMNS)), pd.DataFrame(columns=list(WAIT_COLUMNS))
    if not any(len(f) for f in frames):
        return empty
    rows = _keyed(frames, ranks, offsets)
    out: list[dict] = []
    waits: list[dict] = []
    for i, ((group, _key), g) in enumerate(rows.groupby(["group", "key"], sort=True)):
        if g["rank"].nunique() < 2:
            continue
        last = float(g["start_us"].max())
        transfer = np.maximum(g["end_us"].to_numpy() - last, 0.0)
        n = int(g["group_size"].dropna().iloc[0]) if g["group_size"].notna().any() else int(g["rank"].nunique())
        kind = str(g["kind"].mode().iloc[0])
        size = float(g["size_bytes"].median()) * (n if kind == "all_gather" and g["size_is_input"].all() else 1)
        t = float(np.median(transfer))
        algbw = size / (t * 1e3) if t > 0 and np.isfinite(size) else float("nan")  # bytes/µs → GB/s
        factor = bus_factor(kind, n)
        out.append({"collective": i, "group": group, "seq": g["seq"].iloc[0], "kind": kind,
                    "ranks": int(g["rank"].nunique()), "group_size": n,
                    "first_rank": int(g.loc[g["start_us"].idxmin(), "rank"]),
                    "last_rank": int(g.loc[g["start_us"].idxmax(), "rank"]),
                    "start_skew_us": last - float(g["start_us"].min()), "transfer_us": t, "size_bytes": size,
                    "algbw_gbs": algbw, "busbw_gbs": algbw * factor if factor is not None else float("nan"),
                    "start_us": float(g["start_us"].min())})
        inside = g["in_window"] if "in_window" in g else pd.Series(True, index=g.index)
        waits.extend({"collective": i, "rank": int(r), "wait_us": last - s, "transfer_us": float(x),
                      "in_window": bool(w)}
                     for r, s, x, w in zip(g["rank"], g["start_us"], transfer, inside, strict=True))
    if not out:
        return empty
    table = pd.DataFrame(out, columns=list(COLLECTIVE_COLUMNS)).sort_values("start_us", ignore_index=True)
    return table, pd.DataFrame(waits, columns=list(WAIT_COLUMNS))

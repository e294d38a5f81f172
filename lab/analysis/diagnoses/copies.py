"""Copies from or to pageable host memory: slow, synchronous for the host, and often the whole story.

Kineto names each memcpy by its memory kinds: "Memcpy HtoD (Pageable -> Device)",
"Memcpy DtoH (Device -> Pageable)", "Memcpy HtoD (Pinned -> Device)", … A pageable copy is
staged by the driver through a pinned bounce buffer: it reaches a fraction of the link's
bandwidth, and ``non_blocking=True`` cannot make it asynchronous (the host waits in
cudaMemcpyAsync for the whole copy).

Bytes: Kineto writes ``args["bytes"]`` on every memcpy (``Trace.events["copy_bytes"]``); a
trace without it (older Kineto, a stripped upload) falls back to the enclosing copy op's input
shape and dtype (``record_shapes=True``); else they are unknown and no GB/s is claimed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from lab.analysis.diagnoses.common import (
    ancestor_in,
    gpu_busy,
    mask_in,
    mask_where,
    merge_intervals,
    parents,
    pct,
    texts,
)
from lab.trace import Trace
from lab.vocab import ELEMENT_BYTES, INPUT_TYPE_DTYPES

__all__ = ["COPY_BOUND_PCT", "PAGEABLE_MIN_PCT", "PAGEABLE_WARN_PCT", "PageableCopies", "find_pageable_copies"]

# Share of GPU busy time spent in pageable copies: ≥ 1 % is worth a line (info), ≥ 10 % a
# warning, ≥ 50 % means the copies *are* the run ("copy-bound": a user's trace spent 226 of
# 243 ms of GPU busy time, 93 %, in them) and the verdict says so.
PAGEABLE_MIN_PCT = 1.0
PAGEABLE_WARN_PCT = 10.0
COPY_BOUND_PCT = 50.0
# Ops that copy a tensor between host and device, and which input is the source.
_COPY_SOURCE_INPUT = {"aten::copy_": 1, "aten::_copy_from": 0, "aten::_copy_from_and_resize": 0,
                      "aten::_to_copy": 0, "aten::to": 0}


@dataclass(frozen=True)
class PageableCopies:
    """Pageable vs pinned memcpys: time, share of GPU busy time, bytes and achieved GB/s."""

    count: int
    directions: tuple[str, ...]  # "HtoD", "DtoH" among the pageable copies
    pageable_us: float  # summed durations
    pageable_busy_pct: float  # union of pageable copies / GPU busy time
    gpu_busy_us: float
    pageable_bytes: float | None
    pageable_gbps: float | None
    pinned_count: int
    pinned_us: float
    pinned_bytes: float | None
    pinned_gbps: float | None
    host_blocked_us: float  # host time inside the launch calls of the pageable copies
    bytes_source: str  # "trace" (args bytes), "shapes" (record_shapes) or "" (unknown)
    severity: str


def _parse(text: str):
    try:
        return ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _op_bytes(dims_text: str, type_text: str, index: int) -> float:
    dims, types = _parse(dims_text), _parse(type_text)
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) <= index or len(types) <= index:
        return np.nan
    shape, dtype = dims[index], INPUT_TYPE_DTYPES.get(str(types[index]))
    if not isinstance(shape, list) or dtype is None or not all(isinstance(d, int) for d in shape):
        return np.nan
    return float(np.prod(shape, dtype=np.float64)) * ELEMENT_BYTES[dtype]


def memcpy_bytes(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, str]:
    """Bytes of each memcpy row (NaN when unknown) and where they came from."""
    ev = trace.events
    given = ev["copy_bytes"].to_numpy(dtype=float)[rows]
    if np.isfinite(given).all() and len(given):
        return given, "trace"
    flows = trace.flows
    launch_of = np.full(len(ev), -1, dtype=np.int64)
    launch_of[flows["gpu_row"].to_numpy()] = flows["launch_row"].to_numpy()
    launch = launch_of[rows]
    out = np.full(len(rows), np.nan)
    has = launch >= 0
    if not has.any():
        return out, ""
    owner = np.full(len(rows), -1, dtype=np.int64)
    owner[has] = ancestor_in(parents(trace), mask_in(ev["name"], tuple(_COPY_SOURCE_INPUT)), launch[has])
    for i in np.flatnonzero(owner >= 0):
        o = owner[i]
        name = str(texts(ev["name"], np.array([o]))[0])
        out[i] = _op_bytes(str(texts(ev["input_dims"], np.array([o]))[0]),
                           str(texts(ev["input_type"], np.array([o]))[0]), _COPY_SOURCE_INPUT[name])
    return out, "shapes" if np.isfinite(out).any() else ""


def _gbps(bytes_: np.ndarray, dur_us: np.ndarray) -> tuple[float | None, float | None]:
    known = np.isfinite(bytes_)
    if not known.any() or dur_us[known].sum() <= 0:
        return None, None
    total = float(bytes_[known].sum())
    return total, total / float(dur_us[known].sum()) / 1e3  # bytes/µs = MB/s; /1e3 → GB/s


def find_pageable_copies(trace: Trace) -> PageableCopies | None:
    """Pageable memcpys at ≥ PAGEABLE_MIN_PCT of GPU busy time, with pinned ones for comparison."""
    ev = trace.events
    memcpy = mask_in(ev["cat"], ("gpu_memcpy",))
    pageable = np.flatnonzero(memcpy & mask_where(ev["name"], lambda n: "Pageable" in n))
    if not len(pageable):
        return None
    pinned = np.flatnonzero(memcpy & mask_where(ev["name"], lambda n: "Pinned" in n))
    busy = gpu_busy(trace)
    ts, dur = ev["ts_us"].to_numpy(), ev["dur_us"].to_numpy()
    ps, pe = merge_intervals(ts[pageable], ts[pageable] + dur[pageable])
    share = pct(float((pe - ps).sum()), busy.busy_us)
    if share < PAGEABLE_MIN_PCT:
        return None
    both = np.concatenate([pageable, pinned])
    nbytes, source = memcpy_bytes(trace, both)
    p_bytes, p_gbps = _gbps(nbytes[: len(pageable)], dur[pageable])
    q_bytes, q_gbps = _gbps(nbytes[len(pageable):], dur[pinned])
    flows = trace.flows
    launch_of = dict(zip(flows["gpu_row"].to_numpy().tolist(), flows["launch_row"].to_numpy().tolist(), strict=True))
    launches = sorted({launch_of[r] for r in pageable.tolist() if r in launch_of})
    names = texts(ev["name"], pageable)
    directions = tuple(d for d in ("HtoD", "DtoH", "DtoD") if any(d in n for n in names))
    severity = "critical" if share >= COPY_BOUND_PCT else "warning" if share >= PAGEABLE_WARN_PCT else "info"
    return PageableCopies(
        count=len(pageable), directions=directions, pageable_us=float(dur[pageable].sum()),
        pageable_busy_pct=share, gpu_busy_us=busy.busy_us, pageable_bytes=p_bytes, pageable_gbps=p_gbps,
        pinned_count=len(pinned), pinned_us=float(dur[pinned].sum()), pinned_bytes=q_bytes, pinned_gbps=q_gbps,
        host_blocked_us=float(dur[np.array(launches, dtype=np.int64)].sum()) if launches else 0.0,
        bytes_source=source, severity=severity,
    )

"""Stage 3b of ``load_trace``: profile_memory's "[memory]" record arrays → ``Trace.memory``.

``columns.MemoryParts`` collected the records batch by batch in the same decode pass as the
complete events; here they get the events' clock (µs since the first complete event, to the
ns as ``values.relative_us`` keeps it, so torch's "record inside an op" test compares exact
integers), their device type as a name, the allocating thread's lane, and one stable sort by
time. Columns are documented in ``lab/trace/model.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lab.trace.lanes import Lane
from lab.trace.model import MEMORY_COLUMNS, empty_memory
from lab.trace.values import MAX_SPAN_US, relative_us
from lab.vocab import MEMORY_DEVICE_TYPES

__all__ = ["memory_frame"]

_INT16_MAX = np.iinfo(np.int16).max


def memory_frame(cols: dict | None, start_ts: float, lanes: dict[tuple[str, str], Lane]) -> pd.DataFrame:
    """``MemoryParts.columns()`` → ``Trace.memory`` (empty when the trace has no records)."""
    if cols is None:
        return empty_memory()
    ts = relative_us(cols["ts"], start_ts)
    # Records far outside the events' time (a damaged ts) belong to no op and no step: dropped,
    # so every time stays within int64 ns (values.MAX_SPAN_US).
    near = np.flatnonzero(np.abs(ts) <= MAX_SPAN_US)
    if len(near) < len(ts):
        cols = {**cols, "ts": cols["ts"][near], "values": cols["values"][near],
                "pid": (cols["pid"][0][near], cols["pid"][1]), "tid": (cols["tid"][0][near], cols["tid"][1])}
        ts = ts[near]
        if not len(ts):
            return empty_memory()
    order = np.argsort(ts, kind="stable")
    values = cols["values"][order]
    type_codes = values[:, 4].astype(np.int64)
    kinds, type_index = np.unique(type_codes, return_inverse=True)
    names = [MEMORY_DEVICE_TYPES.get(int(k), f"device type {int(k)}") for k in kinds]
    device_type = pd.Categorical.from_codes(type_index.reshape(-1), categories=pd.Index(names, dtype=object))
    addr = np.where(np.isfinite(values[:, 1]), values[:, 1], -1.0)
    device_id = np.where(np.isfinite(values[:, 5]), values[:, 5], -1.0)
    frame = {
        "ts_us": ts[order],
        "bytes": values[:, 0].astype(np.int64),
        "addr": addr.astype(np.int64),
        "total_allocated_bytes": values[:, 2].astype(np.int64),
        "total_reserved_bytes": values[:, 3].astype(np.int64),
        "device_type": device_type,
        "device_id": np.clip(device_id, -1, _INT16_MAX).astype(np.int16),
        "lane_order": _lane_orders(cols, lanes)[order],
    }
    return pd.DataFrame(frame, columns=list(MEMORY_COLUMNS))


def _lane_orders(cols: dict, lanes: dict[tuple[str, str], Lane]) -> np.ndarray:
    """Each record's thread as the lane order of the events' lane with that (pid, tid), else -1."""
    (pid_codes, pid_uniques), (tid_codes, tid_uniques) = cols["pid"], cols["tid"]
    n_tid = max(len(tid_uniques), 1)
    pair = pid_codes.astype(np.int64) * n_tid + tid_codes
    known = (pid_codes >= 0) & (tid_codes >= 0)
    out = np.full(len(pair), -1, dtype=np.int32)
    if not known.any():
        return out
    uniq, inverse = np.unique(pair[known], return_inverse=True)
    orders = [lanes.get((pid_uniques[p // n_tid], tid_uniques[p % n_tid])) for p in uniq.tolist()]
    table = np.array([-1 if ln is None else ln.order for ln in orders], dtype=np.int32)
    out[known] = table[inverse.reshape(-1)]
    return out

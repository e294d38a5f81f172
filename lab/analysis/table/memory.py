"""key_averages' memory columns from a trace's ``[memory]`` records, with torch's rules.

torch 2.11–2.13 ``profiler._parse_kineto_results`` and ``profiler_util``:

* every CPU-side event (``DeviceType.CPU``: ops, annotations, runtime/driver calls, the
  profiler's overhead events, python frames where torch lists them; async ones too, and ones
  ``_remove_dup_nodes`` drops later) takes every memory record whose time lies in
  [start, end], both ends included, on any thread (``MemRecordsAcc.in_interval``): its bytes go
  to ``cpu_memory_usage`` when the record's device type is CPU / MKLDNN / IDEEP, to
  ``device_memory_usage`` for CUDA / HIP / XPU / PrivateUse1; frees count negative;
* ``self_*_memory_usage`` = own − Σ the CPU children's own (the tree after same-name
  collapsing), 0 for async and device events;
* a record no CPU event took becomes a zero-length ``[memory]`` event of its own (count 1,
  its bytes as both own and self), so key_averages shows one ``[memory]`` CPU row; in torch's
  time-sorted list it comes after every event starting at or before it.

Times are integer ns on the clock of ``Trace.events`` (``Trace.memory.ts_us`` shares it), so
"inside" compares exact integers as torch's ``start_ns()`` do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.vocab import MEMORY_DEVICE_KINDS, MEMORY_EVENT_NAME, MEMORY_HOST_TYPES, OOM_EVENT_NAME

__all__ = ["MEMORY_COLUMNS", "EventMemory", "event_memory", "memory_row", "oom_row", "self_memory"]

MEMORY_COLUMNS = ("self_cpu_memory_bytes", "cpu_memory_bytes", "self_device_memory_bytes", "device_memory_bytes")


@dataclass(frozen=True)
class EventMemory:
    """Per event: bytes it took (``cpu``, ``device``); the records no event took."""

    cpu: np.ndarray  # int64, per event
    device: np.ndarray
    unmatched_cpu_bytes: int
    unmatched_device_bytes: int
    unmatched_count: int
    first_unmatched_ns: int  # time of the first record no event took (-1 if none)


def _record_arrays(memory: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time ns sorted, host bytes, device bytes) of the records, in time order."""
    ns = np.rint(memory["ts_us"].to_numpy() * 1000.0).astype(np.int64)
    kind = memory["device_type"].array  # categorical: test the few categories, not every row
    kinds = np.asarray(kind.categories, dtype=object)
    codes = np.asarray(kind.codes)
    nbytes = memory["bytes"].to_numpy(dtype=np.int64)
    host = np.where(np.isin(kinds, MEMORY_HOST_TYPES)[codes], nbytes, 0)
    device = np.where(np.isin(kinds, MEMORY_DEVICE_KINDS)[codes], nbytes, 0)
    order = np.argsort(ns, kind="stable")
    return ns[order], host[order], device[order]


def event_memory(memory: pd.DataFrame, start_ns: np.ndarray, end_ns: np.ndarray, takes: np.ndarray) -> EventMemory:
    """Bytes of the records inside each event's [start, end] (events where ``takes``; others 0)."""
    n = len(start_ns)
    zero = np.zeros(n, dtype=np.int64)
    if not len(memory):
        return EventMemory(zero, zero.copy(), 0, 0, 0, -1)
    ns, host, device = _record_arrays(memory)
    at = np.flatnonzero(takes)
    lo = np.searchsorted(ns, start_ns[at], side="left")
    hi = np.searchsorted(ns, end_ns[at], side="right")
    host_sum, device_sum = np.r_[0, np.cumsum(host)], np.r_[0, np.cumsum(device)]
    cpu, dev = zero.copy(), zero.copy()
    cpu[at] = host_sum[hi] - host_sum[lo]
    dev[at] = device_sum[hi] - device_sum[lo]
    # Records covered by at least one event's interval: +1 where an interval opens, −1 after it.
    cover = np.bincount(lo, minlength=len(ns) + 1) - np.bincount(hi, minlength=len(ns) + 1)
    free = np.flatnonzero(np.cumsum(cover[:-1]) == 0)
    return EventMemory(cpu, dev, int(host[free].sum()), int(device[free].sum()), len(free),
                       int(ns[free[0]]) if len(free) else -1)


def self_memory(own: np.ndarray, parent: np.ndarray, has_self: np.ndarray) -> np.ndarray:
    """own − Σ direct children's own (``parent``: -1 at the top), 0 where not ``has_self``."""
    kids = parent >= 0
    # Float sums are exact to 2**53 B (8 PiB) of children's bytes per event.
    below = np.bincount(parent[kids], weights=own[kids].astype(np.float64), minlength=len(own))
    return np.where(has_self, own - below.astype(np.int64), 0)


def memory_row(mem: EventMemory, columns: tuple[str, ...]) -> pd.DataFrame:
    """torch's ``[memory]`` row for the records no event took (an empty frame when none)."""
    if not mem.unmatched_count:
        return pd.DataFrame(columns=list(columns))
    return _row(MEMORY_EVENT_NAME, mem.unmatched_count, mem.unmatched_cpu_bytes, mem.unmatched_device_bytes, columns)


def oom_row(oom: pd.DataFrame, columns: tuple[str, ...]) -> tuple[int, pd.DataFrame] | None:
    """torch's ``[OutOfMemory]`` row (``_parse_kineto_results`` makes each such record a
    FunctionEvent of no duration), with the first record's time (ns); None without records.
    No op takes them, and the row's memory columns are 0: the C++ record carries no bytes (the
    JSON's "Bytes" is the size asked for), as torch's key_averages of the H200 OOM trace shows."""
    if not len(oom):
        return None
    ns = np.sort(np.rint(oom["ts_us"].to_numpy() * 1000.0).astype(np.int64))
    return int(ns[0]), _row(OOM_EVENT_NAME, len(ns), 0, 0, columns)


def _row(name: str, count: int, cpu_bytes: int, device_bytes: int, columns: tuple[str, ...]) -> pd.DataFrame:
    values = {
        "name": name, "input_shapes": "[]", "count": count,
        "self_cpu_us": 0.0, "cpu_total_us": 0.0, "self_device_us": 0.0, "device_total_us": 0.0,
        "self_cpu_memory_bytes": cpu_bytes, "cpu_memory_bytes": cpu_bytes,
        "self_device_memory_bytes": device_bytes, "device_memory_bytes": device_bytes,
        "flops": 0, "is_user_annotation": False, "device_type": "cpu",
    }  # fmt: skip
    return pd.DataFrame({c: [values[c]] for c in columns}, columns=list(columns))

"""Records → column pieces (numpy arrays, factorized strings), one batch of records at a time.

Only one batch's Python objects are alive at once; ``EventParts`` / ``FlowParts`` keep compact
arrays per batch and merge them at the end. ``grouped_keys`` is the sortable-key trick that
nesting depth and flow matching share.
"""

from __future__ import annotations

import json
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

from lab.trace.records import COLLECTIVE_ARGS, EMPTY_ARGS, FLOAT_ARGS, INT_ARGS, MEMORY_ARGS, TEXT_ARGS, Event
from lab.trace.values import MAX_ABS_US, MAX_MEMORY_BYTES, id_str, short_repr
from lab.vocab import FLOW_CAT, MEMORY_EVENT_NAME, OOM_EVENT_NAME

__all__ = ["CATEGORY_PARTS", "EventParts", "FlowParts", "MemoryParts", "grouped_keys"]

CATEGORY_PARTS = ("name", "cat", "pid", "tid") + TEXT_ARGS
_COLL_NAME_OF = attrgetter("coll_name")
_COLL_OF = attrgetter(*COLLECTIVE_ARGS)
_INT_OF = attrgetter(*INT_ARGS)
_FLOAT_OF = attrgetter(*FLOAT_ARGS)
_TEXT_OF = attrgetter(*TEXT_ARGS)
_MEMORY_OF = attrgetter(*MEMORY_ARGS)
_TS_OF, _DUR_OF = attrgetter("ts"), attrgetter("dur")
# Float keys group * width + time stay exact to well under 1 ns below this magnitude
# (float64 ulp at 1e12 is 1.2e-4); past it (absurd spans) keys become integer ranks instead.
_EXACT_FLOAT_KEY_LIMIT = 1e12


def grouped_keys(*pairs: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """Sortable keys for (group, time) pairs, group ≥ 0 and time ≥ 0: key order is (group,
    time) order and equal pairs get equal keys, so one global sort or searchsorted serves
    every group at once (groups are shifted into disjoint ranges)."""
    times = np.concatenate([t for _, t in pairs])
    if not len(times):
        return [t.astype(np.float64) for _, t in pairs]
    groups = 1 + max(int(g.max()) for g, _ in pairs if len(g)) if any(len(g) for g, _ in pairs) else 1
    width = float(times.max()) + 1.0
    if width * groups < _EXACT_FLOAT_KEY_LIMIT:
        return [g.astype(np.float64) * width + t for g, t in pairs]
    uniq = np.unique(times)
    return [g.astype(np.int64) * len(uniq) + np.searchsorted(uniq, t) for g, t in pairs]


def _text_codes(values) -> tuple[np.ndarray, list[str]]:
    """Text args (raw JSON) → codes and "[2, 66, 1]"-style texts, each distinct raw value
    decoded and formatted once. Code 0 is "" (the arg is absent)."""
    # One C-level join and split turn the batch's raw values into bytes keys (a Python loop
    # of bytes(raw) per value cost 2x this: 29.8 → 17.9 ms CPU for the text args of
    # bench/data/transformer_step_h200.json.gz, 43 → 18 ms wall for a 10 MB small-ops CPU
    # trace). JSON text holds no NUL byte, so NUL separates values; if a raw value somehow
    # holds one, the split count tells, and the values are copied one by one instead.
    n = len(values)
    joined = b"\x00".join(values)
    if len(joined) == n - 1:  # every value empty: the arg appears nowhere in this batch
        return np.zeros(n, dtype=np.intp), [""]
    keys = joined.split(b"\x00")
    if len(keys) != n:
        keys = [bytes(v) for v in values]
    # b"" first, so that code 0 is the absent arg and the other codes follow first appearance.
    arr = np.empty(n + 1, dtype=object)
    arr[0] = b""
    arr[1:] = keys
    codes, uniques = pd.factorize(arr)
    texts = [""]
    for key in uniques[1:]:
        try:
            value = json.loads(key)
        except (ValueError, RecursionError):
            value = key.decode("utf-8", "replace")
        texts.append("" if value is None else value if isinstance(value, str) else short_repr(value))
    return codes[1:], texts


def _raw_text(raw) -> str:
    """One raw JSON arg as text: a string as itself, a number as written, "" when absent."""
    if not raw:
        return ""
    try:
        value = json.loads(bytes(raw))
    except (ValueError, RecursionError):
        return bytes(raw).decode("utf-8", "replace")
    return "" if value is None else value if isinstance(value, str) else short_repr(value)


def _floats(records: list, getter, n: int) -> np.ndarray:
    """One float field of every record; None (allowed by typed decoding) becomes NaN."""
    try:
        return np.fromiter(map(getter, records), dtype=np.float64, count=n)
    except TypeError:  # a None somewhere: the slower conversion maps it to NaN
        return np.array(list(map(getter, records)), dtype=np.float64)


def _factorized(values: list) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) of a list; None gets code -1. Ids (pid, tid, flow id) are usually all
    ints: hashing them as int64 is ~3x faster than as Python objects."""
    if values and type(values[0]) is int:
        try:
            codes, uniques = pd.factorize(np.fromiter(values, dtype=np.int64, count=len(values)))
            return codes, np.array(uniques.tolist(), dtype=object)  # Python ints, as in the file
        except (TypeError, ValueError, OverflowError):  # a str, None or bool among them
            pass
    return pd.factorize(np.array(values, dtype=object))


def _narrow(factorized: tuple) -> tuple:
    """A batch's codes in the smallest signed int that holds them (int16 for an 8k batch, not
    the intp factorize gives): the nine code columns of every batch wait in memory until the
    merge, 72 → 18 bytes per event (135 MB on a 1 GB trace's 2.5M events)."""
    codes, uniques = factorized
    return codes.astype(np.int16 if len(uniques) < np.iinfo(np.int16).max else np.int32, copy=False), uniques


def _merge_factorized(pieces: list[tuple[np.ndarray, np.ndarray]], as_text=None) -> tuple[np.ndarray, np.ndarray]:
    """Per-batch (codes, uniques) → global (codes, categories): categories merged, codes
    remapped; -1 (a missing value) stays -1. ``as_text`` maps uniques first (417 and "417"
    become one category)."""
    uniques = [list(u) if as_text is None else [as_text(v) for v in u] for _, u in pieces]
    merged_codes, categories = _factorized([v for u in uniques for v in u])
    offsets = np.cumsum([0] + [len(u) for u in uniques[:-1]])
    codes = np.concatenate([np.where(c >= 0, merged_codes[off + np.maximum(c, 0)], -1) if len(u) else c
                            for off, (c, _), u in zip(offsets, pieces, uniques)])
    return codes.astype(np.int32, copy=False), categories


class EventParts:
    """Column pieces of the complete events, one piece per batch of records."""

    def __init__(self) -> None:
        self.parts: list[dict] = []
        self.n = 0
        # The few events that carry a collective's args (COLLECTIVE_ARGS): their positions among
        # the stored events and their values, kept apart from the per-event columns.
        self.collective_rows: list[int] = []
        self.collective_values: list[tuple[str, ...]] = []

    def add(self, records: list[Event], metas: list[Event], flow_parts: FlowParts, memory: MemoryParts) -> int:
        """Sort a batch's records into X / M / flow / "[memory]" events; store the X columns.
        Returns the number of X and memory events dropped as malformed."""
        xs = [e for e in records if e.ph == "X"]
        mem_dropped = 0
        if len(xs) < len(records):
            flows, mems, ooms = [], [], []
            for e in [e for e in records if e.ph != "X"]:
                ph = e.ph
                if ph == "M":
                    metas.append(e)
                elif (ph == "s" or ph == "f") and e.cat == FLOW_CAT:
                    flows.append(e)
                elif ph == "i" and e.name == MEMORY_EVENT_NAME:
                    mems.append(e)
                elif ph == "i" and e.name == OOM_EVENT_NAME:
                    ooms.append(e)
            flow_parts.add(flows)
            mem_dropped = memory.add(mems) + memory.add(ooms, out_of_memory=True)
        del records
        n = len(xs)
        ts, dur = _floats(xs, _TS_OF, n), _floats(xs, _DUR_OF, n)
        names, pids, tids = [e.name for e in xs], [e.pid for e in xs], [e.tid for e in xs]
        with np.errstate(invalid="ignore"):
            ok = (np.abs(ts) <= MAX_ABS_US) & (dur >= 0) & (dur <= MAX_ABS_US)  # False for NaN too
        if None in names or None in pids or None in tids:
            ok &= np.array([not (e.name is None or e.pid is None or e.tid is None) for e in xs])
        dropped = n - int(ok.sum())
        if dropped:
            keep = np.nonzero(ok)[0].tolist()
            xs = [xs[i] for i in keep]
            names, pids, tids = [names[i] for i in keep], [pids[i] for i in keep], [tids[i] for i in keep]
            ts, dur, n = ts[keep], dur[keep], len(keep)
        if n:
            self._store(xs, ts, dur, names, pids, tids)
        return dropped + mem_dropped

    def _store(self, xs: list[Event], ts, dur, names: list, pids: list, tids: list) -> None:
        n = len(xs)
        args = [e.args or EMPTY_ARGS for e in xs]
        part = {
            "ts": ts,
            "dur": dur,
            "name": _narrow(_factorized(names)),
            "cat": _narrow(_factorized([e.cat for e in xs])),
            "pid": _narrow(_factorized(pids)),
            "tid": _narrow(_factorized(tids)),
            "ints": np.fromiter(chain.from_iterable(map(_INT_OF, args)), dtype=np.int64,
                                count=n * len(INT_ARGS)).reshape(n, -1),
            "floats": np.fromiter(chain.from_iterable(map(_FLOAT_OF, args)), dtype=np.float64,
                                  count=n * len(FLOAT_ARGS)).reshape(n, -1),
        }
        for attr, values in zip(TEXT_ARGS, zip(*map(_TEXT_OF, args))):
            part[attr] = _narrow(_text_codes(values))
        if any(map(_COLL_NAME_OF, args)):  # a batch with collectives: their rows and metadata, as text
            for i, a in enumerate(args):
                if a.coll_name:
                    self.collective_rows.append(self.n + i)
                    self.collective_values.append(tuple(_raw_text(v) for v in _COLL_OF(a)))
        self.parts.append(part)
        self.n += n

    # Both take the pieces out as they merge them: each batch's piece is freed once merged,
    # instead of every piece living until the last column is made.
    def column(self, key: str) -> np.ndarray:
        return np.concatenate([p.pop(key) for p in self.parts])

    def categorical(self, key: str, as_text=None) -> tuple[np.ndarray, np.ndarray]:
        return _merge_factorized([p.pop(key) for p in self.parts], as_text)


class FlowParts:
    """ac2g flow events, kept as compact arrays per batch (a Struct per flow would cost ~10x)."""

    def __init__(self) -> None:
        self.parts: list[dict] = []

    def add(self, flows: list[Event]) -> None:
        if not flows:
            return
        self.parts.append({
            "is_start": np.array([e.ph == "s" for e in flows], dtype=bool),
            "ts": _floats(flows, _TS_OF, len(flows)),  # None → NaN
            "pid": _factorized([e.pid for e in flows]),  # None → code -1
            "tid": _factorized([e.tid for e in flows]),
            "id": _factorized([e.id for e in flows]),
        })  # fmt: skip

    def columns(self) -> dict | None:
        if not self.parts:
            return None
        out: dict[str, Any] = {k: np.concatenate([p[k] for p in self.parts]) for k in ("is_start", "ts")}
        out["pid"] = _merge_factorized([p["pid"] for p in self.parts], id_str)
        out["tid"] = _merge_factorized([p["tid"] for p in self.parts], id_str)
        out["id"] = _merge_factorized([p["id"] for p in self.parts])
        return out


class MemoryParts:
    """profile_memory's "[memory]" instants as arrays per batch: time, the six memory args
    (floats, NaN where absent) and the allocating thread. A record without a usable time,
    bytes, totals or device type is dropped and counted."""

    def __init__(self) -> None:
        self.parts: list[dict] = []
        self.oom_parts: list[dict] = []  # "[OutOfMemory]" instants, the same arrays

    def add(self, mems: list[Event], *, out_of_memory: bool = False) -> int:
        if not mems:
            return 0
        n = len(mems)
        ts = _floats(mems, _TS_OF, n)
        args = [e.args or EMPTY_ARGS for e in mems]
        values = np.fromiter(chain.from_iterable(map(_MEMORY_OF, args)), dtype=np.float64,
                             count=n * len(MEMORY_ARGS)).reshape(n, -1)
        with np.errstate(invalid="ignore"):
            ok = ((np.abs(ts) <= MAX_ABS_US) & np.isfinite(values[:, [0, 2, 3, 4]]).all(axis=1)
                  & (np.abs(values[:, [0, 2, 3]]) <= MAX_MEMORY_BYTES).all(axis=1))
        keep = np.flatnonzero(ok)
        if len(keep):
            (self.oom_parts if out_of_memory else self.parts).append({
                "ts": ts[keep], "values": values[keep],
                "pid": _factorized([mems[i].pid for i in keep.tolist()]),
                "tid": _factorized([mems[i].tid for i in keep.tolist()]),
            })  # fmt: skip
        return n - len(keep)

    def columns(self, *, out_of_memory: bool = False) -> dict | None:
        parts = self.oom_parts if out_of_memory else self.parts
        if not parts:
            return None
        out: dict[str, Any] = {k: np.concatenate([p[k] for p in parts]) for k in ("ts", "values")}
        out["pid"] = _merge_factorized([p["pid"] for p in parts], id_str)
        out["tid"] = _merge_factorized([p["tid"] for p in parts], id_str)
        return out

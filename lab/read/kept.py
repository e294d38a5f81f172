"""Parsed traces kept where they were read, and what lets a reader read one again.

Perfetto's trace processor keeps the trace in the process that parsed it and the UI sends it
queries. A reader does the same: a read with ``ReadRequest.keep`` leaves its ``Parsed`` in the
reader's ``KeptTraces`` (an LRU under a byte budget inside the reader's memory limit), and a
``lab.read.Job`` then carries ``TraceRef``s — a key and where the trace's bytes are — instead of
the pickled traces. A reader that no longer holds a key (evicted, or restarted after a crash:
a crashed reader loses only its cache) reads the trace again from ``TraceRef.path``: the file
the caller named, or the server's copy of an upload's bytes on disk (``KeptSources``). The page
never notices, except for the time.

Server side, ``KeptSources`` keeps each kept read's bytes as they came (an upload's gzip) in
files under one byte budget; reader side, ``KeptTraces``. No streamlit, no pandas at import.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lab.core.config import RunConfig
from lab.core.devices import DevicePeak
from lab.core.settings import HostSettings
from lab.read.spool import remove, running, spooled_by

if TYPE_CHECKING:  # pragma: no cover
    from lab.read.protocol import Parsed

__all__ = [
    "KEEP_SHARE", "KEPT_DIR", "KEPT_PREFIX", "KeptSources", "KeptTraces", "TraceRef", "estimate_bytes", "kept_key",
    "sweep_kept",
]  # fmt: skip

# Of a reader's memory limit, what its kept traces may hold: the rest is the room a new read
# needs while they stay (a parse peaks at ~2× its JSON, ``limits.ADDRESS_SPACE_PER_JSON_BYTE``,
# and a parsed trace is ~0.3× its JSON: 35.7 MB for the 114.8 MB trace, BENCHMARKS "Bytes
# between the server and its readers"), so a quarter leaves a read of the largest trace that
# fits room beside the kept ones. A read that runs out of memory anyway drops them and retries.
KEEP_SHARE = 0.25
# Each object cell of a DataFrame (names, args: short Python strings) counted at this many
# bytes beside its 8-byte pointer: a CPython str of 10-40 ASCII characters is 59-89 bytes, and
# cells repeating one value share it.
OBJECT_CELL_BYTES = 64
KEPT_DIR = Path(tempfile.gettempdir())
KEPT_PREFIX = "profiler-lab-kept-"  # + "<server pid>-<random>": ``sweep_kept`` reads the pid back


def kept_key(digest: str, config: RunConfig | None = None) -> str:
    """The key a parsed trace is kept under: its bytes' digest and, for a run's trace, its
    config (which supplies the GEMM analysis's shapes, so it changes the analysis)."""
    return f"{digest}:{repr(config) if config is not None else ''}"


@dataclass(frozen=True, kw_only=True)
class TraceRef:
    """One trace a job reads: the key it is kept under and how to read it again."""

    key: str
    path: str  # the caller's file, or the server's copy of the bytes (KeptSources)
    settings: HostSettings
    config: RunConfig | None = None
    peak: DevicePeak | None = None


def estimate_bytes(obj: Any, _depth: int = 0) -> int:
    """About how much memory ``obj`` (a ``Parsed``) holds: its DataFrames' and arrays' buffers,
    each object cell at ``OBJECT_CELL_BYTES``, walked through dataclasses and containers."""
    import numpy as np
    import pandas as pd

    if _depth > 6 or obj is None:
        return 0
    if isinstance(obj, pd.DataFrame):
        objects = len(obj) * sum(dtype.kind == "O" for dtype in obj.dtypes)
        return int(obj.memory_usage(index=True, deep=False).sum()) + objects * OBJECT_CELL_BYTES
    if isinstance(obj, pd.Series):
        return int(obj.memory_usage(index=True, deep=False)) + (len(obj) * OBJECT_CELL_BYTES
                                                                 if obj.dtype.kind == "O" else 0)
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes) + (obj.size * OBJECT_CELL_BYTES if obj.dtype.kind == "O" else 0)
    if isinstance(obj, dict):
        return sum(estimate_bytes(v, _depth + 1) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(estimate_bytes(v, _depth + 1) for v in obj[:10_000])
    if is_dataclass(obj) and not isinstance(obj, type):
        held = getattr(obj, "__dict__", {})  # on-demand tables cached beside the fields count too
        names = {f.name for f in fields(obj)} | set(held)
        return sum(estimate_bytes(getattr(obj, n, None), _depth + 1) for n in names)
    return 0


class KeptTraces:
    """A reader's ``key → Parsed``, least recently used first out, ``budget_bytes`` in all
    (``estimate_bytes``); one reader thread uses it."""

    def __init__(self, budget_bytes: int):
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[str, tuple[Parsed, int]] = OrderedDict()
        self.held_bytes = 0
        self.evicted = 0

    def get(self, key: str) -> Parsed | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: str, parsed: Parsed) -> None:
        """Keep ``parsed``; the oldest go while over budget. One larger than the whole budget is
        not kept (a later query reads it again)."""
        self.drop(key)
        size = estimate_bytes(parsed)
        if size > self.budget_bytes:
            return
        while self._entries and self.held_bytes + size > self.budget_bytes:
            _, (_, gone) = self._entries.popitem(last=False)
            self.held_bytes -= gone
            self.evicted += 1
        self._entries[key] = (parsed, size)
        self.held_bytes += size

    def drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.held_bytes -= entry[1]

    def clear(self) -> int:
        """Drop everything (a read ran out of memory beside them); how many went."""
        count = len(self._entries)
        self.evicted += count
        self._entries.clear()
        self.held_bytes = 0
        return count

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


class KeptSources:
    """The server's copies of kept reads' bytes (``key → file``), ``budget_bytes`` on disk in
    all, least recently used first out; a path the caller named is only remembered. Thread-safe."""

    def __init__(self, budget_bytes: int, folder: Path = KEPT_DIR):
        self.budget_bytes, self.folder = budget_bytes, folder
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[TraceRef, int, bool]] = OrderedDict()  # ref, bytes, ours
        self._bytes = 0

    def add_bytes(self, key: str, data, *, settings: HostSettings, config: RunConfig | None = None,
                  peak: DevicePeak | None = None) -> TraceRef | None:
        """Write ``data`` to a file of ours and remember it under ``key``; its ref, or None when it
        could not be written or is larger than the budget (a query then cannot read it again)."""
        with self._lock:
            known = self._entries.get(key)
            if known is not None and known[2]:
                self._entries.move_to_end(key)
                return known[0]
        size = memoryview(data).nbytes
        if size > self.budget_bytes:
            return None
        path = self.folder / f"{KEPT_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(memoryview(data))
        except OSError:
            remove(str(path))
            return None
        ref = TraceRef(key=key, path=str(path), settings=settings, config=config, peak=peak)
        self._remember(ref, size, ours=True)
        return ref

    def add_path(self, key: str, path: str, *, settings: HostSettings, config: RunConfig | None = None,
                 peak: DevicePeak | None = None) -> TraceRef:
        """Remember that ``key`` is read from the caller's file at ``path`` (nothing is copied)."""
        ref = TraceRef(key=key, path=str(path), settings=settings, config=config, peak=peak)
        self._remember(ref, 0, ours=False)
        return ref

    def _remember(self, ref: TraceRef, size: int, *, ours: bool) -> None:
        gone = []
        with self._lock:
            old = self._entries.pop(ref.key, None)
            if old is not None:
                self._bytes -= old[1]
                if old[2] and old[0].path != ref.path:
                    gone.append(old[0].path)
            while self._entries and self._bytes + size > self.budget_bytes:
                _, (dropped, n, mine) = self._entries.popitem(last=False)
                self._bytes -= n
                if mine:
                    gone.append(dropped.path)
            self._entries[ref.key] = (ref, size, ours)
            self._bytes += size
        for path in gone:
            remove(path)

    def get(self, key: str) -> TraceRef | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def close(self) -> None:
        """Remove every file of ours (the pool shuts down)."""
        with self._lock:
            paths = [ref.path for ref, _, mine in self._entries.values() if mine]
            self._entries.clear()
            self._bytes = 0
        for path in paths:
            remove(path)


def sweep_kept(folder: Path = KEPT_DIR) -> int:
    """Remove the kept copies of servers no longer running; how many went."""
    removed = 0
    try:
        entries = [p for p in folder.iterdir() if p.name.startswith(KEPT_PREFIX)]
    except OSError:
        return 0
    for path in entries:
        pid = spooled_by(path, prefix=KEPT_PREFIX)
        if pid is not None and not running(pid):
            remove(str(path))
            removed += 1
    return removed

"""What a trace file is, read cheaply: its head (up to ``traceEvents``) and its step count.

The head holds Kineto's top-level keys, ``distributedInfo`` (rank, world size, backend) among
them; it is a few hundred bytes to a few KB (``deviceProperties`` of 8 GPUs), read from at most
``HEAD_MAX_BYTES`` of the inflated file, never parsed as a whole. Steps are the distinct
``ProfilerStep#N`` names, counted by scanning the inflated bytes chunk by chunk (no JSON parse,
~0.3 s for 100 MB) for files up to ``STEP_SCAN_MAX_BYTES`` on disk; past it, unknown until read.
``MetaCache`` keeps each file's answer under (path, mtime, size): a listing re-run costs a stat.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from lab.tracedir.names import TRACE_MARK, holds_trace

__all__ = ["HEAD_MAX_BYTES", "STEP_SCAN_MAX_BYTES", "FileMeta", "MetaCache", "read_meta"]

HEAD_MAX_BYTES = 1 << 20
# 64 MB of gzip is ~1 GB of JSON: ~3 s of a core to inflate; beyond, steps wait for the read.
STEP_SCAN_MAX_BYTES = 64 << 20
_CHUNK = 1 << 20
_STEP = re.compile(rb'"name":\s*"ProfilerStep#(\d+)"')
_DIST = re.compile(rb'"distributedInfo"\s*:\s*(\{[^{}]*(?:\{[^{}]*\}[^{}]*|\[[^\]]*\][^{}]*)*\})')
_MARK = TRACE_MARK
MAX_CACHED = 4096


@dataclass(frozen=True)
class FileMeta:
    rank: int | None
    world_size: int | None
    backend: str
    steps: int | None  # None: not counted (too large to scan, or unreadable)
    readable: bool = True
    is_trace: bool = True  # False: read to its end, it is some other JSON (``names.holds_trace``)


def _open(path: str):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def _distributed(head: bytes) -> dict:
    found = _DIST.search(head)
    if not found:
        return {}
    try:
        value = json.loads(found.group(1))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def read_meta(path: str, size: int) -> FileMeta:
    """Rank, world size, backend (``distributedInfo``) and steps of the trace at ``path``."""
    try:
        with _open(path) as fh:
            head, whole = b"", False
            while _MARK not in head and len(head) < HEAD_MAX_BYTES:
                chunk = fh.read(64 << 10)
                if not chunk:
                    whole = True
                    break
                head += chunk
            if not holds_trace(head, whole=whole):
                return FileMeta(rank=None, world_size=None, backend="", steps=None, is_trace=False)
            info = _distributed(head[: head.find(_MARK)] if _MARK in head else head)
            steps = _count_steps(fh, head) if size <= STEP_SCAN_MAX_BYTES else None
    except (OSError, EOFError, gzip.BadGzipFile):
        return FileMeta(rank=None, world_size=None, backend="", steps=None, readable=False)
    rank, world = info.get("rank"), info.get("world_size")
    return FileMeta(rank=rank if isinstance(rank, int) else None, world_size=world if isinstance(world, int) else None,
                    backend=str(info.get("backend") or ""), steps=steps)


def _count_steps(fh, head: bytes) -> int:
    seen: set[bytes] = set()
    tail = head
    while True:
        seen.update(_STEP.findall(tail))
        chunk = fh.read(_CHUNK)
        if not chunk:
            return len(seen)
        tail = tail[-64:] + chunk  # a name split across two chunks is found in the overlap


class MetaCache:
    """``read_meta`` answers under (path, mtime_ns, size), at most ``MAX_CACHED``; thread-safe."""

    def __init__(self, max_entries: int = MAX_CACHED):
        self._entries: OrderedDict[tuple[str, int, int], FileMeta] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.reads = 0  # files actually opened (tests: a re-listing opens none)

    def get(self, path: str, mtime_ns: int, size: int) -> FileMeta:
        key = (path, mtime_ns, size)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        meta = read_meta(path, size)
        with self._lock:
            self.reads += 1
            self._entries[key] = meta
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return meta

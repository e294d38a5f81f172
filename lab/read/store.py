"""Read uploads the server keeps for their sessions: one budget in bytes for all of them.

An upload's bytes are let go once it is read, so its ``Outline`` is all the page holds of it
(the ``Parsed`` stays in the reader that keeps it, the bytes in ``lab.read.kept.KeptSources``
to read it again): the session holds a key, the store holds the outline. Keys carry the session's own random
token, so a session reaches only what it put here. Past the budget the least recently used
results go (their sessions are told to upload again); a single result larger than the whole
budget is refused. Thread-safe; no streamlit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from lab.read.protocol import Outline, ReadFailed, ReadFailureKind

__all__ = ["ResultStore"]


class ResultStore:
    """``(owner, digest) → Outline``, at most ``budget_bytes`` of ``Outline.result_bytes`` in all."""

    def __init__(self, budget_bytes: int):
        self.budget_bytes = budget_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, str], Outline] = OrderedDict()
        self._bytes = 0
        self.released = 0  # results let go to make room, since start

    def put(self, owner: str, digest: str, outline: Outline) -> None:
        """Keep ``outline`` for ``owner``; older results go while over budget. ``ReadFailed`` if it
        alone is larger than the budget."""
        size = outline.result_bytes
        if size > self.budget_bytes:
            raise ReadFailed(
                f"its parsed form ({size / 2**20:.0f} MB) is larger than all this host keeps for uploads "
                f"({self.budget_bytes / 2**20:.0f} MB); trim it with a shorter schedule or open it in Perfetto",
                kind=ReadFailureKind.TOO_BIG_TO_KEEP)
        key = (owner, digest)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.result_bytes
            while self._entries and self._bytes + size > self.budget_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= dropped.result_bytes
                self.released += 1
            self._entries[key] = outline
            self._bytes += size

    def get(self, owner: str, digest: str) -> Outline | None:
        with self._lock:
            outline = self._entries.get((owner, digest))
            if outline is not None:
                self._entries.move_to_end((owner, digest))
            return outline

    def drop(self, owner: str, digest: str) -> None:
        with self._lock:
            outline = self._entries.pop((owner, digest), None)
            if outline is not None:
                self._bytes -= outline.result_bytes

    def stats(self) -> tuple[int, int]:
        """(results held, their bytes)."""
        with self._lock:
            return len(self._entries), self._bytes

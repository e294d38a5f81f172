"""A trace's bytes handed to a reader through a file in shared memory, not the reader's socket.

Sent as a frame, the bytes crossed a socketpair whose kernel buffer holds ~200 KB: the server's
sending thread and the reader took turns, and the reader copied them into a bytearray of its
own. Measured on the 2-core box at load 3-4 (``small_ops_114mb.json``, 114.8 MB): 0.38-0.67 s
through the socket; written once to /dev/shm 0.10-0.15 s, and the reader maps the file (no
copy of its own: 0.03-0.05 s to touch every page). A 5.5 MB gzip: a few ms either way.

The ticket owns its file (``ReadTicket.spool``): it is removed when the ticket settles, on
every path — read, refused, cancelled, timed out, its reader crashed, the pool shut down — and
if the server itself dies, the next pool to start on the machine removes it (``sweep``: files
of processes no longer running). Where /dev/shm is missing or full the bytes go as a frame.
No streamlit, no pandas.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

__all__ = [
    "SPOOL_DIR", "SPOOL_MIN_BYTES", "SPOOL_PREFIX", "SPOOL_ROOM_FACTOR", "remove", "running", "spool", "spooled_by",
    "sweep",
]

SPOOL_DIR = Path("/dev/shm")
# Below this a frame costs no more than the file (one socket buffer's worth is ~0.2 MB); 1 MiB
# keeps the bundled samples' and most runs' small traces on the socket, every upload on file.
SPOOL_MIN_BYTES = 2**20
# Spool only while the folder keeps at least this many times the trace free.
SPOOL_ROOM_FACTOR = 4
SPOOL_PREFIX = "profiler-lab-read-"  # + "<server pid>-<random>": ``sweep`` reads the pid back


def spool(data, folder: Path = SPOOL_DIR) -> str | None:
    """Write ``data`` to a new file under ``folder`` (mode 0600); its path, or None when it
    could not be written (no such folder, out of space: the caller sends the bytes instead)."""
    size = memoryview(data).nbytes
    try:
        free = os.statvfs(folder)
        if free.f_bavail * free.f_frsize < SPOOL_ROOM_FACTOR * size:
            return None  # a small /dev/shm (a container's 64 MB) is others' too: never fill it
    except OSError:
        return None
    path = folder / f"{SPOOL_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(memoryview(data))
    except OSError:
        remove(str(path))
        return None
    return str(path)


def remove(path: str | None) -> None:
    """Remove a spool file; one already gone is fine."""
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def spooled_by(path: Path, prefix: str = SPOOL_PREFIX) -> int | None:
    """The pid of the server that wrote the spool file ``path`` (named ``prefix`` + pid + "-"…),
    or None if not one."""
    if not path.name.startswith(prefix):
        return None
    pid, _, _ = path.name[len(prefix):].partition("-")
    return int(pid) if pid.isdigit() else None


def running(pid: int) -> bool:
    """Whether the process ``pid`` is running (someone else's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: running
        return True
    return True


def sweep(folder: Path = SPOOL_DIR) -> int:
    """Remove the spool files of servers no longer running (one that died mid-read leaves its
    files); how many went. Files of running servers, this one's included, stay."""
    removed = 0
    try:
        entries = list(folder.iterdir())
    except OSError:
        return 0
    for path in entries:
        pid = spooled_by(path)
        if pid is not None and not running(pid):
            remove(str(path))
            removed += 1
    return removed

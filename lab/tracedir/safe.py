"""A visitor picks a listed trace, never names a path: every pick is resolved here, checked again.

The host's directories (``PROFILER_LAB_TRACE_DIR``) are the only roots. A pick is (root index,
path relative to that root) as the listing gave it; ``resolve`` refuses an absolute path, any
``..`` or empty part, a path whose real location (symlinks followed) leaves the root's real
location, a name that is not a trace's, and anything but a regular file — whatever the page or
a crafted session state hands in.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from lab.tracedir.names import is_trace_name

__all__ = ["TraceDirError", "inside", "resolve"]


class TraceDirError(ValueError):
    """A pick that is not a listed trace of the host's directories; the message says why."""


def inside(path: str, root: str) -> bool:
    """Whether the real ``path`` lies in the real ``root`` (both already ``realpath``-ed)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve(roots: Sequence[str], root_index: int, relative: str) -> Path:
    """The real path of the trace ``relative`` to root ``root_index``; ``TraceDirError`` if it is not one."""
    if not 0 <= root_index < len(roots):
        raise TraceDirError(f"there is no trace directory number {root_index}: pick a trace from the list")
    rel = PurePosixPath(relative)
    parts = relative.split("/")  # not rel.parts: PurePosixPath drops "." and empty parts
    if rel.is_absolute() or any(p in ("", ".", "..") for p in parts) or "\\" in relative or "\0" in relative:
        raise TraceDirError(f"{relative!r} is not a trace of this server's directories: pick one from the list "
                            "(paths are not accepted)")
    if not is_trace_name(rel.name):
        raise TraceDirError(f"{rel.name!r} is not a trace (.json or .json.gz): pick one from the list")
    root = os.path.realpath(roots[root_index])
    real = os.path.realpath(os.path.join(root, *rel.parts))
    if not inside(real, root):
        raise TraceDirError(f"{relative!r} leads out of the trace directory (a symlink): it is not listed")
    try:
        mode = os.stat(real).st_mode
    except OSError:
        raise TraceDirError(f"{relative!r} is gone from the trace directory: refresh the list") from None
    if not stat.S_ISREG(mode):
        raise TraceDirError(f"{relative!r} is not a file: pick a trace from the list")
    return Path(real)

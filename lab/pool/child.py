"""The child's end of the socketpair ``lab.pool.spawn.start_child`` opens: profiling workers and
trace readers talk to the server through it. A send that fails means the server went away
(nobody wants the result): the child exits at once. A receive that fails returns None."""

from __future__ import annotations

import dataclasses
import multiprocessing.connection
import os
import signal
from collections.abc import Callable
from typing import Any

from lab.pool.frames import frame_sizes, receive_object, send_frames
from lab.pool.protocol import Done, Task

__all__ = ["ChildPipe", "child_entry"]


class ChildPipe:
    def __init__(self, conn):
        self.conn = conn

    def send(self, message) -> None:
        try:
            self.conn.send(message)
        except OSError:
            os._exit(0)

    def send_bytes(self, data) -> None:
        try:
            self.conn.send_bytes(data)
        except OSError:
            os._exit(0)

    def send_packed(self, done: Done, frames: list) -> None:
        """``done`` with the sizes of ``frames`` (from ``frames.pack``), then the frames."""
        self.send(dataclasses.replace(done, frame_bytes=frame_sizes(frames)))
        try:
            send_frames(self.conn, frames)
        except OSError:
            os._exit(0)

    def recv(self):
        """The next message, or None when the server's end has closed."""
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            return None

    def recv_bytes(self):
        try:
            return self.conn.recv_bytes()
        except (EOFError, OSError):
            return None

    def recv_frames(self, task: Task) -> tuple[bool, Any]:
        """What follows ``task``: (True, the blob or the unpacked object, or None when it has no
        frames); (False, None) when the server's end closed meanwhile."""
        if not task.frame_bytes:
            return True, None
        try:
            if task.packed:
                return True, receive_object(self.conn, task.frame_bytes)
            return True, self.conn.recv_bytes()
        except (EOFError, OSError):
            return False, None


def child_entry(fd_env: str, main: Callable[[Any, Any], None]) -> None:
    """A child interpreter's entry point: its pipe from ``fd_env``, the init record, ``main``."""
    conn = multiprocessing.connection.Connection(int(os.environ.pop(fd_env)))
    try:
        init = conn.recv()
    except (EOFError, OSError):
        os._exit(0)
    # Ctrl+C in the server's terminal must not kill a task; the server decides when children stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    main(conn, init)
    # Skip the interpreter's teardown (seconds with torch loaded): every message was sent
    # synchronously, nothing is left to flush.
    os._exit(0)


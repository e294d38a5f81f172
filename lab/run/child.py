"""The child's end of the socketpair ``lab.run.spawn.start_child`` opens: profiling workers and
trace readers talk to the server through it. A send that fails means the server went away
(nobody wants the result): the child exits at once. A receive that fails returns None."""

from __future__ import annotations

import os

__all__ = ["ChildPipe"]


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

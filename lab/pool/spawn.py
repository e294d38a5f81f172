"""Starting and stopping a child interpreter, and reading how one ended.

Why ``subprocess`` and not ``multiprocessing``: a child is a fresh interpreter (like the
"spawn" start method: no forked locks or CUDA state) but started as ``python -c CODE``.
multiprocessing's spawn re-imports the parent's ``__main__`` in every child, and under
``streamlit run`` ``__main__`` is the page script: each worker re-ran the page, which started
its own service and workers — an endless chain of processes (seen here). The pipe is a
socketpair wrapped in a ``multiprocessing.connection.Connection`` (pickled messages, as with
multiprocessing). Profiling workers and trace readers both start this way; each client passes
its code and environment (a worker's pinned GPU, a reader's allocator settings).
"""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["REAP_S", "SHUTDOWN_GRACE_S", "exit_text", "kill_child", "start_child", "stop_child"]

# The directory holding the ``lab`` package, put first on the child's PYTHONPATH.
_LAB_PARENT_DIR = str(Path(__file__).resolve().parents[2])
# How long a polite stop lets an idle child exit on its own before it is killed.
SHUTDOWN_GRACE_S = 3.0
# After a kill, how long to wait for the process to be reaped.
REAP_S = 5


def start_child(code: str, fd_env: str, env: dict[str, str]) -> tuple[subprocess.Popen,
                                                                    multiprocessing.connection.Connection]:
    """A fresh interpreter running ``python -c code``, its end of a socketpair named in
    ``env[fd_env]``; (process, the server's end)."""
    parent_sock, child_sock = socket.socketpair()
    env = {**env, fd_env: str(child_sock.fileno())}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_LAB_PARENT_DIR, env.get("PYTHONPATH")) if p)
    try:
        process = subprocess.Popen([sys.executable, "-c", code], env=env, pass_fds=(child_sock.fileno(),),
                                   stdin=subprocess.DEVNULL)
    except BaseException:
        parent_sock.close()
        raise
    finally:
        child_sock.close()  # the child holds the only copy: its death shows as EOF here
    return process, multiprocessing.connection.Connection(parent_sock.detach())


def kill_child(process: subprocess.Popen) -> None:
    """Kill and reap (a child that closed its pipe but lingers, or one being replaced)."""
    if process.poll() is None:
        process.kill()
    try:
        process.wait(timeout=REAP_S)
    except subprocess.TimeoutExpired:
        pass


def stop_child(process: subprocess.Popen, conn, stop_message: Any, *, polite: bool) -> None:
    """End a child started by ``start_child``: ask an idle one to stop (``stop_message``) and give
    it SHUTDOWN_GRACE_S, else — or then — kill it; close the server's end."""
    if process.poll() is None and polite:
        try:
            conn.send(stop_message)
            process.wait(timeout=SHUTDOWN_GRACE_S)
        except (OSError, subprocess.TimeoutExpired):
            pass
    if process.poll() is None:
        process.kill()
        process.wait(timeout=REAP_S)
    conn.close()


def exit_text(exitcode: int | None) -> str:
    """How a child process ended, for messages: e.g. "exit code -9, SIGKILL"."""
    if exitcode is None:
        return "exit code unknown"
    if exitcode < 0:
        try:
            return f"exit code {exitcode}, {signal.Signals(-exitcode).name}"
        except ValueError:
            pass
    return f"exit code {exitcode}"

"""The server side of starting a worker: which GPUs exist, which one a worker gets, the process.

Why ``subprocess`` and not ``multiprocessing``: a worker is a fresh interpreter (like the
"spawn" start method: no forked locks or CUDA state) but started as ``python -c
WORKER_CODE``. multiprocessing's spawn re-imports the parent's ``__main__`` in every child, and
under ``streamlit run`` ``__main__`` is the page script: each worker re-ran the page, which
started its own service and workers — an endless chain of processes (seen here). The pipe is
a socketpair wrapped in a ``multiprocessing.connection.Connection`` (pickled messages, as
with multiprocessing). Nothing here initializes CUDA in the server.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

from lab.core.settings import HostSettings
from lab.run.worker import WORKER_CODE, WORKER_FD_ENV

__all__ = [
    "REAP_S", "SHUTDOWN_GRACE_S", "default_devices", "exit_text", "start_child", "start_worker_process", "stop_child",
    "visible_gpu_ids", "worker_pinning",
]

# The directory holding the ``lab`` package, put first on the worker's PYTHONPATH.
_LAB_PARENT_DIR = str(Path(__file__).resolve().parents[2])
# How long a polite stop lets an idle child exit on its own before it is killed.
SHUTDOWN_GRACE_S = 3.0
# After a kill, how long to wait for the process to be reaped.
REAP_S = 5
# A hung driver must not hang the server's start; nvidia-smi -L is a quick query, 15 s is generous.
NVIDIA_SMI_TIMEOUT_S = 15


def visible_gpu_ids(environ: dict[str, str] | None = None) -> list[str]:
    """IDs of the GPUs this process may use, without initializing CUDA in it.

    ``CUDA_VISIBLE_DEVICES`` wins when set (its entries, indices or UUIDs, in order; "" or
    "-1" hides every GPU); otherwise ``nvidia-smi -L`` lists the physical GPUs. Initializing
    CUDA in the server would pin memory on every GPU and break forked helpers.
    """
    env = os.environ if environ is None else environ
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is not None:
        ids = []
        for entry in (e.strip() for e in raw.split(",")):
            # CUDA stops at the first invalid entry; "-1" is the usual "no GPU" spelling.
            if not entry or entry.startswith("-"):
                break
            ids.append(entry)
        return ids
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S,
                             check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    # Lines look like "GPU 0: NVIDIA H200 (UUID: GPU-...)"; MIG instances are indented below.
    return [line.split(":", 1)[0].split()[1] for line in out.stdout.splitlines() if line.startswith("GPU ")]


def default_devices(settings: HostSettings, gpu_ids: list[str] | None = None) -> list[str]:
    """One worker per visible GPU ("cuda:0", "cuda:1", …), or one "cpu" worker without GPUs.

    ``settings.workers > 0`` sets the number of workers; they are spread round-robin over
    the GPUs (several workers may share one GPU) or all run on the CPU.
    """
    gpus = visible_gpu_ids() if gpu_ids is None else gpu_ids
    count = settings.workers if settings.workers > 0 else max(len(gpus), 1)
    if not gpus:
        return ["cpu"] * count
    return [f"cuda:{i % len(gpus)}" for i in range(count)]


def worker_pinning(device: str, gpu_ids: list[str]) -> tuple[str, int]:
    """(CUDA_VISIBLE_DEVICES value for the worker, physical GPU index to report) of ``device``.

    "cuda:N" is the N-th GPU visible to the server; a CPU worker gets "" (sees no GPU) and -1.
    An entry that is a UUID, not an index, reports N.
    """
    if device == "cpu":
        return "", -1
    if not device.startswith("cuda:") or not device[5:].isdigit():
        raise ValueError(f"unknown worker device {device!r}; use 'cpu' or 'cuda:N'")
    n = int(device[5:])
    if n >= len(gpu_ids):
        raise ValueError(f"{device} is not visible ({len(gpu_ids)} GPU(s) visible); "
                         "check CUDA_VISIBLE_DEVICES or nvidia-smi")
    visible = gpu_ids[n]
    return visible, int(visible) if visible.isdigit() else n


def start_worker_process(visible_id: str) -> tuple[subprocess.Popen, multiprocessing.connection.Connection]:
    """Start a worker interpreter that sees only GPU ``visible_id`` ("" = none); (process, pipe)."""
    env = dict(os.environ)
    # Pinned before the interpreter starts: CUDA reads the variable once, at initialization.
    env["CUDA_VISIBLE_DEVICES"] = visible_id
    env.setdefault("KINETO_LOG_LEVEL", "6")  # silences Kineto's stderr lines
    return start_child(WORKER_CODE, WORKER_FD_ENV, env)


def start_child(code: str, fd_env: str, env: dict[str, str]) -> tuple[subprocess.Popen,
                                                                    multiprocessing.connection.Connection]:
    """A fresh interpreter running ``python -c code``, its end of a socketpair named in
    ``env[fd_env]``; (process, the server's end). Profiling workers and trace readers both
    start this way (not multiprocessing spawn, which re-runs the Streamlit page in the child)."""
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


def stop_child(process: subprocess.Popen, conn, stop_message, *, polite: bool) -> None:
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
    """How a worker process ended, for messages: e.g. "exit code -9, SIGKILL"."""
    if exitcode is None:
        return "exit code unknown"
    if exitcode < 0:
        try:
            return f"exit code {exitcode}, {signal.Signals(-exitcode).name}"
        except ValueError:
            pass
    return f"exit code {exitcode}"

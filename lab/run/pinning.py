"""Which GPUs exist, which one a worker gets, and starting a worker pinned to it.

A worker sees only its GPU: ``CUDA_VISIBLE_DEVICES`` is set in its environment before its
interpreter starts (CUDA reads it once, at initialization), which no process-pool library
offers per worker (``docs/architecture.md``). Starting the interpreter is ``lab.pool.spawn``'s.
Nothing here initializes CUDA in the server.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import shutil
import subprocess

from lab.core.settings import HostSettings
from lab.pool import start_child
from lab.run.worker import WORKER_CODE, WORKER_FD_ENV

__all__ = ["default_devices", "start_worker_process", "visible_gpu_ids", "worker_pinning"]

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

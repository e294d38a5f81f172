"""Joining the Ray cluster (``PROFILER_LAB_BACKEND=ray``), for both clients of the pool: the
profile workers' actors (``lab.run.ray_backend``) and a job's rank reads as Ray tasks
(``lab.read.job_summaries``). ``import ray`` happens only in these functions, so the local
backend never needs Ray.
"""

from __future__ import annotations

import importlib
import os
import socket
from pathlib import Path

from lab.core.settings import ENV_PREFIX, HostSettings

__all__ = ["HEAD_CONNECT_TIMEOUT_S", "RAY_NAMESPACE", "connect", "import_ray"]

# Every actor of the lab lives in this Ray namespace (``ray list actors`` shows them there).
RAY_NAMESPACE = "profiler-lab"
# A head that does not answer a TCP connect within this is not there: ray.init would otherwise
# retry for minutes (seen here: > 5 min against a head that had failed to start).
HEAD_CONNECT_TIMEOUT_S = 5.0
# The ``lab`` package the actors import: shipped to every node by ray.init's runtime_env.
_LAB_DIR = str(Path(__file__).resolve().parents[1])  # lab/


def import_ray():
    # A Ray call after ray.shutdown() (or before ray.init) would otherwise start a single-node
    # cluster of its own, and a token file in ~/.ray with it (Ray's auto-init; seen here: an idle
    # supervisor's liveness check after a test cluster stopped). Ray reads this at its import.
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise RuntimeError(f"{ENV_PREFIX}BACKEND=ray needs Ray on this server and every node: "
                           "pip install -r requirements-ray.txt") from None


def connect(settings: HostSettings):
    """Join the Ray cluster at ``settings.ray_address`` (once per process); returns the ray module."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    address = settings.ray_address or "auto"
    _check_head(address)
    env_vars = {"KINETO_LOG_LEVEL": os.environ.get("KINETO_LOG_LEVEL", "6")}
    try:
        ray.init(address=address, namespace=RAY_NAMESPACE, ignore_reinit_error=True, log_to_driver=False,
                 logging_level="ERROR", runtime_env={"py_modules": [_LAB_DIR], "env_vars": env_vars})
    except ConnectionError as error:
        raise RuntimeError(f"no Ray cluster at {address!r} ({error}); start one with `ray start --head` "
                           f"or set {ENV_PREFIX}RAY_ADDRESS to its head's host:port") from None
    return ray


def _check_head(address: str) -> None:
    """Fail fast when ``host:port`` does not answer (``auto`` is ray's own look-up, which is quick)."""
    if address == "auto" or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.split("//")[-1], int(port)), timeout=HEAD_CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError):
        raise RuntimeError(f"the Ray head {address!r} does not answer; start it with `ray start --head "
                           f"--port={port}` or fix {ENV_PREFIX}RAY_ADDRESS") from None

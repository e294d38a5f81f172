"""A real, small Ray cluster on this machine for the Ray backend's tests and bench.

Each node is ``ray start --block`` in a process (and process group) of its own: CPU only, a few
logical CPUs, a 200 MB object store, no dashboard. ``stop`` ends exactly the nodes it started
(SIGTERM: the node drains and stops its own processes; then its process group is killed) and
never runs ``ray stop``, which would end every Ray process on the machine.

    with local_cluster(nodes=2, cpus_per_node=2) as address:   # "127.0.0.1:PORT"
        ...
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["NODE_START_S", "NODE_STOP_S", "local_cluster"]

# `ray start` of a head took ~4 s here; a second node registering a few more; 120 s leaves room
# for a 2-core box that is running other jobs.
NODE_START_S = 120
NODE_STOP_S = 30
# 200 MB: a run's result is ~100 KB; Ray's default would take 30 % of the machine's memory.
OBJECT_STORE_BYTES = 200_000_000
# A throwaway cluster on 127.0.0.1: no token. Ray 2.60 turns token auth on by itself once a
# ~/.ray/auth_token exists, and then this process (which set RAY_AUTH_MODE below) must match.
NODE_AUTH_MODE = "disabled"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_node(args: list[str], cpus: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": NODE_AUTH_MODE}
    ray_cli = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    command = [ray_cli, "start", "--block", f"--num-cpus={cpus}", "--num-gpus=0",
               f"--object-store-memory={OBJECT_STORE_BYTES}", "--disable-usage-stats",
               "--dashboard-agent-listen-port=0", "--node-ip-address=127.0.0.1", *args]
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)


def _stop_node(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=NODE_STOP_S)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=NODE_STOP_S)


def _wait_for_nodes(address: str, count: int, nodes: list[subprocess.Popen], logs: list[Path]) -> None:
    """Until ``count`` nodes are alive (joining the cluster the lab's way once the head answers);
    a node that exits, or NODE_START_S, raises with the nodes' logs."""
    import ray

    from lab.core.settings import HostSettings
    from lab.run.ray_backend import connect

    deadline = time.monotonic() + NODE_START_S
    while True:
        for process, log in zip(nodes, logs):
            if process.poll() is not None:
                raise RuntimeError(f"a Ray node exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            connect(HostSettings(backend="ray", ray_address=address))
            if len([n for n in ray.nodes() if n["Alive"]]) >= count:
                return
        except RuntimeError:  # the head does not answer yet
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the Ray cluster did not come up within "
                               f"{NODE_START_S} s; logs:\n" + "\n".join(log.read_text()[-2000:] for log in logs))
        time.sleep(0.5)


@contextlib.contextmanager
def local_cluster(*, nodes: int = 2, cpus_per_node: int = 2):
    """A head and ``nodes - 1`` more nodes, separate processes; yields the head's address.
    This process is joined to it (``ray.init``) and leaves it (``ray.shutdown``) at the end."""
    os.environ["RAY_AUTH_MODE"] = NODE_AUTH_MODE  # this process joins as the nodes expect
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")  # before ray's import: see lab.run.ray_backend._ray
    temp = Path(tempfile.mkdtemp(prefix="labray-", dir="/tmp"))  # short: Ray's socket paths
    port = _free_port()
    address = f"127.0.0.1:{port}"
    logs = [temp / f"node{i}.log" for i in range(nodes)]
    started = [_start_node(["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}/ray"],
                           cpus_per_node, logs[0])]
    try:
        _wait_for_nodes(address, 1, started, logs[:1])
        for i in range(1, nodes):
            started.append(_start_node([f"--address={address}"], cpus_per_node, logs[i]))
        _wait_for_nodes(address, nodes, started, logs)
        yield address
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        for process in reversed(started):
            _stop_node(process)
        shutil.rmtree(temp, ignore_errors=True)

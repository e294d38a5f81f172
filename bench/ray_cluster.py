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


# While a node starts: `ray start` gives its raylet 30 s to register (ray/_private/node.py, not
# settable), which a loaded shared box misses (load average 10-12 on 2 cores here: 4 of 4 starts
# failed). Root may start the nodes at this niceness and sets them back to 0 once they are up.
START_NICE = -5
AGENT_REGISTER_TIMEOUT_MS = 120_000


def _boost() -> None:
    if os.geteuid() == 0:
        os.nice(START_NICE)


def _unboost(nodes: list[subprocess.Popen]) -> None:
    """Every process of the nodes' sessions (raylet, GCS, agents) back to niceness 0."""
    import psutil

    sessions = {n.pid for n in nodes}
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(proc.pid) in sessions and proc.nice() < 0:
                proc.nice(0)


def _start_node(args: list[str], cpus: int, log: Path) -> subprocess.Popen:
    # agent_register_timeout_ms: the raylet's wait for its agents' port files (a Python import each),
    # which it ends with a crash; under load here they took longer than its default.
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": NODE_AUTH_MODE,
           "RAY_agent_register_timeout_ms": str(AGENT_REGISTER_TIMEOUT_MS)}
    ray_cli = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    command = [ray_cli, "start", "--block", f"--num-cpus={cpus}", "--num-gpus=0",
               f"--object-store-memory={OBJECT_STORE_BYTES}", "--disable-usage-stats",
               "--dashboard-agent-listen-port=0", "--node-ip-address=127.0.0.1", *args]
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, preexec_fn=_boost)


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
    from lab.pool.ray_cluster import connect

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
def local_cluster(*, nodes: int = 2, cpus_per_node: int = 2, port: int | None = None,
                  node_args: list[list[str]] | None = None, attempts: int = 1):
    """A head and ``nodes - 1`` more nodes, separate processes; yields the head's address.
    This process is joined to it (``ray.init``) and leaves it (``ray.shutdown``) at the end.
    ``port`` (the head's) and ``node_args`` (extra ``ray start`` flags per node, e.g. its
    ports) pin what a shared machine's port plan asks for; by default any free ports. ``attempts``:
    how many times to start the nodes afresh when one fails to come up."""
    os.environ["RAY_AUTH_MODE"] = NODE_AUTH_MODE  # this process joins as the nodes expect
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")  # before ray's import: see lab.pool.ray_cluster.import_ray
    temp = Path(tempfile.mkdtemp(prefix="labray-", dir="/tmp"))  # short: Ray's socket paths
    port = port or _free_port()
    extra = node_args or [[] for _ in range(nodes)]
    address = f"127.0.0.1:{port}"
    logs = [temp / f"node{i}.log" for i in range(nodes)]
    started: list[subprocess.Popen] = []
    try:
        for attempt in range(1, attempts + 1):
            try:
                started.append(_start_node(["--head", f"--port={port}", "--include-dashboard=false",
                                            f"--temp-dir={temp}/ray", *extra[0]], cpus_per_node, logs[0]))
                _wait_for_nodes(address, 1, started, logs[:1])
                for i in range(1, nodes):
                    started.append(_start_node([f"--address={address}", *extra[i]], cpus_per_node, logs[i]))
                _wait_for_nodes(address, nodes, started, logs)
                _unboost(started)
                break
            except RuntimeError:
                # `ray start` gives a node 30 s to register (ray/_private/node.py, not settable): on a
                # loaded shared box (load average 10 on 2 cores here) a raylet can take longer.
                for process in reversed(started):
                    _stop_node(process)
                started.clear()
                if attempt == attempts:
                    raise
        yield address
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        for process in reversed(started):
            _stop_node(process)
        shutil.rmtree(temp, ignore_errors=True)

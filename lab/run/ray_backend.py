"""The Ray backend (``PROFILER_LAB_BACKEND=ray``): each worker is a Ray actor, anywhere in a cluster.

What stays in the server: the fair queue (``lab.run.queue``), the tickets, the reuse cache and
every decision (timeout, cancel, replace). What moves: the execution. Each ``WorkerRecord`` of
the queue gets one actor — ``num_gpus=1`` for a GPU worker (Ray pins it: the actor sees one GPU
as cuda:0), ``num_cpus=1`` for a CPU worker — started and warmed up like a worker process, one
profile at a time, and one supervisor thread here that drives it (``RaySupervisor``, the
pool's ``Supervisor`` with an actor where a process was: it plugs in at the same seam):

    next ticket → actor.run(Task) → lab.run.worker's serve step → (Done | Failure)

A run's stages are polled from the actor (``actor.stage()``, a second thread of the actor) every
tick. A run over ``run_timeout_s`` or cancelled while it runs: the actor is killed
(``ray.kill``) and a fresh one started and warmed up. An actor that dies (killed, OOM-killed,
its node lost): the running ticket fails with a crash message and the actor is replaced. A CUDA
out-of-memory error is a ``RunError`` inside the actor (the runner releases memory): the actor
serves on. An idle actor's death shows through its *lifeline*: one call per actor that only
returns when the actor dies.

What crosses the network: ``RunConfig`` and ``HostSettings`` out, ``Done(RunResult)`` back —
the same plain data the local pipe carries (trace bytes gzipped, tables as pandas frames);
nothing pickles a torch object. The actors import this module and ``lab`` from the code the
server ships with ``ray.init(runtime_env={"py_modules": [lab]})``: a node needs Python, torch
and ray, not a checkout.

``import ray`` happens only in this module's functions, so the local backend never needs Ray.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import socket
import threading
import time
from collections import Counter
from typing import Any

from lab.core.config import ConfigError
from lab.core.settings import HostSettings
from lab.pool import TICK_S, ChildState, Done, Failure, Progress, Ready, Supervisor, Task, Ticket
from lab.pool.ray_cluster import RAY_NAMESPACE, connect
from lab.pool.ray_cluster import import_ray as _ray
from lab.run.protocol import FailureKind, InitWorker, RunFailed, WorkerState
from lab.run.queue import WORKER_START_TIMEOUT_S, RunQueue, RunTicket, WorkerRecord, describe_config

__all__ = ["RAY_NAMESPACE", "ProfileActor", "RaySupervisor", "RayWorkerRecord", "connect", "default_ray_devices"]

# How long a stage query may take before the tick goes on without it.
STAGE_QUERY_S = TICK_S


def default_ray_devices(settings: HostSettings) -> list[str]:
    """One GPU worker per GPU in the cluster, or, with no GPU, one CPU worker per node;
    ``settings.workers > 0`` sets how many (GPU workers if the cluster has GPUs)."""
    ray = connect(settings)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    gpus = int(sum(n.get("Resources", {}).get("GPU", 0) for n in nodes))
    count = settings.workers if settings.workers > 0 else (gpus or max(len(nodes), 1))
    return ["cuda" if gpus else "cpu"] * count


class RayWorkerRecord(WorkerRecord):
    """A worker whose process is a Ray actor: alive while its lifeline call is pending."""

    def __init__(self, index: int, device: str):
        super().__init__(index, device, "", -1)
        self.actor: Any = None  # the actor handle; only the supervisor thread replaces it
        self.lifeline: Any = None  # ObjectRef of actor.lifeline(): ready once the actor is dead
        self.node_id: str | None = None  # the Ray node it was placed on (claimed before it starts)
        self.death: str | None = None

    def died(self) -> bool:
        ray = _ray()
        if self.lifeline is None or not ray.is_initialized():  # no cluster: nothing can be alive
            return True
        ready, _ = ray.wait([self.lifeline], timeout=0)
        return bool(ready)

    def exit_reason(self) -> str:
        return self.death or "its Ray actor died"


class _Outbox:
    """What lab.run.worker's serve step sends, kept for the caller (it expects a pipe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stage: tuple[int, str] | None = None
        self.final: Done | Failure | None = None
        self.conn = self  # the serve step sends Done through ``pipe.conn``

    def send(self, message) -> None:
        with self.lock:
            if isinstance(message, Progress):
                self.stage = (message.ticket_id, message.stage)
            else:
                self.final = message


class ProfileActor:
    """The actor's side (wrapped with ``ray.remote`` by ``RaySupervisor``): one profile at a time.

    Methods run on the actor's threads (max_concurrency 3): ``run`` on one, ``stage`` and
    ``lifeline`` beside it; the lock keeps profiles from overlapping (two profiler sessions in
    one process crash it).
    """

    def __init__(self, device: str, settings: HostSettings):
        ray = importlib.import_module("ray")
        gpu_ids = ray.get_gpu_ids() if device != "cpu" else []
        self.init = InitWorker(device=device, settings=settings,
                               physical_index=int(gpu_ids[0]) if gpu_ids else -1)
        self.node_id = ray.get_runtime_context().get_node_id()
        self.node = f"{socket.gethostname()} (node {self.node_id[:8]})"
        self.info: Any = None
        self.runner: Any = None
        self.outbox = _Outbox()
        self.run_lock = threading.Lock()
        self.gone = threading.Event()

    def warm_up(self) -> tuple[Ready, int, str, str]:
        """Import torch, run the warm-up profile, measure the device; (ready, pid, node, node id)."""
        try:
            self.runner = importlib.import_module("lab.run.runner")
            kind = "cpu" if self.init.device == "cpu" else "cuda"
            self.info = self._where(self.runner.warm_up(kind, settings=self.init.settings))
            ready = Ready(info=self.info)
        except Exception as error:  # noqa: BLE001 - each run then reports its own error
            ready = Ready(info=None, error=f"warm-up failed: {type(error).__name__}: {error}")
        return ready, os.getpid(), self.node, self.node_id

    def run(self, task: Task) -> tuple[Done | Failure, bool]:
        """One run's outcome, and whether the actor may serve on (False: replace it)."""
        from lab.core.result import RunError
        from lab.run.worker import _serve_one

        with self.run_lock:
            self.outbox = outbox = _Outbox()
            pipe: Any = outbox  # the serve step takes a ChildPipe; it only calls send and conn.send
            keep = _serve_one(pipe, self.runner, self.init, task, expected=(ConfigError, RunError), info=self.info)
            final = outbox.final
            assert final is not None, "the serve step always sends an outcome"
            if isinstance(final, Done):
                final = dataclasses.replace(final, value=dataclasses.replace(
                    final.value, device=self._where(final.value.device)))
            return final, keep

    def stage(self) -> tuple[int, str] | None:
        with self.outbox.lock:
            return self.outbox.stage

    def lifeline(self) -> None:
        """Never returns while the actor lives: its ObjectRef turns ready (an error) when it dies."""
        self.gone.wait()

    def _where(self, info):
        """The device as the server shows it: the node's physical GPU index and the node."""
        if info is None:
            return None
        index = self.init.physical_index if info.kind == "cuda" and self.init.physical_index >= 0 else info.index
        return dataclasses.replace(info, index=index, node=self.node)


class RaySupervisor(Supervisor):
    """Keeps one actor alive and serving until the queue stops: the pool's ``Supervisor`` (its
    loop, back-off and bookkeeping), with an actor's start, run and stop."""

    def __init__(self, queue: RunQueue, worker: RayWorkerRecord, stop_event: threading.Event, standby=None):
        super().__init__(queue, worker, stop_event)
        self.queue: RunQueue = queue
        self.worker = worker
        self.ray = connect(queue.settings)
        self.remote = _actor_class()

    def _promote(self) -> bool:
        return False  # an actor has no spare

    # ------------------------------------------------------------------ start-up

    def _options(self) -> dict:
        """One GPU, or one CPU; no restarts by Ray (the supervisor replaces and counts); on the
        node with the fewest of this pool's actors (soft: elsewhere when it is full)."""
        gpu = self.worker.device != "cpu"
        resources = {"num_gpus": 1, "num_cpus": 1} if gpu else {"num_cpus": 1}
        node_id = self._claim_node("GPU" if gpu else "CPU")
        strategies = importlib.import_module("ray.util.scheduling_strategies")
        strategy = ("SPREAD" if node_id is None
                    else strategies.NodeAffinitySchedulingStrategy(node_id=node_id, soft=True))
        return {**resources, "max_restarts": 0, "max_task_retries": 0, "max_concurrency": 3,
                "scheduling_strategy": strategy}

    def _claim_node(self, resource: str) -> str | None:
        """The alive node with ``resource`` that holds the fewest of this pool's other actors;
        recorded on the worker at once, so supervisors starting together pick different nodes.
        (Ray's own SPREAD forgets the pool: replacements after a crash piled onto one node.)"""
        nodes = [n["NodeID"] for n in self.ray.nodes()
                 if n.get("Alive") and n.get("Resources", {}).get(resource, 0) >= 1]
        with self.queue.lock:
            used = Counter(w.node_id for w in self.queue.workers if w is not self.worker
                           and isinstance(w, RayWorkerRecord) and w.node_id)
            self.worker.node_id = min(nodes, key=lambda n: used[n]) if nodes else None
            return self.worker.node_id

    def _launch(self) -> bool:
        """Start an actor and wait for its warm-up; False if it died, hung or never got a place."""
        worker, queue, ray = self.worker, self.queue, self.ray
        actor = self.remote.options(**self._options()).remote(worker.device, queue.settings)
        with queue.lock:
            worker.actor, worker.lifeline, worker.death = actor, actor.lifeline.remote(), None
            worker.state = WorkerState.STARTING
        ready_ref = actor.warm_up.remote()
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while not queue.stopping and time.monotonic() < deadline:
            done, _ = ray.wait([ready_ref], timeout=TICK_S)
            if not done:
                continue
            try:
                ready, pid, node, node_id = ray.get(ready_ref)
            except Exception as error:  # noqa: BLE001 - the actor died while starting
                queue.note_error(f"{worker.label} did not start on Ray ({_short(error)})")
                return False
            with queue.lock:
                worker.pid, worker.node, worker.node_id = pid, node, node_id
                worker.physical_index = getattr(ready.info, "index", -1)
            return self._ready(ready, promoted=False)
        if not queue.stopping:
            queue.note_error(f"{worker.label} did not start on Ray within {WORKER_START_TIMEOUT_S:g} s "
                             f"(no free {'GPU' if worker.device != 'cpu' else 'CPU'} in the cluster?)")
        return False

    # ------------------------------------------------------------------ runs

    def _run_one(self, ticket: Ticket) -> bool:
        """Run one ticket on the actor; False when the actor must be replaced."""
        assert isinstance(ticket, RunTicket)
        ray, actor, queue = self.ray, self.worker.actor, self.queue
        ref = actor.run.remote(Task(ticket_id=ticket.id, job=ticket.config))
        started = time.monotonic()
        deadline = started + queue.settings.run_timeout_s
        while True:
            if ticket.done():  # cancelled or replaced while running: free the actor now
                return False
            done, _ = ray.wait([ref], timeout=TICK_S)
            if done:
                return self._settle_ref(ticket, ref, time.monotonic() - started)
            self._relay_stage(ticket)
            failure = None
            if queue.stopping:
                failure = self.client.error(self.client.shutdown_text, FailureKind.SHUTDOWN)
            elif time.monotonic() > deadline:
                failure = self.client.overdue()
            if failure is not None:
                queue.record_failure(ticket, failure)
                return False

    def _relay_stage(self, ticket: RunTicket) -> None:
        try:
            stage = self.ray.get(self.worker.actor.stage.remote(), timeout=STAGE_QUERY_S)
        except Exception:  # noqa: BLE001 - busy or dying: the next tick asks again, or the run ref says
            return
        if stage is not None:
            self.queue.set_stage(ticket, *stage)

    def _settle_ref(self, ticket: RunTicket, ref, duration_s: float) -> bool:
        queue = self.queue
        try:
            message, keep = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as error:
            self.worker.death = f"its Ray actor died: {_short(error)}"
            queue.record_failure(ticket, RunFailed(
                f"the profiling worker crashed (its Ray actor on {self.worker.node} died) while running "
                f"{describe_config(ticket.config)}; it has been restarted — run again", kind=FailureKind.CRASH))
            return False
        except Exception as error:  # noqa: BLE001 - e.g. the result could not be sent back
            queue.record_failure(ticket, RunFailed(f"the run's result did not come back from Ray ({_short(error)}); "
                                                   "run again", kind=FailureKind.RUN))
            return False
        if isinstance(message, Done):
            queue.record_done(self.worker, ticket, message.value, duration_s)
        else:
            queue.record_failure(ticket, RunFailed(message.message, kind=message.kind,
                                                   error_type=message.error_type))
        return keep

    # ------------------------------------------------------------------ stop

    def _retire(self, state: ChildState) -> None:
        """Kill the actor (it holds nothing worth a polite stop) and record ``state``."""
        worker, queue = self.worker, self.queue
        with queue.lock:
            actor = worker.actor
            worker.actor, worker.lifeline, worker.pid = None, None, None
            if actor is not None and state == WorkerState.RESTARTING:
                worker.restarts += 1
            worker.state = state
            queue.changed.notify_all()
        if actor is not None:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass


@functools.cache
def _actor_class():
    """ProfileActor as a Ray actor class, made once per process."""
    return _ray().remote(ProfileActor)


def _short(error: BaseException) -> str:
    """The first line of a Ray error, which otherwise carries a whole remote traceback."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]

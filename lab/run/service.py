"""Run profiles for many users at once: a fair queue in front of long-lived worker processes.

Why processes: two ``torch.profiler.profile`` sessions overlapping in one process crash it
(SIGSEGV on torch 2.13 CPU), profiling inside the server stalls every other session on the
GIL, and ``with_stack`` would record the server's other threads. So each device gets one
worker process that runs exactly one profile at a time; the server process never imports
torch for a run and never initializes CUDA.

The chain::

    submit(config) → RunTicket (queued) → supervisor thread of a free worker → worker process
        → lab.run.runner.run_profile → RunResult (plain, picklable) → ticket done

The machinery is ``lab.pool``'s (the queue and its lock, one supervisor thread per worker:
start, run, time out, replace; the warm spares); the workers' own rooms are ``protocol``
(their states, status records, errors, init record), ``queue`` (their tickets, records, queue
rules and words: the pool's client), ``pinning`` (GPUs, pinning) and ``worker`` (the worker
process's side). This module is the facade: ``ProfileService``. Errors reach callers as ``RunFailed`` with a
message that says what to do.

No streamlit import: the page keeps one ``ProfileService`` per server (st.cache_resource).
"""

from __future__ import annotations

import importlib
import threading

from lab.core.config import RunConfig
from lab.core.devices import DeviceInfo, DeviceKind, describe_kinds, device_kinds
from lab.core.settings import HostSettings
from lab.pool import ABANDONED_TICKET_S, SHUTDOWN_GRACE_S, ChildPool, Supervisor, resident_bytes
from lab.pool.supervisor import MAX_RESTART_BACKOFF_S
from lab.run.pinning import default_devices, visible_gpu_ids, worker_pinning
from lab.run.protocol import (
    TICKET_STATES,
    RunFailed,
    ServiceBusy,
    ServiceHealth,
    TicketState,
    TicketStatus,
    WorkerHealth,
    WorkerState,
)
from lab.run.queue import RECENT_RUNS_FOR_ESTIMATE, WORKER_START_TIMEOUT_S, RunQueue, RunTicket, WorkerRecord
from lab.run.worker import cpu_worker_threads

__all__ = [
    "ABANDONED_TICKET_S", "MAX_RESTART_BACKOFF_S", "RECENT_RUNS_FOR_ESTIMATE", "SHUTDOWN_GRACE_S",
    "TICKET_STATES", "WORKER_START_TIMEOUT_S", "ProfileService", "RunFailed", "RunTicket", "ServiceBusy",
    "DeviceKind", "ServiceHealth", "TicketState", "TicketStatus", "WorkerHealth", "WorkerState", "cpu_worker_threads",
    "default_devices", "describe_kinds", "device_kinds", "visible_gpu_ids", "worker_pinning",
]  # fmt: skip


class ProfileService:
    """One worker process per device behind a fair queue; thread-safe; see the module doc."""

    def __init__(self, *, settings: HostSettings, devices: list[str] | None = None,
                 abandon_after_s: float = ABANDONED_TICKET_S):
        self.settings = settings
        self.abandon_after_s = abandon_after_s
        workers = _ray_workers(settings, devices) if settings.backend == "ray" else _local_workers(settings, devices)
        self._queue = RunQueue(settings, workers, abandon_after_s=abandon_after_s)
        ray = settings.backend == "ray"  # actors: Ray places them; no spare
        self._pool = ChildPool(self._queue, spares=settings.standby > 0 and not ray,
                               supervisor=_ray_supervisor if ray else Supervisor,
                               thread_name="profiler-lab-supervisor")

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, wait: bool = False, timeout: float | None = None) -> None:
        """Start (and warm up) every worker; with ``wait`` block until each has warmed up.

        Runs submitted before ``start`` wait in the queue.
        """
        # Unpickling the first RunResult imports pandas (~0.5 s); do it now, not on a user's click.
        importlib.import_module("lab.core.result")
        self._pool.start()
        if wait:
            self.wait_ready(WORKER_START_TIMEOUT_S if timeout is None else timeout, all_workers=True)

    @property
    def started(self) -> bool:
        return self._pool.started

    def wait_ready(self, timeout: float | None = None, *, all_workers: bool = False) -> DeviceInfo | None:
        """Block until the first worker (or every worker) has warmed up; returns device_info()."""
        self._pool.wait_ready(timeout, all_children=all_workers)
        return self.device_info()

    def shutdown(self) -> None:
        """Stop every worker; queued tickets are cancelled, running ones fail."""
        self._pool.shutdown()

    def __enter__(self) -> ProfileService:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # ------------------------------------------------------------------ public API

    def submit(self, config: RunConfig, *, force_fresh: bool = False, session: str | None = None,
               device_name: str | None = None) -> RunTicket:
        """Queue ``config``; returns at once. Raises ``ServiceBusy`` when the queue is full and
        ``ConfigError`` when its run-time estimate is over ``settings.max_run_estimate_s``.

        An identical config that finished within ``settings.reuse_window_s`` returns a ticket
        that is already done (``reused=True``) unless ``force_fresh``. Its RunResult is the
        same object other sessions got: treat results as read-only. ``session`` (e.g. the
        page's session id): see ``submit_all``. ``device_name`` (a ``DeviceKind.name`` from
        ``device_kinds``) sends the run only to workers of that device model; ``ConfigError``
        when none has it.
        """
        return self.submit_all([config], force_fresh=force_fresh, session=session, device_name=device_name)[0]

    def submit_all(self, configs: list[RunConfig], *, force_fresh: bool = False,
                   session: str | None = None, device_name: str | None = None) -> list[RunTicket]:
        """Queue ``configs`` as one submission (a lesson's pair). With ``session``, the
        session's earlier submission still waiting or running is cancelled (each new ticket's
        ``replaced`` counts those runs), and the queue serves sessions in turn."""
        for config in configs:
            if not isinstance(config, RunConfig):
                raise TypeError(f"submit() takes a RunConfig, not {type(config).__name__}")
        return self._queue.submit(list(configs), force_fresh=force_fresh, session=session,
                                  device_name=device_name)

    def health(self) -> ServiceHealth:
        queue = self._queue
        with queue.lock:
            workers = tuple(self._worker_health(w) for w in queue.workers)
            return ServiceHealth(
                workers_alive=sum(w.alive for w in workers), workers_total=len(workers), workers=workers,
                queue_length=len(queue.pending), runs_served=queue.runs_served,
                runs_failed=queue.runs_failed, last_error=queue.last_error,
                uptime_s=self._pool.uptime_s(),
                backend=self.settings.backend)

    def device_kinds(self) -> tuple[DeviceKind, ...]:
        """The device models of the warm workers, with counts and nodes, for the page's device
        choice ("NVIDIA H200 ×8 on 2 nodes, NVIDIA L4 ×4"; ``describe_kinds``)."""
        with self._queue.lock:
            return device_kinds([(w.info, w.node) for w in self._queue.workers if w.info is not None])

    def _worker_health(self, w: WorkerRecord) -> WorkerHealth:
        """(lock held) One worker's record as callers see it, its spare's too."""
        spare_pid = w.standby[0].pid if w.standby is not None else None
        return WorkerHealth(
            index=w.index, device=w.device, state=w.state, pid=w.pid, alive=w.alive, runs_served=w.runs_served,
            restarts=w.restarts, device_info=w.info, node=w.node,
            rss_bytes=resident_bytes(w.pid) if w.node is None else None,  # a Ray actor's pid may be elsewhere
            standby=str(w.standby_state) if self.settings.standby > 0 else "off", standby_pid=spare_pid,
            standby_rss_bytes=resident_bytes(spare_pid), promotions=w.promotions)

    @property
    def device_kind(self) -> str:
        """"cuda" when a worker runs on a GPU, else "cpu": known from the start, before any worker
        has warmed up (the GPUs were listed by CUDA_VISIBLE_DEVICES or nvidia-smi, without CUDA)."""
        return "cpu" if all(w.device == "cpu" for w in self._queue.workers) else "cuda"

    def device_info(self) -> DeviceInfo | None:
        """DeviceInfo of the first worker that has warmed up, or None before any has."""
        with self._queue.lock:
            return next((w.info for w in self._queue.workers if w.info is not None), None)


def _local_workers(settings: HostSettings, devices: list[str] | None) -> list[WorkerRecord]:
    """One worker process per visible GPU (or one CPU worker), pinned; or one per ``devices`` entry."""
    gpu_ids = None
    if devices is None:
        gpu_ids = visible_gpu_ids()
        devices = default_devices(settings, gpu_ids)
    elif any(d != "cpu" for d in devices):
        gpu_ids = visible_gpu_ids()
    if not devices:
        raise ValueError("devices is empty; pass None for one worker per GPU, or e.g. ['cpu']")
    return [WorkerRecord(i, d, *worker_pinning(d, gpu_ids or [])) for i, d in enumerate(devices)]


def _ray_workers(settings: HostSettings, devices: list[str] | None) -> list[WorkerRecord]:
    """One actor per GPU of the cluster (or one CPU actor per node); or one per ``devices``
    entry, "cpu" or "cuda" (Ray picks the GPU and the node)."""
    backend = importlib.import_module("lab.run.ray_backend")
    if devices is None:
        devices = backend.default_ray_devices(settings)
    if not devices:
        raise ValueError("devices is empty; pass None for one actor per GPU of the cluster, or e.g. ['cpu']")
    kinds = ["cpu" if d == "cpu" else "cuda" if d.startswith("cuda") else d for d in devices]
    unknown = sorted({k for k in kinds if k not in ("cpu", "cuda")})
    if unknown:
        raise ValueError(f"unknown Ray worker device(s) {unknown}; use 'cpu' or 'cuda'")
    return [backend.RayWorkerRecord(i, k) for i, k in enumerate(kinds)]


def _ray_supervisor(queue, worker, stop_event: threading.Event, standby=None):
    return importlib.import_module("lab.run.ray_backend").RaySupervisor(queue, worker, stop_event)

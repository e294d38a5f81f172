"""Run profiles for many users at once: a FIFO queue in front of long-lived worker processes.

Why processes: two ``torch.profiler.profile`` sessions overlapping in one process crash it
(SIGSEGV on torch 2.13 CPU), profiling inside the server stalls every other session on the
GIL, and ``with_stack`` would record the server's other threads. So each device gets one
worker process that runs exactly one profile at a time; the server process never imports
torch for a run and never initializes CUDA.

Why ``subprocess`` and not ``multiprocessing``: a worker is a fresh interpreter (like the
"spawn" start method: no forked locks or CUDA state) but started as ``python -c "from
lab.run.service import _worker_entry; ..."``. multiprocessing's spawn re-imports the parent's
``__main__`` in every child, and under ``streamlit run`` ``__main__`` is the page script:
each worker re-ran the page, which started its own service and workers — an endless chain
of processes (seen here). The pipe is a socketpair wrapped in a
``multiprocessing.connection.Connection`` (pickled messages, as with multiprocessing).

The chain::

    submit(config) → RunTicket (queued) → supervisor thread of a free worker → worker process
        → lab.runner.run_profile → RunResult (plain, picklable) → ticket done

Each worker has a supervisor thread in the server that owns its pipe and its process: it
hands the worker the next ticket, relays stage updates, enforces ``run_timeout_s``, and
replaces (and warms up again) a worker that dies or overruns, failing only the ticket that
was running. Errors reach callers as ``RunFailed`` with a message that says what to do.

No streamlit import: the page keeps one ``ProfileService`` per server (st.cache_resource).
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
import itertools
import math
import multiprocessing.connection
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lab.run.config import ConfigError, RunConfig
from lab.run.devices import DeviceInfo
from lab.run.settings import HostSettings

if TYPE_CHECKING:  # pragma: no cover
    from lab.run.result import RunResult

# A queued ticket nobody has polled for this long belongs to a closed browser tab; it is
# dropped when it reaches the head of the queue instead of occupying a worker. Streamlit
# pages poll every second or so while they wait, so two minutes is generous.
ABANDONED_TICKET_S = 120.0
# First profile in a fresh process: ~1.1 s on CPU (imports torch._inductor), ~7 s on an H200
# (CUPTI init), plus the torch import itself. A worker not ready after this is replaced.
WORKER_START_TIMEOUT_S = 180.0
# Queue-time estimates use the median of this many recent run durations.
RECENT_RUNS_FOR_ESTIMATE = 20
# A worker that keeps dying while it starts is retried after 1, 2, 4 … seconds, at most this.
MAX_RESTART_BACKOFF_S = 60.0
# How long shutdown() lets an idle worker exit on its own before killing it.
SHUTDOWN_GRACE_S = 3.0
# Supervisor threads wake at least this often to check deadlines and stop requests.
_TICK_S = 0.25
# How a worker interpreter starts, and where it finds its end of the socketpair.
_WORKER_CODE = "from lab.run.service import _worker_entry; _worker_entry()"
_WORKER_FD_ENV = "PROFILER_LAB_WORKER_FD"
# The directory holding the ``lab`` package, put first on the worker's PYTHONPATH.
_LAB_PARENT_DIR = str(Path(__file__).resolve().parents[2])

TICKET_STATES = ("queued", "running", "done", "failed", "cancelled")


class ServiceBusy(RuntimeError):
    """The queue is full; the caller should try again shortly."""


class RunFailed(RuntimeError):
    """A run did not produce a result. ``str(error)`` is a message for the user.

    ``kind`` says why: "config" (the run was refused; change the config), "run" (the run
    failed, e.g. out of memory), "crash" (the worker died), "timeout" (over the host's
    limit), "cancelled" (cancelled or abandoned), "shutdown" (the service stopped).
    """

    def __init__(self, message: str, *, kind: str = "run", error_type: str | None = None):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.error_type = error_type


@dataclass(frozen=True)
class TicketStatus:
    id: int
    state: str  # one of TICKET_STATES
    stage: str | None  # the runner's current stage while running ("profiling", ...)
    queue_position: int | None  # 1 = next to run; None unless queued
    elapsed_s: float  # since submission
    # Seconds until the result is expected: queued → median run × (runs ahead per worker + 1);
    # running → median run − time running (≥ 0). None before any run has finished.
    estimate_s: float | None
    worker: int | None  # index of the worker running (or that ran) it
    device: str | None  # that worker's device, e.g. "cuda:0" or "cpu"
    reused: bool = False
    message: str | None = None  # why it failed or was cancelled


@dataclass(frozen=True)
class WorkerHealth:
    index: int
    device: str
    state: str  # "not started", "starting", "idle", "busy", "restarting", "stopped"
    pid: int | None
    alive: bool
    runs_served: int
    restarts: int
    device_info: DeviceInfo | None


@dataclass(frozen=True)
class ServiceHealth:
    workers_alive: int
    workers_total: int
    workers: tuple[WorkerHealth, ...]
    queue_length: int
    runs_served: int
    runs_failed: int
    last_error: str | None
    uptime_s: float


# --------------------------------------------------------------------------- devices


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
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=15, check=False)
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


def _describe(config: RunConfig) -> str:
    return f"{config.workload} {config.shape_text} {config.dtype} (device {config.device})"


def _exit_text(exitcode: int | None) -> str:
    if exitcode is None:
        return "exit code unknown"
    if exitcode < 0:
        try:
            return f"exit code {exitcode}, {signal.Signals(-exitcode).name}"
        except ValueError:
            pass
    return f"exit code {exitcode}"


# --------------------------------------------------------------------------- worker process


def _worker_entry() -> None:
    """Entry point of a worker interpreter (see ``_WORKER_CODE``): read the init message, serve."""
    # CUDA_VISIBLE_DEVICES and KINETO_LOG_LEVEL came in the environment, set before this
    # interpreter started, so torch (imported later, by lab.run.runner) sees only the pinned GPU.
    conn = multiprocessing.connection.Connection(int(os.environ.pop(_WORKER_FD_ENV)))
    try:
        _, device, physical_index, settings = conn.recv()
    except (EOFError, OSError):
        os._exit(0)
    _worker_main(conn, device, physical_index, settings)
    # Skip the interpreter's teardown (seconds with torch loaded): every message was sent
    # synchronously, nothing is left to flush.
    os._exit(0)


def cpu_worker_threads(cpu_count: int | None) -> int:
    """Intra-op threads for a CPU worker: every core but one, which the server keeps.

    With as many OpenMP threads as cores, one thread descheduled by the server (or a browser on
    the same box) stalls the others at the GEMM's barrier: on 2 busy cores a 64³ matmul was
    seen taking 40–90 ms instead of ~20 µs. One core fewer keeps runs steady and the page live.
    """
    return max(1, (cpu_count or 1) - 1)


def _leave_a_core_to_the_server() -> None:
    import torch

    torch.set_num_threads(cpu_worker_threads(os.cpu_count()))


def _worker_main(conn, device: str, physical_index: int, settings: HostSettings) -> None:
    """Serve runs until told to stop or the server goes away.

    Messages to the parent: ("ready", DeviceInfo | None, error | None), ("stage", run_id,
    stage), ("done", run_id, RunResult), ("error", run_id, kind, type_name, message, fatal).
    From the parent: ("run", run_id, RunConfig) or ("stop",).
    """
    # Ctrl+C in the server's terminal must not kill a run; the server decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def send(message: tuple) -> None:
        try:
            conn.send(message)
        except OSError:  # the server went away: nobody wants the result
            os._exit(0)

    def physical(info: DeviceInfo | None) -> DeviceInfo | None:
        # Inside the worker the pinned GPU is cuda:0; the page shows the real index.
        if info is not None and info.kind == "cuda":
            return dataclasses.replace(info, index=physical_index)
        return info

    try:
        runner = importlib.import_module("lab.run.runner")  # imports torch
        from lab.run.result import RunError
    except BaseException as error:  # noqa: BLE001 - report, then exit: nothing can run
        send(("ready", None, f"{type(error).__name__}: {error}"))
        return
    expected = (ConfigError, RunError)  # refusals and run failures: the worker stays healthy
    if device == "cpu":
        _leave_a_core_to_the_server()

    try:
        info = runner.warm_up("cpu" if device == "cpu" else "cuda")
        send(("ready", physical(info), None))
    except Exception as error:  # noqa: BLE001 - keep serving; each run reports its own error
        send(("ready", None, f"warm-up failed: {type(error).__name__}: {error}"))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the server went away
            return
        if message[0] != "run":
            return
        _, run_id, config = message

        def on_stage(stage: str, _run_id=run_id) -> None:
            send(("stage", _run_id, stage))

        try:
            result = runner.run_profile(config, settings=settings, on_stage=on_stage)
        except expected as error:
            kind = "config" if isinstance(error, ConfigError) else "run"
            send(("error", run_id, kind, type(error).__name__, str(error), False))
            continue
        except Exception as error:  # noqa: BLE001
            # An unexpected failure may leave the profiler running or CUDA in a bad state;
            # report it and exit so the server starts a clean worker.
            send(("error", run_id, "run", type(error).__name__, f"{type(error).__name__}: {error}", True))
            return
        try:
            conn.send(("done", run_id, dataclasses.replace(result, device=physical(result.device))))
        except OSError:
            return
        except Exception as error:  # noqa: BLE001 - e.g. an unpicklable field
            send(("error", run_id, "run", type(error).__name__,
                  f"the result could not be sent back ({type(error).__name__}: {error})", False))


# --------------------------------------------------------------------------- tickets


class RunTicket:
    """A caller's handle on one submitted run. Cheap to poll from any thread."""

    def __init__(self, service: "ProfileService", ticket_id: int, config: RunConfig, *, reused: bool = False):
        self._service = service
        self.id = ticket_id
        self.config = config
        self.reused = reused
        now = time.monotonic()
        # All fields below are guarded by the service's lock.
        self._state = "queued"
        self._stage: str | None = None
        self._submitted_at = now
        self._started_at: float | None = None
        self._last_seen = now
        self._worker: int | None = None
        self._device: str | None = None
        self._result: "RunResult | None" = None
        self._error: RunFailed | None = None
        self._finished = threading.Event()

    def poll(self) -> TicketStatus:
        return self._service._status(self)

    def result(self, timeout: float | None = None) -> "RunResult":
        """Wait for the result. Raises ``RunFailed`` if the run failed or was cancelled, and
        ``TimeoutError`` if ``timeout`` seconds pass first (the run goes on)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._service._touch(self)  # a caller waiting here is not an abandoned tab
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                if self._finished.is_set():
                    break
                raise TimeoutError(f"run {self.id} is not finished after {timeout:g} s; it is still "
                                   f"{self.poll().state}")
            wait_s = ABANDONED_TICKET_S / 4 if remaining is None else min(remaining, ABANDONED_TICKET_S / 4)
            if self._finished.wait(wait_s):
                break
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def cancel(self) -> bool:
        """Cancel: a queued run is removed from the queue; a running one finishes but its
        result is dropped. Returns False if the ticket had already finished."""
        return self._service._cancel(self)

    def done(self) -> bool:
        """Whether the ticket has settled (done, failed or cancelled); never blocks."""
        return self._finished.is_set()

    def __repr__(self) -> str:
        return f"RunTicket(id={self.id}, state={self._state!r}, reused={self.reused})"


# --------------------------------------------------------------------------- workers (server side)


class _Worker:
    """Server-side record of one worker process; fields guarded by the service's lock
    except ``process`` and ``conn``, which only its supervisor thread touches."""

    def __init__(self, index: int, device: str, visible_id: str, physical_index: int):
        self.index = index
        self.device = device
        self.visible_id = visible_id
        self.physical_index = physical_index
        self.state = "not started"
        self.process = None
        self.conn = None
        self.pid: int | None = None
        self.info: DeviceInfo | None = None
        self.ever_ready = False
        self.runs_served = 0
        self.restarts = 0
        self.thread: threading.Thread | None = None


class ProfileService:
    """One worker process per device behind a FIFO queue; thread-safe; see the module doc."""

    def __init__(self, *, settings: HostSettings, devices: list[str] | None = None,
                 abandon_after_s: float = ABANDONED_TICKET_S):
        self.settings = settings
        self.abandon_after_s = abandon_after_s
        gpu_ids = None
        if devices is None:
            gpu_ids = visible_gpu_ids()
            devices = default_devices(settings, gpu_ids)
        elif any(d != "cpu" for d in devices):
            gpu_ids = visible_gpu_ids()
        if not devices:
            raise ValueError("devices is empty; pass None for one worker per GPU, or e.g. ['cpu']")
        self._workers = [self._make_worker(i, d, gpu_ids or []) for i, d in enumerate(devices)]
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # queue, worker state or stop changed
        self._pending: deque[RunTicket] = deque()
        self._ids = itertools.count(1)
        self._durations_s: deque[float] = deque(maxlen=RECENT_RUNS_FOR_ESTIMATE)
        self._recent: dict[RunConfig, tuple[float, "RunResult"]] = {}  # reuse cache
        self._runs_served = 0
        self._runs_failed = 0
        self._last_error: str | None = None
        self._started_at: float | None = None
        self._stopping = False
        self._stop_event = threading.Event()

    @staticmethod
    def _make_worker(index: int, device: str, gpu_ids: list[str]) -> _Worker:
        visible_id, physical_index = worker_pinning(device, gpu_ids)
        return _Worker(index, device, visible_id, physical_index)

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, wait: bool = False, timeout: float | None = None) -> None:
        """Start (and warm up) every worker; with ``wait`` block until each has warmed up.

        Runs submitted before ``start`` wait in the queue.
        """
        # Unpickling the first RunResult imports pandas (~0.5 s); do it now, not on a user's click.
        importlib.import_module("lab.run.result")
        with self._lock:
            if self._stopping:
                raise RuntimeError("this ProfileService was shut down; create a new one")
            if self._started_at is None:
                self._started_at = time.monotonic()
                for worker in self._workers:
                    worker.thread = threading.Thread(target=self._supervise, args=(worker,),
                                                     name=f"profiler-lab-supervisor-{worker.index}",
                                                     daemon=True)
                    worker.thread.start()
                # Workers would exit on their own once the server's end of the socket closes;
                # stopping them at exit is quicker and leaves no run half-done.
                atexit.register(_shutdown_at_exit, weakref.ref(self))
        if wait:
            self.wait_ready(WORKER_START_TIMEOUT_S if timeout is None else timeout, all_workers=True)

    @property
    def started(self) -> bool:
        return self._started_at is not None

    def wait_ready(self, timeout: float | None = None, *, all_workers: bool = False) -> DeviceInfo | None:
        """Block until the first worker (or every worker) has warmed up; returns device_info()."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while not self._stopping:
                ready = [w.ever_ready for w in self._workers]
                if all(ready) if all_workers else any(ready):
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._changed.wait(_TICK_S if remaining is None else min(remaining, _TICK_S))
        return self.device_info()

    def shutdown(self) -> None:
        """Stop every worker; queued tickets are cancelled, running ones fail."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            self._stop_event.set()
            while self._pending:
                self._finish(self._pending.popleft(), error=RunFailed(
                    "the profiling service is shutting down; reload the page and run again", kind="shutdown"),
                    state="cancelled")
            self._changed.notify_all()
            threads = [w.thread for w in self._workers if w.thread is not None]
        for thread in threads:
            thread.join(timeout=SHUTDOWN_GRACE_S + 5)

    def __enter__(self) -> "ProfileService":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # ------------------------------------------------------------------ public API

    def submit(self, config: RunConfig, *, force_fresh: bool = False) -> RunTicket:
        """Queue ``config``; returns at once. Raises ``ServiceBusy`` when the queue is full.

        An identical config that finished within ``settings.reuse_window_s`` returns a ticket
        that is already done (``reused=True``) unless ``force_fresh``. Its RunResult is the
        same object other sessions got: treat results as read-only.
        """
        if not isinstance(config, RunConfig):
            raise TypeError(f"submit() takes a RunConfig, not {type(config).__name__}")
        with self._lock:
            if self._stopping:
                raise RuntimeError("this ProfileService was shut down; create a new one")
            now = time.monotonic()
            if not force_fresh and self.settings.reuse_window_s > 0:
                hit = self._recent.get(config)
                if hit is not None and now - hit[0] <= self.settings.reuse_window_s:
                    ticket = RunTicket(self, next(self._ids), config, reused=True)
                    ticket._result = hit[1]
                    ticket._state = "done"
                    ticket._finished.set()
                    return ticket
            self._drop_abandoned(now)
            # queue_max counts runs waiting beyond those a free worker picks up right away.
            idle = sum(w.state == "idle" for w in self._workers)
            if len(self._pending) + 1 - idle > self.settings.queue_max:
                raise ServiceBusy(f"{len(self._pending)} runs are queued; try again in a moment")
            ticket = RunTicket(self, next(self._ids), config)
            self._pending.append(ticket)
            self._changed.notify_all()
            return ticket

    def health(self) -> ServiceHealth:
        with self._lock:
            workers = tuple(
                WorkerHealth(index=w.index, device=w.device, state=w.state, pid=w.pid,
                             alive=w.process is not None and w.process.poll() is None,
                             runs_served=w.runs_served, restarts=w.restarts, device_info=w.info)
                for w in self._workers)
            return ServiceHealth(
                workers_alive=sum(w.alive for w in workers), workers_total=len(workers), workers=workers,
                queue_length=len(self._pending), runs_served=self._runs_served,
                runs_failed=self._runs_failed, last_error=self._last_error,
                uptime_s=0.0 if self._started_at is None else time.monotonic() - self._started_at)

    def device_info(self) -> DeviceInfo | None:
        """DeviceInfo of the first worker that has warmed up, or None before any has."""
        with self._lock:
            return next((w.info for w in self._workers if w.info is not None), None)

    # ------------------------------------------------------------------ tickets (service side)

    def _touch(self, ticket: RunTicket) -> None:
        with self._lock:
            ticket._last_seen = time.monotonic()

    def _status(self, ticket: RunTicket) -> TicketStatus:
        with self._lock:
            now = time.monotonic()
            ticket._last_seen = now
            position = None
            estimate = None
            median = statistics.median(self._durations_s) if self._durations_s else None
            if ticket._state == "queued":
                try:
                    position = self._pending.index(ticket) + 1
                except ValueError:  # between dequeue and dispatch
                    position = 1
                if median is not None:
                    workers = max(1, len(self._workers))
                    estimate = median * (math.ceil(position / workers) + 1)
            elif ticket._state == "running" and median is not None:
                estimate = max(0.0, median - (now - (ticket._started_at or now)))
            return TicketStatus(
                id=ticket.id, state=ticket._state, stage=ticket._stage, queue_position=position,
                elapsed_s=now - ticket._submitted_at, estimate_s=estimate, worker=ticket._worker,
                device=ticket._device, reused=ticket.reused,
                message=None if ticket._error is None else ticket._error.message)

    def _cancel(self, ticket: RunTicket) -> bool:
        with self._lock:
            if ticket._state == "queued":
                try:
                    self._pending.remove(ticket)
                except ValueError:
                    pass
            elif ticket._state != "running":
                return False
            # A running ticket keeps its worker busy until the run ends; its result is dropped.
            self._finish(ticket, error=RunFailed("the run was cancelled", kind="cancelled"), state="cancelled")
            self._changed.notify_all()
            return True

    def _finish(self, ticket: RunTicket, *, result=None, error: RunFailed | None = None,
                state: str | None = None) -> None:
        """Settle a ticket (lock held). A ticket settles once; later outcomes are dropped."""
        if ticket._finished.is_set():
            return
        ticket._result = result
        ticket._error = error
        ticket._state = state or ("done" if error is None else "failed")
        ticket._finished.set()

    def _drop_abandoned(self, now: float) -> None:
        """Drop queued tickets nobody has polled for ``abandon_after_s`` (lock held)."""
        stale = [t for t in self._pending if now - t._last_seen > self.abandon_after_s]
        for ticket in stale:
            self._pending.remove(ticket)
            self._finish(ticket, state="cancelled", error=RunFailed(
                f"the run was dropped from the queue: nobody checked on it for {self.abandon_after_s:g} s "
                "(page closed?); run again", kind="cancelled"))

    def _next_ticket(self, worker: _Worker) -> RunTicket | None:
        """Wait for the next live queued ticket and mark it running on ``worker``; None when
        the service stops or the idle worker died (e.g. the OOM killer): it gets replaced now,
        not when the next user clicks."""
        with self._lock:
            worker.state = "idle"
            self._changed.notify_all()
            while not self._stopping:
                if worker.process.poll() is not None:  # Popen.poll is safe from any thread
                    self._last_error = (f"worker {worker.index} ({worker.device}) died while idle "
                                        f"({_exit_text(worker.process.returncode)}); restarting it")
                    return None
                self._drop_abandoned(time.monotonic())
                if self._pending:
                    ticket = self._pending.popleft()
                    ticket._state = "running"
                    ticket._stage = "dispatched"
                    ticket._started_at = time.monotonic()
                    ticket._worker = worker.index
                    ticket._device = worker.device
                    worker.state = "busy"
                    return ticket
                self._changed.wait(_TICK_S * 4)
            return None

    # ------------------------------------------------------------------ supervisor threads

    def _supervise(self, worker: _Worker) -> None:
        """Keep ``worker`` alive and serving until shutdown (runs in its own thread)."""
        backoff_s = 1.0
        while not self._stopping:
            try:
                launched = self._launch(worker)
            except Exception as error:  # noqa: BLE001 - e.g. spawn refused; keep retrying
                launched = False
                with self._lock:
                    self._last_error = (f"worker {worker.index} ({worker.device}) could not be started: "
                                        f"{type(error).__name__}: {error}")
            if not launched:
                self._retire(worker, state="stopped" if self._stopping else "restarting")
                if self._stop_event.wait(backoff_s):
                    break
                backoff_s = min(backoff_s * 2, MAX_RESTART_BACKOFF_S)
                continue
            backoff_s = 1.0
            self._serve(worker)
            self._retire(worker, state="stopped" if self._stopping else "restarting")
        self._retire(worker, state="stopped")

    def _launch(self, worker: _Worker) -> bool:
        """Start the worker interpreter and wait for its warm-up; False if it died or hung."""
        parent_sock, child_sock = socket.socketpair()
        env = dict(os.environ)
        # Pinned before the interpreter starts: CUDA reads the variable once, at initialization.
        env["CUDA_VISIBLE_DEVICES"] = worker.visible_id
        env.setdefault("KINETO_LOG_LEVEL", "6")  # silences Kineto's stderr lines
        env[_WORKER_FD_ENV] = str(child_sock.fileno())
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_LAB_PARENT_DIR, env.get("PYTHONPATH")) if p)
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CODE], env=env, pass_fds=(child_sock.fileno(),),
                stdin=subprocess.DEVNULL)
        except BaseException:
            parent_sock.close()
            raise
        finally:
            child_sock.close()  # the worker holds the only copy: its death shows as EOF here
        conn = multiprocessing.connection.Connection(parent_sock.detach())
        with self._lock:
            worker.process, worker.conn, worker.pid = process, conn, process.pid
            worker.state = "starting"
        try:
            conn.send(("init", worker.device, worker.physical_index, self.settings))
        except OSError:
            pass  # it died already; reported below
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while not self._stopping:
            if conn.poll(_TICK_S):
                try:
                    _, info, error = conn.recv()
                except (EOFError, OSError):
                    break
                with self._lock:
                    if info is not None:
                        worker.info = info
                    worker.ever_ready = True
                    worker.state = "idle"  # before the supervisor reaches the queue: submit() counts it free
                    if error:
                        self._last_error = f"worker {worker.index} ({worker.device}): {error}"
                    self._changed.notify_all()
                return process.poll() is None
            if process.poll() is not None or time.monotonic() > deadline:
                break
        if not self._stopping:
            try:
                process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
            why = "timed out" if process.returncode is None else _exit_text(process.returncode)
            with self._lock:
                self._last_error = f"worker {worker.index} ({worker.device}) did not start ({why})"
        return False

    def _serve(self, worker: _Worker) -> None:
        """Run tickets on a warm worker until it must be replaced or the service stops."""
        while True:
            ticket = self._next_ticket(worker)
            if ticket is None:
                return
            if not self._run_one(worker, ticket):
                return

    def _run_one(self, worker: _Worker, ticket: RunTicket) -> bool:
        """Run one ticket on ``worker``; False when the worker must be replaced."""
        conn, process = worker.conn, worker.process
        try:
            conn.send(("run", ticket.id, ticket.config))
        except (OSError, ValueError):
            # The worker died while idle; the run never started, so it goes back to the front.
            with self._lock:
                if not ticket._finished.is_set():
                    ticket._state, ticket._stage, ticket._worker, ticket._device = "queued", None, None, None
                    self._pending.appendleft(ticket)
                    self._changed.notify_all()
            return False
        started = time.monotonic()
        deadline = started + self.settings.run_timeout_s
        while True:
            if conn.poll(_TICK_S):
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    message = None
                if message is not None:
                    if message[0] == "stage":
                        with self._lock:
                            if message[1] == ticket.id:
                                ticket._stage = message[2]
                        continue
                    return self._settle(worker, ticket, message, time.monotonic() - started)
                dead = True  # EOF: the worker's end of the socket closed
            else:
                dead = process.poll() is not None
            if dead:
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:  # EOF but still alive: make it dead
                    process.kill()
                    process.wait(timeout=5)
                self._fail_run(ticket, RunFailed(
                    f"the profiling worker crashed ({_exit_text(process.returncode)}) while running "
                    f"{_describe(ticket.config)}; it has been restarted — run again", kind="crash"))
                return False
            if self._stopping:
                process.kill()
                self._fail_run(ticket, RunFailed(
                    "the profiling service is shutting down; reload the page and run again", kind="shutdown"))
                return False
            if time.monotonic() > deadline:
                process.kill()
                process.wait(timeout=5)
                limit = self.settings.run_timeout_s
                self._fail_run(ticket, RunFailed(
                    f"the run exceeded the host's limit of {limit:g} s; the worker was restarted — "
                    "choose a smaller size", kind="timeout"))
                return False

    def _settle(self, worker: _Worker, ticket: RunTicket, message: tuple, duration_s: float) -> bool:
        """Apply a worker's final message for ``ticket``; False when the worker is exiting."""
        if message[0] == "done":
            result = message[2]
            with self._lock:
                now = time.monotonic()
                self._durations_s.append(duration_s)
                self._runs_served += 1
                worker.runs_served += 1
                if self.settings.reuse_window_s > 0:
                    self._recent = {c: hit for c, hit in self._recent.items()
                                    if now - hit[0] <= self.settings.reuse_window_s}
                    self._recent[ticket.config] = (now, result)
                self._finish(ticket, result=result)  # a no-op if cancelled meanwhile
                self._changed.notify_all()
            return True
        _, _run_id, kind, type_name, text, fatal = message
        self._fail_run(ticket, RunFailed(text, kind=kind, error_type=type_name))
        return not fatal

    def _fail_run(self, ticket: RunTicket, error: RunFailed) -> None:
        with self._lock:
            self._runs_failed += 1
            self._last_error = f"run {ticket.id} ({_describe(ticket.config)}): {error.message}"
            self._finish(ticket, error=error)
            self._changed.notify_all()

    def _retire(self, worker: _Worker, *, state: str) -> None:
        """Stop ``worker``'s process (politely if idle, else kill) and record ``state``."""
        with self._lock:
            # Only an idle worker reads "stop"; one starting up or mid-run is killed at once.
            polite = worker.state == "idle"
            # Forget the process first so health() never touches one being closed.
            process, conn = worker.process, worker.conn
            worker.process, worker.conn, worker.pid = None, None, None
            if process is not None and state == "restarting":
                worker.restarts += 1
            worker.state = state
            self._changed.notify_all()
        if process is None:
            return
        if process.poll() is None and polite:
            try:
                conn.send(("stop",))
                process.wait(timeout=SHUTDOWN_GRACE_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)
        conn.close()


def _shutdown_at_exit(ref) -> None:
    service = ref()
    if service is not None:
        service.shutdown()

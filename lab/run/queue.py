"""The profile workers as a client of the pool: their tickets, records, queue rules and words.

The machinery (the lock, lanes and fair turns, cancel, supervisors, spares) is ``lab.pool``'s;
what is the workers' own is here: a ``RunTicket`` carries a ``RunConfig`` and its run-time
estimate, a ``WorkerRecord`` its device, pinning and measured ``DeviceInfo``; ``RunQueue`` adds
one outstanding submission per session (a newer one replaces it in its place in line), the
queue limit, the reuse cache of recent identical runs, device-model routing and the wait
estimates; ``WorkerClient`` says how a worker starts and what its failures are called.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import TYPE_CHECKING

from lab.core.config import ConfigError, RunConfig
from lab.core.devices import DeviceInfo
from lab.core.settings import HostSettings
from lab.pool import ChildRecord, Done, PoolClient, PoolQueue, Ready, Ticket, exit_text
from lab.run.estimate import check_estimate
from lab.run.pinning import start_worker_process
from lab.run.protocol import FailureKind, InitWorker, RunFailed, ServiceBusy, TicketState, TicketStatus, WorkerState
from lab.stats import median

if TYPE_CHECKING:  # pragma: no cover
    from lab.core.result import RunResult

__all__ = [
    "RECENT_RUNS_FOR_ESTIMATE", "WORKER_START_TIMEOUT_S", "RunQueue", "RunTicket", "WorkerClient", "WorkerRecord",
    "describe_config",
]  # fmt: skip

# Queue-time estimates use the median of this many recent run durations.
RECENT_RUNS_FOR_ESTIMATE = 20
# First profile in a fresh process: ~1.1 s on CPU (imports torch._inductor), ~7 s on an H200
# (CUPTI init), plus the torch import itself. A worker (or spare) not ready after this is replaced.
WORKER_START_TIMEOUT_S = 180.0


def describe_config(config: RunConfig) -> str:
    return f"{config.workload} {config.shape_text} {config.dtype} (device {config.device})"


class RunTicket(Ticket):
    """A caller's handle on one submitted run (see ``lab.pool.Ticket``)."""

    def __init__(self, queue: RunQueue, ticket_id: int, config: RunConfig, *, reused: bool = False,
                 session: str | None = None, run_estimate_s: float | None = None, replaced: int = 0,
                 device_name: str | None = None):
        super().__init__(queue, ticket_id, config, session=session)
        self.config = config
        self.reused = reused
        self.run_estimate_s = run_estimate_s  # lab.run.estimate's seconds for this run, if measured
        self.replaced = replaced  # how many of the session's earlier runs this submission replaced
        self.device_name = device_name  # the device model asked for (DeviceInfo.name); None = any worker
        self.device: str | None = None
        self.node: str | None = None

    def result(self, timeout: float | None = None) -> RunResult:
        """Wait for the result. Raises ``RunFailed`` if the run failed or was cancelled, and
        ``TimeoutError`` if ``timeout`` seconds pass first (the run goes on)."""
        return super().result(timeout)

    def mark_running(self, child: ChildRecord) -> None:
        super().mark_running(child)
        assert isinstance(child, WorkerRecord)
        self.device, self.node = child.device, child.node

    def mark_queued(self) -> None:
        super().mark_queued()
        self.device = None

    def status(self, now: float, *, queue_position: int | None, estimate_s: float | None) -> TicketStatus:
        return TicketStatus(
            id=self.id, state=self.state, stage=self.stage, queue_position=queue_position,
            elapsed_s=now - self.submitted_at, estimate_s=estimate_s, worker=self.child,
            device=self.device, reused=self.reused,
            message=None if self.error is None else self.error.message,
            run_estimate_s=self.run_estimate_s, replaced=self.replaced, node=self.node,
            device_name=self.device_name)


class WorkerRecord(ChildRecord):
    """Server-side record of one worker process (see ``lab.pool.ChildRecord``)."""

    kind = "worker"

    def __init__(self, index: int, device: str, visible_id: str, physical_index: int):
        super().__init__(index)
        self.device = device
        self.visible_id = visible_id
        self.physical_index = physical_index
        self.info: DeviceInfo | None = None

    @property
    def label(self) -> str:
        return f"worker {self.index} ({self.device})"

    @property
    def runs_served(self) -> int:
        return self.served

    def serves(self, ticket: RunTicket, workers: list[WorkerRecord]) -> bool:
        """Whether this worker may take ``ticket``: the device model it asked for, or a GPU
        worker for a "cuda" run while the pool has one (else any worker, which refuses it
        with the reason, as a pool of one kind always did)."""
        if ticket.device_name is not None:
            return self.info is not None and self.info.name == ticket.device_name
        if ticket.config.device == "cuda" and any(w.device.startswith("cuda") for w in workers):
            return self.device.startswith("cuda")
        return True


class WorkerClient(PoolClient):
    """How a profile worker starts, what it is sent and what its failures are called."""

    noun = "run"
    pool_name = "ProfileService"
    failed = RunFailed
    start_timeout_s = WORKER_START_TIMEOUT_S
    cancelled_text = "the run was cancelled"
    withdrawn_text = "the run was withdrawn before it started"
    shutdown_text = "the profiling service is shutting down; reload the page and run again"
    again_text = "run again"
    replaced_text = "the run was replaced by a newer one from the same page"

    def __init__(self, settings: HostSettings):
        self.settings = settings

    def spawn(self, child):
        return start_worker_process(child.visible_id)

    def init_message(self, child) -> InitWorker:
        return InitWorker(device=child.device, physical_index=child.physical_index, settings=self.settings)

    def on_ready(self, child, ready: Ready, *, promoted: bool) -> None:
        # A promoted spare warmed up while a run may have shared the device with it, so its
        # own measurement can read low: the rates the worker measured stay (same device, model).
        if promoted and child.info is not None and child.info.rates:
            return
        if ready.info is not None:
            child.info = ready.info

    def describe(self, ticket) -> str:
        return describe_config(ticket.config)

    def timeout_s(self) -> float:
        return self.settings.run_timeout_s

    def on_done(self, ticket, done: Done, value):
        return value

    def crashed(self, ticket, child, exitcode: int | None) -> RunFailed:
        return RunFailed(f"the profiling worker crashed ({exit_text(exitcode)}) while running "
                         f"{describe_config(ticket.config)}; it has been restarted — run again", kind=FailureKind.CRASH)

    def overdue(self) -> RunFailed:
        return RunFailed(f"the run exceeded the host's limit of {self.settings.run_timeout_s:g} s; the worker was "
                         "restarted — choose a smaller size", kind=FailureKind.TIMEOUT)

    def error(self, message: str, kind: str, error_type: str | None = None) -> RunFailed:
        return RunFailed(message, kind=kind, error_type=error_type)


class RunQueue(PoolQueue):
    """The pool's queue with the workers' rules: see the module doc."""

    def __init__(self, settings: HostSettings, workers: list[WorkerRecord], *, abandon_after_s: float):
        super().__init__(WorkerClient(settings), workers, abandon_after_s=abandon_after_s)
        self.settings = settings
        self._durations_s: deque[float] = deque(maxlen=RECENT_RUNS_FOR_ESTIMATE)
        self._recent: dict[RunConfig, tuple[float, RunResult]] = {}  # reuse cache

    @property
    def workers(self) -> list[WorkerRecord]:
        return self.children

    @property
    def runs_served(self) -> int:
        return self.served

    @property
    def runs_failed(self) -> int:
        return self.failed

    # ------------------------------------------------------------------ callers

    def submit(self, configs: list[RunConfig], *, force_fresh: bool, session: str | None,
               device_name: str | None = None) -> list[RunTicket]:
        """Queue ``configs`` as one submission (or hand back recent identical runs); see
        ProfileService.submit. A session's earlier submission still waiting or running is
        cancelled: one outstanding submission per session."""
        with self.lock:
            self.check_open()
            now = time.monotonic()
            self._drop_abandoned(now)
            info = self._info_for(device_name)
            estimates = [check_estimate(c, info, self.settings) for c in configs]  # may refuse: ConfigError
            mine = self.outstanding(session)
            fresh = [c for c in configs if force_fresh or self._reusable(c, now) is None]
            # queue_max counts runs waiting beyond those a free worker picks up right away.
            idle = sum(w.state == WorkerState.IDLE for w in self.workers)
            waiting = len(self.pending) - sum(t.state == TicketState.QUEUED for t in mine)
            if fresh and waiting + len(fresh) - idle > self.settings.queue_max:
                raise ServiceBusy(f"{len(self.pending)} runs are queued; try again in a moment")
            # The replacement takes the place of the waiting run it replaces, not the back of the line.
            places = [(t.tag, t.seq) for t in mine if t.state == TicketState.QUEUED]
            for old in mine:
                self.cancel_locked(old, WorkerClient.replaced_text)
            tickets = []
            for config, estimate in zip(configs, estimates):
                hit = None if force_fresh else self._reusable(config, now)
                ticket = RunTicket(self, self.next_id(), config, reused=hit is not None, session=session,
                                   run_estimate_s=None if estimate is None else estimate.seconds,
                                   replaced=len(mine), device_name=device_name)
                if hit is not None:
                    ticket.settle(value=hit)
                else:
                    self.enqueue(ticket, places.pop(0) if places else None)
                tickets.append(ticket)
            self.changed.notify_all()
            return tickets

    def _info_for(self, device_name: str | None) -> DeviceInfo | None:
        """(lock held) The measured DeviceInfo estimates use: a worker of ``device_name``'s
        model, else any. Refuses a model no warm worker has, naming those there are."""
        warm = [w.info for w in self.workers if w.info is not None]
        if device_name is not None:
            named = [i for i in warm if i.name == device_name]
            if not named:
                have = sorted({i.name for i in warm}) or ["none warmed up yet"]
                raise ConfigError(f"no worker here has a {device_name}; choose one of: {', '.join(have)}, or any")
            warm = named
        return next((i for i in warm if i.rates), None)

    def _reusable(self, config: RunConfig, now: float):
        reuse_s = self.settings.reuse_window_s
        hit = self._recent.get(config) if reuse_s > 0 else None
        return hit[1] if hit is not None and now - hit[0] <= reuse_s else None

    def describe_status(self, ticket: RunTicket, now: float, position: int | None) -> TicketStatus:  # type: ignore[override]
        estimate = None
        typical_s = median(self._durations_s) if self._durations_s else None
        if position is not None:
            ahead = [t for t in self.serve_order() if t is not ticket][:position - 1]
            estimate = self._wait_estimate(ticket, ahead, now)
            if estimate is None and typical_s is not None:
                workers = max(1, len(self.workers))
                estimate = typical_s * (math.ceil(position / workers) + 1)
        elif ticket.state == TicketState.RUNNING:
            own_s = ticket.run_estimate_s if ticket.run_estimate_s is not None else typical_s
            estimate = None if own_s is None else max(0.0, own_s - ticket.running_for(now))
        return ticket.status(now, queue_position=position, estimate_s=estimate)

    def _wait_estimate(self, ticket: RunTicket, ahead: list, now: float) -> float | None:
        """(lock held) Seconds until ``ticket``'s result from the run-time estimates: what is
        left of the running runs and the runs ahead, shared by the workers, plus its own run.
        None when a run involved has no estimate (no worker had measured its device)."""
        running = [t for t in self.live if isinstance(t, RunTicket) and t.state == TicketState.RUNNING]
        times = [t.run_estimate_s for t in (*ahead, ticket)]
        left = [None if t.run_estimate_s is None else max(0.0, t.run_estimate_s - t.running_for(now))
                for t in running]
        if any(x is None for x in (*times, *left)):
            return None
        before = sum(x for x in (*times[:-1], *left) if x is not None)
        return before / max(1, len(self.workers)) + (ticket.run_estimate_s or 0.0)

    # ------------------------------------------------------------------ supervisors (lock held)

    def serves(self, child, ticket) -> bool:
        return child.serves(ticket, self.workers)

    def on_done(self, ticket, value, duration_s: float) -> None:
        now = time.monotonic()
        self._durations_s.append(duration_s)
        reuse_s = self.settings.reuse_window_s
        if reuse_s > 0:
            self._recent = {c: hit for c, hit in self._recent.items() if now - hit[0] <= reuse_s}
            self._recent[ticket.config] = (now, value)

    def set_stage(self, ticket: RunTicket, run_id: int, stage: str) -> None:
        if run_id == ticket.id:
            self.progress(ticket, stage)

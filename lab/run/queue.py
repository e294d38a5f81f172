"""The service's shared state: tickets, the fair queue, worker records and counters.

One lock (``RunQueue.lock``) guards all of it; ``RunQueue.changed`` is notified whenever the
queue, a worker's state or the stop flag changes. The public ``ProfileService`` methods and
the per-worker supervisor threads both go through ``RunQueue``; a ``RunTicket`` changes state
only through its own methods, which the queue calls with the lock held.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import threading
import time
from collections import deque
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from lab.core.config import ConfigError, RunConfig
from lab.core.devices import DeviceInfo
from lab.core.settings import HostSettings
from lab.run.estimate import check_estimate
from lab.run.protocol import (
    FailureKind,
    RunFailed,
    ServiceBusy,
    StandbyState,
    TicketState,
    TicketStatus,
    WorkerReady,
    WorkerState,
)
from lab.run.spawn import exit_text
from lab.stats import median

if TYPE_CHECKING:  # pragma: no cover
    from lab.core.result import RunResult

__all__ = [
    "ABANDONED_TICKET_S", "IDLE_WAIT_S", "RECENT_RUNS_FOR_ESTIMATE", "RunQueue", "RunTicket", "WorkerRecord",
    "describe_config",
]  # fmt: skip

# A queued ticket nobody has polled for this long belongs to a closed browser tab; it is
# dropped when it reaches the head of the queue instead of occupying a worker. Streamlit
# pages poll every second or so while they wait, so two minutes is generous.
ABANDONED_TICKET_S = 120.0
# Queue-time estimates use the median of this many recent run durations.
RECENT_RUNS_FOR_ESTIMATE = 20
# How long an idle supervisor waits on the queue before it checks its worker and the stop flag.
IDLE_WAIT_S = 1.0


class RunTicket:
    """A caller's handle on one submitted run. Cheap to poll from any thread.

    Callers use ``poll``, ``result``, ``cancel`` and ``done``; the ``mark_*`` and ``settle``
    methods belong to the queue, which calls them with its lock held.
    """

    def __init__(self, queue: RunQueue, ticket_id: int, config: RunConfig, *, reused: bool = False,
                 session: str | None = None, run_estimate_s: float | None = None, replaced: int = 0,
                 device_name: str | None = None):
        self._queue = queue
        self.id = ticket_id
        self.config = config
        self.reused = reused
        self.session = session  # who submitted it: one outstanding submission per session
        self.run_estimate_s = run_estimate_s  # lab.run.estimate's seconds for this run, if measured
        self.replaced = replaced  # how many of the session's earlier runs this submission replaced
        self.device_name = device_name  # the device model asked for (DeviceInfo.name); None = any worker
        # Fair-queue order (start-time fair queueing): served lowest (tag, seq) first; a
        # replacement inherits the replaced run's pair, so it keeps that place in line.
        self.tag = 0
        self.seq = ticket_id
        now = time.monotonic()
        # All fields below are guarded by the queue's lock.
        self._state = TicketState.QUEUED
        self._stage: str | None = None
        self._submitted_at = now
        self._started_at: float | None = None
        self._last_seen = now
        self._worker: int | None = None
        self._device: str | None = None
        self._node: str | None = None
        self._result: RunResult | None = None
        self._error: RunFailed | None = None
        self._finished = threading.Event()

    # ------------------------------------------------------------------ callers

    def poll(self) -> TicketStatus:
        return self._queue.status(self)

    def result(self, timeout: float | None = None) -> RunResult:
        """Wait for the result. Raises ``RunFailed`` if the run failed or was cancelled, and
        ``TimeoutError`` if ``timeout`` seconds pass first (the run goes on)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._queue.touch(self)  # a caller waiting here is not an abandoned tab
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
        """Cancel: a queued run leaves the queue; a running one's worker is killed (and
        replaced, warmed up again). Returns False if the ticket had already finished."""
        return self._queue.cancel(self)

    def withdraw(self) -> bool:
        """Take the run out of the queue if it is still waiting; a running one goes on (its
        result is dropped if nobody collects it). What a page does when its script is
        interrupted (a tab click mid-run): killing the worker there would cost every such click
        a worker restart (~10 s on a 2-core box)."""
        return self._queue.withdraw(self)

    def done(self) -> bool:
        """Whether the ticket has settled (done, failed or cancelled); never blocks."""
        return self._finished.is_set()

    def __repr__(self) -> str:
        return f"RunTicket(id={self.id}, state={str(self._state)!r}, reused={self.reused})"

    # ------------------------------------------------------------------ the queue (lock held)

    @property
    def state(self) -> TicketState:
        return self._state

    def mark_seen(self, now: float) -> None:
        self._last_seen = now

    def unseen_for(self, now: float) -> float:
        return now - self._last_seen

    def mark_running(self, worker: int, device: str, node: str | None = None) -> None:
        self._state, self._stage = TicketState.RUNNING, "dispatched"
        self._started_at = time.monotonic()
        self._worker, self._device, self._node = worker, device, node

    def mark_queued(self) -> None:
        """Back to waiting: its worker died before the run started."""
        self._state, self._stage, self._worker, self._device = TicketState.QUEUED, None, None, None

    def mark_stage(self, stage: str) -> None:
        self._stage = stage

    def settle(self, *, result=None, error: RunFailed | None = None, state: TicketState | None = None) -> None:
        """Record the outcome. A ticket settles once; later outcomes are dropped."""
        if self._finished.is_set():
            return
        self._result = result
        self._error = error
        self._state = state or (TicketState.DONE if error is None else TicketState.FAILED)
        self._finished.set()

    def status(self, now: float, *, queue_position: int | None, estimate_s: float | None) -> TicketStatus:
        return TicketStatus(
            id=self.id, state=self._state, stage=self._stage, queue_position=queue_position,
            elapsed_s=now - self._submitted_at, estimate_s=estimate_s, worker=self._worker,
            device=self._device, reused=self.reused,
            message=None if self._error is None else self._error.message,
            run_estimate_s=self.run_estimate_s, replaced=self.replaced, node=self._node,
            device_name=self.device_name)

    def running_for(self, now: float) -> float:
        return now - (self._started_at or now)


class WorkerRecord:
    """Server-side record of one worker process; fields guarded by the queue's lock except
    ``process`` and ``conn``, which only its supervisor thread touches."""

    def __init__(self, index: int, device: str, visible_id: str, physical_index: int):
        self.index = index
        self.device = device
        self.visible_id = visible_id
        self.physical_index = physical_index
        self.state = WorkerState.NOT_STARTED
        self.process: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.pid: int | None = None
        self.info: DeviceInfo | None = None
        self.ever_ready = False
        self.runs_served = 0
        self.restarts = 0
        self.thread: threading.Thread | None = None
        self.node: str | None = None  # where it runs when that is not this server (a Ray node)
        # The warm spare (lab.run.standby): (process, pipe, its WorkerReady once warm), its state,
        # how often it replaced this worker, and the thread that keeps it.
        self.standby: tuple[subprocess.Popen, Connection, WorkerReady | None] | None = None
        self.standby_state = StandbyState.NONE
        self.promotions = 0
        self.standby_thread: threading.Thread | None = None

    @property
    def alive(self) -> bool:
        return not self.died()

    def died(self) -> bool:
        """Whether its process is gone (Popen.poll is safe from any thread)."""
        return self.process is None or self.process.poll() is not None

    @property
    def label(self) -> str:
        return f"worker {self.index} ({self.device})"

    def exit_reason(self) -> str:
        """How its process ended, for messages (call once ``process.poll()`` is not None)."""
        return exit_text(None if self.process is None else self.process.returncode)

    def serves(self, ticket: RunTicket, workers: list[WorkerRecord]) -> bool:
        """Whether this worker may take ``ticket``: the device model it asked for, or a GPU
        worker for a "cuda" run while the pool has one (else any worker, which refuses it
        with the reason, as a pool of one kind always did)."""
        if ticket.device_name is not None:
            return self.info is not None and self.info.name == ticket.device_name
        if ticket.config.device == "cuda" and any(w.device.startswith("cuda") for w in workers):
            return self.device.startswith("cuda")
        return True


def describe_config(config: RunConfig) -> str:
    return f"{config.workload} {config.shape_text} {config.dtype} (device {config.device})"


class RunQueue:
    """Tickets waiting and running, the workers' records and the service's counters."""

    def __init__(self, settings: HostSettings, workers: list[WorkerRecord], *, abandon_after_s: float):
        self.settings = settings
        self.workers = workers
        self.abandon_after_s = abandon_after_s
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # queue, worker state or stop changed
        self.pending: deque[RunTicket] = deque()
        self.stopping = False
        self.runs_served = 0
        self.runs_failed = 0
        self.last_error: str | None = None
        self._ids = itertools.count(1)
        self._durations_s: deque[float] = deque(maxlen=RECENT_RUNS_FOR_ESTIMATE)
        self._recent: dict[RunConfig, tuple[float, RunResult]] = {}  # reuse cache
        # Fair queue (see _next_tag): the tag of the round being served, each session's last tag.
        self._round = 0
        self._last_tag: dict[object, int] = {}
        # Submitted tickets not yet settled, for the one-per-session rule (pruned on submit).
        self._live_refs: list[RunTicket] = []

    @property
    def _live(self) -> list[RunTicket]:
        self._live_refs = [t for t in self._live_refs if not t.done()]
        return self._live_refs

    # ------------------------------------------------------------------ callers

    def submit(self, configs: list[RunConfig], *, force_fresh: bool, session: str | None,
               device_name: str | None = None) -> list[RunTicket]:
        """Queue ``configs`` as one submission (or hand back recent identical runs); see
        ProfileService.submit. A session's earlier submission still waiting or running is
        cancelled: one outstanding submission per session."""
        with self.lock:
            if self.stopping:
                raise RuntimeError("this ProfileService was shut down; create a new one")
            now = time.monotonic()
            self._drop_abandoned(now)
            info = self._info_for(device_name)
            estimates = [check_estimate(c, info, self.settings) for c in configs]  # may refuse: ConfigError
            mine = self._outstanding(session)
            fresh = [c for c in configs if force_fresh or self._reusable(c, now) is None]
            # queue_max counts runs waiting beyond those a free worker picks up right away.
            idle = sum(w.state == WorkerState.IDLE for w in self.workers)
            waiting = len(self.pending) - sum(t.state == TicketState.QUEUED for t in mine)
            if fresh and waiting + len(fresh) - idle > self.settings.queue_max:
                raise ServiceBusy(f"{len(self.pending)} runs are queued; try again in a moment")
            # The replacement takes the place of the waiting run it replaces, not the back of the line.
            places = [(t.tag, t.seq) for t in mine if t.state == TicketState.QUEUED]
            for old in mine:
                self._cancel(old, "the run was replaced by a newer one from the same page")
            tickets = []
            for config, estimate in zip(configs, estimates):
                hit = None if force_fresh else self._reusable(config, now)
                ticket = RunTicket(self, next(self._ids), config, reused=hit is not None, session=session,
                                   run_estimate_s=None if estimate is None else estimate.seconds,
                                   replaced=len(mine), device_name=device_name)
                if hit is not None:
                    ticket.settle(result=hit)
                else:
                    if places:
                        ticket.tag, ticket.seq = places.pop(0)
                    else:
                        ticket.tag = self._next_tag(session)
                    self.pending.append(ticket)
                    self._live_refs.append(ticket)
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

    def _outstanding(self, session: str | None) -> list[RunTicket]:
        """The session's tickets still waiting or running (none for an anonymous caller)."""
        if session is None:
            return []
        return [t for t in self._live if t.session == session and not t.done()]

    def _next_tag(self, session: str | None) -> int:
        """Start-time fair queueing: a session's next run is served one round after its last
        one, and never before the round being served now; so sessions take turns (round
        robin) and an anonymous caller (session None) is served in arrival order."""
        key = session if session is not None else object()
        tag = max(self._round, self._last_tag.get(key, 0)) + 1
        self._last_tag = {k: t for k, t in self._last_tag.items() if t > self._round}
        if session is not None:
            self._last_tag[key] = tag
        return tag

    def serve_order(self) -> list[RunTicket]:
        """The waiting tickets in the order workers will take them (lock held)."""
        return sorted(self.pending, key=lambda t: (t.tag, t.seq))

    def touch(self, ticket: RunTicket) -> None:
        with self.lock:
            ticket.mark_seen(time.monotonic())

    def status(self, ticket: RunTicket) -> TicketStatus:
        with self.lock:
            now = time.monotonic()
            ticket.mark_seen(now)
            position = None
            estimate = None
            typical_s = median(self._durations_s) if self._durations_s else None
            if ticket.state == TicketState.QUEUED:
                order = self.serve_order()
                position = order.index(ticket) + 1 if ticket in order else 1  # else: being dispatched
                estimate = self._wait_estimate(ticket, order[:position - 1], now)
                if estimate is None and typical_s is not None:
                    workers = max(1, len(self.workers))
                    estimate = typical_s * (math.ceil(position / workers) + 1)
            elif ticket.state == TicketState.RUNNING:
                own_s = ticket.run_estimate_s if ticket.run_estimate_s is not None else typical_s
                estimate = None if own_s is None else max(0.0, own_s - ticket.running_for(now))
            return ticket.status(now, queue_position=position, estimate_s=estimate)

    def _wait_estimate(self, ticket: RunTicket, ahead: list[RunTicket], now: float) -> float | None:
        """(lock held) Seconds until ``ticket``'s result from the run-time estimates: what is
        left of the running runs and the runs ahead, shared by the workers, plus its own run.
        None when a run involved has no estimate (no worker had measured its device)."""
        running = [t for t in self._live if t.state == TicketState.RUNNING]
        times = [t.run_estimate_s for t in (*ahead, ticket)]
        left = [None if t.run_estimate_s is None else max(0.0, t.run_estimate_s - t.running_for(now))
                for t in running]
        if any(x is None for x in (*times, *left)):
            return None
        before = sum(x for x in (*times[:-1], *left) if x is not None)
        return before / max(1, len(self.workers)) + (ticket.run_estimate_s or 0.0)

    def cancel(self, ticket: RunTicket) -> bool:
        with self.lock:
            return self._cancel(ticket, "the run was cancelled")

    def withdraw(self, ticket: RunTicket) -> bool:
        with self.lock:
            if ticket.state != TicketState.QUEUED:
                return False
            return self._cancel(ticket, "the run was withdrawn before it started")

    def _cancel(self, ticket: RunTicket, why: str) -> bool:
        """(lock held) A queued ticket leaves the queue; a running one settles now and its
        supervisor, which checks every tick, kills the worker and starts a fresh one."""
        if ticket.state == TicketState.QUEUED:
            try:
                self.pending.remove(ticket)
            except ValueError:
                pass
        elif ticket.state != TicketState.RUNNING:
            return False
        ticket.settle(error=RunFailed(why, kind=FailureKind.CANCELLED), state=TicketState.CANCELLED)
        self.changed.notify_all()
        return True

    def stop(self) -> bool:
        """Set the stop flag and cancel every queued ticket; False if it was already set."""
        with self.lock:
            if self.stopping:
                return False
            self.stopping = True
            while self.pending:
                self.pending.popleft().settle(error=RunFailed(
                    "the profiling service is shutting down; reload the page and run again",
                    kind=FailureKind.SHUTDOWN), state=TicketState.CANCELLED)
            self.changed.notify_all()
            return True

    # ------------------------------------------------------------------ supervisors

    def next_ticket(self, worker: WorkerRecord) -> RunTicket | None:
        """Wait for the next live queued ticket and mark it running on ``worker``; None when
        the service stops or the idle worker died (e.g. the OOM killer): it gets replaced now,
        not when the next user clicks."""
        with self.lock:
            worker.state = WorkerState.IDLE
            self.changed.notify_all()
            while not self.stopping:
                if worker.died():
                    self.last_error = f"{worker.label} died while idle ({worker.exit_reason()}); restarting it"
                    return None
                self._drop_abandoned(time.monotonic())
                ticket = next((t for t in self.serve_order() if worker.serves(t, self.workers)), None)
                if ticket is not None:
                    self.pending.remove(ticket)
                    self._round = max(self._round, ticket.tag)
                    ticket.mark_running(worker.index, worker.device, worker.node)
                    worker.state = WorkerState.BUSY
                    return ticket
                self.changed.wait(IDLE_WAIT_S)
            return None

    def requeue(self, ticket: RunTicket) -> None:
        """Put a ticket whose run never started back at the front of the queue."""
        with self.lock:
            if not ticket.done():
                ticket.mark_queued()
                self.pending.appendleft(ticket)
                self.changed.notify_all()

    def set_stage(self, ticket: RunTicket, run_id: int, stage: str) -> None:
        with self.lock:
            if run_id == ticket.id:
                ticket.mark_stage(stage)

    def record_done(self, worker: WorkerRecord, ticket: RunTicket, result, duration_s: float) -> None:
        with self.lock:
            now = time.monotonic()
            self._durations_s.append(duration_s)
            self.runs_served += 1
            worker.runs_served += 1
            reuse_s = self.settings.reuse_window_s
            if reuse_s > 0:
                self._recent = {c: hit for c, hit in self._recent.items() if now - hit[0] <= reuse_s}
                self._recent[ticket.config] = (now, result)
            ticket.settle(result=result)  # a no-op if cancelled meanwhile
            self.changed.notify_all()

    def record_failure(self, ticket: RunTicket, error: RunFailed) -> None:
        with self.lock:
            self.runs_failed += 1
            self.last_error = f"run {ticket.id} ({describe_config(ticket.config)}): {error.message}"
            ticket.settle(error=error)
            self.changed.notify_all()

    def note_error(self, text: str) -> None:
        with self.lock:
            self.last_error = text

    # ------------------------------------------------------------------ (lock held)

    def _drop_abandoned(self, now: float) -> None:
        """Drop queued tickets nobody has polled for ``abandon_after_s``."""
        stale = [t for t in self.pending if t.unseen_for(now) > self.abandon_after_s]
        for ticket in stale:
            self.pending.remove(ticket)
            ticket.settle(state=TicketState.CANCELLED, error=RunFailed(
                f"the run was dropped from the queue: nobody checked on it for {self.abandon_after_s:g} s "
                "(page closed?); run again", kind=FailureKind.CANCELLED))

"""Stage 1 of the pipeline: a ``RunConfig`` → a profile run in a worker process → ``RunResult``.

The config, the host's settings, the workloads, lessons, devices and the result record are
shared types: import them from ``lab.core`` (not re-listed here, D7). Here: ``estimate``
(a run's time and memory before it starts), ``runner`` the only code that touches ``torch.profiler``;
``service`` is the pool of worker processes, built from ``protocol`` (states and messages),
``queue``, ``supervisor``, ``spawn`` and ``worker`` (the worker process's side).
"""

from lab.run.estimate import RunEstimate, check_estimate, estimate_run, estimate_text
from lab.run.protocol import FailureKind, TicketState, WorkerState
from lab.run.service import WORKER_START_TIMEOUT_S, ProfileService, RunFailed, ServiceBusy, TicketStatus
from lab.vocab import DTYPES, STAGE_TEXT, STAGES

__all__ = [
    "DTYPES", "STAGES", "STAGE_TEXT", "WORKER_START_TIMEOUT_S", "FailureKind", "ProfileService", "RunEstimate",
    "RunFailed", "ServiceBusy", "TicketState", "TicketStatus", "WorkerState", "check_estimate", "estimate_run",
    "estimate_text",
]  # fmt: skip

"""Stage 1 of the pipeline: a ``RunConfig`` → a profile run in a worker process → ``RunResult``.

The config, the host's settings, the workloads, lessons, devices and the result record are
shared types in ``lab.core`` (re-exported here for the page and the CLI). Here: ``estimate``
(a run's time and memory before it starts), ``runner`` the only code that touches ``torch.profiler``;
``service`` is the pool of worker processes, built from ``protocol`` (states and messages),
``queue``, ``supervisor``, ``spawn`` and ``worker`` (the worker process's side).
"""

from lab.core.config import (
    DEVICES,
    MAX_LABEL_CHARS,
    OPTIONS,
    ConfigError,
    Option,
    RunConfig,
    check_device,
    check_limits,
    check_memory,
    dtype_refusal,
)
from lab.core.devices import DeviceInfo, DeviceKind, DevicePeak, DeviceRates, describe_kinds
from lab.core.lessons import LESSONS, Lesson, lesson_configs
from lab.core.result import RunError, RunResult
from lab.core.settings import ENV_PREFIX, HostSettings, SettingsError, host_environment
from lab.core.workloads import WORKLOADS
from lab.run.estimate import RunEstimate, check_estimate, estimate_run, estimate_text
from lab.run.protocol import FailureKind, TicketState, WorkerState
from lab.run.service import WORKER_START_TIMEOUT_S, ProfileService, RunFailed, ServiceBusy, TicketStatus
from lab.vocab import DTYPES, STAGE_TEXT, STAGES

__all__ = [
    "DEVICES", "DTYPES", "ENV_PREFIX", "LESSONS", "MAX_LABEL_CHARS", "OPTIONS", "STAGES", "STAGE_TEXT",
    "WORKER_START_TIMEOUT_S", "WORKLOADS", "ConfigError", "DeviceInfo", "DeviceKind", "DevicePeak", "DeviceRates",
    "FailureKind", "HostSettings", "Lesson", "Option", "ProfileService", "RunConfig", "RunError", "RunEstimate",
    "RunFailed", "RunResult", "ServiceBusy", "SettingsError", "TicketState", "TicketStatus", "WorkerState",
    "check_device", "check_estimate", "check_limits", "check_memory", "dtype_refusal", "estimate_run", "estimate_text",
    "describe_kinds", "host_environment", "lesson_configs",
]  # fmt: skip

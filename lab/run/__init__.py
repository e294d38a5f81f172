"""Stage 1 of the pipeline: a ``RunConfig`` → a profile run in a worker process → ``RunResult``.

``config`` holds the config (each field's form/CLI metadata on the field) and every refusal,
``settings`` the host's limits, ``workloads`` and ``lessons`` the exercises, ``devices``
device detection and peak rates, ``runner`` the only code that touches ``torch.profiler``;
``service`` is the pool of worker processes, built from ``protocol`` (states and messages),
``queue``, ``supervisor``, ``spawn`` and ``worker`` (the worker process's side).
"""

from lab.run.config import (
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
from lab.run.devices import DeviceInfo, DeviceKind, DevicePeak, DeviceRates, describe_kinds
from lab.run.estimate import RunEstimate, check_estimate, estimate_run, estimate_text
from lab.run.lessons import LESSONS, Lesson, lesson_configs
from lab.run.protocol import FailureKind, TicketState, WorkerState
from lab.run.result import RunError, RunResult
from lab.run.service import WORKER_START_TIMEOUT_S, ProfileService, RunFailed, ServiceBusy, TicketStatus
from lab.run.settings import ENV_PREFIX, HostSettings, SettingsError, host_environment
from lab.run.workloads import WORKLOADS
from lab.vocab import DTYPES, STAGE_TEXT, STAGES

__all__ = [
    "DEVICES", "DTYPES", "ENV_PREFIX", "LESSONS", "MAX_LABEL_CHARS", "OPTIONS", "STAGES", "STAGE_TEXT",
    "WORKER_START_TIMEOUT_S", "WORKLOADS", "ConfigError", "DeviceInfo", "DeviceKind", "DevicePeak", "DeviceRates",
    "FailureKind", "HostSettings", "Lesson", "Option", "ProfileService", "RunConfig", "RunError", "RunEstimate",
    "RunFailed", "RunResult", "ServiceBusy", "SettingsError", "TicketState", "TicketStatus", "WorkerState",
    "check_device", "check_estimate", "check_limits", "check_memory", "dtype_refusal", "estimate_run", "estimate_text",
    "describe_kinds", "host_environment", "lesson_configs",
]  # fmt: skip

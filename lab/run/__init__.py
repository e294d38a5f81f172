"""Stage 1 of the pipeline: a ``RunConfig`` → a profile run in a worker process → ``RunResult``.

``config`` holds the config and every refusal, ``settings`` the host's limits, ``workloads``
and ``lessons`` the exercises, ``devices`` device detection and peak rates, ``runner`` the only
code that touches ``torch.profiler``, ``service`` the worker processes and their queue.
"""

from lab.run.config import DEVICES, ConfigError, RunConfig, check_device, check_limits, dtype_refusal
from lab.run.devices import DeviceInfo, DevicePeak
from lab.run.lessons import LESSONS, Lesson, lesson_configs
from lab.run.result import RunError, RunResult
from lab.run.service import WORKER_START_TIMEOUT_S, ProfileService, RunFailed, ServiceBusy, TicketStatus
from lab.run.settings import HostSettings, SettingsError
from lab.run.workloads import WORKLOADS
from lab.vocab import DTYPES, STAGE_TEXT, STAGES

__all__ = [
    "DEVICES", "DTYPES", "LESSONS", "STAGES", "STAGE_TEXT", "WORKER_START_TIMEOUT_S", "WORKLOADS", "ConfigError", "DeviceInfo",
    "DevicePeak", "HostSettings", "Lesson", "ProfileService", "RunConfig", "RunError", "RunFailed",
    "RunResult", "ServiceBusy", "SettingsError", "TicketStatus", "check_device", "check_limits",
    "dtype_refusal", "lesson_configs",
]  # fmt: skip

"""The shared types, below every stage (run/, read/, trace/, analysis/, views/, teach/): plain data and
pure functions that several stages need, and nothing that runs a profile or a process.

``settings`` (the host's limits, ``HostSettings``), ``config`` (``RunConfig``, each field's form and
CLI metadata, every refusal), ``workloads`` (the exercises and their cost model; builders import
torch lazily), ``devices`` (device kinds, datasheet peaks; ``detect_device`` imports torch only when
called), ``result`` (``RunResult``, what a run returns) and ``columns`` (column contracts:
``KEY_AVERAGES_COLUMNS``). Importing ``lab.core`` imports no torch and nothing of ``lab.run``, so a
trace reader loads no runner.
"""

from lab.core.columns import KEY_AVERAGES_COLUMNS
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
from lab.core.devices import PEAKS, DeviceInfo, DeviceKind, DevicePeak, DeviceRates, describe_kinds, lookup_peak
from lab.core.result import RunError, RunResult, Timing
from lab.core.settings import ENV_PREFIX, HostSettings, SettingsError, host_environment
from lab.core.workloads import WORKLOADS, Workload

__all__ = [
    "DEVICES", "ENV_PREFIX", "KEY_AVERAGES_COLUMNS", "MAX_LABEL_CHARS", "OPTIONS", "PEAKS", "WORKLOADS",
    "ConfigError", "DeviceInfo", "DeviceKind", "DevicePeak", "DeviceRates", "HostSettings", "Option",
    "RunConfig", "RunError", "RunResult", "SettingsError", "Timing", "Workload",
    "check_device", "check_limits", "check_memory", "describe_kinds", "dtype_refusal", "host_environment",
    "lookup_peak",
]  # fmt: skip

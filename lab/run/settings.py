"""Host settings: every limit an instructor may change, in one place.

Read from environment variables named ``PROFILER_LAB_<FIELD>`` (upper case), e.g.
``PROFILER_LAB_MAX_DIM=8192``. Streamlit exposes ``.streamlit/secrets.toml`` entries as
environment variables too, so either works. Nothing here imports torch or streamlit.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["ENV_PREFIX", "HostSettings", "SettingsError", "host_environment"]

ENV_PREFIX = "PROFILER_LAB_"


class SettingsError(ValueError):
    """A host setting has a value the lab cannot use; the message names the variable."""


@dataclass(frozen=True, kw_only=True)
class HostSettings:
    # Matrix sizes: 16384 is the largest power of two the UI's slider offers; 16384^3 bf16
    # needs ~1.6 GB, which fits any GPU we list and a laptop's RAM.
    max_dim: int = 16384
    # Total profiled iterations per run (wait+warmup+active)*repeat plus warm-up iterations.
    max_steps: int = 64
    # Uploads: Streamlit enforces its own server.maxUploadSize too (.streamlit/config.toml).
    max_upload_mb: int = 200
    # A gzip trace expands ~10-20x; the cap stops gzip bombs before they exhaust memory.
    max_trace_decompressed_mb: int = 1024
    max_trace_events: int = 5_000_000
    # A 16384^3 fp32 run on a CPU takes ~1 min per iteration; past this the worker is replaced.
    run_timeout_s: float = 300.0
    # Runs waiting beyond the ones being executed; past this callers are told to retry.
    queue_max: int = 64
    # 0 = one worker per visible GPU, or one CPU worker when there is no GPU.
    workers: int = 0
    # Identical configs within this window reuse the last result (0 = never reuse).
    reuse_window_s: float = 0.0
    # Trace readers (lab.read): processes that parse and analyse uploads, samples and the CLI's
    # traces, apart from the server. 0 = from the machine (lab.read.limits.reader_plan): 2–4
    # readers, each allowed half the machine's memory shared out, at most 8 GiB.
    reader_count: int = 0
    # Address space one reader may add to its own start-up size (RLIMIT_AS); 0 = from the machine.
    # A 509 MB-JSON trace needed 1.8 GB of it (0.6 GB of that resident), see lab/read/limits.py.
    reader_memory_mb: int = 0
    # A read (parse + analysis) past this is killed and its reader replaced. A 1 GB JSON trace
    # takes ~25 s of one free core; 240 s leaves room for a 2-core box that is also serving pages.
    read_timeout_s: float = 240.0
    # Parsed uploads the server keeps for their sessions, all sessions together; the oldest is
    # released past it. 0 = a quarter of the machine's memory.
    uploads_held_mb: int = 0
    # Runs estimated (lab.run.estimate) to take longer are refused before they queue, so one
    # attendee cannot hold a worker for minutes (16384³ float32 on a CPU: ~15 min). 0 = no limit.
    max_run_estimate_s: float = 20.0
    # Where *Open in Perfetto* sends the trace (lab/views/perfetto.py); a test points it at a
    # local stand-in, a site without internet at its own copy of the Perfetto UI.
    perfetto_origin: str = "https://ui.perfetto.dev"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> HostSettings:
        """The settings the ``PROFILER_LAB_*`` variables give. Read once, at start (the page, the
        CLI's ``main``), and passed down: nothing below reads the environment again."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = ENV_PREFIX + f.name.upper()
            if key not in env:
                continue
            raw = env[key]
            if f.type == "str":
                values[f.name] = raw
                continue
            cast = int if f.type == "int" else float
            try:
                value = cast(raw)
            except ValueError:
                raise SettingsError(f"{key}={raw!r} is not a number; set it to a {f.type}") from None
            if value < 0:
                raise SettingsError(f"{key}={raw!r} is negative; use 0 or more")
            values[f.name] = value
        return cls(**values)

    def replace(self, **changes) -> HostSettings:
        return dataclasses.replace(self, **changes)


def host_environment(environ: dict[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """The ``PROFILER_LAB_*`` variables, sorted: all that ``from_env`` reads, as a cache key.

    A server's environment does not change, so the page parses it once; a test that sets a
    variable between two page sessions in one process gets settings of its own.
    """
    env = os.environ if environ is None else environ
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(ENV_PREFIX)))

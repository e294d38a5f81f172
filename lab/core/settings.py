"""Host settings: every limit an instructor may change, in one place.

Read from environment variables named ``PROFILER_LAB_<FIELD>`` (upper case), e.g.
``PROFILER_LAB_MAX_DIM=8192``. Streamlit exposes ``.streamlit/secrets.toml`` entries as
environment variables too, so either works (the page also reads the root-level
``PROFILER_LAB_*`` entries of ``st.secrets`` itself and passes them in, ``ui/access.py``).
Nothing here imports torch or streamlit.

Who may use the page (``lab/access``): ``login`` is ``off``, ``passcode`` or ``oidc``; left
unset it is ``passcode`` when a passcode is set, else ``off``. The passcode and the host token
are secrets: never in ``repr``, and ``shown()`` (the host's status lines) says only "set".
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["BACKENDS", "ENV_PREFIX", "LOGIN_MODES", "SECRET_FIELDS", "HostSettings", "SettingsError",
           "host_environment"]

ENV_PREFIX = "PROFILER_LAB_"
# off: anyone who reaches the port (one's own box); passcode: one shared workshop passcode;
# oidc: Streamlit's own st.login with the provider in .streamlit/secrets.toml [auth].
LOGIN_MODES = ("off", "passcode", "oidc")
# Fields whose values are never shown, logged or sent to a page: only whether they are set.
SECRET_FIELDS = frozenset({"passcode", "host_token"})
# Where runs execute: "local" = worker processes of this server (lab.pool.supervisor); "ray" =
# Ray actors of a cluster, possibly on other hosts (lab.run.ray_backend; pip install -r
# requirements-ray.txt).
BACKENDS = ("local", "ray")


class SettingsError(ValueError):
    """A host setting has a value the lab cannot use; the message names the variable."""


@dataclass(frozen=True, kw_only=True)
class HostSettings:
    # Matrix sizes: 16384 is the largest power of two the UI's slider offers; 16384^3 bf16
    # needs ~1.6 GB, which fits any GPU we list and a laptop's RAM.
    max_dim: int = 16384
    # Processes of a distributed run (the ddp_gloo workload): each is a Python with torch (~0.3 GB
    # resident) sharing this host's cores; 8 is the most a job may ask for (lab.core.config.MAX_RANKS).
    max_ranks: int = 8
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
    # 1: an upload's read starts when Streamlit stores the file, before the page run that brings
    # it (ui.early_read: the reader starts 0.04-0.09 s sooner; the verdict comes sooner where the
    # read has a core to itself, not when the browser shares the server's 2 cores, BENCHMARKS.md);
    # 0: when that page run reaches the upload box. It wraps Streamlit's file store, so a host can
    # turn it off.
    early_reads: int = 1
    # Parsed uploads the server keeps for their sessions, all sessions together; the oldest is
    # released past it. 0 = a quarter of the machine's memory.
    uploads_held_mb: int = 0
    # Runs estimated (lab.run.estimate) to take longer are refused before they queue, so one
    # attendee cannot hold a worker for minutes (16384³ float32 on a CPU: ~15 min). 0 = no limit.
    max_run_estimate_s: float = 20.0
    # Where *Open in Perfetto* sends the trace (lab/views/perfetto.py); a test points it at a
    # local stand-in, a site without internet at its own copy of the Perfetto UI.
    perfetto_origin: str = "https://ui.perfetto.dev"
    # 1 = each worker has a warm spare (lab.pool.standby) that takes over within a tick when a run
    # is cancelled or its worker dies, instead of a fresh start (~10 s on a 2-core CPU box); it
    # costs one idle process per worker (~0.40 GB resident on CPU) and is skipped while the
    # machine has under 2 GiB available. 0 = no spare.
    standby: int = 1
    # --- who may use the page (lab/access) ---------------------------------------------------
    # "" = not set: "passcode" when a passcode is set, else "off" (see login_mode).
    login: str = ""
    # The shared workshop passcode; "" = no passcode.
    passcode: str = field(default="", repr=False)
    # Whoever enters it (on the sign-in page or under "Host sign-in") is the host; "" = none.
    host_token: str = field(default="", repr=False)
    # OIDC identities (emails, or the provider's "sub") who are hosts; lower case.
    hosts: tuple[str, ...] = field(default=(), repr=False)
    # Per visitor (browser session, and signed-in identity), in any 60 s (lab.access.RATE_WINDOW_S);
    # 0 = no limit. A submission (a "Run profile" or "Run lesson" click) counts once. 12 = one
    # every 5 s on average: a small CPU run and reading its Summary takes longer (~1–3 s run +
    # reading), so an attendee iterating by hand never meets it; a held Enter key or a script does.
    runs_per_min: int = 12
    # Each upload costs a reader's time (a 509 MB-JSON trace: ~25 s of a core) and is kept for
    # its session; 6 a minute is more than anyone opens by hand (a session keeps 4 at most).
    uploads_per_min: int = 6
    # --- traces on this server (lab.tracedir) -------------------------------------------------
    # Directories the page lists (runs, workers, spans), os.pathsep-separated, e.g. where
    # tensorboard_trace_handler writes; "" = none. Only the host names them: a visitor picks a
    # listed trace, never a path. `profiler-lab serve DIR` sets it.
    trace_dir: str = ""
    # --- where runs execute ------------------------------------------------------------------
    # "local" (worker processes here) or "ray" (actors of the Ray cluster at ray_address).
    backend: str = "local"
    # The Ray cluster to join: "auto" = the one `ray start` set up on this machine (or RAY_ADDRESS),
    # else "host:port" of its head (ray start --head prints it).
    ray_address: str = "auto"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SettingsError(f"{ENV_PREFIX}BACKEND={self.backend!r} is unknown; use one of: {', '.join(BACKENDS)}")

    @property
    def trace_dirs(self) -> tuple[str, ...]:
        """``trace_dir`` split on ``os.pathsep``, empty parts dropped."""
        return tuple(d.strip() for d in self.trace_dir.split(os.pathsep) if d.strip())

    @property
    def login_mode(self) -> str:
        """The sign-in the page asks for: "off", "passcode" or "oidc" (one of LOGIN_MODES)."""
        return self.login or ("passcode" if self.passcode else "off")

    @property
    def open_access(self) -> bool:
        """Nothing set (one's own box): every visitor is the host, as before there were hosts."""
        return self.login_mode == "off" and not self.host_token and not self.hosts

    def shown(self) -> list[tuple[str, str]]:
        """(variable, value as the host's status lines show it): secrets only as "set"/"not set"."""
        lines = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in SECRET_FIELDS:
                text = "set" if value else "not set"
            elif f.name == "hosts":
                text = f"{len(value)} listed" if value else "not set"
            elif f.name == "login":
                text = self.login_mode
            elif isinstance(value, str):
                text = value
            else:
                text = f"{value:g}"
            lines.append((ENV_PREFIX + f.name.upper(), text))
        return lines

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> HostSettings:
        """The settings the ``PROFILER_LAB_*`` variables give. Read once, at start (the page, the
        CLI's ``main``), and passed down: nothing below reads the environment again."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = ENV_PREFIX + f.name.upper()
            if key in env:
                values[f.name] = _parse(key, env[key], str(f.type))
        settings = cls(**values)
        _check_access(settings)
        return settings

    def replace(self, **changes) -> HostSettings:
        return dataclasses.replace(self, **changes)


def _parse(key: str, raw: str, kind: str) -> Any:
    if kind == "str":
        return raw.strip().lower() if key == ENV_PREFIX + "LOGIN" else raw.strip()
    if kind.startswith("tuple"):  # a comma list: PROFILER_LAB_HOSTS=ana@lab.org,bo@lab.org
        return tuple(item.strip().lower() for item in raw.split(",") if item.strip())
    cast = int if kind == "int" else float
    try:
        value = cast(raw)
    except ValueError:
        raise SettingsError(f"{key}={raw!r} is not a number; set it to a {kind}") from None
    if value < 0:
        raise SettingsError(f"{key}={raw!r} is negative; use 0 or more")
    return value


def _check_access(settings: HostSettings) -> None:
    """Refuse a sign-in setup that would not do what the host meant, saying what to set."""
    login = ENV_PREFIX + "LOGIN"
    if settings.login and settings.login not in LOGIN_MODES:
        raise SettingsError(f"{login}={settings.login!r} is not a sign-in mode; use one of {', '.join(LOGIN_MODES)}")
    if settings.login_mode == "passcode" and not settings.passcode:
        raise SettingsError(f"{login}=passcode needs the passcode too: set {ENV_PREFIX}PASSCODE")
    if settings.login_mode == "oidc" and settings.passcode:
        raise SettingsError(f"{login}=oidc signs visitors in with your provider, and {ENV_PREFIX}PASSCODE is set "
                            f"too: unset one of them ({login}=passcode for the passcode alone)")
    if settings.hosts and settings.login_mode != "oidc":
        raise SettingsError(f"{ENV_PREFIX}HOSTS lists OIDC identities, which only {login}=oidc signs in; "
                            f"set {login}=oidc, or give the host {ENV_PREFIX}HOST_TOKEN instead")


def host_environment(environ: dict[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """The ``PROFILER_LAB_*`` variables, sorted: all that ``from_env`` reads, as a cache key.

    A server's environment does not change, so the page parses it once; a test that sets a
    variable between two page sessions in one process gets settings of its own.
    """
    env = os.environ if environ is None else environ
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(ENV_PREFIX)))

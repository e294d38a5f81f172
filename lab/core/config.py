"""What to run: ``RunConfig`` and every check that can refuse it before anything is allocated.

``RunConfig(...)`` checks what needs no context (names, labels, positive numbers). The
checks that depend on the host (``check_limits``), on the device (``check_device``) and on
free memory (``check_memory``) are separate functions so the page can run them before it
submits and the worker can run them again before it allocates. Every refusal is a
``ConfigError`` whose message says what to change. No torch import here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from lab.core import workloads
from lab.core.settings import HostSettings
from lab.vocab import DTYPE_BYTES, DTYPE_INFO, DTYPES

__all__ = [
    "DEVICES", "DTYPES", "JOB_FIELDS", "MAX_LABEL_CHARS", "MAX_RANKS", "MEMORY_HEADROOM", "MIN_RANKS", "OPTIONS",
    "STRAGGLER_CAUSES", "ConfigError", "Option", "RunConfig", "check_device", "check_label", "check_limits",
    "check_memory", "dtype_refusal",
]  # fmt: skip

DEVICES = ("auto", "cpu", "cuda")
MAX_LABEL_CHARS = 64
# A distributed workload's processes: two make a job; eight is what one host's gloo job is taught
# with here (a room's laptop has 4-8 cores; each rank runs one intra-op thread).
MIN_RANKS, MAX_RANKS = 2, 8
# How the straggler is slowed: its input pipeline (a sleep inside record_function("load_batch")
# before its forward) or extra compute (matmuls inside record_function("extra_compute")).
STRAGGLER_CAUSES = ("input", "compute")
# Leave a fifth of free memory to the allocator's caches, the profiler's buffers and the OS.
MEMORY_HEADROOM = 0.8


class ConfigError(ValueError):
    """A run that cannot be made as asked; the message says what to change."""


def check_label(label: str, what: str) -> None:
    if not isinstance(label, str) or not 1 <= len(label) <= MAX_LABEL_CHARS:
        got = len(label) if isinstance(label, str) else type(label).__name__
        raise ConfigError(f"{what} must be 1–{MAX_LABEL_CHARS} characters (got {got}); shorten it")
    if not label.isprintable():
        raise ConfigError(f"{what} may hold printable characters only (no tabs or newlines); remove them")


@dataclass(frozen=True, kw_only=True)
class Option:
    """What the form, the CLI and the summary say about one ``RunConfig`` field.

    Declared once, on the field (``_option`` below); ``OPTIONS`` collects them with each field's
    name and default. A field of the "profiler" group with ``profiler_arg`` is passed as is to
    ``torch.profiler.profile``: a new one of those is one field here and nothing else.
    """

    label: str  # the form's widget label
    # Where the form puts it: "labels", "schedule" and "profiler" are expanders built from the
    # Options; "what" (workload, sizes, dtype, device) has widgets of its own in ui/controls.py.
    group: str
    help: str | None = None  # the CLI's help line (argparse's %(default)s is the default)
    tip: str | None = None  # the form's hover help
    flag: str | None = None  # the CLI flag when it is not --<name-with-dashes>, e.g. "--steps"
    low: int | None = None  # smallest whole number RunConfig accepts
    high: int | None = None  # the form's largest value (the host's limits apply on top)
    inline: bool = False  # the form puts it in one row with its group's other inline options
    profiler_arg: bool = False  # a keyword of torch.profiler.profile; the summary names it when on
    name: str = ""  # filled in by OPTIONS: the field's name
    default: object = None  # filled in by OPTIONS: the field's default

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def kind(self) -> str:
        """"bool", "int", "text" or "optional text" (a label that may be left out: None)."""
        if isinstance(self.default, bool):
            return "bool"
        if isinstance(self.default, int):
            return "int"
        return "optional text" if self.default is None else "text"


def _option(default, **spec):
    return dataclasses.field(default=default, metadata={"option": Option(**spec)})


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    workload: str = _option("matmul_add", label="Workload", group="what",
                            help="exercise to run (default %(default)s)")
    m: int = _option(1024, label="M", group="what", low=1, help="rows of x (default %(default)s)")
    k: int = _option(1024, label="K", group="what", low=1, help="inner dimension (default %(default)s)")
    n: int = _option(1024, label="N", group="what", low=1, help="columns of w (default %(default)s)")
    dtype: str = _option("float32", label="dtype", group="what",
                         help=f"one of {', '.join(DTYPES)} (default %(default)s)",
                         tip="Element type of x, w and b. tf32 is float32 storage with tensor-core matmuls.")
    device: str = _option("auto", label="Device", group="what",
                          help=f"one of {', '.join(DEVICES)} (default %(default)s)")
    # record_function labels: the whole step, and optional ones around the matmul and the add.
    step_label: str = _option("matmul_add", label="Whole step", group="labels", flag="--label",
                              help="record_function label of the step")
    matmul_label: str | None = _option(None, label="Around the matmul (optional)", group="labels",
                                       help="record_function label around the matmul")
    add_label: str | None = _option(None, label="Around the bias add (optional)", group="labels",
                                    help="record_function label around the bias add")
    # torch.profiler.schedule; the seed's defaults. One cycle = wait + warmup + active steps.
    wait: int = _option(1, label="wait", group="schedule", low=0, high=8, inline=True,
                        help="schedule: skipped steps per cycle")
    warmup: int = _option(1, label="warmup", group="schedule", low=0, high=8, inline=True,
                          help="schedule: traced-but-dropped steps")
    active: int = _option(3, label="active", group="schedule", low=1, high=32, inline=True, flag="--steps",
                          help="active (recorded) steps per cycle")
    repeat: int = _option(1, label="repeat", group="schedule", low=1, high=8, inline=True,
                          help="schedule: cycles")
    # Un-profiled iterations before the profiler starts; 0 = a cold run (first-step costs show).
    warmup_iters: int = _option(2, label="Warm-up iterations before profiling (0 = cold)", group="schedule",
                                low=0, high=16, help="un-profiled iterations before profiling; 0 = cold run")
    record_shapes: bool = _option(True, label="record_shapes", group="profiler", profiler_arg=True)
    profile_memory: bool = _option(False, label="profile_memory", group="profiler", profiler_arg=True)
    with_stack: bool = _option(False, label="with_stack", group="profiler", profiler_arg=True)
    with_flops: bool = _option(False, label="with_flops", group="profiler", profiler_arg=True)
    # A distributed workload's job (Workload.distributed): its processes and the straggler planted.
    ranks: int = _option(4, label="Processes (ranks)", group="job", low=MIN_RANKS, high=MAX_RANKS,
                         help=f"distributed workloads: processes, one rank each ({MIN_RANKS}-{MAX_RANKS}; "
                              "default %(default)s)")
    straggler: int = _option(-1, label="Straggler rank (-1 = none)", group="job", low=-1, high=MAX_RANKS - 1,
                             help="distributed workloads: the rank made slow (-1 = none; default %(default)s)")
    straggler_ms: int = _option(60, label="Straggler's extra time per step (ms)", group="job", low=0, high=1000,
                                help="distributed workloads: the straggler's extra time per step, ms "
                                     "(default %(default)s)")
    straggler_cause: str = _option("input", label="Straggler's cause", group="job",
                                   help=f"one of {', '.join(STRAGGLER_CAUSES)}: a slow input pipeline (sleep in "
                                        "'load_batch') or extra compute (default %(default)s)")
    # Run the step through torch.compile; compile time is measured apart from the profile.
    compile: bool = _option(False, label="torch.compile the step", group="profiler",
                            help="run the step through torch.compile",
                            tip="Compile time is measured apart and kept out of the profile.")
    # The replay workload's op (lab.replay.workload.ReplayRequest as JSON); empty for every other run.
    replay: str = _option("", label="Replayed op", group="replay",
                          help="the replay workload: the op row as JSON (the page's 'Replay here' and "
                               "python -m lab replay write it)")

    def __post_init__(self) -> None:
        if self.workload not in workloads.WORKLOADS:
            known = ", ".join(workloads.WORKLOADS)
            raise ConfigError(f"unknown workload {self.workload!r}; choose one of: {known}")
        for dim in ("m", "k", "n"):
            _check_count(dim.upper(), getattr(self, dim), OPTIONS[dim].low or 0)
        if self.dtype not in DTYPE_BYTES:
            raise ConfigError(f"unknown dtype {self.dtype!r}; choose one of: {', '.join(DTYPES)}")
        if self.device not in DEVICES:
            raise ConfigError(f"unknown device {self.device!r}; choose one of: {', '.join(DEVICES)}")
        check_label(self.step_label, "the step label")
        for name, what in (("matmul_label", "the matmul label"), ("add_label", "the bias-add label")):
            if getattr(self, name) is not None:
                check_label(getattr(self, name), what)
        self._check_job()
        if not isinstance(self.replay, str) or (self.replay and not self.replay.lstrip().startswith("{")):
            raise ConfigError("replay must be the op row as JSON ({...}), or empty for any other workload")
        # The first problem found is the one refused: the ≥ 0 counts first, then the ≥ 1 ones.
        counts = sorted((o for o in OPTIONS.values() if o.group == "schedule"), key=lambda o: o.low or 0)
        for option in counts:
            _check_count(option.name, getattr(self, option.name), option.low or 0)

    def _check_job(self) -> None:
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or not MIN_RANKS <= self.ranks <= MAX_RANKS:
            raise ConfigError(f"ranks must be a whole number {MIN_RANKS}-{MAX_RANKS} (got {self.ranks!r})")
        straggler = self.straggler
        if isinstance(straggler, bool) or not isinstance(straggler, int) or not -1 <= straggler < self.ranks:
            raise ConfigError(f"straggler must be a rank of 0-{self.ranks - 1}, or -1 for none (got {straggler!r})")
        _check_count("straggler_ms", self.straggler_ms, 0)
        if self.straggler_cause not in STRAGGLER_CAUSES:
            raise ConfigError(f"unknown straggler cause {self.straggler_cause!r}; choose one of: "
                              f"{', '.join(STRAGGLER_CAUSES)}")

    @property
    def distributed(self) -> bool:
        """Whether this run is a job of ``ranks`` processes (its workload's ``distributed``)."""
        return workloads.WORKLOADS[self.workload].distributed

    @property
    def profiled_steps(self) -> int:
        """Iterations run while the profiler is on (its schedule's cycles)."""
        return (self.wait + self.warmup + self.active) * self.repeat

    @property
    def element_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def estimated_bytes(self) -> int:
        """Memory the run's tensors need at once (inputs, intermediates, output)."""
        return workloads.WORKLOADS[self.workload].estimate_bytes(self)

    @property
    def shape_text(self) -> str:
        return f"{self.m}x{self.k}x{self.n}"

    def replace(self, **changes) -> RunConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Every field; a one-process run's leaves out the job's (``JOB_FIELDS``): it has no job, and
        its dict (summary.json, a sample's config, a cache key) stays what it was before they existed;
        so does a run's that replays no op (``replay`` empty)."""
        data = dataclasses.asdict(self)
        if not self.distributed:
            for name in JOB_FIELDS:
                del data[name]
        if not self.replay:
            del data["replay"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> RunConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config fields {unknown}; remove them")
        return cls(**data)

    def profiler_args(self) -> dict[str, Any]:
        """The keywords of ``torch.profiler.profile`` this config sets (record_shapes, …)."""
        return {name: getattr(self, name) for name, o in OPTIONS.items() if o.profiler_arg}


# The fields of a distributed run's job: a one-process run ignores them.
JOB_FIELDS = tuple(f.name for f in dataclasses.fields(RunConfig) if f.metadata["option"].group == "job")
# Every field's Option, with its name and default, in field order.
OPTIONS: dict[str, Option] = {
    f.name: dataclasses.replace(f.metadata["option"], name=f.name, default=f.default)
    for f in dataclasses.fields(RunConfig)
}


def _check_count(what: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{what} must be a whole number ≥ {low} (got {value!r})")


def check_limits(config: RunConfig, settings: HostSettings) -> None:
    """Refuse sizes and step counts beyond what the host allows."""
    for dim in ("m", "k", "n"):
        value = getattr(config, dim)
        if value > settings.max_dim:
            raise ConfigError(
                f"{dim.upper()}={value} is above this host's limit of {settings.max_dim}; "
                f"use {settings.max_dim} or less"  # the host's variable: in Server status, not here
            )
    if config.distributed and config.ranks > settings.max_ranks:
        raise ConfigError(
            f"{config.ranks} processes are more than this host allows ({settings.max_ranks}); "
            f"use {settings.max_ranks} ranks or fewer"
        )
    total = config.profiled_steps + config.warmup_iters
    if total > settings.max_steps:
        raise ConfigError(
            f"the run needs {total} iterations (schedule {config.profiled_steps} + warm-up "
            f"{config.warmup_iters}); this host allows {settings.max_steps}: lower active, repeat or warm-up"
        )


def check_memory(config: RunConfig, available_bytes: int, where: str) -> None:
    """Refuse a run whose tensors cannot fit in ``available_bytes`` of ``where`` memory."""
    need = config.estimated_bytes
    budget = int(available_bytes * MEMORY_HEADROOM)
    if need > budget:
        raise ConfigError(
            f"{config.shape_text} {config.dtype} needs about {_gib(need)} but {where} has "
            f"{_gib(available_bytes)} free ({_gib(budget)} usable); choose smaller M, K or N"
        )


def check_device(config: RunConfig, *, kind: str, compute_capability: tuple[int, int] | None) -> None:
    """Refuse dtypes the chosen device cannot run well; ``kind`` is "cpu" or "cuda"."""
    reason = dtype_refusal(config.dtype, kind=kind, compute_capability=compute_capability)
    reason = reason or workloads.WORKLOADS[config.workload].refusal(kind, compute_capability)
    if reason:
        raise ConfigError(reason)
    if config.device == "cuda" and kind != "cuda":
        raise ConfigError("device 'cuda' was asked for but no CUDA GPU is visible; choose 'cpu' or 'auto'")


def dtype_refusal(dtype: str, *, kind: str, compute_capability: tuple[int, int] | None) -> str | None:
    """Why ``dtype`` cannot run on this device, or None. The page shows these on disabled options."""
    if kind == "cpu":
        if DTYPE_INFO[dtype].tf32:
            return "tf32 is a tensor-core mode of NVIDIA GPUs (Ampere or newer); on CPU choose float32"
        if dtype == "float16":
            return ("float16 matmul on CPU runs a slow reference path, not a tuned kernel; "
                    "choose bfloat16 or float32 on CPU")
        return None
    major = compute_capability[0] if compute_capability else 0
    if DTYPE_INFO[dtype].tf32 and major < 8:
        return f"tf32 needs compute capability 8.0 or newer (this GPU is {major}.x); choose float32"
    if dtype == "bfloat16" and major < 8:
        return f"bfloat16 matmul needs compute capability 8.0 or newer (this GPU is {major}.x); choose float16"
    return None


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**27 else f"{n / 2**20:.1f} MiB"

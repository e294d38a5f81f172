"""One profile run: ``RunConfig`` → ``RunResult``. With ``lab.run.ddp_rank`` (a distributed run's rank
processes, started by ``lab.run.ddp``), the only module that imports torch.profiler.

The chain, one stage at a time (each reported through ``on_stage`` and timed in
``RunResult.stage_s``):

    checking → allocating → [compiling] → warming up → profiling → exporting → timing → summarizing

Every refusal happens in "checking", before a tensor exists. The profiled loop runs under
``torch.profiler.profile``'s context manager, so an exception never leaves the profiler on
(two overlapping sessions crash the process: see the brief). torch is imported lazily so
that ``TABLE_SORT_KEYS`` and friends can be imported by code that never runs a profile.

On a GPU each step is timed by a pair of CUDA events, so a GPU trace and table show two
``cudaEventRecord*`` calls (and ``cudaStreamIsCapturing`` checks) per step that belong to the
lab's timer, not to the workload.

Not thread-safe by design: run it in a dedicated worker process, one run at a time.
"""

from __future__ import annotations

import dataclasses
import gc
import gzip
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable

import pandas as pd

from lab.core import workloads
from lab.core.config import RunConfig, check_device, check_limits, check_memory, dtype_refusal
from lab.core.devices import DeviceInfo, detect_device
from lab.core.result import KEY_AVERAGES_COLUMNS, RunError, RunResult, Timing
from lab.core.settings import HostSettings
from lab.run.estimate import measure_rates
from lab.stats import median
from lab.vocab import (
    DTYPES,
    GPU_ONLY_SORT_KEYS,
    LEGACY_SORT_KEYS,
    PROFILER_STEP_NAME,
    STAGES,
    TABLE_SORT_KEYS,
    torch_dtype_name,
)

__all__ = [
    "STAGES", "TABLE_SORT_KEYS", "TRACE_GZIP_LEVEL", "UNPROFILED_BUDGET_S", "UNPROFILED_MAX_ITERS",
    "averages_frame", "averages_tables", "default_sort_key", "run_profile", "unprofiled_iterations", "warm_up",
]  # fmt: skip

# Kineto prints "profiler_start/stop" lines to stderr at its default level; it reads this
# variable when a profile starts, so setting it here (before any profile) silences them.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")


# Un-profiled timing: up to 10 iterations for a stable median, but within ~1 s so a big CPU
# run (1024³ fp32 ≈ 30–150 ms/step on 2 busy cores, 16384³ ≈ 1 min) does not double its wall time.
UNPROFILED_MAX_ITERS = 10
UNPROFILED_BUDGET_S = 1.0

# Timed tiny runs at warm-up, the best taken as a run's fixed overhead (lab.run.estimate).
TINY_RUN_REPEATS = 3

# gzip level 6: within a few % of level 9's size at a fraction of its time on MB-sized traces.
TRACE_GZIP_LEVEL = 6


def default_sort_key(kind: str) -> str:
    """The table sort key the classic view starts with: device time on GPU, CPU time on CPU."""
    return "device_time_total" if kind == "cuda" else "cpu_time_total"


def warm_up(device: str = "auto", *, settings: HostSettings | None = None) -> DeviceInfo:
    """Run one tiny profile so that the first real run does not pay the profiler's start-up
    (~1.1 s on CPU: torch._inductor imports; ~7 s on an H200: CUPTI initialisation)."""
    # warmup=1: torch warns when a schedule has no warm-up step.
    config = RunConfig(m=64, k=64, n=64, device=device, wait=0, warmup=1, active=1, warmup_iters=1)
    info = run_profile(config, settings=settings).device
    # Then measure the device for the run-time estimate (lab.run.estimate): ~0.3 s on CPU.
    # A GPU worker also runs "cpu" runs, so it measures the host CPU as well.
    import torch

    rates = []
    for kind in ("cpu", "cuda") if info.kind == "cuda" else ("cpu",):
        tiny = config.replace(device=kind)
        # The first run paid the imports: the best of the next TINY_RUN_REPEATS (~10 ms each on
        # CPU). One timed run read 77 ms once, with another test process on the second core,
        # against 10 ms quiet, and put a 256³ run's estimate 3.5× over its 25 ms.
        tiny_run_s = math.inf
        for _ in range(TINY_RUN_REPEATS):
            start = time.perf_counter()
            run_profile(tiny, settings=settings)
            tiny_run_s = min(tiny_run_s, time.perf_counter() - start)
        runnable = [d for d in DTYPES if dtype_refusal(d, kind=kind, compute_capability=info.compute_capability
                                                     if kind == "cuda" else None) is None]
        rates.append(measure_rates(torch, kind, runnable, tiny_run_s=tiny_run_s))
    return dataclasses.replace(info, rates=tuple(rates))


def run_profile(
    config: RunConfig,
    *,
    settings: HostSettings | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> RunResult:
    """Check, allocate, profile and summarize one run of ``config``.

    ``settings`` are the host's limits, read once by the caller (the service, the CLI); None
    means the defaults, ``HostSettings()``: this function never reads the environment.
    Raises ``ConfigError`` (before allocating anything) for a run that cannot be made as
    asked, and ``RunError`` for a run that started but ran out of memory or failed to compile.
    """
    import torch

    clock = _StageClock(on_stage)
    clock.enter("checking")
    settings = settings if settings is not None else HostSettings()
    check_limits(config, settings)
    info = detect_device(config.device)
    check_device(config, kind=info.kind, compute_capability=info.compute_capability)
    where = f"the GPU ({info.name})" if info.kind == "cuda" else "this machine's RAM"
    check_memory(config, info.free_memory_bytes, where)
    if config.distributed:  # its ranks profile in processes of their own, never in this one
        from lab.run.ddp import run_job

        return run_job(config, info, clock, settings, [])

    notes: list[str] = []  # become RunResult.warnings
    if info.kind == "cuda" and not info.cupti_available:
        notes.append("CUPTI is not available to this torch build: the trace has CPU events only, no kernels")
    if config.repeat > 1:
        notes.append(
            f"repeat={config.repeat}: torch keeps one cycle per trace, so the trace and the tables "
            f"hold the last cycle; the timings cover the active steps of all {config.repeat} cycles"
        )

    # tf32 is float32 storage with TF32 tensor-core matmuls; plain float32 must not use them.
    # Only the legacy flag is touched (torch ≥ 2.9 refuses to mix it with the new API).
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = config.dtype == "tf32"
    try:
        return _run(torch, config, info, clock, notes)
    except _oom_errors(torch):
        pass
    except RuntimeError as exc:
        if "can't allocate memory" not in str(exc):  # the CPU allocator's wording
            raise
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
        _ensure_profiler_off(torch)
        if config.compile:
            _reset_compiler()  # drop this run's graphs: the next user's run starts clean
    # Only an out-of-memory error gets here. The exception, and the frames that held the
    # run's tensors, are gone now, so the memory can actually be returned.
    _release_memory(torch)
    memory = "GPU memory" if info.kind == "cuda" else "memory"
    raise RunError(f"{config.shape_text} {config.dtype} ran out of {memory}; choose smaller M, K or N")


def _run(torch, config: RunConfig, info: DeviceInfo, clock: _StageClock, notes: list[str]) -> RunResult:
    cuda = info.kind == "cuda"
    timer = _StepTimer(torch, cuda)
    step, compile_s = _prepare_step(torch, config, info, clock, timer)

    clock.enter("warming up")
    for _ in range(config.warmup_iters):
        step()
    timer.sync()

    clock.enter("profiling")
    prof, profiled_us = _profile(torch, config, step, timer, cupti=cuda and bool(info.cupti_available))

    clock.enter("exporting")
    trace_gz = _export_trace_gz(prof)

    clock.enter("timing")
    unprofiled_us = _time_unprofiled(step, timer, profiled_us)

    clock.enter("summarizing")
    labels = {x for x in (config.step_label, config.matmul_label, config.add_label) if x}
    averages = prof.key_averages()
    key_averages = averages_frame(averages, labels, with_shapes=False)
    by_shape = averages_frame(prof.key_averages(group_by_input_shape=True), labels, with_shapes=True)
    tables = averages_tables(averages, cuda=cuda)
    del prof, averages, step  # drop the tensors before the result travels on

    timing = Timing(
        method=timer.method,
        profiled_us=tuple(profiled_us),
        unprofiled_us=tuple(unprofiled_us),
        compile_s=compile_s,
    )
    return RunResult(
        config=config,
        device=info,
        trace_gz=trace_gz,
        key_averages=key_averages,
        key_averages_by_shape=by_shape,
        tables=tables,
        timing=timing,
        stage_s=clock.finish(),
        warnings=tuple(notes),
    )


def _prepare_step(torch, config: RunConfig, info: DeviceInfo, clock: _StageClock, timer: _StepTimer):
    """Allocate the workload's tensors (and compile its step): (labelled step, compile seconds)."""
    from torch.profiler import record_function

    device = torch.device("cuda", info.index) if info.kind == "cuda" else torch.device("cpu")
    dtype = getattr(torch, torch_dtype_name(config.dtype))

    clock.enter("allocating")
    inner = workloads.WORKLOADS[config.workload].build(config, device, dtype)
    timer.sync()

    compile_s = None
    if config.compile:
        clock.enter("compiling")
        inner, compile_s = _compile(torch, inner, timer)

    label = config.step_label

    def step():
        # The step label stays outside any compiled function so it is always a CPU annotation.
        with record_function(label):
            return inner()

    return step, compile_s


def _compile(torch, inner, timer: _StepTimer):
    """torch.compile ``inner`` and call it once, timed here and kept out of the profile.

    The time covers wrapping (which imports torch._dynamo) and the first call, which
    traces and compiles: all that a user pays before the compiled step runs.
    """
    # A fresh compiler state per run: dynamo caches by code object, so without a reset a run
    # would reuse an earlier run's graph (and after two shapes, a dynamic-shape one).
    _reset_compiler()
    start = time.perf_counter()
    try:
        compiled = torch.compile(inner)
        compiled()
        timer.sync()
    except Exception as exc:  # noqa: BLE001 - any compiler failure means: run it eagerly
        if isinstance(exc, _oom_errors(torch)):
            raise
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise RunError(f"torch.compile failed ({type(exc).__name__}: {first_line}); run without compile") from None
    return compiled, time.perf_counter() - start


def _profile(torch, config: RunConfig, step, timer: _StepTimer, *, cupti: bool):
    """Run the schedule's iterations under the profiler; time each recorded (active) one."""
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cupti else [])
    cycle = config.wait + config.warmup + config.active
    marks = []
    with warnings.catch_warnings():
        # torch warns that each cycle clears the last one's events (RunResult.warnings says so
        # when repeat > 1); torch 2.11 warns even for one cycle. Filter it before the profiler starts.
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
        with profile(
            activities=activities,
            schedule=schedule(wait=config.wait, warmup=config.warmup, active=config.active, repeat=config.repeat),
            **config.profiler_args(),  # record_shapes, profile_memory, with_stack, with_flops
        ) as prof:
            for i in range(config.profiled_steps):
                mark = timer.measure(step)
                # torch.profiler.schedule: steps [wait+warmup, cycle) of each cycle are recorded.
                if i % cycle >= config.wait + config.warmup:
                    marks.append(mark)
                prof.step()
            timer.sync()  # after the last recorded step: the profiler already stopped recording
    return prof, timer.elapsed_us(marks)


def _export_trace_gz(prof) -> bytes:
    """The Chrome trace exactly as torch writes it, gzipped. torch exports once per profile."""
    fd, path = tempfile.mkstemp(prefix="profiler_lab_", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, "rb") as f:
            raw = f.read()
    finally:
        os.unlink(path)
    return gzip.compress(raw, compresslevel=TRACE_GZIP_LEVEL)


def _time_unprofiled(step, timer: _StepTimer, profiled_us: list[float]) -> list[float]:
    step()  # one untimed iteration: the profiler's teardown may have evicted caches
    timer.sync()
    iters = unprofiled_iterations(median(profiled_us) if profiled_us else 0.0)
    marks = [timer.measure(step) for _ in range(iters)]
    timer.sync()
    return timer.elapsed_us(marks)


def unprofiled_iterations(step_us: float) -> int:
    """How many un-profiled iterations to time: as many as fit the budget, 1 to 10."""
    if not step_us > 0:  # also NaN
        return UNPROFILED_MAX_ITERS
    return max(1, min(UNPROFILED_MAX_ITERS, int(UNPROFILED_BUDGET_S * 1e6 / step_us)))


def averages_frame(averages, labels: set[str], *, with_shapes: bool) -> pd.DataFrame:
    rows = []
    for e in averages:
        rows.append({
            "name": e.key,
            "input_shapes": str(e.input_shapes) if with_shapes and e.input_shapes else "",
            "count": int(e.count),
            "self_cpu_us": float(e.self_cpu_time_total),
            "cpu_total_us": float(e.cpu_time_total),
            "self_device_us": float(_attr(e, "self_device_time_total", "self_cuda_time_total")),
            "device_total_us": float(_attr(e, "device_time_total", "cuda_time_total")),
            "self_cpu_memory_bytes": int(e.self_cpu_memory_usage),
            "cpu_memory_bytes": int(e.cpu_memory_usage),
            "self_device_memory_bytes": int(_attr(e, "self_device_memory_usage", "self_cuda_memory_usage")),
            "device_memory_bytes": int(_attr(e, "device_memory_usage", "cuda_memory_usage")),
            "flops": int(e.flops or 0),
            "is_user_annotation": _is_user_annotation(e, labels),
            "device_type": str(e.device_type).rsplit(".", 1)[-1].lower(),
        })
    frame = pd.DataFrame(rows, columns=list(KEY_AVERAGES_COLUMNS))
    return frame.astype({
        "name": str, "input_shapes": str, "count": "int64",
        "self_cpu_us": "float64", "cpu_total_us": "float64", "self_device_us": "float64",
        "device_total_us": "float64", "self_cpu_memory_bytes": "int64", "cpu_memory_bytes": "int64",
        "self_device_memory_bytes": "int64", "device_memory_bytes": "int64", "flops": "int64",
        "is_user_annotation": bool, "device_type": str,
    })


def _attr(event, name: str, legacy: str):
    """``event.name``, or the pre-2.4 ``cuda_*`` spelling (which raises on torch ≥ 2.4)."""
    value = getattr(event, name, None)
    if value is None:
        value = getattr(event, legacy, 0)
    return value or 0


def _is_user_annotation(event, labels: set[str]) -> bool:
    flag = getattr(event, "is_user_annotation", None)
    if flag is not None:
        return bool(flag)
    # Older torch has no flag: the run's own labels and the schedule's ProfilerStep#N are annotations.
    return event.key in labels or event.key.startswith(PROFILER_STEP_NAME[:-1])


def averages_tables(averages, *, cuda: bool) -> dict[str, str]:
    tables = {}
    for key in TABLE_SORT_KEYS:
        if key in GPU_ONLY_SORT_KEYS and not cuda:
            continue
        for sort_by in (key, LEGACY_SORT_KEYS.get(key)):
            if sort_by is None:
                continue
            try:
                tables[key] = averages.table(sort_by=sort_by, row_limit=-1)
                break
            except (AttributeError, KeyError, ValueError, TypeError):
                continue
    return tables


class _StepTimer:
    """Times each step the same way with and without the profiler.

    GPU: a pair of CUDA events around each step, read after one synchronize at the end, so
    steps queue as they normally do (the CPU runs ahead of the GPU) and each time is the
    step's span on the stream: its kernels, plus any gap while the GPU waited for launches.
    The events' cudaEventRecord calls show in the trace; no per-step synchronize does.
    CPU: perf_counter around the step, which is synchronous.
    """

    def __init__(self, torch, cuda: bool):
        self._torch = torch
        self._cuda = cuda
        self.method = "cuda events" if cuda else "wall clock"

    def sync(self) -> None:
        if self._cuda:
            self._torch.cuda.synchronize()

    def measure(self, step):
        """Run ``step`` once; returns a mark that ``elapsed_us`` turns into microseconds."""
        if self._cuda:
            start = self._torch.cuda.Event(enable_timing=True)
            end = self._torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            return start, end
        start_s = time.perf_counter()
        step()
        return (time.perf_counter() - start_s) * 1e6

    def elapsed_us(self, marks: list) -> list[float]:
        """Microseconds per mark; on GPU call ``sync`` first so every event has completed."""
        if self._cuda:
            return [start.elapsed_time(end) * 1000.0 for start, end in marks]  # ms → µs
        return list(marks)


class _StageClock:
    """Reports each stage as it starts and records the seconds each one took."""

    def __init__(self, on_stage: Callable[[str], None] | None):
        self._on_stage = on_stage
        self._current: str | None = None
        self._started = 0.0
        self.seconds: dict[str, float] = {}

    def enter(self, stage: str) -> None:
        self._close()
        self._current, self._started = stage, time.perf_counter()
        if self._on_stage is not None:
            self._on_stage(stage)

    def finish(self) -> dict[str, float]:
        self._close()
        return dict(self.seconds)

    def _close(self) -> None:
        if self._current is not None:
            self.seconds[self._current] = time.perf_counter() - self._started
            self._current = None


def _oom_errors(torch) -> tuple[type[BaseException], ...]:
    errors = [getattr(torch.cuda, "OutOfMemoryError", None), getattr(torch, "OutOfMemoryError", None)]
    return tuple(e for e in errors if e is not None) + (MemoryError,)


def _ensure_profiler_off(torch) -> None:
    """Belt and braces after the context manager: a profiler left on breaks the next run."""
    try:
        enabled = torch._C._autograd._profiler_enabled()
    except AttributeError:  # a torch without this private hook: trust the context manager
        return
    if enabled:
        try:
            torch.autograd._disable_profiler()
        except RuntimeError:
            pass


def _reset_compiler() -> None:
    import torch._dynamo

    torch._dynamo.reset()


def _release_memory(torch) -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


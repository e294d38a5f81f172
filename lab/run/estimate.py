"""How long a run will take, before it runs: the workload's cost model × the device's measured rates.

At warm-up each worker times a few small operations on its device (``measure_rates``: a
matmul per dtype, a clone, a ``randn`` fill, and one whole tiny profile run) and reports them
in ``DeviceInfo.rates``. ``estimate_run`` turns a ``RunConfig`` into seconds with arithmetic
only — no torch, no allocation, microseconds — and ``check_estimate`` refuses a run longer
than the host's ``max_run_estimate_s`` with a message an attendee can act on.

The model, per the runner's stages (``lab.run.runner``):

    fill (inputs from randn) + [compile] + (warm-up + profiled + 1 + timed) × step + tiny run

where one step is ``flops / matmul rate + bytes / copy rate``. Measured on this repo's 2-core
box (1 intra-op thread, float32): 1024³ estimated 0.7 s vs 0.8 s run, 2048³ 2.6 s vs 2.4 s
(``tests/test_estimate.py`` re-measures it on whatever machine runs the tests).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

from lab.core import workloads
from lab.core.config import ConfigError, RunConfig
from lab.core.devices import DeviceInfo, DeviceRates
from lab.core.settings import HostSettings
from lab.run.ddp_rank import TIMED_STEPS as JOB_TIMED_STEPS
from lab.vocab import DTYPE_INFO, torch_dtype_name

__all__ = [
    "COMPILE_ESTIMATE_S", "RANK_START_CPU_S", "RATE_MATMUL_DIM", "RATE_ONE_CALL_S", "RATE_REPEATS", "RunEstimate",
    "check_estimate", "estimate_run", "estimate_text", "measure_rates", "suggest_dim",
]  # fmt: skip

# torch.compile's first call on a small step: ~5–15 s on CPU (inductor writes and builds C++),
# a few seconds on a GPU (Triton). Not measured at warm-up (it would add that much to every
# worker's start); a generous constant, so a compiled run is never under-estimated by much.
COMPILE_ESTIMATE_S = {"cpu": 15.0, "cuda": 8.0}
# The warm-up matmul: big enough to reach the GEMM's steady rate (at 512³ this box did 34
# GFLOP/s, at 1024³ 77: the smaller one under-rates big runs 2×), small enough to take
# ~30 ms on one CPU thread and microseconds on a GPU.
RATE_MATMUL_DIM = {"cpu": 1024, "cuda": 4096}
RATE_REPEATS = 3  # best of 3: one descheduled repeat on a shared box must not rate the device
# A first call this long is the dtype's compute, not its set-up (page faults and kernel selection
# take milliseconds): it rates the dtype alone, with no repeats. A CPU with no fast path for a
# dtype (bfloat16 and float16 on an AVX2-only EPYC: 2.8 s a 1024³ call, 1.5 % of float32's rate)
# otherwise spent 4 calls, 11 s, of every worker's warm-up on each such dtype.
RATE_ONE_CALL_S = 0.2
RATE_COPY_BYTES = 16 * 2**20
# Un-profiled timing: mirrors lab.run.runner's UNPROFILED_MAX_ITERS / UNPROFILED_BUDGET_S
# (not imported: runner imports torch and pandas, this module must not).
_TIMED_MAX_ITERS = 10
_TIMED_BUDGET_S = 1.0
# A distributed run's rank process before its first step: a Python, torch's import, the gloo
# group's set-up. Measured on this repo's 2-core box: 4 ranks spent 16.7 s of CPU in all (~3.5 s
# each beside ~0.7 s of steps) and 8.3 s of wall time before their steps; ranks beyond the
# host's cores start that many times slower.
RANK_START_CPU_S = 3.5


@dataclass(frozen=True, kw_only=True)
class RunEstimate:
    seconds: float  # the whole run, as the worker will spend it
    step_s: float  # one iteration of the workload
    iterations: int  # how many iterations the run makes (warm-up, profiled, timed)
    kind: str  # the device kind it was estimated for: "cpu" or "cuda"
    device_name: str


def _run_kind(config: RunConfig, info: DeviceInfo) -> str:
    return "cpu" if config.device == "cpu" or info.kind == "cpu" else "cuda"


def estimate_run(config: RunConfig, info: DeviceInfo | None) -> RunEstimate | None:
    """Seconds ``config`` will take on the worker that described itself as ``info``; None
    before a worker has measured its device (no rates yet)."""
    if info is None:
        return None
    kind = _run_kind(config, info)
    rates = info.rates_for(kind)
    if rates is None:
        return None
    workload = workloads.WORKLOADS[config.workload]
    gflops = rates.gflops(config.dtype) or rates.gflops("float32") or 1.0
    name = "this host's CPU" if kind == "cpu" else (info.name if info.kind == "cuda" else "the GPU")
    if workload.distributed:
        return _job_estimate(config, info, rates, gflops, name)
    nbytes = workload.estimate_bytes(config)
    step_s = workload.flops(config) / (gflops * 1e9) + nbytes / (rates.copy_gbs * 1e9)
    timed = max(1, min(_TIMED_MAX_ITERS, int(_TIMED_BUDGET_S / step_s))) if step_s > 0 else _TIMED_MAX_ITERS
    iterations = config.warmup_iters + config.profiled_steps + 1 + timed
    # The inputs are made by randn (plus a cast): about half of the bytes alive at once.
    seconds = rates.run_overhead_s + nbytes / 2 / (rates.fill_gbs * 1e9) + iterations * step_s
    if config.compile:
        seconds += COMPILE_ESTIMATE_S[kind] + step_s  # plus the compiling call itself
    return RunEstimate(seconds=seconds, step_s=step_s, iterations=iterations, kind=kind, device_name=name)


def _job_estimate(config: RunConfig, info: DeviceInfo, rates: DeviceRates, gflops: float, name: str) -> RunEstimate:
    """A distributed run: ``ranks`` processes on this host's cores. Each starts (``RANK_START_CPU_S``),
    then every step takes the slowest rank's time: its work, slowed by the ranks sharing each core,
    plus the straggler's planted time (the others wait for it at the all-reduce)."""
    workload = workloads.WORKLOADS[config.workload]
    share = max(1.0, config.ranks / max(1, info.cpu_count or 1))  # ranks per core
    rank_bytes = workload.estimate_bytes(config) / config.ranks
    step_s = (workload.flops(config) / (gflops * 1e9) + rank_bytes / (rates.copy_gbs * 1e9)) * share
    if config.straggler >= 0:
        step_s += config.straggler_ms / 1000
    iterations = config.warmup_iters + config.profiled_steps + JOB_TIMED_STEPS
    seconds = RANK_START_CPU_S * share + iterations * step_s
    return RunEstimate(seconds=seconds, step_s=step_s, iterations=iterations, kind="cpu", device_name=name)


def estimate_text(seconds: float) -> str:
    """"about 40 s", "about 6 min", "about 2 h": how long, as the page says it."""
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"about {seconds:.0f} s"
    if seconds < 90 * 60:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h".replace(".0 h", " h")


def suggest_dim(config: RunConfig, info: DeviceInfo, limit_s: float) -> int | None:
    """The largest power of two P such that the run with every size capped at P fits
    ``limit_s``; None if not even 64 does (then the schedule, not the size, is too long)."""
    p = 1 << (max(config.m, config.k, config.n).bit_length() - 1)
    while p >= 64:
        smaller = config.replace(m=min(config.m, p), k=min(config.k, p), n=min(config.n, p))
        estimate = estimate_run(smaller, info)
        if estimate is not None and estimate.seconds <= limit_s:
            return p
        p //= 2
    return None


def check_estimate(config: RunConfig, info: DeviceInfo | None, settings: HostSettings) -> RunEstimate | None:
    """Refuse ``config`` when its estimate is over ``settings.max_run_estimate_s`` (0 = no
    limit); returns the estimate (None before the device was measured). Arithmetic only."""
    estimate = estimate_run(config, info)
    limit = settings.max_run_estimate_s
    if estimate is None or limit <= 0 or estimate.seconds <= limit:
        return estimate
    assert info is not None
    dim = suggest_dim(config, info, limit)
    advice = (f"try {dim} or smaller" if dim is not None
              else "try fewer steps (active, repeat, warm-up) or a smaller size")
    if config.distributed:
        advice = f"try fewer ranks than {config.ranks}, fewer steps or a smaller size"
    what = f" × {config.ranks} ranks" if config.distributed else ""
    raise ConfigError(f"{config.workload} {config.shape_text}{what} {config.dtype} would take "
                      f"{estimate_text(estimate.seconds)} on {estimate.device_name}, longer than a run "
                      f"may take here — {advice}")


# --------------------------------------------------------------------------- in the worker


def measure_rates(torch, kind: str, dtypes: list[str], *, tiny_run_s: float) -> DeviceRates:
    """Time a matmul per dtype, a clone and a randn fill on ``kind`` (in a worker, at warm-up).

    ``dtypes`` are those the device runs (the others are refused anyway); ``tiny_run_s`` is
    the measured wall time of a whole tiny profile run. Takes ~0.3 s on one CPU thread, plus one
    call (``RATE_ONE_CALL_S``) for each dtype the CPU has no fast path for.
    """
    device = torch.device("cuda" if kind == "cuda" else "cpu")
    sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)

    def best_s(fn) -> float:
        start = time.perf_counter()
        fn()  # the first call pays one-time set-up (kernel selection, page faults)
        sync()
        first_s = time.perf_counter() - start
        if first_s >= RATE_ONE_CALL_S:
            return first_s
        times = []
        for _ in range(RATE_REPEATS):
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
        return max(min(times), 1e-9)

    dim = RATE_MATMUL_DIM[kind]
    rates = []
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    try:
        for dtype in dtypes:
            torch.backends.cuda.matmul.allow_tf32 = DTYPE_INFO[dtype].tf32
            # Random data, as the workloads use: a GEMM on constant data can run faster.
            a = torch.randn(dim, dim, device=device).to(getattr(torch, torch_dtype_name(dtype)))
            rates.append((dtype, 2 * dim**3 / best_s(functools.partial(torch.matmul, a, a)) / 1e9))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    x = torch.ones(RATE_COPY_BYTES // 4, device=device)
    copy_gbs = 2 * RATE_COPY_BYTES / best_s(x.clone) / 1e9
    del x
    fill_gbs = RATE_COPY_BYTES / best_s(lambda: torch.randn(RATE_COPY_BYTES // 4, device=device)) / 1e9
    return DeviceRates(kind=kind, matmul_gflops=tuple(rates), copy_gbs=copy_gbs, fill_gbs=fill_gbs,
                       run_overhead_s=tiny_run_s)

"""The run-time estimate: measured rates × the workload's cost model, checked against real runs.

The rates and the runs are both measured here, on whatever machine runs the tests (no
hard-coded timings): the estimate must land within a factor of 3 of the run's wall time.
"""

from __future__ import annotations

import time
import tracemalloc
from collections import Counter

import pytest

from lab.core.config import ConfigError, RunConfig
from lab.core.devices import DeviceInfo, DeviceRates
from lab.core.settings import HostSettings
from lab.run.estimate import (
    RATE_MATMUL_DIM,
    RATE_ONE_CALL_S,
    RATE_REPEATS,
    check_estimate,
    estimate_run,
    estimate_text,
    measure_rates,
    suggest_dim,
)

# The bound: close enough to decide "runs in seconds" vs "blocks the room for minutes".
FACTOR = 3.0


@pytest.fixture(scope="module")
def cpu_info(warm_cpu):
    return warm_cpu  # conftest's: the warm-up's DeviceInfo, measured once a session


def test_warm_up_measures_the_cpu(cpu_info):
    rates = cpu_info.rates_for("cpu")
    assert rates is not None and cpu_info.rates_for("cuda") is None
    assert rates.gflops("float32") > 0 and rates.copy_gbs > 0 and rates.fill_gbs > 0
    assert rates.run_overhead_s > 0
    assert rates.gflops("tf32") is None  # refused on CPU: not measured


@pytest.mark.parametrize("size", [256, 1024, 2048])
def test_estimate_is_within_a_factor_of_three_of_a_measured_cpu_run(cpu_info, size):
    from lab.run import runner

    config = RunConfig(m=size, k=size, n=size, device="cpu")
    estimate = estimate_run(config, cpu_info)
    assert estimate is not None and estimate.kind == "cpu"
    start = time.perf_counter()
    runner.run_profile(config)
    took_s = time.perf_counter() - start
    assert took_s / FACTOR <= estimate.seconds <= took_s * FACTOR, (size, estimate, took_s)


def test_16384_float32_on_cpu_is_refused_at_once_allocating_nothing(cpu_info):
    config = RunConfig(m=16384, k=16384, n=16384, dtype="float32", device="cpu")
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        check_estimate(config, cpu_info, HostSettings())
    took_s = time.perf_counter() - start
    _, peak_bytes = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert took_s < 1.0
    assert peak_bytes < 1 << 20  # a few strings, nothing the size of a tensor (3 GiB here)
    message = str(caught.value)
    assert "on this host's CPU" in message and "try " in message and "or smaller" in message
    assert estimate_text(estimate_run(config, cpu_info).seconds) in message
    assert "PROFILER_LAB" not in message and "max_run_estimate_s" not in message


class _CountingTorch:
    """torch, with each matmul counted by dtype and bfloat16's slowed past ``RATE_ONE_CALL_S``, as
    on a CPU with no fast path for it."""

    def __init__(self):
        import torch

        self.torch, self.calls = torch, Counter()

    def __getattr__(self, name):
        return getattr(self.torch, name)

    def matmul(self, a, b):
        self.calls[str(a.dtype).removeprefix("torch.")] += 1
        if a.dtype == self.torch.bfloat16:
            time.sleep(RATE_ONE_CALL_S)
        return self.torch.matmul(a, b)


def test_a_dtype_slower_than_one_call_is_rated_from_that_call_alone(monkeypatch):
    monkeypatch.setitem(RATE_MATMUL_DIM, "cpu", 64)
    torch = _CountingTorch()
    rates = measure_rates(torch, "cpu", ["float32", "bfloat16"], tiny_run_s=0.1)
    assert torch.calls == {"float32": 1 + RATE_REPEATS, "bfloat16": 1}
    # Rated from its one call, set-up included: never faster than the sleep allows.
    assert 0 < rates.gflops("bfloat16") <= 2 * 64**3 / RATE_ONE_CALL_S / 1e9 < rates.gflops("float32")


def _rates(gflops: float) -> DeviceInfo:
    rates = DeviceRates(kind="cpu", matmul_gflops=(("float32", gflops), ("bfloat16", gflops)),
                        copy_gbs=10.0, fill_gbs=1.0, run_overhead_s=0.2)
    return DeviceInfo(kind="cpu", name="test CPU", rates=(rates,))


def test_limit_zero_means_no_limit_and_no_rates_means_no_estimate():
    big = RunConfig(m=16384, k=16384, n=16384, device="cpu")
    assert check_estimate(big, _rates(50.0), HostSettings(max_run_estimate_s=0)).seconds > 600
    assert check_estimate(big, None, HostSettings()) is None
    assert check_estimate(big, DeviceInfo(kind="cpu", name="cold"), HostSettings()) is None


def test_suggested_size_fits_the_limit_and_the_next_power_does_not():
    info = _rates(50.0)  # 4096³: 137 GFLOP/step ≈ 2.7 s; 2048³ ≈ 0.34 s
    config = RunConfig(m=16384, k=16384, n=16384, device="cpu")
    dim = suggest_dim(config, info, 20.0)
    assert dim == 2048
    assert estimate_run(config.replace(m=dim, k=dim, n=dim), info).seconds <= 20.0
    assert estimate_run(config.replace(m=2 * dim, k=2 * dim, n=2 * dim), info).seconds > 20.0


def test_compile_and_more_steps_cost_more():
    info = _rates(50.0)
    base = RunConfig(m=1024, k=1024, n=1024, device="cpu")
    assert estimate_run(base.replace(compile=True), info).seconds > estimate_run(base, info).seconds + 5
    assert estimate_run(base.replace(active=20), info).seconds > estimate_run(base, info).seconds


def test_estimate_text_reads_in_seconds_minutes_hours():
    assert estimate_text(0.2) == "under a second"
    assert estimate_text(40) == "about 40 s"
    assert estimate_text(360) == "about 6 min"
    assert estimate_text(7200) == "about 2 h"


def test_host_setting_default_and_env():
    assert HostSettings().max_run_estimate_s == 20.0
    assert HostSettings.from_env({"PROFILER_LAB_MAX_RUN_ESTIMATE_S": "60"}).max_run_estimate_s == 60.0

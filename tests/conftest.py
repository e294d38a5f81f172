"""Shared fixtures. Keep it small; add a fixture here only when two test files need it."""

from __future__ import annotations

import gzip
import json
import os

import pytest

# Kineto prints profiler_start/stop lines at its default level (see the brief).
os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def read_trace(trace_gz: bytes) -> dict:
    """A gzipped Chrome trace as torch exported it → its JSON object."""
    return json.loads(gzip.decompress(trace_gz))


@pytest.fixture(scope="session")
def host_settings():
    """The default host limits, whatever PROFILER_LAB_* variables the shell has set."""
    from lab.core.settings import HostSettings

    return HostSettings()


@pytest.fixture(scope="session")
def warm_cpu():
    """Pay the first profile's start-up (~1 s: torch._inductor imports) once per session."""
    from lab.run.runner import warm_up

    return warm_up("cpu")


@pytest.fixture(scope="session")
def small_cpu_result(warm_cpu, host_settings):
    """One real 128³ float32 CPU run with matmul/add labels, shapes, memory and FLOPs on.

    Session-scoped and read-only: tests that need a fresh trace or key averages share it.
    """
    from lab.core.config import RunConfig
    from lab.run.runner import run_profile

    config = RunConfig(
        device="cpu", m=128, k=96, n=64, step_label="step", matmul_label="mm_part", add_label="add_part",
        record_shapes=True, profile_memory=True, with_flops=True,
    )
    return run_profile(config, settings=host_settings)


@pytest.fixture(scope="session")
def cpu_lesson_runs(warm_cpu, host_settings):
    """Each CPU lesson's runs, made once per session through the real engine: (Runs, raw JSON
    events, whole JSON documents, (profiled, unprofiled) µs lists) per lesson key. Shared by
    tests/test_lessons.py, test_questions.py, test_claims.py and test_giveaway.py.

    With the intra-op threads the page's CPU worker uses (every core but one:
    ``lab.run.worker.cpu_worker_threads``): with torch's default of one thread per core, a 64³
    step on a 2-core box shared with other jobs stalled at the GEMM's barrier often enough that
    the GEMM read as 99 % of the step (seen in 3 runs of test_lessons.py)."""
    import gzip
    import json
    import os

    import torch
    from lessonruns import complete_events

    from lab.analysis import Run, analyze
    from lab.lessons import LESSONS, lesson_configs
    from lab.run.runner import run_profile
    from lab.run.worker import cpu_worker_threads
    from lab.trace.load import load_trace

    threads = torch.get_num_threads()
    torch.set_num_threads(cpu_worker_threads(os.cpu_count()))
    cache: dict[str, tuple] = {}

    def get(key: str):
        if key not in cache:
            runs, raw, datas, timings = [], [], [], []
            for name, config in lesson_configs(LESSONS[key], "cpu"):
                result = run_profile(config, settings=host_settings)
                trace = load_trace(result.trace_gz)
                t = result.timing
                runs.append(Run(name, trace, analyze(trace, config=config),
                                timing=(t.profiled_median_us, t.unprofiled_median_us)))
                doc = json.loads(gzip.decompress(result.trace_gz))
                raw.append(complete_events(doc))
                datas.append(doc)
                timings.append((list(t.profiled_us), list(t.unprofiled_us)))
            cache[key] = (runs, raw, datas, timings)
        return cache[key]

    yield get
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def playwright_api():
    """The browser tests': Playwright's sync API, checked before their ``server`` starts."""
    from tests.browser_pages import sync_api

    return sync_api()


@pytest.fixture(scope="module")
def browser(playwright_api, server):
    """The browser tests': one Chromium per module, on the module's own ``server`` fixture."""
    from tests.browser_pages import chromium

    with chromium(playwright_api) as b:
        yield b


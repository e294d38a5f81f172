"""The ddp_gloo workload: a real DDP job over gloo that the lab runs as N processes, one rank planted
slow. Each real job costs seconds of both cores, so there are two: 2 ranks through the CLI (a
slow input pipeline) and 4 ranks through ``run_profile`` (extra compute). What they must show is
brute-forced from the rank traces' JSON: the planted range's time per step, and each rank's wait
at the matched all-reduces (the last rank's start minus its own, on the host's one clock)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.core.config import ConfigError, RunConfig, check_device, check_limits
from lab.core.devices import DeviceRates, detect_device
from lab.core.settings import HostSettings
from lab.run.ddp import rank_trace_rank
from lab.run.estimate import check_estimate, estimate_run

REPO = Path(__file__).resolve().parents[1]
PLANT_MS = 120  # large beside the box's scheduling noise (tens of ms when other jobs share its 2 cores)
WITHIN = 0.15  # the plant is seen within this share (the straggler issue's bar for the waits)
SMALL = {"m": 32, "k": 256, "n": 256}  # rows, model dim, hidden dim: ~1 ms of compute beside the plant
COLLECTIVE = "c10d::allreduce_"


def _events(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


def _per_step_ms(trace: dict, name: str) -> float:
    """The range ``name``'s time per profiled step (ProfilerStep#N), from the JSON."""
    events = _events(trace)
    steps = sum(e["name"].startswith("ProfilerStep#") for e in events)
    return sum(e["dur"] for e in events if e["name"] == name) / steps / 1e3


def _waits_ms(traces: list[dict]) -> list[float]:
    """Each rank's wait per step: at the k-th all-reduce, the last rank's start minus its own."""
    starts = [sorted(e["ts"] for e in _events(t) if e["name"] == COLLECTIVE) for t in traces]
    calls = min(len(s) for s in starts)
    steps = sum(e["name"].startswith("ProfilerStep#") for e in _events(traces[0]))
    last = [max(s[k] for s in starts) for k in range(calls)]
    return [sum(last[k] - s[k] for k in range(calls)) / steps / 1e3 for s in starts]


def _check_job(traces: list[dict], straggler: int, planted: str) -> None:
    """The plant is where it was planted, and the others wait for it: brute force on the JSON."""
    assert [t["distributedInfo"]["rank"] for t in traces] == list(range(len(traces)))
    plant = [_per_step_ms(t, planted) for t in traces]
    assert plant[straggler] == pytest.approx(PLANT_MS, rel=WITHIN)
    assert max(p for r, p in enumerate(plant) if r != straggler) < PLANT_MS * WITHIN
    waits = _waits_ms(traces)
    assert waits[straggler] < PLANT_MS * WITHIN
    for rank, wait in enumerate(waits):
        if rank != straggler:
            assert wait == pytest.approx(PLANT_MS, rel=WITHIN), (rank, waits)


@pytest.mark.subprocess
def test_cli_profiles_a_two_rank_job_and_prints_its_straggler_and_cause(tmp_path):
    # Extra compute on 2 ranks: one core spins for the straggler, the other rank's waits are the plant.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFILER_LAB_")}
    args = ["profile", "--workload", "ddp_gloo", "--ranks", "2", "--straggler", "1", "--straggler-ms", str(PLANT_MS),
            "--straggler-cause", "compute",
            "--m", str(SMALL["m"]), "--k", str(SMALL["k"]), "--n", str(SMALL["n"]), "--device", "cpu",
            "--label", "train_step", "--out", str(tmp_path)]
    proc = subprocess.run([sys.executable, "-m", "lab", *args], cwd=REPO, env={**env, "KINETO_LOG_LEVEL": "6"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    paths = sorted(tmp_path.glob("*.pt.trace.json.gz"), key=lambda p: rank_trace_rank(p.name) or 0)
    assert [rank_trace_rank(p.name) for p in paths] == [0, 1]
    assert {"summary.json", "key_averages.csv"} <= {p.name for p in tmp_path.iterdir()}
    traces = [json.loads(gzip.decompress(p.read_bytes())) for p in paths]
    _check_job(traces, straggler=1, planted="extra_compute")
    # The ranks' text, as `ranks DIR` prints it, names the straggler by its cause.
    why = next(line for line in proc.stdout.splitlines() if line.startswith("why:"))
    assert why.startswith("why: rank 1 spends") and "'extra_compute'" in why


@pytest.mark.subprocess
def test_a_four_rank_job_with_a_slow_input_pipeline_returns_every_ranks_trace(tmp_path):
    # A sleep in load_batch: with 4 ranks on a 2-core box, extra compute would also slow the
    # ranks sharing the straggler's core, and their waits would hold more than the plant.
    from lab.analysis import combine_ranks
    from lab.read import ReadHere, read_rank_summaries
    from lab.run.runner import run_profile

    config = RunConfig(workload="ddp_gloo", device="cpu", ranks=4, straggler=2, straggler_ms=PLANT_MS,
                       step_label="train_step", **SMALL)
    result = run_profile(config)
    names = [name for name, _ in result.rank_traces]
    assert [rank_trace_rank(n) for n in names] == [0, 1, 2, 3]
    assert result.trace_gz == result.rank_traces[0][1]
    traces = [json.loads(gzip.decompress(data)) for _, data in result.rank_traces]
    _check_job(traces, straggler=2, planted="load_batch")
    # Rank 0's steps as it timed them: each holds the straggler's plant (the all-reduce waits for it).
    assert statistics.median(result.timing.profiled_us) / 1e3 > PLANT_MS
    for name, data in result.rank_traces:
        (tmp_path / name).write_bytes(data)
    with ReadHere(settings=HostSettings()) as pool:
        paths = [str(tmp_path / name) for name in names]
        ranks = combine_ranks(read_rank_summaries(paths, settings=pool.settings, pool=pool))
    assert ranks.straggler is not None and ranks.straggler.rank == 2


@pytest.mark.subprocess
def test_a_killed_run_takes_its_rank_processes_with_it(tmp_path):
    """A cancelled run's worker is killed; its ranks (tied to it by PR_SET_PDEATHSIG) die too."""
    psutil = pytest.importorskip("psutil")
    code = ("from lab.core.config import RunConfig; from lab.run.runner import run_profile; "
            "run_profile(RunConfig(workload='ddp_gloo', device='cpu', ranks=2, straggler=0, straggler_ms=1000, "
            "m=8, k=8, n=8, warmup_iters=16))")
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env={**os.environ, "KINETO_LOG_LEVEL": "6"})
    try:
        deadline = time.monotonic() + 60
        while len(children := psutil.Process(parent.pid).children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(children) == 2
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        gone, alive = psutil.wait_procs(children, timeout=10)
        assert not alive
    finally:
        if parent.poll() is None:
            parent.kill()


# ---- refusals and estimates: no process started ------------------------------------------------


def test_more_ranks_than_the_host_allows_are_refused_with_the_fix():
    config = RunConfig(workload="ddp_gloo", ranks=6)
    with pytest.raises(ConfigError, match="use 4 ranks or fewer"):
        check_limits(config, HostSettings(max_ranks=4))
    check_limits(config, HostSettings(max_ranks=6))
    check_limits(RunConfig(ranks=6), HostSettings(max_ranks=4))  # a one-process workload: not a job


@pytest.mark.parametrize("changes, fragment", [
    ({"ranks": 1}, "ranks must be"), ({"ranks": 9}, "ranks must be"), ({"straggler": 4}, "straggler must be"),
    ({"straggler_cause": "disk"}, "straggler cause"), ({"straggler_ms": -1}, "straggler_ms"),
])
def test_bad_job_options_are_refused(changes, fragment):
    with pytest.raises(ConfigError, match=fragment):
        RunConfig(workload="ddp_gloo", **changes)


def test_the_job_runs_on_the_host_cpu_only():
    with pytest.raises(ConfigError, match="choose device 'cpu'"):
        check_device(RunConfig(workload="ddp_gloo"), kind="cuda", compute_capability=(9, 0))


def test_the_estimate_counts_the_ranks_on_the_hosts_cores_and_the_plant():
    rates = DeviceRates(kind="cpu", matmul_gflops=(("float32", 50.0),), copy_gbs=5.0, fill_gbs=1.0,
                        run_overhead_s=0.2)
    info = dataclasses.replace(detect_device("cpu"), cpu_count=2, rates=(rates,))
    base = RunConfig(workload="ddp_gloo", device="cpu", ranks=2, **SMALL)
    two, four = estimate_run(base, info), estimate_run(base.replace(ranks=4), info)
    planted = estimate_run(base.replace(straggler=1, straggler_ms=100), info)
    assert two is not None and four is not None and planted is not None
    assert four.seconds == pytest.approx(2 * two.seconds)  # twice the ranks on the same 2 cores
    assert planted.seconds - two.seconds == pytest.approx(planted.iterations * 0.1)
    with pytest.raises(ConfigError, match="fewer ranks than 8"):
        check_estimate(base.replace(ranks=8, m=1024, k=1024, n=1024), info, HostSettings(max_run_estimate_s=5))

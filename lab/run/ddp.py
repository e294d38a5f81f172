"""A distributed run: start one process per rank (``lab.run.ddp_rank``), wait, and gather the job.

The worker's own process never profiles a distributed run: ``run_job`` starts ``config.ranks``
interpreters (``python -c RANK_CODE``), each of which profiles its own rank and writes its trace
under ``tensorboard_trace_handler``'s name into a temporary directory. When they all exit, their
traces come back in ``RunResult.rank_traces`` (rank order; ``trace_gz`` is rank 0's), with rank
0's key averages and tables and its step times. A rank that fails ends the job (the others are
killed) with the last line it printed; so does the host's ``run_timeout_s``. Each rank process
is tied to the worker (Linux ``PR_SET_PDEATHSIG``): when a cancelled run's worker is killed,
its ranks die with it, and ``run_job`` kills them on any exception of its own.
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab.core.config import RunConfig
from lab.core.devices import DeviceInfo
from lab.core.result import RunError, RunResult, Timing
from lab.core.settings import HostSettings
from lab.run.ddp_rank import RANK_CODE, RANK_ENV, SUMMARY_NAME, WORLD_ENV, timing_name

__all__ = ["POLL_S", "rank_trace_rank", "run_job"]

POLL_S = 0.05  # how often the ranks are checked: a failed rank ends the job within this
_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
_TRACE_NAME = re.compile(r"^rank(\d+)\..*\.pt\.trace\.json\.gz$")


def rank_trace_rank(name: str) -> int | None:
    """The rank in a rank trace's file name (``rank2.<ns>.pt.trace.json.gz`` → 2), else None."""
    match = _TRACE_NAME.match(name)
    return int(match.group(1)) if match else None


def run_job(config: RunConfig, info: DeviceInfo, clock, settings: HostSettings, notes: list[str]) -> RunResult:
    """Run ``config`` (a distributed workload) as ``config.ranks`` processes; ``clock`` is the
    runner's stage clock."""
    with tempfile.TemporaryDirectory(prefix="profiler_lab_job_") as tmp:
        out = Path(tmp)
        clock.enter("allocating")
        ranks = [_start_rank(config, rank, out) for rank in range(config.ranks)]
        try:
            clock.enter("profiling")
            _wait(ranks, out, settings.run_timeout_s)
        finally:
            for process in ranks:
                if process.poll() is None:
                    process.kill()
                process.wait()
        clock.enter("exporting")
        traces = _rank_traces(out, config.ranks)
        clock.enter("summarizing")
        summary = pickle.loads((out / SUMMARY_NAME).read_bytes())
        times = json.loads((out / timing_name(0)).read_text())
    timing = Timing(method="wall clock", profiled_us=tuple(times["profiled_us"]),
                    unprofiled_us=tuple(times["unprofiled_us"]))
    return RunResult(config=config, device=info, trace_gz=traces[0][1], key_averages=summary["key_averages"],
                     key_averages_by_shape=summary["by_shape"], tables=summary["tables"], timing=timing,
                     stage_s=clock.finish(), warnings=tuple(notes), rank_traces=traces)


def _die_with_parent() -> None:
    """In the rank's process before it runs: SIGKILL when the worker that started it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _start_rank(config: RunConfig, rank: int, out: Path) -> subprocess.Popen:
    import lab

    env = dict(os.environ, **{RANK_ENV: str(rank), WORLD_ENV: str(config.ranks), "KINETO_LOG_LEVEL": "6"})
    root = str(Path(lab.__file__).resolve().parents[1])  # where this lab is imported from
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    log = open(out / f"rank{rank}.stderr", "wb")  # noqa: SIM115 - the child holds it; closed below
    try:
        return subprocess.Popen(
            [sys.executable, "-c", RANK_CODE, json.dumps(config.to_dict()), str(out)],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,  # noqa: PLW1509
        )
    finally:
        log.close()


def _wait(ranks: list[subprocess.Popen], out: Path, timeout_s: float) -> None:
    """Until every rank exits; a rank that fails, or the timeout, raises ``RunError``."""
    deadline = time.monotonic() + timeout_s
    while True:
        codes = [process.poll() for process in ranks]
        failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            rank = failed[0]
            raise RunError(f"rank {rank} of {len(ranks)} failed ({_last_line(out / f'rank{rank}.stderr')}); "
                           "the other ranks were stopped")
        if all(code == 0 for code in codes):
            return
        if time.monotonic() > deadline:
            raise RunError(f"the job's {len(ranks)} ranks ran past this host's {timeout_s:g} s limit; "
                           "use fewer ranks, fewer steps or smaller sizes")
        time.sleep(POLL_S)


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else "no message"


def _rank_traces(out: Path, world: int) -> tuple[tuple[str, bytes], ...]:
    """Each rank's trace, (file name, gzipped JSON), in rank order."""
    found = {rank_trace_rank(p.name): p for p in out.iterdir()}
    missing = [rank for rank in range(world) if rank not in found]
    if missing:
        raise RunError(f"ranks {missing} wrote no trace; run again")
    return tuple((found[rank].name, found[rank].read_bytes()) for rank in range(world))

"""Every benchmark runs once in its quick mode, so none of them rots (figures are not asserted:
speed targets live in BENCHMARKS.md, measured by the full runs). Nothing here writes
BENCHMARKS.md."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.bench, pytest.mark.subprocess]

ROOT = Path(__file__).resolve().parents[1]

QUICK_RUNS = {
    "ingest": (["bench/bench_ingest.py", "--quick"], "## Scaling (ingest)"),
    "analysis": (["bench/bench_analysis.py", "--quick"], "## Scaling (analyze)"),
    "timeline": (["bench/bench_timeline.py", "--quick", "--no-write", "--no-browser", "--events", "20000"],
                 "## Timeline"),
    "click_to_result": (["bench/bench_click_to_result.py", "--quick", "--no-write"], "Total click to result"),
    "capacity": (["bench/bench_capacity.py", "--quick"], "Each result holds only its own label: yes"),
    "memory": (["bench/bench_memory.py", "--quick"], "## Memory"),
    "rooms": (["bench/bench_rooms.py", "--quick"], "## Rooms"),
    "cli": (["bench/bench_cli.py", "--rounds", "1"], "## Command line"),
    "job_bytes": (["bench/bench_job_bytes.py", "tests/data/matmul_add_4096_bf16.json.gz"],
                  "| compare with the first trace |"),
}


@pytest.mark.parametrize("name", list(QUICK_RUNS))
def test_benchmark_runs_in_quick_mode(name, tmp_path):
    args, expected = QUICK_RUNS[name]
    before = (ROOT / "BENCHMARKS.md").read_text()
    env = {**os.environ, "KINETO_LOG_LEVEL": "6"}
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert expected in done.stdout, done.stdout[-2000:]
    assert (ROOT / "BENCHMARKS.md").read_text() == before, f"{name} --quick rewrote BENCHMARKS.md"

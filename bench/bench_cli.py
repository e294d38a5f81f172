"""The command line's wall time: reads in its own process (the default) against ``--isolated``.

Each command is a fresh ``python -m lab …`` interpreter, as a user types it, timed from start
to exit (stdout to /dev/null). Rounds are interleaved (every command once, then again), so a
change of load on the shared box falls on all of them alike; the table gives medians.

- the floor: ``python -c "import lab.trace, lab.analysis"`` (what any read must import);
- on a small trace (default ``tests/data/matmul_add_1024_fp32.json.gz``): ``analyze`` and
  ``table`` in-process, ``analyze --isolated`` (a reader interpreter, the path before);
- with ``--large PATH`` (the 114 MB recording: ``bench/record_cpu_traces.py small_ops:114``):
  ``analyze`` in-process and ``--isolated``, and the read itself in one ``python -c`` (imports,
  ``load_trace``, ``analyze``, ``judge_trace``: the in-process time to match);
- with ``--job DIR`` (``scripts/make_synthetic_job.py DIR --ranks 64``): ``ranks`` both ways.

    python bench/bench_cli.py --large /tmp/readers_bench/real/small_ops_114mb.json.gz --job /tmp/job64 --rounds 5

Prints a Markdown section; ``--write`` replaces ``## Command line`` in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks_md import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz"
# What the read costs at least in a fresh interpreter, to set the CLI's time beside.
FLOOR_CODE = "import lab.trace, lab.analysis"
READ_CODE = ("import sys; from lab.core import HostSettings; from lab.read.here import parse; "
             "parse(sys.argv[1], settings=HostSettings.from_env())")
# The targets: a small trace within 1.5x the floor; a large one within 10 % of the read alone.
SMALL_TARGET_RATIO = 1.5
LARGE_TARGET_RATIO = 1.10


def _commands(small: Path, large: Path | None, job: Path | None) -> dict[str, list[str]]:
    py = [sys.executable]
    out = {
        "import lab.trace + lab.analysis": [*py, "-c", FLOOR_CODE],
        "analyze small": [*py, "-m", "lab", "analyze", str(small)],
        "analyze small --isolated": [*py, "-m", "lab", "analyze", "--isolated", str(small)],
        "table small": [*py, "-m", "lab", "table", str(small)],
    }
    if large is not None:
        out |= {
            "read large in one python -c": [*py, "-c", READ_CODE, str(large)],
            "analyze large": [*py, "-m", "lab", "analyze", str(large)],
            "analyze large --isolated": [*py, "-m", "lab", "analyze", "--isolated", str(large)],
        }
    if job is not None:
        out |= {
            "ranks job": [*py, "-m", "lab", "ranks", str(job)],
            "ranks job --isolated": [*py, "-m", "lab", "ranks", "--isolated", str(job)],
        }
    return out


def _time(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one command; CPU counts its reader processes too (children waited for)."""
    env = {**os.environ, "KINETO_LOG_LEVEL": "6"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(commands: dict[str, list[str]], rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds per command, ``rounds`` each."""
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for cmd in commands.values():  # one unmeasured pass: the page cache, .pyc files
        _time(cmd)
    for _ in range(rounds):
        for name, cmd in commands.items():
            w, c = _time(cmd)
            wall[name].append(w)
            cpu[name].append(c)
    return wall, cpu


def _ratio(times: dict[str, list[float]], a: str, b: str) -> str:
    if a not in times or b not in times:
        return ""
    return f"{statistics.median(times[a]) / statistics.median(times[b]):.2f}×"


def _ratios(times: dict[str, list[float]]) -> list[str]:
    ratios = [
        f"- analyze small ÷ import floor: {_ratio(times, 'analyze small', 'import lab.trace + lab.analysis')} "
        f"(target ≤ {SMALL_TARGET_RATIO}×); table small ÷ floor: "
        f"{_ratio(times, 'table small', 'import lab.trace + lab.analysis')}; "
        f"--isolated ÷ in-process: {_ratio(times, 'analyze small --isolated', 'analyze small')}",
    ]
    if "analyze large" in times:
        alone = _ratio(times, "analyze large", "read large in one python -c")
        ratios.append(f"- analyze large ÷ the read alone: {alone} (target ≤ {LARGE_TARGET_RATIO:.2f}×); "
                      f"--isolated ÷ in-process: {_ratio(times, 'analyze large --isolated', 'analyze large')}")
    if "ranks job" in times:
        ratios.append(f"- ranks --isolated ÷ in-process: {_ratio(times, 'ranks job --isolated', 'ranks job')}")
    return ratios


def report(wall: dict[str, list[float]], cpu: dict[str, list[float]], rounds: int, loads: tuple[float, float],
           argv: list[str]) -> str:
    floor, floor_cpu = (statistics.median(t["import lab.trace + lab.analysis"]) for t in (wall, cpu))
    rows = ["| command | wall median s | min | max | ÷ import floor | CPU median s | ÷ import floor (CPU) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, ts in wall.items():
        c = statistics.median(cpu[name])
        rows.append(f"| {name} | {statistics.median(ts):.3f} | {min(ts):.3f} | {max(ts):.3f} | "
                    f"{statistics.median(ts) / floor:.2f}× | {c:.3f} | {c / floor_cpu:.2f}× |")
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        "## Command line",
        "",
        f"Command: `python bench/bench_cli.py {' '.join(argv)}` — {when}, {os.cpu_count()} CPUs "
        f"({platform.machine()}), Python {platform.python_version()}; load average {loads[0]:.2f} at the start, "
        f"{loads[1]:.2f} at the end.",
        "",
        f"Method: each command a fresh interpreter, start to exit, stdout to /dev/null; one unmeasured pass, then "
        f"{rounds} interleaved rounds (every command once per round); medians. The default reads in the CLI's "
        "own process (`lab.read.ReadHere`); `--isolated` starts a pool of reader processes as before (one for "
        "analyze, the host's count for ranks).",
        "",
        *rows,
        "",
        "Wall:",
        *_ratios(wall),
        "",
        "CPU (user + system, the command and its reader processes: what load on the shared box changes least):",
        *_ratios(cpu),
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=Path, default=SMALL)
    parser.add_argument("--large", type=Path, default=None)
    parser.add_argument("--job", type=Path, default=None, help="a directory of one job's rank traces")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="replace '## Command line' in BENCHMARKS.md")
    args = parser.parse_args(argv)
    start_load = os.getloadavg()[0]
    wall, cpu = measure(_commands(args.small, args.large, args.job), args.rounds)
    text = report(wall, cpu, args.rounds, (start_load, os.getloadavg()[0]), sys.argv[1:] if argv is None else argv)
    print(text)
    if args.write:
        write_section(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

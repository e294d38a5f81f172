"""load_trace vs Holistic Trace Analysis's newest release on real traces.

    pip install -r bench/requirements.txt        # traceinsight 0.6.1 (HTA's newest release)
    python bench/record_cpu_traces.py small_ops:10 train_stack:40 small_ops:114
    python bench/bench_vs_hta.py                 # the four real traces below, 5 rounds
    python bench/bench_vs_hta.py --rounds 3 --cold 3 TRACE.json ...

Real traces only (no tiles): ``bench/data/transformer_step_h200.json.gz`` (a real H200
training step) and the CPU recordings ``bench/record_cpu_traces.py`` writes under
``/tmp/profiler_lab_bench/real/`` (never committed). Contenders, on the same file:

* ``load_trace``: ``lab.trace.load_trace(path)`` → ``Trace`` (events with lanes, depth, args
  columns; flows; memory records; metadata).
* ``HTA TraceAnalysis``: ``hta.trace_analysis.TraceAnalysis(trace_dir=DIR)``, what HTA's
  documentation tells users to call to load a trace (DIR holds a symlink to the one file; one
  rank, so HTA parses in-process, no pool). Its constructor parses, aligns, filters and
  indexes the trace. The issue's reference.
* ``HTA parse``: ``hta.common.trace_parser.parse_trace_dataframe(path, default config)``, its
  per-file parser alone (what bench_ingest.py compares), which does less than TraceAnalysis.

Warm (the table's ratios): in this one process, after one warm-up call each (imports and
first-call caches paid), ``--rounds`` rounds, each round every contender once, the order
rotated each round so none always runs first after the others' garbage; ``gc.collect()`` before
each call, outside the timing. Median wall (``perf_counter``) and CPU (``process_time``).

Cold (``--cold N``): a fresh Python per call that imports the contender and loads the trace
once, timed inside from before the import; what a one-shot script pays. Median of N,
interleaved the same way.

HTA's log output is silenced (it logs at WARNING per parse).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REAL = Path("/tmp/profiler_lab_bench/real")
DEFAULT_TRACES = (
    REAL / "small_ops_10mb.json",
    ROOT / "bench" / "data" / "transformer_step_h200.json.gz",
    REAL / "train_stack_40mb.json",
    REAL / "small_ops_114mb.json",
)
CONTENDERS = ("load_trace", "HTA TraceAnalysis", "HTA parse")


def _quiet_hta() -> None:
    logging.disable(logging.CRITICAL)


def call(name: str, path: str, trace_dir: str):
    """One load by contender ``name``; returns what it built (kept alive until timed)."""
    if name == "load_trace":
        from lab.trace.load import load_trace

        return load_trace(path)
    if name == "HTA TraceAnalysis":
        from hta.trace_analysis import TraceAnalysis

        return TraceAnalysis(trace_dir=trace_dir)
    from hta.common.trace_parser import parse_trace_dataframe
    from hta.configs.parser_config import ParserConfig

    return parse_trace_dataframe(path, ParserConfig.get_default_cfg())


def rows_of(name: str, result) -> int:
    if name == "load_trace":
        return len(result.events)
    if name == "HTA TraceAnalysis":
        return sum(len(df) for df in result.t.get_all_traces().values())
    return len(result[1])


def json_bytes(path: Path) -> int:
    import gzip

    data = path.read_bytes()
    return len(gzip.decompress(data)) if data[:2] == b"\x1f\x8b" else len(data)


def trace_dir_for(path: Path, tmp: Path) -> str:
    """A directory holding only ``path`` (a symlink), as TraceAnalysis(trace_dir=...) wants."""
    d = tmp / path.name.split(".")[0]
    d.mkdir(exist_ok=True)
    link = d / path.name
    if not link.exists():
        link.symlink_to(path.resolve())
    return str(d)


def rotated(names: tuple[str, ...], k: int) -> list[str]:
    return list(names[k % len(names):] + names[: k % len(names)])


def warm(path: Path, trace_dir: str, rounds: int) -> tuple[dict, dict]:
    rows = {}
    for name in CONTENDERS:  # warm-up: imports and first-call caches
        rows[name] = rows_of(name, call(name, str(path), trace_dir))
    times: dict[str, dict[str, list[float]]] = {n: {"wall": [], "cpu": []} for n in CONTENDERS}
    for k in range(rounds):
        for name in rotated(CONTENDERS, k):
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            result = call(name, str(path), trace_dir)
            times[name]["cpu"].append(time.process_time() - cpu)
            times[name]["wall"].append(time.perf_counter() - wall)
            del result
    return times, rows


def cold(path: Path, trace_dir: str, rounds: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {n: [] for n in CONTENDERS}
    for k in range(rounds):
        for name in rotated(CONTENDERS, k):
            proc = subprocess.run([sys.executable, __file__, "--one-cold", name, str(path), trace_dir],
                                  capture_output=True, text=True, check=True, timeout=1800)
            out[name].append(json.loads(proc.stdout.strip().splitlines()[-1])["wall_s"])
    return out


def _one_cold(name: str, path: str, trace_dir: str) -> None:
    start = time.perf_counter()
    _quiet_hta()
    call(name, path, trace_dir)
    print(json.dumps({"wall_s": time.perf_counter() - start}))


def header(rounds: int, cold_rounds: int) -> list[str]:
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor()
    from importlib.metadata import PackageNotFoundError, version

    vers = []
    for pkg in ("traceinsight", "pandas", "numpy", "msgspec", "isal"):
        try:
            vers.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            vers.append(f"{pkg} absent")
    return [
        f"- command: `python bench/bench_vs_hta.py --rounds {rounds}"
        + (f" --cold {cold_rounds}`" if cold_rounds else "`"),
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {os.cpu_count()} CPUs ({model}), "
        f"Python {platform.python_version()}; load average at start {os.getloadavg()[0]:.2f}",
        f"- versions: {', '.join(vers)}",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", type=Path, help="real traces (default: the four named in the docstring)")
    ap.add_argument("--rounds", type=int, default=5, help="warm rounds per trace (median)")
    ap.add_argument("--cold", type=int, default=0, help="also N fresh-process rounds per contender and trace")
    ap.add_argument("--one-cold", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    _quiet_hta()
    if args.one_cold:
        _one_cold(*args.one_cold)
        return 0
    traces = args.traces or list(DEFAULT_TRACES)
    missing = [p for p in traces if not p.exists()]
    if missing:
        print("missing: " + ", ".join(map(str, missing)) + " — run: python bench/record_cpu_traces.py "
              "small_ops:10 train_stack:40 small_ops:114", file=sys.stderr)
        return 2
    lines = header(args.rounds, args.cold)
    print("\n".join(lines), flush=True)
    table = ["| trace | JSON MB | events (ours / HTA) | load_trace ms | HTA TraceAnalysis ms | × | HTA parse ms | × "
             "| × CPU (TA / parse) | load avg |" + (" cold: load_trace / TraceAnalysis s (×) |" if args.cold else ""),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.cold else "")]
    with tempfile.TemporaryDirectory(prefix="bench_vs_hta_") as tmp:
        for path in traces:
            trace_dir = trace_dir_for(path, Path(tmp))
            times, rows = warm(path, trace_dir, args.rounds)
            med = {n: {k: statistics.median(v) for k, v in times[n].items()} for n in CONTENDERS}
            ours, ta, hp = med["load_trace"], med["HTA TraceAnalysis"], med["HTA parse"]
            row = (f"| {path.name} | {json_bytes(path) / 1e6:,.1f} "
                   f"| {rows['load_trace']:,} / {rows['HTA TraceAnalysis']:,} "
                   f"| {ours['wall'] * 1e3:,.0f} | {ta['wall'] * 1e3:,.0f} | **{ta['wall'] / ours['wall']:.1f}×** "
                   f"| {hp['wall'] * 1e3:,.0f} | {hp['wall'] / ours['wall']:.1f}× "
                   f"| {ta['cpu'] / ours['cpu']:.1f}× / {hp['cpu'] / ours['cpu']:.1f}× | {os.getloadavg()[0]:.2f} |")
            if args.cold:
                c = {n: statistics.median(v) for n, v in cold(path, trace_dir, args.cold).items()}
                ours_s, ta_s = c["load_trace"], c["HTA TraceAnalysis"]
                row += f" {ours_s:.2f} / {ta_s:.2f} ({ta_s / ours_s:.1f}×) |"
            table.append(row)
            print(row, flush=True)
            print("  all rounds (wall ms): " + "; ".join(
                f"{n}: " + ", ".join(f"{t * 1e3:.0f}" for t in times[n]["wall"]) for n in CONTENDERS), flush=True)
    print("\n" + "\n".join(lines + [""] + table))
    return 0


if __name__ == "__main__":
    sys.exit(main())

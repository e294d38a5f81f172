"""Ingest benchmark: lab.trace.load_trace vs Holistic Trace Analysis's parser, same files, same run.

    python bench/bench_ingest.py            # ~20 MB trace (plain and gzip) + scaling 1k..1M events
    python bench/bench_ingest.py --quick    # small inputs, a few seconds (CI runs this once)

What is timed (wall clock ``time.perf_counter`` and CPU time ``time.process_time``), each on the
same file, rounds interleaved (A B C, A B C, ...) so that drift on a shared machine hits every
contender alike:

* ``load_trace``: ``lab.trace.load_trace(path)`` → events frame (lanes, depth, args columns),
  flows, metadata.
* ``HTA parse``: ``hta.common.trace_parser.parse_trace_dataframe(path, ParserConfig.get_default_cfg())``,
  HTA's own single-file parser (the step ``TraceAnalysis`` runs per rank file), with its
  default backend (stdlib json); its log lines are silenced. It builds HTA's events frame and
  symbol table; it does not compute flows or nesting depth (HTA does those later, in
  ``CallGraph``/``CallStack``), so the comparison favours HTA.
* ``floor (json.loads)``: read (+ ``gzip.decompress``) + ``json.loads``: the cost of merely
  decoding the JSON with the standard library, nothing built.
* ``floor (msgspec)``: read (+ gunzip) + untyped ``msgspec.json.decode``.

Memory: each contender runs twice more, each time in a fresh subprocess: one reports the
tracemalloc peak (Python allocations during the call, the file's bytes included since they are
read inside), the other the resident-memory high-water mark during the call minus resident
memory before it (``/proc/self/status`` VmHWM, reset through ``/proc/self/clear_refs``).

Inputs: a ~20 MB trace made by ``bench/make_large_trace.py`` (plain and gzip) and, when present,
``bench/data/transformer_step_h200.json.gz`` (a real H200 training-step trace with Python stacks).

Scaling: ``load_trace`` on 1k / 10k / 100k / 1M-event traces made by
``bench/make_large_trace.py`` (repeated real H200 steps), median of repeats, µs per event.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import make_large_trace  # noqa: E402

from lab.trace.load import load_trace  # noqa: E402

# ---- contenders -------------------------------------------------------------------------------


def _read(path: str) -> bytes:
    data = Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def run_load_trace(path: str):
    return load_trace(path)


def run_hta(path: str):
    from hta.common.trace_parser import parse_trace_dataframe
    from hta.configs.parser_config import ParserConfig

    return parse_trace_dataframe(path, ParserConfig.get_default_cfg())


def run_json_floor(path: str):
    return json.loads(_read(path))


def run_msgspec_floor(path: str):
    import msgspec

    return msgspec.json.decode(_read(path))


CONTENDERS = {
    "load_trace": run_load_trace,
    "HTA parse": run_hta,
    "floor (json.loads)": run_json_floor,
    "floor (msgspec)": run_msgspec_floor,
}


def hta_available() -> bool:
    try:
        import hta.common.trace_parser  # noqa: F401
    except ImportError:
        return False
    return True


# ---- measurement ------------------------------------------------------------------------------


def time_interleaved(names: list[str], path: str, repeats: int) -> dict[str, dict[str, list[float]]]:
    """Wall and CPU seconds per call. CPU time (``time.process_time``: this process, all
    threads) is the steadier figure on a machine shared with other jobs."""
    for name in names:  # warm-up: imports, first-call caches
        CONTENDERS[name](path)
    times = {n: {"wall": [], "cpu": []} for n in names}
    for _ in range(repeats):
        for name in names:
            wall, cpu = time.perf_counter(), time.process_time()
            result = CONTENDERS[name](path)
            times[name]["cpu"].append(time.process_time() - cpu)
            times[name]["wall"].append(time.perf_counter() - wall)
            del result
    return times


def memory_in_subprocess(name: str, path: str) -> dict:
    """Two fresh processes: one traces Python allocations, one only watches resident memory
    (tracemalloc's own bookkeeping would inflate RSS)."""
    result = {}
    for mode in ("tracemalloc", "rss"):
        out = subprocess.run(
            [sys.executable, __file__, "--measure-memory", mode, name, path],
            capture_output=True, text=True, check=True, timeout=1800,
        )  # fmt: skip
        result.update(json.loads(out.stdout.strip().splitlines()[-1]))
    return result


def _proc_status_bytes(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _measure_memory_here(mode: str, name: str, path: str) -> None:
    """Peak memory of one call, in this fresh process. ``tracemalloc``: peak of Python
    allocations during the call. ``rss``: resident high-water mark (VmHWM, reset right before
    the call) minus resident memory right before it; ru_maxrss would not do, as Linux carries
    it over from the parent process across exec."""
    fn = CONTENDERS[name]
    fn(make_large_trace.DEFAULT_SOURCE.as_posix())  # imports and warm-up on a tiny trace
    if mode == "tracemalloc":
        tracemalloc.start()
        result = fn(path)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(json.dumps({"tracemalloc_peak_bytes": peak}))
        return
    rss_before = _proc_status_bytes("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    except OSError:
        rss_before = None
    result = fn(path)
    hwm = _proc_status_bytes("VmHWM")
    del result
    growth = hwm - rss_before if (hwm is not None and rss_before is not None) else float("nan")
    print(json.dumps({"rss_growth_bytes": growth}))


# ---- reporting --------------------------------------------------------------------------------


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, "
            f"load average at start {load:.1f}")  # fmt: skip


def versions() -> str:
    parts = []
    for mod in ("pandas", "numpy", "msgspec", "hta"):
        try:
            m = __import__(mod)
            parts.append(f"{mod} {getattr(m, '__version__', '?')}")
        except ImportError:
            parts.append(f"{mod} absent")
    return ", ".join(parts)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}"


def ingest_section(files: list[tuple[str, str]], repeats: int, names: list[str]) -> list[str]:
    lines = [
        "| input | contender | median wall ms | median CPU ms | × load_trace (wall) | × load_trace (CPU) "
        "| tracemalloc peak MB (× JSON) | RSS growth MB (× JSON) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, path in files:
        json_bytes = len(_read(path))
        times = time_interleaved(names, path, repeats)
        base = {k: statistics.median(times["load_trace"][k]) for k in ("wall", "cpu")}
        for name in names:
            med = {k: statistics.median(times[name][k]) for k in ("wall", "cpu")}
            mem = memory_in_subprocess(name, path)
            peak, rss = mem["tracemalloc_peak_bytes"], mem["rss_growth_bytes"]
            lines.append(
                f"| {label} | {name} | {ms(med['wall'])} | {ms(med['cpu'])} | {med['wall'] / base['wall']:.2f} | "
                f"{med['cpu'] / base['cpu']:.2f} | {peak / 1e6:,.1f} ({peak / json_bytes:.2f}×) | "
                f"{rss / 1e6:,.1f} ({rss / json_bytes:.2f}×) |"
            )
            print(lines[-1], flush=True)
    return lines


def scaling_section(paths: list[tuple[int, str]], repeats: int) -> list[str]:
    lines = ["| events | JSON MB | median wall ms | median CPU ms | CPU µs / event | tracemalloc peak (× JSON) "
             "| RSS growth (× JSON) |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for n, path in paths:
        reps = repeats if n < 1_000_000 else max(3, repeats // 2)
        times = time_interleaved(["load_trace"], path, reps)["load_trace"]
        wall, cpu = statistics.median(times["wall"]), statistics.median(times["cpu"])
        json_bytes = Path(path).stat().st_size
        mem = memory_in_subprocess("load_trace", path)
        lines.append(
            f"| {n:,} | {json_bytes / 1e6:,.1f} | {ms(wall)} | {ms(cpu)} | {cpu / n * 1e6:.2f} | "
            f"{mem['tracemalloc_peak_bytes'] / json_bytes:.2f}× | {mem['rss_growth_bytes'] / json_bytes:.2f}× |"
        )
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description="load_trace vs HTA ingest benchmark")
    ap.add_argument("--quick", action="store_true", help="small inputs, few repeats (CI)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/profiler_lab_bench"), help="where traces are made")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--measure-memory", nargs=3, metavar=("MODE", "CONTENDER", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    logging.disable(logging.CRITICAL)  # HTA logs a warning per parse
    if args.measure_memory:
        _measure_memory_here(*args.measure_memory)
        return

    doc = make_large_trace.load_source(make_large_trace.DEFAULT_SOURCE)
    if args.quick:
        ingest_events, scaling_events, repeats = [5_000], [1_000, 10_000], args.repeats or 3
    else:
        ingest_events = [make_large_trace.events_for_megabytes(doc, 20)]
        scaling_events, repeats = [1_000, 10_000, 100_000, 1_000_000], args.repeats or 7

    def made(n: int) -> Path:
        path = args.out / f"trace_{n}.json"
        if not path.exists() or not path.with_suffix(".json.gz").exists():
            make_large_trace.write_trace(doc, n, args.out, gzip_too=True)
        return path

    names = ["load_trace"] + (["HTA parse"] if hta_available() else []) + ["floor (json.loads)", "floor (msgspec)"]
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = [
        f"- command: `python bench/bench_ingest.py{' --quick' if args.quick else ''}`",
        f"- date: {started}; machine: {machine()}",
        f"- versions: {versions()}",
        f"- method: median of {repeats} interleaved rounds after one warm-up call each, wall clock and "
        "CPU time of this process; memory from one "
        "fresh subprocess per contender and figure (tracemalloc peak during the call; in another "
        "process, resident high-water mark during the call minus resident memory before it).",
    ]
    if not hta_available():
        header.append("- HTA not installed (`pip install -r bench/requirements.txt`): HTA rows skipped.")
    print("\n".join(header), flush=True)
    files = []
    for n in ingest_events:
        plain = made(n)
        mb = plain.stat().st_size / 1e6
        files += [(f"{n:,} events, {mb:.1f} MB .json", str(plain)),
                  ("same, .json.gz", str(plain.with_suffix(".json.gz")))]
    real = ROOT / "bench" / "data" / "transformer_step_h200.json.gz"  # a real H200 trace, if recorded
    if real.exists() and not args.quick:
        files.append((f"real transformer step, {len(_read(str(real))) / 1e6:.1f} MB .json.gz", str(real)))
    ingest = ingest_section(files, repeats, names)
    scaling = scaling_section([(n, str(made(n))) for n in scaling_events], repeats)
    print("\n## Ingest\n\n" + "\n".join(header + [""] + ingest))
    print("\n## Scaling (ingest)\n\n" + "\n".join(scaling))


if __name__ == "__main__":
    main()

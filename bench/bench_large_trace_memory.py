"""A 1 GB JSON trace in a reader-like process: peak resident memory and time.

    python bench/make_large_trace.py --source bench/data/transformer_step_h200.json.gz \\
        --megabytes 1000 --out /tmp/profiler_lab_bench/large        # ~3 min, 1.0 GB, once
    python bench/bench_large_trace_memory.py /tmp/profiler_lab_bench/large/trace_3494195.json
    python bench/bench_large_trace_memory.py PATH --rounds 3 --as-bytes

Not run in CI (minutes, gigabytes). Each measurement is a fresh Python that starts as a reader
does (``lab/read/reader.py``'s ``_Steps``: import lab.trace and lab.analysis, one warm-up read
of a bundled sample, ``gc.collect(); gc.freeze()``), then:

* ``load``: ``load_trace(PATH)`` alone;
* ``load+analyze``: ``load_trace`` + ``analyze`` + ``judge_trace``, what a reader does per
  upload (``_Steps.parse``).

``--as-bytes`` reads the file into bytes first (untimed, counted: a reader handed the upload's
bytes holds them), as ``load_trace(buf)``.

Figures: the process's resident high-water mark (``VmHWM``, reset through
``/proc/self/clear_refs`` just before the call, so it is the peak *during* the call, absolute:
imports included) and its growth over the resident size before the call; wall time per stage;
a 20 ms sampler of ``VmRSS`` says when the peak came. Ratios are to the JSON's size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


class _Sampler(threading.Thread):
    """VmRSS every 20 ms, with the stage it was taken in."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stage, self.samples, self.stop = "start", [], threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            self.samples.append((self.stage, _status_kb("VmRSS")))


def _measure(mode: str, path: str, as_bytes: bool) -> dict:
    import gc

    from lab.analysis import analyze
    from lab.judge import judge_trace
    from lab.samples import list_samples
    from lab.trace import load_trace

    sample = list_samples()[0].read_bytes()
    trace = load_trace(sample)
    judge_trace(trace, analyze(trace))
    del trace
    gc.collect()
    gc.freeze()
    source = Path(path).read_bytes() if as_bytes else path
    rss_before_kb = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS now
    sampler = _Sampler()
    sampler.start()
    out: dict = {"rss_before_mb": rss_before_kb / 1024}
    sampler.stage = "load"
    t0 = time.perf_counter()
    trace = load_trace(source, max_decompressed_bytes=4 << 30, max_events=50_000_000)
    out["load_s"] = time.perf_counter() - t0
    out["hwm_load_mb"] = _status_kb("VmHWM") / 1024
    out["events"] = len(trace.events)
    if mode == "load+analyze":
        del source
        sampler.stage = "analyze"
        t1 = time.perf_counter()
        analysis = analyze(trace)
        judge_trace(trace, analysis)
        out["analyze_s"] = time.perf_counter() - t1
    out["hwm_mb"] = _status_kb("VmHWM") / 1024
    sampler.stop.set()
    sampler.join()
    peak_stage = max(sampler.samples, key=lambda s: s[1])[0] if sampler.samples else "?"
    out["peak_in"] = peak_stage
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", type=Path)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--as-bytes", action="store_true")
    ap.add_argument("--modes", default="load,load+analyze")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(_measure(args.one, str(args.path), args.as_bytes)))
        return 0
    json_mb = args.path.stat().st_size / 2**20
    print(f"- command: `python bench/bench_large_trace_memory.py {args.path} --rounds {args.rounds}"
          f"{' --as-bytes' if args.as_bytes else ''}`\n- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; JSON {json_mb:,.0f} MiB", flush=True)
    rows = ["| mode | events | load s | analyze s | peak RSS MiB (× JSON) | growth MiB (× JSON) | peak during "
            "| load avg |",
            "|---|---:|---:|---:|---:|---:|---|---:|"]
    for mode in args.modes.split(","):
        runs = []
        for _ in range(args.rounds):
            cmd = [sys.executable, __file__, str(args.path), "--one", mode] + (["--as-bytes"] if args.as_bytes else [])
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
            if proc.returncode:
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if isinstance(runs[0][k], (int, float))}
        growth = med["hwm_mb"] - med["rss_before_mb"]
        rows.append(f"| {mode}{' (bytes in hand)' if args.as_bytes else ''} | {int(med['events']):,} "
                    f"| {med['load_s']:.2f} | {med.get('analyze_s', float('nan')):.2f} "
                    f"| {med['hwm_mb']:,.0f} ({med['hwm_mb'] / json_mb:.2f}×) "
                    f"| {growth:,.0f} ({growth / json_mb:.2f}×) "
                    f"| {runs[0]['peak_in']} | {os.getloadavg()[0]:.2f} |")
        print(rows[-1], flush=True)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

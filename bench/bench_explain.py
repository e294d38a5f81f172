"""Explain: analyze + explain + judge now, beside analyze alone before explain existed, on the 114 MB trace.

    python bench/bench_explain.py                        # ~114 MB of JSON: the H200 transformer step repeated
    python bench/bench_explain.py --mb 20 --rounds 2     # a smaller one
    python bench/bench_explain.py --old-ref a4fde0d      # the commit to compare with (default: before explain)

The trace is built once by ``make_large_trace`` (times shifted, ids renumbered). The old side is
that commit checked out into a temporary git worktree. Each round runs one interpreter per side,
old and new interleaved (so a busy host slows both alike); each interpreter loads the trace, warms
up once and times ``--n`` calls, in process CPU time and wall time. The medians are over every
timed call of every round. Target (explain issue): analyze plus the attribution (``measure`` +
``attribute``) no longer than ``analyze`` alone took before explain; the whole of what
``lab.read.here.parse`` runs (``measure`` + ``explain`` + ``judge_trace``) is timed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from make_large_trace import events_for_megabytes, load_source, write_trace  # noqa: E402

OLD_REF = "a4fde0d"  # the commit before lab.explain landed (a42ee29's parent)

# One side's timings, run in its own interpreter with that side's checkout first on sys.path.
_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from lab.trace import load_trace
trace = load_trace(open(sys.argv[2], "rb").read())
n = int(sys.argv[3])
from lab.analysis import analyze
steps = {"analyze": lambda: analyze(trace)}
if sys.argv[4] == "new":
    from lab.explain import explain
    from lab.judge import judge_trace
    from lab.measure import measure

    from lab.explain import attribute

    def _now():
        m = measure(trace)
        judge_trace(trace, m.analysis, explain(m))

    def _attributed():
        attribute(measure(trace))
    steps["measure + attribute"] = _attributed
    steps["measure + explain + judge"] = _now
out = {"events": len(trace.events)}
for name, fn in steps.items():
    fn()
    wall, cpu = [], []
    for _ in range(n):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    out[name] = {"wall": wall, "cpu": cpu}
print(json.dumps(out))
"""


def _side(checkout: Path, trace: Path, n: int, which: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(checkout), str(trace), str(n), which],
                          capture_output=True, text=True, check=True, cwd=checkout,
                          env={**os.environ, "KINETO_LOG_LEVEL": "6"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=114.0)
    ap.add_argument("--n", type=int, default=3, help="timed calls per interpreter")
    ap.add_argument("--rounds", type=int, default=3, help="old/new interpreter pairs, interleaved")
    ap.add_argument("--old-ref", default=OLD_REF)
    args = ap.parse_args(argv)
    doc = load_source(ROOT / "bench" / "data" / "transformer_step_h200.json.gz")
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.old_ref],
                       check=True, capture_output=True)
        try:
            path = write_trace(doc, events_for_megabytes(doc, args.mb), Path(tmp))
            samples: dict[str, dict[str, list[float]]] = {}
            events = 0
            for _ in range(args.rounds):
                for label, checkout, which in (("old", old, "old"), ("new", ROOT, "new")):
                    got = _side(checkout, path, args.n, which)
                    events = got.pop("events")
                    for step, t in got.items():
                        row = samples.setdefault(f"{step} ({label})", {"wall": [], "cpu": []})
                        row["wall"] += t["wall"]
                        row["cpu"] += t["cpu"]
            size = path.stat().st_size
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)
    calls = args.n * args.rounds
    print(f"{events:,} events, {size / 1e6:.1f} MB JSON; old = {args.old_ref}; median of {calls} calls "
          f"({args.rounds} interleaved rounds of {args.n})")
    print("| step | wall (ms) | CPU (ms) |\n| --- | --- | --- |")
    med = {k: (statistics.median(v["wall"]), statistics.median(v["cpu"])) for k, v in samples.items()}
    for name, (wall, cpu) in med.items():
        print(f"| {name} | {wall * 1e3:,.0f} | {cpu * 1e3:,.0f} |")
    for step in ("measure + attribute", "measure + explain + judge"):
        ratio = med[f"{step} (new)"][1] / med["analyze (old)"][1]
        print(f"CPU ratio ({step}, new) / (analyze, old): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

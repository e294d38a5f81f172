"""Record real CPU traces of chosen sizes with torch.profiler, for the ingest and upload benches.

Real recordings, not tiles: every event's timestamps, ids, shapes and Python frames are what
torch.profiler wrote on this machine, so they compress like users' traces do (a tiled trace
gzips ~15x, a recording with Python stacks ~5x). Two programs:

- ``small_ops``: a loop of tiny ops (64x64 matmul, add, relu, mul) under ``record_function``
  steps, ``record_shapes=True``: the "many small ops" kind, ~415 B of JSON per event;
- ``train_stack``: an MLP's training steps (forward, backward, SGD) with ``with_stack=True``
  and ``record_shapes=True``: python_function events beside the ops, as with_stack traces have.

    python bench/record_cpu_traces.py --out /tmp/profiler_lab_bench/real small_ops:10 train_stack:20 small_ops:114

``KIND:MB`` records until the exported JSON is about MB megabytes (the step count is
estimated from a short first recording); writes ``<kind>_<MB>mb.json`` and ``.json.gz``
beside it, and prints one line per file: path, events, bytes. Existing files are kept.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "6")

DEFAULT_OUT = Path("/tmp/profiler_lab_bench/real")


def _small_ops(torch, steps: int) -> None:
    x, w = torch.randn(64, 64), torch.randn(64, 64)
    for s in range(steps):
        with torch.profiler.record_function(f"step_{s}"):
            y = x
            for _ in range(20):
                y = torch.relu(y @ w + 1.0) * 0.5


def _train_stack(torch, steps: int) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256),
                                torch.nn.LayerNorm(256), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 256), torch.randint(0, 10, (32,))
    for s in range(steps):
        with torch.profiler.record_function(f"step_{s}"):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()


PROGRAMS = {"small_ops": (_small_ops, {"record_shapes": True}),
            "train_stack": (_train_stack, {"record_shapes": True, "with_stack": True})}


def record(kind: str, steps: int, path: Path) -> int:
    import torch

    program, options = PROGRAMS[kind]
    program(torch, 2)  # warm-up outside the profile
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **options) as prof:
        program(torch, steps)
    prof.export_chrome_trace(str(path))
    return path.stat().st_size


def make(kind: str, megabytes: float, out: Path) -> Path:
    path = out / f"{kind}_{megabytes:g}mb.json"
    if not path.exists():
        with tempfile.TemporaryDirectory() as tmp:
            probe_steps = 20
            per_step = record(kind, probe_steps, Path(tmp) / "probe.json") / probe_steps
        record(kind, max(1, round(megabytes * 1e6 / per_step)), path)
    gz = path.with_name(path.name + ".gz")
    if not gz.exists():
        gz.write_bytes(gzip.compress(path.read_bytes(), compresslevel=6))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+", help="KIND:MB, KIND one of " + ", ".join(PROGRAMS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for spec in args.traces:
        kind, _, mb = spec.partition(":")
        if kind not in PROGRAMS or not mb:
            parser.error(f"{spec!r}: expected KIND:MB with KIND one of {', '.join(PROGRAMS)}")
        path = make(kind, float(mb), args.out)
        events = len(json.loads(path.read_bytes())["traceEvents"])
        gz = path.with_name(path.name + ".gz")
        print(f"{path}\t{events}\t{path.stat().st_size}\t{gz.stat().st_size}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

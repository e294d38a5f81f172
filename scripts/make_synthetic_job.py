"""A synthetic many-rank job from real rank traces, one straggler planted.

Every rank is a real gloo DDP rank trace of the ground-truth corpus (tests/data/groundtruth/
cpu/gloo_ddp_rank0.json.gz by default), rewritten as rank r of a world of N: its
``distributedInfo`` says so, each event's start is shifted (up to ``--shift-us``) and its times
stretched about the trace's first event by 1 + U(0, ``--jitter``); the planted straggler is
stretched by ``--straggler-stretch`` (1.25: everything it does takes 25 % longer, so each of
its collective calls starts later than every other rank's). Files get tensorboard_trace_handler's
names (``node<k>_<pid>.<time_ns>.pt.trace.json.gz``, 8 ranks a node), one span; the expected
straggler is printed and written to ``expected_straggler.txt`` (not a trace name: never listed).

    python scripts/make_synthetic_job.py OUT --ranks 64 --straggler 37
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "data" / "groundtruth" / "cpu" / "gloo_ddp_rank0.json.gz"
RANKS_PER_NODE = 8


def rewrite(raw: dict, rank: int, world: int, stretch: float, shift_us: float) -> dict:
    """``raw`` as rank ``rank`` of ``world``: times stretched about its first event, then shifted."""
    events = raw["traceEvents"]
    t0 = min(e["ts"] for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") == "X")
    out_events = []
    for e in events:
        e = dict(e)
        if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M":
            e["ts"] = t0 + (e["ts"] - t0) * stretch + shift_us
        if isinstance(e.get("dur"), (int, float)):
            e["dur"] = e["dur"] * stretch
        out_events.append(e)
    info = dict(raw.get("distributedInfo") or {})
    info.update(rank=rank, world_size=world)
    if info.get("pg_config"):
        info["pg_config"] = [dict(pg, pg_size=world, ranks=list(range(world))) for pg in info["pg_config"]]
    out = {}
    for key, value in raw.items():  # Kineto's key order: distributedInfo before traceEvents
        out[key] = info if key == "distributedInfo" else out_events if key == "traceEvents" else value
    return out


def make_job(out: Path, *, ranks: int, straggler: int, seed: int = 0, source: Path = SOURCE,
             jitter: float = 0.02, shift_us: float = 200.0, straggler_stretch: float = 1.25) -> list[Path]:
    """Write the job into ``out``; returns the files, by rank."""
    if not 0 <= straggler < ranks:
        raise ValueError(f"--straggler {straggler} is not a rank of {ranks}")
    raw = json.loads(gzip.decompress(source.read_bytes()))
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    stamp = int(raw.get("baseTimeNanoseconds") or 0) + 10**9
    paths = []
    for rank in range(ranks):
        stretch = straggler_stretch if rank == straggler else 1.0 + rng.uniform(0.0, jitter)
        trace = rewrite(raw, rank, ranks, stretch, rng.uniform(0.0, shift_us))
        path = out / f"node{rank // RANKS_PER_NODE}_{2000 + rank}.{stamp + rank * 1000}.pt.trace.json.gz"
        path.write_bytes(gzip.compress(json.dumps(trace).encode(), compresslevel=6))
        paths.append(path)
    (out / "expected_straggler.txt").write_text(f"{straggler}\n")
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--straggler", type=int, default=37)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--source", type=Path, default=SOURCE, help="the real rank trace every rank is made from")
    p.add_argument("--jitter", type=float, default=0.02, help="other ranks' stretch: 1 + U(0, jitter)")
    p.add_argument("--shift-us", type=float, default=200.0)
    p.add_argument("--straggler-stretch", type=float, default=1.25)
    args = p.parse_args(argv)
    paths = make_job(args.out, ranks=args.ranks, straggler=args.straggler, seed=args.seed, source=args.source,
                     jitter=args.jitter, shift_us=args.shift_us, straggler_stretch=args.straggler_stretch)
    size = sum(x.stat().st_size for x in paths)
    print(f"wrote {len(paths)} ranks ({size / 1e6:.1f} MB) to {args.out}; expected straggler: rank {args.straggler}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

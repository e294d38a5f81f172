"""Bytes that cross the server ↔ reader boundary per page interaction, before and after a
change to what the readers send (they keep parsed traces; the page holds only outlines), in one
run; and the wall time of a view's round trip.

Each side runs in an interpreter of its own on a checkout (``--before TREE``: a worktree of the
branch point; "after": this one), interleaved round by round, with a real ``ReaderPool`` of one
reader doing what the page does: an upload read as ``ui.upload`` reads it, then each interaction
as ``ui.cache.job_result`` sends it — the traces themselves before, their keys after (a side
whose ``ReaderPool.submit`` takes ``keep`` keeps traces; one whose ``ReaderPool`` has
``read_outline`` reads the page's traces as outlines and asks for the Timeline's window).
Interactions:
the TensorBoard view (a view switch: its views come from a reader), the Table's by-shape toggle,
the own-trace questions, compare (the trace against the first one given), opening a lesson (its
check's signals and its questions' answers, on the lesson's recorded traces, read first as the
page's ``ui.cache.load`` reads them; their read is a row of its own), and the Timeline tab (the
whole trace's window) and a move of its window (the middle half): drawn in the server from the
``Parsed`` it holds where the page reads whole traces (no bytes cross; the wall is the server's
own drawing), asked of the reader (``lab.views.queries.timeline_window``) where it reads outlines.

Bytes: the server process's own ``/proc/self/io`` ``rchar`` + ``wchar`` over the interaction —
every byte it sent to or received from its reader through the socket (and any file it wrote
for one: a read's copy of the trace's bytes on disk, ``KeptSources``, which a read's second row
leaves out); nothing else runs in it meanwhile. Wall: the interaction's round trip.

    python bench/bench_job_bytes.py --before /tmp/readers_before --rounds 3 \\
        tests/data/matmul_add_4096_bf16.json.gz bench/data/transformer_step_h200.json.gz BIG.json.gz
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
MB = 1e6
LESSON = "fp32_vs_tf32"  # two recorded H200 traces


def _io() -> int:
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["rchar"]) + int(fields["wchar"])


def side(traces: list[Path]) -> list[dict]:
    """One side's interactions (this interpreter imports the side's ``lab``)."""
    import lab.views as lv
    from lab.core import HostSettings
    from lab.lessons import LESSONS, answer_questions, lesson_signals
    from lab.read import Job, JobInput, JobKind, ReaderPool
    from lab.samples import lesson_samples
    from lab.teach import own_answers

    keeps = "keep" in inspect.signature(ReaderPool.submit).parameters
    outlines = hasattr(ReaderPool, "read_outline")
    rows: list[dict] = []
    pool = ReaderPool(settings=HostSettings.from_env(), readers=1).start(wait=True)

    def measured(trace: str, interaction: str, fn, copied: int = 0):
        """``copied``: of the bytes, the server's copy of the trace written to disk for a reader to
        read again (``KeptSources``), reported again in a row of its own without them."""
        before, start = _io(), time.perf_counter()
        result = fn()
        moved, wall = _io() - before, time.perf_counter() - start
        rows.append({"trace": trace, "interaction": interaction, "bytes": moved, "wall_s": wall})
        if copied:
            rows.append({"trace": trace, "interaction": f"{interaction}: reader ↔ server only (less the copy on disk)",
                         "bytes": moved - copied, "wall_s": wall})
        return result

    def read(data: bytes):
        key = f"{hashlib.blake2b(data, digest_size=16).hexdigest()}:"
        if outlines:
            return pool.read_outline(data, keep=key), key
        parsed = pool.read(data, keep=key) if keeps else pool.read(data)
        return parsed, key

    def job(kind_job, opened):
        if outlines:  # the page holds no traces: the keys alone
            return pool.run_job(kind_job, keys=tuple(k for _, k in opened))
        given = JobInput(traces=tuple(p.trace for p, _ in opened), analyses=tuple(p.analysis for p, _ in opened),
                         findings=tuple(p.findings for p, _ in opened))
        if keeps:
            return pool.run_job(kind_job, given, keys=tuple(k for _, k in opened))
        return pool.run_job(kind_job, given)

    def timeline(opened, fraction: tuple[float, float]):
        loaded, key = opened
        span = max(loaded.analysis.utilization.trace_span_us, 1.0)
        start, end = span * fraction[0], span * fraction[1]
        if outlines:
            return pool.run_job(Job(kind=JobKind.VIEW, code=lv.timeline_window,
                                    args=(("end_us", end), ("start_us", start))), keys=(key,))
        return lv.build_timeline(loaded.trace, start_us=start, end_us=end)  # in the server, from its Parsed

    def interactions(paths: list[Path]) -> None:
        lesson = LESSONS[LESSON]
        samples = lesson_samples(lesson.runs)
        recorded = [s.read_bytes() for s in samples]
        runs = measured(f"lesson {LESSON}", "read its two recordings", lambda: [read(d) for d in recorded],
                        copied=sum(map(len, recorded)) if keeps else 0)
        names = tuple(r.name for r in lesson.runs)

        def open_lesson():
            job(Job(kind=JobKind.SIGNALS, lesson=LESSON, names=names, code=lesson_signals), runs)
            job(Job(kind=JobKind.ANSWERS, lesson=LESSON, names=names, device_kind="cuda", code=answer_questions),
                runs)

        measured(f"lesson {LESSON}", "open a lesson (signals + answers)", open_lesson)
        first = None
        for path in paths:
            data = path.read_bytes()
            opened = measured(path.name, "read (an upload opened)", lambda data=data: read(data),
                              copied=len(data) if keeps else 0)
            del data
            first = first or opened
            measured(path.name, "TensorBoard view", lambda o=opened: job(Job(kind=JobKind.TENSORBOARD), [o]))
            measured(path.name, "by-shape toggle", lambda o=opened: job(Job(kind=JobKind.BY_SHAPE), [o]))
            measured(path.name, "own-trace questions",
                     lambda o=opened: job(Job(kind=JobKind.OWN, names=("yours",), code=own_answers), [o]))
            measured(path.name, "compare with the first trace",
                     lambda o=opened, f=first: job(Job(kind=JobKind.COMPARE), [o, f]))
            measured(path.name, "Timeline tab (whole trace)", lambda o=opened: timeline(o, (0.0, 1.0)))
            measured(path.name, "Timeline window moved (middle half)", lambda o=opened: timeline(o, (0.25, 0.75)))

    try:
        # Once through the lesson and the first trace, not counted: the server reads the files of the
        # modules it imports lazily (rchar) the first time each interaction runs, once per process.
        interactions(traces[:1])
        rows.clear()
        interactions(traces)
    finally:
        pool.shutdown()
    return rows


def sessions(trace: Path, count: int) -> dict:
    """``count`` sessions, each with its own upload open (the trace re-gzipped with its own
    header time: other bytes, another digest) and its TensorBoard view, by-shape table and
    Timeline tab asked for, as ``ui.upload``, ``ui.cache`` and ``ui.views`` do it: the server's
    peak RSS (``ru_maxrss``)."""
    import gzip
    import resource

    import lab.views as lv
    from lab.core import HostSettings
    from lab.read import Job, JobInput, JobKind, ReaderPool

    keeps = "keep" in inspect.signature(ReaderPool.submit).parameters
    outlines = hasattr(ReaderPool, "read_outline")
    raw = gzip.decompress(trace.read_bytes()) if trace.suffix == ".gz" else trace.read_bytes()
    start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    pool = ReaderPool(settings=HostSettings.from_env()).start(wait=True)
    try:
        for n in range(count):
            data = gzip.compress(raw, compresslevel=1, mtime=n)
            digest = hashlib.blake2b(data, digest_size=16).hexdigest()
            key = f"{digest}:"
            if outlines:
                loaded = pool.read_outline(data, keep=key)
            else:
                loaded = pool.read(data, keep=key) if keeps else pool.read(data)
            pool.uploads.put(f"session{n}", digest, loaded)  # what ui.upload._settle keeps
            del data
            span = max(loaded.analysis.utilization.trace_span_us, 1.0)
            if outlines:
                window = Job(kind=JobKind.VIEW, code=lv.timeline_window, args=(("end_us", span), ("start_us", 0.0)))
                for job in (Job(kind=JobKind.TENSORBOARD), Job(kind=JobKind.BY_SHAPE), window):
                    pool.run_job(job, keys=(key,))
            else:
                given = JobInput(traces=(loaded.trace,), analyses=(loaded.analysis,), findings=(loaded.findings,))
                for kind in (JobKind.TENSORBOARD, JobKind.BY_SHAPE):
                    if keeps:
                        pool.run_job(Job(kind=kind), given, keys=(key,))
                    else:
                        pool.run_job(Job(kind=kind), given)
                lv.build_timeline(loaded.trace, start_us=0.0, end_us=span)  # the Timeline tab, drawn in the server
                del given
            del loaded
        held = pool.uploads.stats()
        readers_rss = sum(r.rss_bytes or 0 for r in pool.health().readers)
    finally:
        pool.shutdown()
    return {"sessions": count, "server_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "server_rss_before_mb": start_rss / 1024, "held_uploads": held[0], "held_mb": held[1] / MB,
            "readers_rss_mb": readers_rss / MB}


def table(results: dict[str, list[dict]]) -> str:
    """Medians per (trace, interaction), before against after."""
    def medians(rows, field):
        out: dict[tuple[str, str], list[float]] = {}
        for r in rows:
            out.setdefault((r["trace"], r["interaction"]), []).append(r[field])
        return {k: statistics.median(v) for k, v in out.items()}

    b_bytes, a_bytes = medians(results["before"], "bytes"), medians(results["after"], "bytes")
    b_wall, a_wall = medians(results["before"], "wall_s"), medians(results["after"], "wall_s")
    lines = ["| trace | interaction | before MB | after MB | fewer | before wall s | after wall s |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for k in b_bytes:
        # "—": nothing crossed before (the server drew it from the frames it held), so no ratio
        fewer = f"{b_bytes[k] / a_bytes[k]:.1f}×" if b_bytes[k] and a_bytes.get(k) else "—"
        lines.append(f"| {k[0]} | {k[1]} | {b_bytes[k] / MB:.3f} | {a_bytes[k] / MB:.3f} | {fewer} | "
                     f"{b_wall[k]:.3f} | {a_wall[k]:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--before", type=Path, help="the checkout to measure as 'before' (without it: this tree alone)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--side", type=Path, help=argparse.SUPPRESS)  # a child: measure the lab at this tree
    parser.add_argument("--raw", type=Path, help="write every round's rows here (JSON)")
    parser.add_argument("--sessions", type=int, default=0,
                        help="instead: this many sessions with an upload open (the first trace), peak RSS")
    args = parser.parse_args(argv)
    if args.side is not None:
        sys.path.insert(0, str(args.side))
        found = (sessions(args.traces[0].resolve(), args.sessions) if args.sessions
                 else side([p.resolve() for p in args.traces]))
        print(json.dumps(found))
        return 0
    if args.sessions:
        for n in range(args.rounds):
            for name, tree in {"before": args.before, "after": HERE}.items():
                out = subprocess.run([sys.executable, __file__, "--side", str(tree), "--sessions", str(args.sessions),
                                      str(args.traces[0])], cwd=tree, check=True, capture_output=True, text=True)
                print(f"round {n + 1} {name}: {out.stdout.strip().splitlines()[-1]}")
        return 0
    if args.before is None:  # this tree alone: what crosses per interaction now
        out = subprocess.run([sys.executable, __file__, "--side", str(HERE), *map(str, args.traces)],
                             cwd=HERE, check=True, capture_output=True, text=True)
        print("| trace | interaction | MB | wall s |\n| --- | --- | ---: | ---: |")
        for r in json.loads(out.stdout.strip().splitlines()[-1]):
            print(f"| {r['trace']} | {r['interaction']} | {r['bytes'] / MB:.3f} | {r['wall_s']:.3f} |")
        return 0
    results: dict[str, list[dict]] = {"before": [], "after": []}
    trees = {"before": args.before, "after": HERE}
    for n in range(args.rounds):
        for name, tree in trees.items():  # interleaved: before, after, before, after…
            out = subprocess.run([sys.executable, __file__, "--side", str(tree), *map(str, args.traces)],
                                 cwd=tree, check=True, capture_output=True, text=True)
            rows = json.loads(out.stdout.strip().splitlines()[-1])
            results[name] += [{**r, "round": n} for r in rows]
            print(f"round {n + 1} {name}: done", file=sys.stderr)
    if args.raw is not None:
        args.raw.write_text(json.dumps(results, indent=1))
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

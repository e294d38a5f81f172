"""Bytes that cross the server ↔ reader boundary per page interaction, as the readers work now.

The page holds each trace's ``Parsed`` (``Trace`` DataFrames, ``Analysis``, insights), so a read
sends it back whole, and every later computation on it (a ``lab.read.Job``) sends the traces and
analyses it needs to a reader again and gets the result back (``ReaderPool.submit_job``:
``pack(JobInput)`` one way, ``pack(result)`` the other). This measures those frames exactly as
``lab.pool.frames.pack`` makes them, computing each job's result in this process with
``lab.read.jobs.run_job`` (what the reader runs). The baseline for readers that keep the traces
and take a digest and a query, where each interaction would send a ``Job`` and a digest and get
back only the result.

    python bench/bench_job_bytes.py tests/data/matmul_add_4096_bf16.json.gz /tmp/small_ops_114mb.json.gz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.core import HostSettings  # noqa: E402
from lab.pool import pack  # noqa: E402
from lab.pool.frames import frame_sizes  # noqa: E402
from lab.read import Job, JobInput, JobKind  # noqa: E402
from lab.read.here import parse  # noqa: E402
from lab.read.jobs import run_job  # noqa: E402
from lab.teach import own_answers  # noqa: E402

MB = 1e6


def _size(obj) -> int:
    return sum(frame_sizes(pack(obj)))


def measure(path: Path) -> list[tuple[str, int, int]]:
    """(interaction, bytes to the reader, bytes back) for one trace."""
    parsed = parse(str(path), settings=HostSettings.from_env())
    other = parse(str(path), settings=HostSettings.from_env())  # the compare's B: objects of its own
    # What ui.cache.job_result sends for every job: the traces, their analyses and judged findings.
    one = JobInput(traces=(parsed.trace,), analyses=(parsed.analysis,), findings=(parsed.findings,))
    two = JobInput(traces=(parsed.trace, other.trace), analyses=(parsed.analysis, other.analysis),
                   findings=(parsed.findings, other.findings))
    jobs = (("by-shape toggle", Job(kind=JobKind.BY_SHAPE), one),
            ("TensorBoard tab", Job(kind=JobKind.TENSORBOARD), one),
            ("own-trace questions", Job(kind=JobKind.OWN, names=("yours",), code=own_answers), one),
            ("compare two traces", Job(kind=JobKind.COMPARE), two))
    # Every size before any job runs here: a job fills the analysis's on-demand tables in this
    # process, which the server's copy never gets.
    sent = [_size(job) + _size(given) for _, job, given in jobs]
    rows = [("read (the Parsed sent back)", len(str(path)), _size(parsed))]
    rows += [(label, n, _size(run_job(job, given))) for (label, job, given), n in zip(jobs, sent, strict=True)]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+", type=Path)
    args = parser.parse_args(argv)
    print("| trace | interaction | to the reader (MB) | back (MB) |")
    print("| --- | --- | --- | --- |")
    for path in args.traces:
        for label, sent, back in measure(path):
            print(f"| {path.name} | {label} | {sent / MB:.3f} | {back / MB:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

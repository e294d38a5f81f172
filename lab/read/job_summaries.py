"""A job's ranks read in parallel where they lie, each sending back only its summary.

Every rank of one span is a read of its own: on the reader pool (``ReaderPool.submit(path=…,
rank_of_job=name)``, as many at once as the pool has readers, each under the reader's memory
limit) or, with ``PROFILER_LAB_BACKEND=ray``, as Ray tasks on the cluster (one CPU each; the
files must be on storage every node reads). A read returns the rank's ``RankSummary`` (per-rank
row, collective starts, op totals, per-step cells), never its parsed frames; ``combine_ranks``
makes the job of them here. The ranks a visitor opens in full (the stacked timeline) are read
apart, as single traces.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from lab.core.settings import HostSettings
from lab.read.here import ReadHere, summarize_rank
from lab.read.limits import READER_NICE
from lab.read.pool import ReaderPool
from lab.read.protocol import ReadFailed

__all__ = ["read_rank_summaries", "submit_rank_summaries"]

# A Ray task's memory, as a reader's: what one rank's parse may use (Ray schedules by it).
RAY_TASK_MEMORY_MB = 4096


def submit_rank_summaries(pool: ReaderPool, paths: Sequence[str], *, settings: HostSettings | None = None) -> list:
    """One path read per rank on ``pool`` (tickets, in ``paths``' order); returns at once."""
    return [pool.submit(path=p, settings=settings, label=os.path.basename(p), rank_of_job=os.path.basename(p))
            for p in paths]


def _summarize_path(path: str, settings: HostSettings):
    """In a Ray task: read one rank's trace and return its summary (what a reader would)."""
    # At the readers' niceness: a node that also serves pages keeps them responsive (limits.READER_NICE).
    os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), READER_NICE))
    return summarize_rank(path, settings)


def _ray_summaries(paths: Sequence[str], settings: HostSettings) -> list:
    from lab.pool.ray_cluster import connect

    ray = connect(settings)
    task = ray.remote(num_cpus=1, memory=RAY_TASK_MEMORY_MB * 2**20, max_retries=0)(_summarize_path)
    refs = [task.remote(p, settings) for p in paths]
    try:
        return ray.get(refs)
    except Exception as exc:  # noqa: BLE001 - a task's failure, for the caller in one line
        cause = getattr(exc, "cause", None) or exc
        raise ReadFailed(f"a rank could not be read on the Ray cluster: {type(cause).__name__}: {cause}") from None


def read_rank_summaries(paths: Sequence[str], *, settings: HostSettings,
                        pool: ReaderPool | ReadHere | None = None) -> list:
    """Every rank's ``RankSummary``, in ``paths``' order: Ray tasks when ``settings.backend`` is
    ``ray``, else reads on ``pool`` (a ``ReadHere``: one after the other in this process);
    ``ReadFailed`` names the first rank that failed."""
    if settings.backend == "ray":
        return _ray_summaries(paths, settings)
    if pool is None:
        raise ValueError("the local backend reads on a ReaderPool (or ReadHere): pass pool=")
    if isinstance(pool, ReadHere):
        return [_named(path, pool.read_rank, settings) for path in paths]
    tickets = submit_rank_summaries(pool, paths, settings=settings)
    out = []
    for path, ticket in zip(paths, tickets, strict=True):
        try:
            out.append(ticket.result())
        except ReadFailed as exc:
            for t in tickets:
                t.cancel()
            raise ReadFailed(f"{os.path.basename(path)}: {exc}", kind=exc.kind) from None
    return out


def _named(path: str, read_rank, settings: HostSettings):
    """``read_rank(path)``; a ``ReadFailed`` names the rank's file, as the pool's reads do."""
    try:
        return read_rank(path, settings=settings)
    except ReadFailed as exc:
        raise ReadFailed(f"{os.path.basename(path)}: {exc}", kind=exc.kind) from None

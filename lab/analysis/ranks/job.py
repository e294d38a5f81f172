"""Which rank of which job each trace is, and whether several traces are one job.

A trace's rank, world size and backend come from Kineto's ``distributedInfo`` (torch writes it
when ``torch.distributed`` is initialised: ``rank``, ``world_size``, ``backend``); a trace
without it gets its rank from its file name (``rank0``, ``rank_1``, ``…-rank-2…``,
``worker3`` is not a rank). ``check_job`` refuses traces that cannot be one job (two world
sizes, one rank twice, two backends, a rank it cannot place) with a ``RanksError`` that says
the fix; missing ranks are only a warning. Each trace's offset on the job's one clock comes
from ``baseTimeNanoseconds`` (Kineto's event ``ts`` are µs after it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lab.trace import Trace

__all__ = ["RANK_NAME_PATTERN", "RankInfo", "RanksError", "check_infos", "check_job", "job_offsets_us",
           "rank_from_name",
           "rank_info"]

# "rank0", "rank_1", "job-rank-2.pt.trace.json", "RANK3": "rank", an optional _ or -, digits
# not followed by another digit; "rank" must not end a longer word ("frank2" is no rank).
RANK_NAME_PATTERN = re.compile(r"(?<![a-z])rank[_-]?(\d+)(?!\d)", re.IGNORECASE)


class RanksError(ValueError):
    """The traces are not the ranks of one job; the message says which and what to upload instead."""


@dataclass(frozen=True, kw_only=True)
class RankInfo:
    """One trace's place in its job, and where its clock starts on the job's clock."""

    name: str  # the file name (or a label)
    index: int  # its position among the traces given
    rank: int
    world_size: int | None  # None: only the file name said the rank
    backend: str  # "gloo", "nccl", … ("" when unknown)
    source: str  # "distributedInfo" | "file name"
    base_time_ns: int  # baseTimeNanoseconds (0 when absent): the events' ts are µs after it
    start_ts_us: float  # the trace's first event's ts, as in the file
    has_base_time: bool


def rank_from_name(name: str) -> int | None:
    """The rank a file name (or its path in a .zip) states: the last ``rank<N>`` in it, else None."""
    found = RANK_NAME_PATTERN.findall(name)
    return int(found[-1]) if found else None


def rank_info(trace: Trace, name: str, index: int = 0) -> RankInfo:
    """``trace``'s rank from distributedInfo, else from ``name``; ``RanksError`` if neither says it."""
    info = trace.meta.distributed or {}
    world = info.get("world_size")
    backend = info.get("backend")
    rank, source = trace.meta.rank, "distributedInfo"
    if rank is None:
        rank, source = rank_from_name(name), "file name"
    if rank is None:
        raise RanksError(f"{name} names no rank: it has no distributedInfo (torch.distributed was not initialised "
                         "when it was recorded) and its file name holds no 'rank<N>'. Rename it, e.g. "
                         "trace_rank0.json.gz, or upload it on its own to open it as a single trace.")
    base = trace.meta.base_time_ns
    return RankInfo(name=name, index=index, rank=int(rank), world_size=int(world) if isinstance(world, int) else None,
                    backend=backend if isinstance(backend, str) else "", source=source,
                    base_time_ns=base or 0, start_ts_us=trace.meta.start_ts_us, has_base_time=base is not None)


def check_job(traces: Sequence[Trace], names: Sequence[str]) -> tuple[list[RankInfo], list[str]]:
    """Each trace's ``RankInfo`` (in the order given) and the job's warnings; ``RanksError`` if
    the traces cannot be one job's ranks."""
    if len(traces) != len(names):
        raise ValueError(f"{len(traces)} traces but {len(names)} names")
    if len(traces) < 2:
        raise RanksError("reading ranks side by side needs at least two traces of one job; a single trace opens "
                         "as itself.")
    return check_infos([rank_info(t, n, i) for i, (t, n) in enumerate(zip(traces, names, strict=True))])


def check_infos(infos: Sequence[RankInfo]) -> tuple[list[RankInfo], list[str]]:
    """``check_job`` on the traces' ``RankInfo`` (each read where its trace is: ``ranks.summary``)."""
    if len(infos) < 2:
        raise RanksError("reading ranks side by side needs at least two traces of one job; a single trace opens "
                         "as itself.")
    infos = list(infos)
    worlds = {i.world_size for i in infos if i.world_size is not None}
    if len(worlds) > 1:
        said = ", ".join(f"{i.name}: {i.world_size}" for i in infos if i.world_size is not None)
        raise RanksError(f"these traces come from different jobs: their world sizes differ ({said}). Open the "
                         "traces of one run together (one per rank).")
    backends = {i.backend for i in infos if i.backend}
    if len(backends) > 1:
        said = ", ".join(f"{i.name}: {i.backend}" for i in infos if i.backend)
        raise RanksError(f"these traces come from different jobs: their backends differ ({said}). Open the "
                         "traces of one run together (one per rank).")
    by_rank: dict[int, list[str]] = {}
    for i in infos:
        by_rank.setdefault(i.rank, []).append(i.name)
    twice = {r: n for r, n in by_rank.items() if len(n) > 1}
    if twice:
        r, files = min(twice.items())
        raise RanksError(f"rank {r} appears {len(files)} times ({', '.join(files)}): these are not one job's ranks "
                         "(two runs, or the same file twice). Open one trace per rank, all from the same run.")
    world = worlds.pop() if worlds else max(by_rank) + 1
    beyond = sorted(r for r in by_rank if r >= world)
    if beyond:
        raise RanksError(f"rank {beyond[0]} ({by_rank[beyond[0]][0]}) is outside the job's world size of {world}: "
                         "it comes from another job. Open the traces of one run together.")
    warnings = []
    if not all(i.has_base_time for i in infos):
        # Without every base time, the events' own timestamps are the only clock the traces share.
        infos = [replace(i, base_time_ns=0) for i in infos]
        warnings.append("some traces have no baseTimeNanoseconds: they are aligned on their event timestamps alone, "
                        "which only agree when every rank ran on one host.")
    missing = sorted(set(range(world)) - set(by_rank))
    if missing:
        warnings.append(f"ranks {', '.join(map(str, missing))} of the job's {world} are missing: the straggler and "
                        f"imbalance figures cover ranks {', '.join(map(str, sorted(by_rank)))} only.")
    return infos, warnings


def job_offsets_us(infos: Sequence[RankInfo]) -> list[float]:
    """Each trace's first event on the job's clock, in µs after the earliest trace's first event.

    Differences first, then sums: base + ts is ~1.8e15 µs, where a float64 keeps only 0.25 µs.
    """
    rel = [(i.base_time_ns - infos[0].base_time_ns) / 1000.0 + (i.start_ts_us - infos[0].start_ts_us) for i in infos]
    return [r - min(rel) for r in rel]

"""The host's trace directories as the TensorBoard plugin listed them: runs, workers, spans.

A **run** is a directory (a root or one below it, ``MAX_DEPTH`` deep) holding traces; its name
is its path under the root. A **worker** is a writer of traces (tensorboard_trace_handler's
``worker_name``, one per rank). A **span** is one export of every worker: the n-th file of each
worker, in time order (each schedule cycle exports once per worker), as tb-plugin's span
chooser had it; a span of two or more workers is one job's ranks. Runs, and spans within a
run, come newest first. Files that are not traces (``names``: a name other than ``.json`` /
``.json.gz``, or a JSON that is no Chrome trace, e.g. a run's ``facts.json``) are left out of the
run and named in its ``skipped``, so that whoever reads the run can say what was left. Listing
costs a ``scandir`` and a ``stat`` per file; what a file holds
(rank, world size, steps: ``meta``) is read once per (path, mtime, size).

Symlinks are followed only where they stay inside their root (``safe.inside``); a directory
that is missing is listed as such (tensorboard_trace_handler creates it at the first export).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass

from lab.tracedir.meta import FileMeta, MetaCache
from lab.tracedir.names import parse_trace_name
from lab.tracedir.safe import inside

__all__ = ["MAX_DEPTH", "MAX_FILES", "JobFiles", "Run", "Span", "TraceFile", "file_rows", "job_files", "job_paths",
           "list_runs", "run_label", "span_label"]

MAX_DEPTH = 3  # root/run/sub/sub: deeper folders are not runs of this root
MAX_FILES = 20_000  # per root: a listing stays a fraction of a second
MB = 1e6


@dataclass(frozen=True)
class TraceFile:
    root: int  # index into the host's directories
    relative: str  # path under the root, "/"-separated: what a pick names
    name: str
    worker: str
    time_ns: int
    from_handler: bool
    size_bytes: int
    mtime_ns: int
    meta: FileMeta

    @property
    def key(self) -> str:
        return f"{self.root}:{self.relative}"


@dataclass(frozen=True)
class Span:
    index: int  # 0 = each worker's first export
    files: tuple[TraceFile, ...]  # one per worker, by rank when known, else by worker name
    time_ns: int  # its earliest export

    @property
    def is_job(self) -> bool:
        return len(self.files) > 1

    @property
    def world_size(self) -> int | None:
        sizes = {f.meta.world_size for f in self.files if f.meta.world_size is not None}
        return sizes.pop() if len(sizes) == 1 else None


@dataclass(frozen=True)
class Run:
    root: int
    name: str  # its path under the root ("." for the root itself)
    workers: tuple[str, ...]
    spans: tuple[Span, ...]  # newest first
    files: tuple[TraceFile, ...]  # newest first
    skipped: tuple[str, ...] = ()  # its files that are not traces (relative paths, by name), hidden ones aside

    @property
    def key(self) -> str:
        return f"{self.root}:{self.name}"

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)

    @property
    def newest_ns(self) -> int:
        return max(f.time_ns for f in self.files)


def _scan(root_index: int, root: str, cache: MetaCache) -> tuple[list[TraceFile], list[str]]:
    """The traces under ``root`` and the other files beside them (relative paths; hidden ones not named)."""
    out: list[TraceFile] = []
    skipped: list[str] = []
    pending = [("", 0)]
    while pending and len(out) < MAX_FILES:
        rel_dir, depth = pending.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel_dir) if rel_dir else root))
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            real = os.path.realpath(entry.path)
            if not inside(real, root):  # a symlink out of the directory: not ours to list
                continue
            try:
                st = os.stat(real)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth < MAX_DEPTH and not entry.is_symlink() and not entry.name.startswith("."):
                    pending.append((rel, depth + 1))
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            name = parse_trace_name(entry.name, st.st_mtime_ns)
            meta = cache.get(real, st.st_mtime_ns, st.st_size) if name is not None else None
            if name is None or meta is None or not meta.is_trace:
                if not entry.name.startswith("."):
                    skipped.append(rel)
                continue
            out.append(TraceFile(root=root_index, relative=rel, name=entry.name, worker=name.worker,
                                 time_ns=name.time_ns, from_handler=name.from_handler, size_bytes=st.st_size,
                                 mtime_ns=st.st_mtime_ns, meta=meta))
    return out, skipped


def _worker_order(f: TraceFile) -> tuple:
    return (f.meta.rank is None, f.meta.rank if f.meta.rank is not None else 0, f.worker)


def _spans(files: list[TraceFile]) -> tuple[Span, ...]:
    by_worker: dict[str, list[TraceFile]] = {}
    for f in sorted(files, key=lambda f: f.time_ns):
        by_worker.setdefault(f.worker, []).append(f)
    count = max(len(v) for v in by_worker.values())
    spans = []
    for i in range(count):
        members = sorted((v[i] for v in by_worker.values() if i < len(v)), key=_worker_order)
        spans.append(Span(index=i, files=tuple(members), time_ns=min(f.time_ns for f in members)))
    return tuple(reversed(spans))


def list_runs(dirs: Sequence[str], cache: MetaCache) -> list[Run]:
    """Every run under the host's ``dirs``, newest first (see the module doc)."""
    runs = []
    for index, directory in enumerate(dirs):
        root = os.path.realpath(directory)
        by_dir: dict[str, list[TraceFile]] = {}
        found, skipped = _scan(index, root, cache)
        for f in found:
            by_dir.setdefault(f.relative.rpartition("/")[0] or ".", []).append(f)
        for name, files in by_dir.items():
            workers = tuple(dict.fromkeys(f.worker for f in sorted(files, key=_worker_order)))
            others = tuple(sorted(p for p in skipped if (p.rpartition("/")[0] or ".") == name))
            runs.append(Run(root=index, name=name, workers=workers, spans=_spans(files),
                            files=tuple(sorted(files, key=lambda f: -f.time_ns)), skipped=others))
    return sorted(runs, key=lambda r: -r.newest_ns)


@dataclass(frozen=True)
class JobFiles:
    """One span of a directory's run: its traces' paths, and the directory's files that are not traces."""

    paths: tuple[str, ...]
    skipped: tuple[str, ...]  # names under the directory (Run.skipped)


def job_paths(directory: str, span: int | None = None, cache: MetaCache | None = None) -> list[str]:
    """The files of one span of the run at ``directory`` (``job_files``' paths)."""
    return list(job_files(directory, span, cache).paths)


def job_files(directory: str, span: int | None = None, cache: MetaCache | None = None) -> JobFiles:
    """The files of one span of the run at ``directory`` (the newest, or span number ``span``):
    what ``python -m lab ranks DIR`` reads. ``ValueError`` with the fix when there is none."""
    runs = [r for r in list_runs([directory], cache or MetaCache()) if r.name == "."]
    if not runs:
        below = sorted(r.name for r in list_runs([directory], cache or MetaCache()))
        hint = f"; its runs: {', '.join(below[:8])} (name one: {directory}/{below[0]})" if below else ""
        raise ValueError(f"{directory} holds no traces (.json or .json.gz) of its own{hint}")
    spans = {s.index: s for s in runs[0].spans}
    chosen = runs[0].spans[0] if span is None else spans.get(span)
    if chosen is None:
        raise ValueError(f"{directory} has spans 0..{len(spans) - 1}; --span {span} is not one of them")
    root = os.path.realpath(directory)
    return JobFiles(paths=tuple(os.path.join(root, *f.relative.split("/")) for f in chosen.files),
                    skipped=runs[0].skipped)


def _clock(time_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time_ns / 1e9))


def run_label(run: Run) -> str:
    """One line per run, as the page's run chooser shows it."""
    return (f"{run.name} · {len(run.workers)} worker{'s' * (len(run.workers) != 1)} · {len(run.spans)} "
            f"span{'s' * (len(run.spans) != 1)} · {run.size_bytes / MB:,.1f} MB · newest {_clock(run.newest_ns)}")


def span_label(span: Span) -> str:
    world = f", world size {span.world_size}" if span.world_size else ""
    what = f"{len(span.files)} workers{world}" if span.is_job else f"1 worker ({span.files[0].worker})"
    return f"span {span.index} · {what} · {_clock(span.time_ns)}"


def file_rows(run: Run) -> list[dict]:
    """The run's files, newest span first and by rank within it: what the page's table shows."""
    span_of = {f.relative: s.index for s in run.spans for f in s.files}
    order = [f for s in run.spans for f in s.files]  # newest span first, each by rank
    return [{"span": span_of[f.relative], "worker": f.worker, "rank": f.meta.rank, "world_size": f.meta.world_size,
             "steps": f.meta.steps, "size_mb": round(f.size_bytes / MB, 2), "written": _clock(f.time_ns),
             "file": f.relative.rpartition("/")[2]} for f in order]

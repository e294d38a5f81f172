"""Which files in a trace directory are traces, and what their names say.

``torch.profiler.tensorboard_trace_handler(dir, worker_name=None, use_gzip=False)`` writes
``f"{worker_name}.{time.time_ns()}.pt.trace.json"`` (+ ``.gz`` with ``use_gzip``), the worker
defaulting to ``f"{socket.gethostname()}_{os.getpid()}"`` (torch/profiler/profiler.py, read
on torch 2.13): one file per worker per schedule cycle, the nanosecond stamp taken at export.
Other Chrome traces (``export_chrome_trace("rank0.json.gz")``) count too: their worker is the
name without its suffix and their time the file's mtime. Anything else is not a trace; nor is a
``.json`` whose head shows it is some other JSON (``holds_trace``: a run's ``facts.json``, a
config): a Chrome trace is an object with a ``traceEvents`` list or a bare list of events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["HANDLER_NAME", "TRACE_MARK", "TRACE_SUFFIXES", "TraceName", "holds_trace", "is_trace_name",
           "parse_trace_name"]

# worker . time_ns . pt.trace.json [.gz]; the worker may itself hold dots (a host name).
HANDLER_NAME = re.compile(r"^(?P<worker>.+)\.(?P<time_ns>\d+)\.pt\.trace\.json(?P<gz>\.gz)?$")
TRACE_SUFFIXES = (".json.gz", ".json")
TRACE_MARK = b'"traceEvents"'  # the key every Chrome trace object holds


@dataclass(frozen=True)
class TraceName:
    worker: str
    time_ns: int  # tensorboard_trace_handler's stamp, else the file's mtime
    from_handler: bool  # the name is tensorboard_trace_handler's


def is_trace_name(name: str) -> bool:
    """A name a trace directory lists: ``.json`` or ``.json.gz``, not hidden."""
    return not name.startswith(".") and name.endswith(TRACE_SUFFIXES)


def holds_trace(head: bytes, *, whole: bool) -> bool:
    """Whether a file whose (inflated) start is ``head`` may be a trace: it names ``traceEvents``,
    or is a bare list of events, or was not read to its end (``whole`` False: undecided, kept)."""
    return TRACE_MARK in head or head.lstrip()[:1] == b"[" or not whole


def parse_trace_name(name: str, mtime_ns: int) -> TraceName | None:
    """The worker and time a trace's file name gives (None: not a trace's name)."""
    if not is_trace_name(name):
        return None
    found = HANDLER_NAME.match(name)
    if found:
        return TraceName(worker=found["worker"], time_ns=int(found["time_ns"]), from_handler=True)
    stem = name[: -len(next(s for s in TRACE_SUFFIXES if name.endswith(s)))]
    stem = stem.removesuffix(".pt.trace")
    return TraceName(worker=stem, time_ns=mtime_ns, from_handler=False)

"""Trace directories on the server: where torch.profiler writes, listed for visitors.

``list_runs`` (``listing``) lists the host's directories as the TensorBoard plugin did: runs,
workers, spans; ``names`` says which files are traces and what tensorboard_trace_handler's names
hold; ``meta`` reads what a file is (rank, world size, steps) cheaply and caches it;
``safe.resolve`` turns a visitor's pick back into a path, refusing anything not listed. Only
the host chooses directories (``HostSettings.trace_dirs``); the readers open the files.
"""

from lab.tracedir.listing import (
    MAX_DEPTH,
    JobFiles,
    Run,
    Span,
    TraceFile,
    file_rows,
    job_files,
    job_paths,
    list_runs,
    run_label,
    span_label,
)
from lab.tracedir.meta import FileMeta, MetaCache, read_meta
from lab.tracedir.names import HANDLER_NAME, TraceName, is_trace_name, parse_trace_name
from lab.tracedir.safe import TraceDirError, inside, resolve

__all__ = [
    "HANDLER_NAME", "MAX_DEPTH", "FileMeta", "JobFiles", "MetaCache", "Run", "Span", "TraceDirError", "TraceFile",
    "TraceName", "file_rows", "inside", "is_trace_name", "job_files", "job_paths", "list_runs", "parse_trace_name",
    "read_meta", "resolve", "run_label", "span_label",
]  # fmt: skip

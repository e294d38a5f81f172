"""Stage 2 of the pipeline: a Chrome trace (a fresh run's export or an upload) → ``Trace``.

``load_trace`` is the one entry; ``Trace.events`` / ``Trace.flows`` are documented in
``lab/trace/load.py``.
"""

from lab.trace.load import Trace, TraceError, TraceMeta, load_trace

__all__ = ["Trace", "TraceError", "TraceMeta", "load_trace"]

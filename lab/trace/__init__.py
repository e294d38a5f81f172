"""Stage 2 of the pipeline: a Chrome trace (a fresh run's export or an upload) → ``Trace``.

``load_trace`` is the one entry; ``Trace.events`` / ``Trace.flows`` / ``Trace.memory`` are
documented in ``lab/trace/model.py``. Modules, in pipeline order: ``decode`` (bytes / gzip →
JSON → records), ``records`` (the one record schema and its checks), ``columns`` (records →
arrays), ``lanes`` (lanes and metadata), ``flows`` (launch ↔ GPU pairs), ``memory``
(profile_memory's records), ``load`` (``load_trace``); ``facts`` (``TraceFacts``: what a trace
says of itself without its frames).
"""

from lab.trace.facts import TraceFacts, category_counts, profiler_lanes, trace_facts
from lab.trace.load import load_trace
from lab.trace.model import Trace, TraceError, TraceMeta

__all__ = ["Trace", "TraceError", "TraceFacts", "TraceMeta", "category_counts", "load_trace", "profiler_lanes",
           "trace_facts"]

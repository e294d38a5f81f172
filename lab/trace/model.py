"""What ``load_trace`` returns: ``Trace`` (events, flows, metadata), ``TraceMeta``, ``TraceError``.

The single source of truth for every view: a fresh run's exported trace and a user's upload
go through ``load_trace`` alike.

``Trace.events`` — one row per complete (``ph == "X"``) event, sorted by (lane_order, ts_us):

=====================  ========  ===========================================================
column                 dtype     meaning
=====================  ========  ===========================================================
name                   category  event name (op, kernel, annotation)
cat                    category  Kineto category (cpu_op, kernel, cuda_runtime, ...; "" if none)
pid, tid               category  as in the trace, as strings
lane                   category  readable row, "CPU thread 417 (python3)" / "GPU 0 stream 7"
lane_kind              category  "cpu" or "gpu"
lane_order             int32     sort key of the lane (CPU threads first, then GPU streams)
ts_us                  float64   start, µs since the trace's first event
dur_us                 float64   duration, µs (≥ 0)
depth                  int16     nesting depth within the lane (0 = outermost)
correlation            int64     CUDA correlation id, -1 if none
external_id            int64     "External id" (links GPU work to its CPU op), -1 if none
device                 int16     GPU index, -1 for CPU events
stream                 int32     CUDA stream, -1 for CPU events
grid, block            category  "[2, 66, 1]" style text, "" if none
registers_per_thread   float64   NaN if none
shared_memory_bytes    float64   NaN if none
blocks_per_sm          float64   NaN if none
warps_per_sm           float64   NaN if none
occupancy_pct          float64   "est. achieved occupancy %", NaN if none
input_dims             category  "[[1024, 1024], [1024, 1024]]" style text, "" if none
input_type             category  "['float', 'float']" style text, "" if none
input_strides          category  "[[1024, 1], [1, 1024]]" style text ("Input Strides"), "" if none
concrete_inputs        category  "['', '', '[1, 1]']" style text ("Concrete Inputs"), "" if none
copy_bytes             float64   bytes of a gpu_memcpy / gpu_memset ("bytes"), NaN if none
=====================  ========  ===========================================================

``Trace.collective_args`` — one row per event that carries a collective's metadata
(record_param_comms's args, on that CPU op and, written by Kineto, on NCCL kernels): ``row``
(int64, its position in ``events``) and, as text ("" when absent), ``collective`` ("Collective
name": "allreduce", …), ``collective_dtype`` ("dtype"), ``in_msg_nelems``, ``out_msg_nelems``,
``group_size``, ``process_group`` ("Process Group Name") and ``collective_seq`` ("Seq"). Kept
apart from ``events``: a handful of events hold them, and every copy of ``events`` would carry
seven more columns.

``Trace.flows`` — one row per CPU launch ↔ GPU activity pair:
``correlation`` (int64), ``launch_row`` and ``gpu_row`` (int64 positions in ``events``),
``delay_us`` (GPU start − launch start).

``Trace.memory`` — one row per ``[memory]`` instant (``profile_memory=True``: one per allocator
allocation or free), sorted by time (file order within a tie); empty without profile_memory:

=====================  ========  ===========================================================
column                 dtype     meaning
=====================  ========  ===========================================================
ts_us                  float64   µs since the trace's first event (the clock of ``events``)
bytes                  int64     "Bytes": > 0 allocated, < 0 freed
addr                   int64     "Addr" of the block, -1 if none
total_allocated_bytes  int64     "Total Allocated" on that device right after this record
total_reserved_bytes   int64     "Total Reserved" (the caching allocator's segments)
device_type            category  "cpu", "cuda", … (``lab.vocab.MEMORY_DEVICE_TYPES``)
device_id              int16     "Device Id" (-1 for the CPU in Kineto's records)
lane_order             int32     the allocating thread's lane in ``events``, -1 if it has none
=====================  ========  ===========================================================

``Trace.out_of_memory`` — one row per ``[OutOfMemory]`` instant (an allocation the allocator
could not satisfy; the program usually died, or caught ``torch.cuda.OutOfMemoryError``), the
same columns: ``bytes`` is the size asked for, the totals are the device's at that moment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["COLLECTIVE_ARG_COLUMNS", "EVENT_COLUMNS", "MEMORY_COLUMNS", "Trace", "TraceError", "TraceMeta",
           "empty_memory"]

EVENT_COLUMNS = (
    "name", "cat", "pid", "tid", "lane", "lane_kind", "lane_order", "ts_us", "dur_us", "depth",
    "correlation", "external_id", "device", "stream", "grid", "block", "registers_per_thread",
    "shared_memory_bytes", "blocks_per_sm", "warps_per_sm", "occupancy_pct", "input_dims",
    "input_type", "input_strides", "concrete_inputs", "copy_bytes",
)  # fmt: skip
COLLECTIVE_ARG_COLUMNS = ("collective", "collective_dtype", "in_msg_nelems", "out_msg_nelems", "group_size",
                          "process_group", "collective_seq")  # fmt: skip

MEMORY_COLUMNS = ("ts_us", "bytes", "addr", "total_allocated_bytes", "total_reserved_bytes", "device_type",
                  "device_id", "lane_order")
_MEMORY_DTYPES = {"ts_us": np.float64, "bytes": np.int64, "addr": np.int64, "total_allocated_bytes": np.int64,
                  "total_reserved_bytes": np.int64, "device_id": np.int16, "lane_order": np.int32}


def empty_memory() -> pd.DataFrame:
    """``Trace.memory`` of a trace without profile_memory: no rows, the same columns."""
    cols = {c: np.zeros(0, dtype=t) for c, t in _MEMORY_DTYPES.items()}
    cols["device_type"] = pd.Categorical([], categories=pd.Index([], dtype=object))
    return pd.DataFrame(cols, columns=list(MEMORY_COLUMNS))


class TraceError(ValueError):
    """The input is not a trace the lab can read; the message says what is wrong and what to do."""


@dataclass(frozen=True)
class TraceMeta:
    device_properties: tuple[dict, ...] = ()
    base_time_ns: int | None = None
    schema_version: int | None = None
    trace_name: str = ""
    cuda_driver_version: int | None = None
    cuda_runtime_version: int | None = None
    cupti_version: int | None = None
    record_shapes: bool | None = None
    with_flops: bool | None = None
    profile_memory: bool | None = None
    with_stack: bool | None = None
    distributed: dict | None = None
    rank: int | None = None
    start_ts_us: float = 0.0  # absolute ts of the first event, as in the file
    span_us: float = 0.0  # last event end − first event start
    process_names: dict = field(default_factory=dict)  # pid (str) -> name
    thread_names: dict = field(default_factory=dict)  # (pid, tid) strings -> name


@dataclass(frozen=True)
class Trace:
    events: pd.DataFrame
    flows: pd.DataFrame
    meta: TraceMeta
    skipped_events: int = 0  # malformed events dropped while loading
    source_bytes: int = 0  # size of the JSON text
    memory: pd.DataFrame = field(default_factory=empty_memory)  # profile_memory's records
    # profile_memory's "[OutOfMemory]" records, the memory columns ("bytes" = the size asked for)
    out_of_memory: pd.DataFrame = field(default_factory=empty_memory)
    collective_args: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        {"row": np.zeros(0, dtype=np.int64), **{c: np.array([], dtype=object) for c in COLLECTIVE_ARG_COLUMNS}}))

    @property
    def has_memory(self) -> bool:
        """The trace holds profile_memory's allocator records."""
        return len(self.memory) > 0

    @property
    def has_gpu(self) -> bool:
        return bool((self.events["lane_kind"] == "gpu").any())

    @property
    def event_count(self) -> int:
        return len(self.events)

    @property
    def has_python(self) -> bool:
        """The trace holds with_stack's Python frames (``python_function`` events)."""
        return bool((self.events["cat"] == "python_function").any())

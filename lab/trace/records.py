"""The one event record schema (msgspec Structs) and the checks that fill it from any JSON.

Every event becomes an ``Event`` (its args an ``Args``), however it was read:

- typed decoding (``LIST_DECODER`` / ``EVENT_DECODER``) validates while it parses: the fast
  path, taken by every event of a well-formed trace;
- ``checked`` turns Python objects (events typed decoding refused, or a whole document only
  the stdlib parser reads) into the same Structs, keeping what is usable and counting what is
  not. It is the one validate-and-count loop.

Text args (grid, block, Input Dims, Input type, Input Strides, Concrete Inputs) stay raw JSON (``msgspec.Raw``) on both
routes: they are decoded and formatted once per distinct value, not once per event
(``columns.text_codes``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any

import msgspec

from lab.trace.values import (
    INT64_MAX,
    INT64_MIN,
    finite,
    id_value,
    int_or_none,
    short_repr,
)
from lab.vocab import FLOW_CAT, MEMORY_EVENT_NAME, OOM_EVENT_NAME

__all__ = [
    "ARG_KEYS", "COLLECTIVE_ARGS", "EMPTY_ARGS", "EVENT_DECODER", "FLOAT_ARGS", "INT_ARGS", "LIST_DECODER",
    "MEMORY_ARGS", "RAW_DOC_DECODER", "RAW_LIST_DECODER", "TEXT_ARGS", "Args", "Event", "RawDoc", "checked",
    "typed_or_python",
]  # fmt: skip

ARG_KEYS = {  # attribute -> key in the event's "args"
    "correlation": "correlation",
    "external_id": "External id",
    "device": "device",
    "stream": "stream",
    "grid": "grid",
    "block": "block",
    "registers": "registers per thread",
    "shared_memory": "shared memory",
    "blocks_per_sm": "blocks per SM",
    "warps_per_sm": "warps per SM",
    "occupancy": "est. achieved occupancy %",
    "input_dims": "Input Dims",
    "input_type": "Input type",
    "input_strides": "Input Strides",  # record_shapes' strides per input, for replaying an op's layout
    "concrete_inputs": "Concrete Inputs",  # conv2d stride/padding/… for torch's FLOP formulas
    "copy_bytes": "bytes",  # gpu_memcpy / gpu_memset size
    # A collective's metadata, as torch's record_param_comms writes it on the CPU op and Kineto
    # copies it onto NCCL kernels (torch/csrc/profiler/util.h: kCommsName, kDtype, kInMsgNelems,
    # kOutMsgNelems, kGroupSize, kProcessGroupName, kSeqNum)
    "coll_name": "Collective name",
    "coll_dtype": "dtype",
    "coll_in_nelems": "In msg nelems",
    "coll_out_nelems": "Out msg nelems",
    "coll_group_size": "Group size",
    "coll_group": "Process Group Name",
    "coll_seq": "Seq",
    "name": "name",  # metadata events: process/thread name
    "labels": "labels",  # metadata events: process label ("GPU 0", "CPU")
    # profile_memory's "[memory]" instants (c10's reportMemoryUsage, written by Kineto)
    "mem_bytes": "Bytes",  # > 0 allocated, < 0 freed
    "mem_addr": "Addr",
    "mem_allocated": "Total Allocated",  # the allocator's totals right after this record
    "mem_reserved": "Total Reserved",
    "mem_device_type": "Device Type",  # c10::DeviceType: 0 CPU, 1 CUDA (lab.vocab.MEMORY_DEVICE_TYPES)
    "mem_device_id": "Device Id",
}
INT_ARGS = ("correlation", "external_id", "device", "stream")
FLOAT_ARGS = ("registers", "shared_memory", "blocks_per_sm", "warps_per_sm", "occupancy", "copy_bytes")
# Read as floats (NaN when absent), like FLOAT_ARGS: integers up to 2**53 (8 PiB, and every
# 48-bit address) are exact, and a record missing one is told apart from a 0.
MEMORY_ARGS = ("mem_bytes", "mem_addr", "mem_allocated", "mem_reserved", "mem_device_type", "mem_device_id")
TEXT_ARGS = ("grid", "block", "input_dims", "input_type", "input_strides", "concrete_inputs")
# Read as raw JSON like TEXT_ARGS, but kept only for the events that carry a "Collective name"
# (``Trace.collective_args``, as text: numbers as written, "4160"): a batch without one costs a
# single pass of any(), and ``events`` gets no column for them.
COLLECTIVE_ARGS = ("coll_name", "coll_dtype", "coll_in_nelems", "coll_out_nelems", "coll_group_size", "coll_group",
                   "coll_seq")
_NAN = float("nan")
_NO_TEXT = msgspec.Raw(b"")

# Ids outside int64 fail validation here and send their batch to per-event decoding.
_I64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]


# gc=False: these hold no cycles, and untracked objects keep the cyclic GC from walking
# millions of events again and again while a large trace loads.
class Args(msgspec.Struct, rename=ARG_KEYS, gc=False):
    correlation: _I64 = -1
    external_id: _I64 = -1
    device: _I64 = -1
    stream: _I64 = -1
    # Text args stay raw JSON: decoded and formatted once per distinct value, not per event.
    grid: msgspec.Raw = _NO_TEXT
    block: msgspec.Raw = _NO_TEXT
    registers: float = _NAN
    shared_memory: float = _NAN
    blocks_per_sm: float = _NAN
    warps_per_sm: float = _NAN
    occupancy: float = _NAN
    copy_bytes: float = _NAN
    input_dims: msgspec.Raw = _NO_TEXT
    input_type: msgspec.Raw = _NO_TEXT
    input_strides: msgspec.Raw = _NO_TEXT
    concrete_inputs: msgspec.Raw = _NO_TEXT
    coll_name: msgspec.Raw = _NO_TEXT
    coll_dtype: msgspec.Raw = _NO_TEXT
    coll_in_nelems: msgspec.Raw = _NO_TEXT
    coll_out_nelems: msgspec.Raw = _NO_TEXT
    coll_group_size: msgspec.Raw = _NO_TEXT
    coll_group: msgspec.Raw = _NO_TEXT
    coll_seq: msgspec.Raw = _NO_TEXT
    name: Any = None
    labels: Any = None
    mem_bytes: float = _NAN
    mem_addr: float = _NAN
    mem_allocated: float = _NAN
    mem_reserved: float = _NAN
    mem_device_type: float = _NAN
    mem_device_id: float = _NAN


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    name: str | None = None
    cat: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    id: int | str | None = None
    args: Args | None = None


class RawDoc(msgspec.Struct):
    # Events stay raw JSON here and are decoded in batches (decode.typed_batches).
    traceEvents: list[msgspec.Raw] | msgspec.UnsetType = msgspec.UNSET
    deviceProperties: Any = None
    baseTimeNanoseconds: Any = None
    schemaVersion: Any = None
    traceName: Any = None
    cuda_driver_version: Any = None
    cuda_runtime_version: Any = None
    cupti_version: Any = None
    record_shapes: Any = None
    with_flops: Any = None
    profile_memory: Any = None
    with_stack: Any = None
    distributedInfo: Any = None


# The same document with its events typed in the same parse (decode's one-pass route for
# traces up to decode._ONE_PASS_MAX_BYTES).
TypedDoc = msgspec.defstruct(
    "TypedDoc", [("traceEvents", list[Event] | msgspec.UnsetType, msgspec.UNSET)]
    + [(f, Any, None) for f in RawDoc.__struct_fields__ if f != "traceEvents"],
)

RAW_DOC_DECODER = msgspec.json.Decoder(RawDoc)
TYPED_DOC_DECODER = msgspec.json.Decoder(TypedDoc)
RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
LIST_DECODER = msgspec.json.Decoder(list[Event])
EVENT_DECODER = msgspec.json.Decoder(Event)
EMPTY_ARGS = Args()  # stands in for a missing args object

_IGNORED = object()  # events of phases the lab does not use: neither kept nor counted as bad


def typed_or_python(raw: msgspec.Raw):
    """One raw event → a typed ``Event``; else (typed decoding refused it) its Python object
    for ``checked``; else None (unreadable, counted as malformed)."""
    try:
        return EVENT_DECODER.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    except RecursionError:
        return None
    try:
        return json.loads(bytes(raw))  # stdlib: also reads NaN and numbers beyond float range
    except (ValueError, RecursionError):
        return None


def checked(items: Iterable) -> tuple[list[Event], int]:
    """Typed records pass as they are; anything else goes through ``_validate``. Returns the
    records, in input order, and the number of items dropped as malformed."""
    records, skipped = [], 0
    for item in items:
        rec = item if type(item) is Event else _validate(item)
        if rec is None:
            skipped += 1
        elif rec is not _IGNORED:
            records.append(rec)
    return records, skipped


def _validate(obj):
    """One generic event → Event, _IGNORED, or None (malformed: counted in skipped_events)."""
    if not isinstance(obj, dict):
        return None
    ph = obj.get("ph")
    if ph == "i" and obj.get("name") in (MEMORY_EVENT_NAME, OOM_EVENT_NAME):
        return _memory_record(obj)
    if ph not in ("X", "M", "s", "f"):
        return _IGNORED if isinstance(ph, str) else None
    if ph in ("s", "f") and obj.get("cat") != FLOW_CAT:
        return _IGNORED  # other flows (e.g. fwdbwd) are not used
    if ph == "M":
        return _metadata_record(obj)
    args = obj.get("args")
    if args is not None and not isinstance(args, dict):
        return None
    pid, tid, name, cat = id_value(obj.get("pid")), id_value(obj.get("tid")), obj.get("name"), obj.get("cat", "")
    ts, dur, event_id = finite(obj.get("ts")), finite(obj.get("dur")), id_value(obj.get("id"))
    if pid is None or tid is None or not isinstance(cat, str) or not isinstance(name, str):
        return None
    if ph == "X" and (ts is None or dur is None):
        return None
    if ph in ("s", "f") and (ts is None or event_id is None):
        return None
    return Event(ph=ph, name=name, cat=cat, pid=pid, tid=tid, ts=ts, dur=dur, id=event_id,
                 args=None if args is None else _validate_args(args))


def _metadata_record(obj: dict) -> Event:
    """A metadata event, leniently: it only names processes and threads, so a malformed one
    is ignored rather than counted as a skipped event."""
    args = obj.get("args")
    return Event(ph="M", name=obj.get("name"), cat="", pid=id_value(obj.get("pid")), tid=id_value(obj.get("tid")),
                 args=_validate_args(args) if isinstance(args, dict) else None)


def _memory_record(obj: dict):
    """A "[memory]" (or "[OutOfMemory]") instant: kept with what its args hold (``columns.MemoryParts`` drops one
    without a time, bytes or totals); args that are not an object make it malformed."""
    args = obj.get("args")
    if not isinstance(args, dict):
        return None
    values = {attr: v for attr in MEMORY_ARGS if (v := finite(args.get(ARG_KEYS[attr]))) is not None}
    return Event(ph="i", name=obj["name"], cat="", pid=id_value(obj.get("pid")), tid=id_value(obj.get("tid")),
                 ts=finite(obj.get("ts")), args=Args(**values))


def _validate_args(args: dict) -> Args:
    """Usable args kept, others left at their defaults (a wrong-typed arg does not drop the
    event)."""
    values = {}
    for attr in INT_ARGS:
        value = int_or_none(args.get(ARG_KEYS[attr]))
        if value is not None:
            values[attr] = value
    for attr in FLOAT_ARGS:
        value = finite(args.get(ARG_KEYS[attr]))
        if value is not None:
            values[attr] = value
    for attr in TEXT_ARGS + COLLECTIVE_ARGS:
        value = args.get(ARG_KEYS[attr])
        if value is not None:
            values[attr] = _raw_text(value if isinstance(value, str) else short_repr(value))
    return Args(name=args.get("name"), labels=args.get("labels"), **values)


def _raw_text(text: str) -> msgspec.Raw:
    """A checked text as raw JSON, as typed decoding keeps text args: a JSON string decodes back
    to exactly this text (stdlib ``json.dumps`` escapes lone surrogates, which msgspec would
    refuse to encode)."""
    return msgspec.Raw(json.dumps(text).encode()) if text else _NO_TEXT

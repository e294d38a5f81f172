"""Chrome trace (torch.profiler / Kineto JSON) → ``Trace``: parsed events, flows, metadata.

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
=====================  ========  ===========================================================

``Trace.flows`` — one row per CPU launch ↔ GPU activity pair:
``correlation`` (int64), ``launch_row`` and ``gpu_row`` (int64 positions in ``events``),
``delay_us`` (GPU start − launch start).

How ``load_trace`` works, stage by stage:

1. ``_read_json_bytes``: bytes or a file → the JSON text as bytes. Gzip is recognised by its
   magic bytes (1f 8b), never by the file name, and inflated incrementally so that a gzip bomb
   stops at ``max_decompressed_bytes`` instead of filling memory.
2. ``_decode``: JSON → batches of event records. msgspec first locates each event's raw JSON
   (``list[msgspec.Raw]``), then decodes 16k events at a time into typed Structs (validated as
   they parse). A batch in which some event has an unexpected type is decoded event by event,
   and only the failing events go through the Python checks; bad events are dropped and counted
   in ``skipped_events``. Without msgspec: orjson or stdlib json, then the Python checks.
3. ``_build``: each batch → column pieces (numpy arrays, factorized strings), so the Python
   objects of one batch at a time are alive; then lanes from process/thread metadata, one
   sort, nesting depth (vectorised).
4. ``_build_flows``: launch ↔ GPU pairs from ``ac2g`` flow events and from correlation ids.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd

from lab.vocab import FLOW_CAT, GPU_ACTIVITY_CATS, GPU_LANE_CATS, LAUNCH_CATS

try:  # msgspec is the fast path; the H200 box may not have it (stdlib json fallback).
    import msgspec
except ImportError:  # pragma: no cover - exercised on hosts without msgspec
    msgspec = None

try:
    import orjson
except ImportError:  # pragma: no cover
    orjson = None


# Inflate in slices this size, so the decompressed-size cap is checked before memory is spent.
_INFLATE_CHUNK_BYTES = 8 << 20
_DEFLATE_SLICE_BYTES = 1 << 20  # compressed input handed to zlib per call
# Kineto traces gzip 10-20x (the bundled samples: 12x; synthetic repeated-step traces in
# bench/: see BENCHMARKS.md); deflate's ceiling is ~1032x. Past 200x the data is a run of
# repeats, i.e. a gzip bomb: stop early rather than inflating up to the size cap (1 GiB takes
# seconds). Only checked once 32 MiB are out, so small odd files are never refused for it.
_MAX_GZIP_RATIO = 200
_RATIO_CHECK_FROM_BYTES = 32 << 20
# int64 bounds: ids outside them cannot be stored and mean the field is garbage.
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_GZIP_MAGIC = b"\x1f\x8b"
# Times beyond 1e18 µs (~31,700 years; Unix-epoch µs are ~1.7e15) are garbage, and bounding
# them keeps every sum and product below float overflow.
_MAX_ABS_US = 1e18

_EVENT_COLUMNS = (
    "name", "cat", "pid", "tid", "lane", "lane_kind", "lane_order", "ts_us", "dur_us", "depth",
    "correlation", "external_id", "device", "stream", "grid", "block", "registers_per_thread",
    "shared_memory_bytes", "blocks_per_sm", "warps_per_sm", "occupancy_pct", "input_dims",
    "input_type",
)  # fmt: skip
_FLOW_COLUMNS = ("correlation", "launch_row", "gpu_row", "delay_us")


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

    def gpu_activity(self) -> pd.DataFrame:
        return self.events[self.events["cat"].isin(GPU_ACTIVITY_CATS)]

    @property
    def has_gpu(self) -> bool:
        return bool((self.events["lane_kind"] == "gpu").any())


# ---------------------------------------------------------------------------------------------
# Stage 1: source → JSON bytes


def _read_json_bytes(source, cap_bytes: int) -> bytes | bytearray | memoryview:
    if isinstance(source, (bytes, bytearray)):
        data = source
    elif isinstance(source, memoryview):
        try:
            data = source.cast("B")  # byte view of any contiguous buffer
        except TypeError:
            data = source.tobytes()  # non-contiguous: copy once
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            size = path.stat().st_size
            if not path.is_file():
                raise TraceError(f"{path} is not a file; pass the path of a .json or .json.gz trace.")
            if size > cap_bytes:
                raise TraceError(
                    f"{path} is {size / 2**20:.0f} MiB, over the {cap_bytes / 2**20:.0f} MiB limit for "
                    "traces; profile fewer steps or raise PROFILER_LAB_MAX_TRACE_DECOMPRESSED_MB."
                )
            data = path.read_bytes()
        except OSError as exc:
            raise TraceError(f"cannot read {path}: {exc.strerror or exc}; check the path.") from None
    else:
        raise TraceError(
            f"cannot read a trace from a {type(source).__name__}; pass bytes or a path to a "
            ".json / .json.gz file."
        )
    if bytes(data[:2]) == _GZIP_MAGIC:
        return _gunzip(data, cap_bytes)
    if len(data) > cap_bytes:
        raise TraceError(
            f"the trace is {len(data) / 2**20:.0f} MiB, over the {cap_bytes / 2**20:.0f} MiB limit; "
            "profile fewer steps or raise PROFILER_LAB_MAX_TRACE_DECOMPRESSED_MB."
        )
    return data


def _gunzip(data, cap_bytes: int) -> bytearray:
    """Inflate gzip (possibly several members) without ever holding more than the cap.

    Input goes in 1 MiB slices and output comes out 8 MiB at a time (``max_length``), so every
    check below runs before more memory is spent and no call copies the whole input.
    """
    view = memoryview(data).cast("B")
    total = len(view)
    out = bytearray()
    pos = 0  # input bytes handed to zlib so far
    looked_at_start = False
    try:
        while True:  # one gzip member per round (RFC 1952 allows several, concatenated)
            inflater = zlib.decompressobj(wbits=31)  # 16 + 15: gzip header and trailer
            while not inflater.eof:
                tail = inflater.unconsumed_tail
                if tail:
                    chunk = inflater.decompress(tail, _INFLATE_CHUNK_BYTES)
                elif pos < total:
                    piece = view[pos : pos + _DEFLATE_SLICE_BYTES]
                    pos += len(piece)
                    chunk = inflater.decompress(piece, _INFLATE_CHUNK_BYTES)
                else:
                    chunk = inflater.decompress(b"", _INFLATE_CHUNK_BYTES)  # drain what zlib holds
                    if not chunk:
                        raise TraceError(
                            "the gzip file is truncated (it ends before the compressed data "
                            "does); re-download or re-export the trace."
                        )
                if not chunk:
                    continue
                if b"\x00" in chunk:  # JSON text never holds NUL bytes; zero-filled bombs do
                    raise TraceError(
                        "the gzip file holds binary data, not JSON text; upload the .json or "
                        ".json.gz trace that torch.profiler exported."
                    )
                if not looked_at_start:
                    head = chunk.lstrip()[:1]
                    if head:
                        looked_at_start = True
                        if head not in (b"{", b"["):  # refuse before inflating any more
                            raise TraceError(
                                "the gzip file does not contain JSON (a trace starts with '{' or "
                                "'['); upload the .json or .json.gz that torch.profiler exported."
                            )
                out += chunk
                if len(out) > cap_bytes:
                    raise TraceError(
                        f"the gzip trace inflates past the {cap_bytes / 2**20:.0f} MiB limit "
                        "(a gzip bomb, or a very long profile); profile fewer steps or raise "
                        "PROFILER_LAB_MAX_TRACE_DECOMPRESSED_MB."
                    )
                consumed = pos - len(inflater.unconsumed_tail)
                if len(out) >= _RATIO_CHECK_FROM_BYTES and len(out) > _MAX_GZIP_RATIO * max(consumed, 1):
                    raise TraceError(
                        f"the gzip data inflates more than {_MAX_GZIP_RATIO}x, which no profiler "
                        "trace does (this looks like a gzip bomb); upload the plain .json instead."
                    )
            # Bytes zlib read past this member's end belong to what follows it.
            pos -= len(inflater.unused_data)
            rest = view[pos : pos + 2]
            if pos >= total:
                return out
            if bytes(rest) != _GZIP_MAGIC:
                if bytes(view[pos:]).strip(b"\x00"):  # zero padding after the end is harmless
                    raise TraceError("the gzip file has stray bytes after its end; re-export the trace.")
                return out
    except zlib.error as exc:
        raise TraceError(
            f"the gzip data is corrupt ({exc}); re-export the trace or upload the plain .json."
        ) from None


# ---------------------------------------------------------------------------------------------
# Stage 2: JSON → event records
#
# Records expose the attributes below, whether they are msgspec Structs (fast path) or _Ev
# instances built by the Python validator (fallback path).

_ARG_KEYS = {  # attribute -> key in the event's "args"
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
    "name": "name",  # metadata events: process/thread name
    "labels": "labels",  # metadata events: process label ("GPU 0", "CPU")
}
_INT_ARGS = ("correlation", "external_id", "device", "stream")
_FLOAT_ARGS = ("registers", "shared_memory", "blocks_per_sm", "warps_per_sm", "occupancy")
_TEXT_ARGS = ("grid", "block", "input_dims", "input_type")
_NAN = float("nan")

if msgspec is not None:

    # Ids outside int64 fail validation here and send their batch to per-event decoding.
    _I64 = Annotated[int, msgspec.Meta(ge=_INT64_MIN, le=_INT64_MAX)]

    # gc=False: these hold no cycles, and untracked objects keep the cyclic GC from walking
    # millions of events again and again while a large trace loads.
    class _Args(msgspec.Struct, rename=_ARG_KEYS, gc=False):
        correlation: _I64 = -1
        external_id: _I64 = -1
        device: _I64 = -1
        stream: _I64 = -1
        # Text args stay raw JSON: decoded and formatted once per distinct value, not per event.
        grid: msgspec.Raw = msgspec.Raw(b"")
        block: msgspec.Raw = msgspec.Raw(b"")
        registers: float = _NAN
        shared_memory: float = _NAN
        blocks_per_sm: float = _NAN
        warps_per_sm: float = _NAN
        occupancy: float = _NAN
        input_dims: msgspec.Raw = msgspec.Raw(b"")
        input_type: msgspec.Raw = msgspec.Raw(b"")
        name: Any = None
        labels: Any = None

    class _Event(msgspec.Struct, gc=False):
        ph: str = ""
        name: str | None = None
        cat: str = ""
        pid: int | str | None = None
        tid: int | str | None = None
        ts: float | None = None
        dur: float | None = None
        id: int | str | None = None
        args: _Args | None = None

    class _RawDoc(msgspec.Struct):
        # Events stay raw JSON here and are decoded in batches (see _typed_batches).
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
        distributedInfo: Any = None

    _RAW_DOC_DECODER = msgspec.json.Decoder(_RawDoc)
    _RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
    _LIST_DECODER = msgspec.json.Decoder(list[_Event])
    _EVENT_DECODER = msgspec.json.Decoder(_Event)
    _EMPTY_ARGS = _Args()


class _PyArgs:
    __slots__ = tuple(_ARG_KEYS)

    def __init__(self):
        for attr in _INT_ARGS:
            setattr(self, attr, -1)
        for attr in _FLOAT_ARGS:
            setattr(self, attr, _NAN)
        for attr in _TEXT_ARGS:
            setattr(self, attr, "")
        self.name = None
        self.labels = None


class _Ev:
    __slots__ = ("ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "args")


_PY_EMPTY_ARGS = _PyArgs()
# Stands in for a missing args object; both kinds of args expose the same attributes.
_EMPTY_ARGS_ANY = _EMPTY_ARGS if msgspec is not None else _PY_EMPTY_ARGS


# Events turned into Python objects at a time. The raw JSON of every event is located first
# (cheap: 48 bytes per event); objects exist only for one batch (~6 MB) before they become
# column arrays, which keeps peak memory near the JSON size plus the final frame.
_BATCH_EVENTS = 8_192


@dataclass
class _Source:
    top: dict  # top-level keys other than traceEvents
    n_events: int
    # (records, events dropped as malformed, True when every record came from typed decoding)
    batches: Iterator[tuple[list, int, bool]]


def _decode(buf, max_events: int) -> _Source:
    first = bytes(buf[:64]).lstrip()[:1]
    if not first and not bytes(buf).strip():
        raise TraceError("the trace is empty; upload the .json or .json.gz file torch.profiler exported.")
    if first in b'"-0123456789tfn':  # a JSON scalar, or garbage: let the parser say which
        return _decode_generic(buf, max_events)
    if first not in (b"{", b"["):
        shown = bytes(buf[:20])
        raise TraceError(
            f"this is not JSON (it starts with {shown!r}); upload the .json or .json.gz trace "
            "that torch.profiler's export_chrome_trace wrote."
        )
    if msgspec is None:
        return _decode_generic(buf, max_events)
    try:
        if first == b"[":
            raws, top = _RAW_LIST_DECODER.decode(buf), {}
        else:
            doc = _RAW_DOC_DECODER.decode(buf)
            if doc.traceEvents is msgspec.UNSET:
                raise _not_a_trace("a JSON object without a 'traceEvents' list")
            raws = doc.traceEvents
            top = {f: getattr(doc, f) for f in doc.__struct_fields__ if f != "traceEvents"}
    except msgspec.ValidationError:  # e.g. traceEvents is not a list: the generic path says so
        return _decode_generic(buf, max_events)
    except msgspec.DecodeError as exc:
        return _decode_generic(buf, max_events, msgspec_error=str(exc))
    except RecursionError:
        raise _too_deep() from None
    if len(raws) > max_events:
        raise _too_many(len(raws), max_events)
    return _Source(top, len(raws), _typed_batches(raws))


def _typed_batches(raws: list) -> Iterator[tuple[list, int, bool]]:
    """Typed decode, one batch of raw events per call; a batch with an unexpected type
    somewhere is decoded event by event instead."""
    for i in range(0, len(raws), _BATCH_EVENTS):
        chunk = raws[i : i + _BATCH_EVENTS]
        try:
            yield _LIST_DECODER.decode(b"[" + b",".join(chunk) + b"]"), 0, True
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            # DecodeError here: bad UTF-8 inside a string, which locating events does not check
            yield *_decode_each(chunk), False


def _decode_each(raw_events: list) -> tuple[list, int]:
    """Raw JSON events → records: typed decode each; an event that fails goes through the
    Python checks, which drop it (counted) or keep what is usable."""
    decode = _EVENT_DECODER.decode
    records, skipped = [], 0
    for raw in raw_events:
        try:
            records.append(decode(raw))
            continue
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        except RecursionError:
            skipped += 1
            continue
        try:
            obj = json.loads(bytes(raw))  # stdlib: also reads numbers beyond float range
        except (ValueError, RecursionError):
            skipped += 1
            continue
        rec = _validate(obj)
        if rec is None:
            skipped += 1
        elif rec is not _IGNORED:
            records.append(rec)
    return records, skipped


def _too_deep() -> TraceError:
    return TraceError(
        "the JSON is nested too deeply to be a profiler trace; upload the trace that "
        "torch.profiler exported."
    )


def _not_a_trace(what: str) -> TraceError:
    return TraceError(
        f"this JSON is {what}, not a Chrome trace; a trace is an object with a 'traceEvents' "
        "list (or a bare list of events) as written by torch.profiler's export_chrome_trace."
    )


def _loads_any(buf, msgspec_error: str | None):
    """Generic JSON decode, fastest library first. stdlib json also reads NaN/Infinity tokens
    and numbers beyond float range, which stricter parsers reject."""
    error = msgspec_error
    if msgspec is not None and msgspec_error is None:
        try:
            return msgspec.json.decode(buf)
        except RecursionError:
            raise _too_deep() from None
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            error = str(exc)
    elif orjson is not None and msgspec is None:
        try:
            return orjson.loads(bytes(buf) if isinstance(buf, memoryview) else buf)
        except RecursionError:
            raise _too_deep() from None
        except orjson.JSONDecodeError as exc:
            if "recursion" in str(exc).lower():
                raise _too_deep() from None
            error = str(exc)
    try:
        return json.loads(bytes(buf) if isinstance(buf, memoryview) else buf)
    except RecursionError:
        raise _too_deep() from None
    except (ValueError, UnicodeDecodeError) as exc:
        detail = error or str(exc)
        raise TraceError(
            f"the trace is not valid JSON ({detail}); the file may be truncated or corrupt — "
            "re-export it with export_chrome_trace."
        ) from None


def _decode_generic(buf, max_events: int, msgspec_error: str | None = None) -> _Source:
    obj = _loads_any(buf, msgspec_error)
    if isinstance(obj, list):
        raw_events, top = obj, {}
    elif isinstance(obj, dict):
        raw_events = obj.get("traceEvents")
        if not isinstance(raw_events, list):
            what = "a JSON object without a 'traceEvents' list" if raw_events is None else (
                f"a JSON object whose 'traceEvents' is a {_json_type(raw_events)}"
            )
            raise _not_a_trace(what)
        top = {k: v for k, v in obj.items() if k != "traceEvents"}
    else:
        raise _not_a_trace(f"a {_json_type(obj)}")
    if len(raw_events) > max_events:
        raise _too_many(len(raw_events), max_events)
    return _Source(top, len(raw_events), _checked_batches(raw_events))


def _checked_batches(raw_events: list) -> Iterator[tuple[list, int, bool]]:
    for i in range(0, len(raw_events), _BATCH_EVENTS):
        records, skipped = [], 0
        for raw in raw_events[i : i + _BATCH_EVENTS]:
            rec = _validate(raw)
            if rec is None:
                skipped += 1
            elif rec is not _IGNORED:
                records.append(rec)
        yield records, skipped, False


def _too_many(n: int, cap: int) -> TraceError:
    return TraceError(
        f"the trace has {n:,} events, over the limit of {cap:,}; profile fewer steps "
        "(schedule active=1) or raise PROFILER_LAB_MAX_TRACE_EVENTS."
    )


def _json_type(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return "null"


_IGNORED = object()  # events of phases the lab does not use: neither kept nor counted as bad


def _int_or_none(value):
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _finite(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int beyond float range
        return None
    return value if math.isfinite(value) else None


def _id_value(value):
    if isinstance(value, str):
        return value
    return _int_or_none(value)


def _validate(raw):
    """One generic event → _Ev, _IGNORED, or None (malformed: counted in skipped_events)."""
    if not isinstance(raw, dict):
        return None
    ph = raw.get("ph")
    if ph not in ("X", "M", "s", "f"):
        return _IGNORED if isinstance(ph, str) else None
    if ph in ("s", "f") and raw.get("cat") != FLOW_CAT:
        return _IGNORED  # other flows (e.g. fwdbwd) are not used
    if ph == "M":
        return _metadata_record(raw)
    ev = _Ev()
    ev.ph = ph
    ev.pid, ev.tid = _id_value(raw.get("pid")), _id_value(raw.get("tid"))
    ev.name = raw.get("name")
    cat = raw.get("cat", "")
    ev.cat = cat if isinstance(cat, str) else None
    ev.ts = _finite(raw.get("ts"))
    dur = raw.get("dur")
    ev.dur = _finite(dur)
    ev.id = _id_value(raw.get("id"))
    args = raw.get("args")
    if args is None:
        ev.args = None
    elif isinstance(args, dict):
        ev.args = _validate_args(args)
    else:
        return None
    if ev.pid is None or ev.tid is None or ev.cat is None or not isinstance(ev.name, str):
        return None
    if ph == "X" and (ev.ts is None or ev.dur is None):
        return None
    if ph in ("s", "f") and (ev.ts is None or ev.id is None):
        return None
    return ev


def _metadata_record(raw: dict):
    """A metadata event, leniently: it only names processes and threads, so a malformed one
    is ignored rather than counted as a skipped event."""
    ev = _Ev()
    ev.ph, ev.cat, ev.ts, ev.dur, ev.id = "M", "", None, None, None
    ev.pid, ev.tid, ev.name = _id_value(raw.get("pid")), _id_value(raw.get("tid")), raw.get("name")
    args = raw.get("args")
    ev.args = _validate_args(args) if isinstance(args, dict) else None
    return ev


def _validate_args(args: dict) -> _PyArgs:
    out = _PyArgs()
    for attr in _INT_ARGS:
        value = _int_or_none(args.get(_ARG_KEYS[attr]))
        if value is not None:
            setattr(out, attr, value)
    for attr in _FLOAT_ARGS:
        value = _finite(args.get(_ARG_KEYS[attr]))
        if value is not None:
            setattr(out, attr, value)
    for attr in _TEXT_ARGS:
        value = args.get(_ARG_KEYS[attr])
        if value is not None:
            setattr(out, attr, value if isinstance(value, str) else _short_repr(value))
    out.name = args.get("name")
    out.labels = args.get("labels")
    return out


def _short_repr(value) -> str:
    try:
        return str(value)[:1000]  # bounded: args can hold anything in a hand-edited file
    except (RecursionError, ValueError):
        return "?"


def _text_codes(values, all_raw: bool) -> tuple[np.ndarray, list[str]]:
    """Text args (msgspec.Raw JSON, or text from the Python checks) → codes and "[2, 66, 1]"-
    style texts, each distinct raw value decoded and formatted once."""
    # Most events lack any given text arg (grid: kernels only; Input Dims: ops only), so only
    # the non-empty ones are hashed; the empty ones get the code of "".
    n = len(values)
    filled = np.fromiter(map(len, values), dtype=np.int64, count=n) > 0
    if not filled.any():
        return np.zeros(n, dtype=np.intp), [""]
    at = np.nonzero(filled)[0]
    some = [values[i] for i in at.tolist()]
    keys = list(map(bytes, some)) if all_raw else [v if isinstance(v, str) else bytes(v) for v in some]
    sub_codes, uniques = pd.factorize(np.array(keys, dtype=object))
    codes = np.zeros(n, dtype=np.intp)
    codes[at] = sub_codes + 1
    uniques = [b""] + list(uniques)
    texts = []
    for key in uniques:
        if isinstance(key, str):
            texts.append(key)
            continue
        if not key:
            texts.append("")
            continue
        try:
            value = json.loads(key)
        except (ValueError, RecursionError):
            value = key.decode("utf-8", "replace")
        texts.append("" if value is None else value if isinstance(value, str) else _short_repr(value))
    return codes, texts


# ---------------------------------------------------------------------------------------------
# Stage 3: records → events frame

_STREAM_RE = re.compile(r"stream\s+(-?\d+)")
_GPU_LABEL_RE = re.compile(r"GPU\s+(-?\d+)")
_THREAD_RE = re.compile(r"^thread\s+\d+\s*\((.*)\)\s*$")


def _id_str(value) -> str:
    return value if isinstance(value, str) else str(value)


def _id_int(value) -> int:
    """An id (int or numeric string) as an int64, -1 when it is neither."""
    number = _as_int(value) if isinstance(value, str) else value
    number = _int_or_none(number)
    return -1 if number is None else number


def _as_int(text: str):
    """A numeric string as an int64-sized int, else None (ids that big are not numbers)."""
    try:
        return _int_or_none(int(text))
    except ValueError:  # not digits, or too many digits for int()
        return None


def _first_int(*candidates) -> int:
    """The first candidate that is (or spells) a non-negative int64, else -1."""
    for value in candidates:
        number = _as_int(value) if isinstance(value, str) else _int_or_none(value)
        if number is not None and number >= 0:
            return number
    return -1


@dataclass(frozen=True)
class _Lane:
    pid: str
    tid: str
    name: str
    kind: str  # "cpu" | "gpu"
    order: int
    device: int
    stream: int


def _lanes(keys: list[tuple[str, str]], gpu_hint: dict, meta_names: dict) -> list[_Lane]:
    """Name and order lanes. ``gpu_hint[(pid, tid)]`` is (device, stream) from a GPU event's
    args, or None when the lane holds no GPU-only categories."""
    process_names, process_labels, thread_names = meta_names["process"], meta_names["labels"], meta_names["thread"]
    drafts = []
    for pid, tid in keys:
        label = process_labels.get(pid, "")
        gpu_label = _GPU_LABEL_RE.search(label) if isinstance(label, str) else None
        hint = gpu_hint.get((pid, tid))
        tname = thread_names.get((pid, tid), "")
        if gpu_label or hint is not None:
            device = _first_int(gpu_label and gpu_label.group(1), hint and hint[0], pid)
            m = _STREAM_RE.search(tname)
            stream = _first_int(m and m.group(1), tid, hint and hint[1])
            name = f"GPU {device} stream {stream}"
            drafts.append(((1, device, stream, pid, tid), pid, tid, name, "gpu", device, stream))
            continue
        numeric_pid, numeric_tid = _as_int(pid), _as_int(tid)
        m = _THREAD_RE.match(tname) if tname else None
        if m:
            detail = m.group(1)
        elif tname:
            detail = tname.strip()
        else:
            detail = process_names.get(pid, "")
            if not detail and numeric_pid is not None:
                detail = f"pid {pid}"
        if numeric_tid is None and numeric_pid is None:
            name = f"{pid} {tid}"  # e.g. Kineto's "Spans" / "PyTorch Profiler" pseudo-process
        else:
            name = f"CPU thread {tid}" + (f" ({detail})" if detail else "")
        pid_key = (0, numeric_pid, "") if numeric_pid is not None else (1, 0, pid)
        tid_key = (0, numeric_tid, "") if numeric_tid is not None else (1, 0, tid)
        drafts.append(((0, pid_key, tid_key), pid, tid, name, "cpu", -1, -1))
    drafts.sort(key=lambda d: d[0])
    lanes, seen = [], {}
    for order, (_, pid, tid, name, kind, device, stream) in enumerate(drafts):
        if name in seen:  # two lanes would look alike: say which process each belongs to
            name = f"{name} [pid {pid} tid {tid}]"
        seen[name] = True
        lanes.append(_Lane(pid, tid, name, kind, order, device, stream))
    return lanes


def _metadata_names(meta_events: list) -> dict:
    process, labels, thread = {}, {}, {}
    for e in meta_events:
        if e.args is None or e.pid is None:
            continue
        pid = _id_str(e.pid)
        if e.name == "process_name" and isinstance(e.args.name, str):
            process[pid] = e.args.name
        elif e.name == "process_labels" and isinstance(e.args.labels, str):
            labels[pid] = e.args.labels
        elif e.name == "thread_name" and isinstance(e.args.name, str) and e.tid is not None:
            thread[(pid, _id_str(e.tid))] = e.args.name
    return {"process": process, "labels": labels, "thread": thread}


# Float keys group * width + time stay exact to well under 1 ns below this magnitude
# (float64 ulp at 1e12 is 1.2e-4); past it (absurd spans) keys become integer ranks instead.
_EXACT_FLOAT_KEY_LIMIT = 1e12


def _grouped_keys(*pairs: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """Sortable keys for (group, time) pairs, group ≥ 0 and time ≥ 0: key order is (group,
    time) order and equal pairs get equal keys, so one global sort or searchsorted serves
    every group at once (groups are shifted into disjoint ranges)."""
    times = np.concatenate([t for _, t in pairs])
    if not len(times):
        return [t.astype(np.float64) for _, t in pairs]
    groups = 1 + max(int(g.max()) for g, _ in pairs if len(g)) if any(len(g) for g, _ in pairs) else 1
    width = float(times.max()) + 1.0
    if width * groups < _EXACT_FLOAT_KEY_LIMIT:
        return [g.astype(np.float64) * width + t for g, t in pairs]
    uniq = np.unique(times)
    return [g.astype(np.int64) * len(uniq) + np.searchsorted(uniq, t) for g, t in pairs]


def _nesting_depth(lane_code: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each event within its lane; input sorted by (lane, start, longer first).

    depth = events of the lane that started before this one and are still open at its start.
    That equals (earlier starts in the lane) − (lane events that ended at or before this start),
    counted with searchsorted over (lane, time) keys instead of a Python stack.
    """
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.int16)
    s, e = _grouped_keys((lane_code, start), (lane_code, np.maximum(end, start)))
    lane_first = np.searchsorted(lane_code, lane_code, side="left")
    rank = np.arange(n) - lane_first
    sorted_e = np.sort(e)
    ended = np.searchsorted(sorted_e, s, side="right") - lane_first
    # searchsorted also counted ends that are not earlier events: a zero-length event's own
    # end, and zero-length events sorted after this one at the same start (zero-length events
    # are last in their (lane, start) group, since ties put the longer first). Add them back.
    zero = e == s
    group_start = np.r_[True, (s[1:] != s[:-1])]
    group_id = np.cumsum(group_start) - 1
    group_end = np.r_[np.nonzero(group_start)[0][1:], n]  # exclusive end per group
    zeros_in_group = np.bincount(group_id, weights=zero, minlength=group_id[-1] + 1).astype(np.int64)
    pos = np.arange(n)
    later_zeros = np.where(zero, group_end[group_id] - pos, zeros_in_group[group_id])
    depth = rank - ended + later_zeros
    return np.clip(depth, 0, np.iinfo(np.int16).max).astype(np.int16)


_INT_OF = attrgetter(*_INT_ARGS)
_FLOAT_OF = attrgetter(*_FLOAT_ARGS)
_TEXT_OF = attrgetter(*_TEXT_ARGS)
_CATEGORY_PARTS = ("name", "cat", "pid", "tid") + _TEXT_ARGS


_TS_OF, _DUR_OF = attrgetter("ts"), attrgetter("dur")


def _floats(records: list, getter, n: int) -> np.ndarray:
    """One float field of every record; None (allowed by typed decoding) becomes NaN."""
    try:
        return np.fromiter(map(getter, records), dtype=np.float64, count=n)
    except TypeError:  # a None somewhere: the slower conversion maps it to NaN
        return np.array(list(map(getter, records)), dtype=np.float64)


def _factorized(values: list) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) of a list; None gets code -1. Ids (pid, tid, flow id) are usually all
    ints: hashing them as int64 is ~3x faster than as Python objects."""
    if values and type(values[0]) is int:
        try:
            codes, uniques = pd.factorize(np.fromiter(values, dtype=np.int64, count=len(values)))
            return codes, np.array(uniques.tolist(), dtype=object)  # Python ints, as in the file
        except (TypeError, ValueError, OverflowError):  # a str, None or bool among them
            pass
    return pd.factorize(np.array(values, dtype=object))


class _EventParts:
    """Column pieces of the complete events, one piece per batch of records."""

    def __init__(self):
        self.parts: list[dict] = []
        self.n = 0

    def add(self, records: list, metas: list, flow_parts: _FlowParts, all_raw: bool) -> int:
        """Sort a batch's records into X / M / flow events; store the X columns. Returns the
        number of X events dropped as malformed."""
        xs = [e for e in records if e.ph == "X"]
        if len(xs) < len(records):
            flows = []
            for e in [e for e in records if e.ph != "X"]:
                ph = e.ph
                if ph == "M":
                    metas.append(e)
                elif (ph == "s" or ph == "f") and e.cat == FLOW_CAT:
                    flows.append(e)
            flow_parts.add(flows)
        del records
        n = len(xs)
        ts, dur = _floats(xs, _TS_OF, n), _floats(xs, _DUR_OF, n)
        names, pids, tids = [e.name for e in xs], [e.pid for e in xs], [e.tid for e in xs]
        with np.errstate(invalid="ignore"):
            ok = (np.abs(ts) <= _MAX_ABS_US) & (dur >= 0) & (dur <= _MAX_ABS_US)  # False for NaN too
        if None in names or None in pids or None in tids:
            ok &= np.array([not (e.name is None or e.pid is None or e.tid is None) for e in xs])
        dropped = n - int(ok.sum())
        if dropped:
            keep = np.nonzero(ok)[0].tolist()
            xs = [xs[i] for i in keep]
            names, pids, tids = [names[i] for i in keep], [pids[i] for i in keep], [tids[i] for i in keep]
            ts, dur, n = ts[keep], dur[keep], len(keep)
        if not n:
            return dropped
        args = [e.args or _EMPTY_ARGS_ANY for e in xs]
        part = {
            "ts": ts,
            "dur": dur,
            "name": _factorized(names),
            "cat": _factorized([e.cat for e in xs]),
            "pid": _factorized(pids),
            "tid": _factorized(tids),
            "ints": np.fromiter(chain.from_iterable(map(_INT_OF, args)), dtype=np.int64,
                                count=n * len(_INT_ARGS)).reshape(n, -1),
            "floats": np.fromiter(chain.from_iterable(map(_FLOAT_OF, args)), dtype=np.float64,
                                  count=n * len(_FLOAT_ARGS)).reshape(n, -1),
        }
        for attr, values in zip(_TEXT_ARGS, zip(*map(_TEXT_OF, args))):
            part[attr] = _text_codes(values, all_raw)
        self.parts.append(part)
        self.n += n
        return dropped

    def column(self, key: str) -> np.ndarray:
        return np.concatenate([p[key] for p in self.parts])

    def categorical(self, key: str, as_text=None) -> tuple[np.ndarray, np.ndarray]:
        return _merge_factorized([p[key] for p in self.parts], as_text)


def _merge_factorized(pieces: list[tuple[np.ndarray, np.ndarray]], as_text=None) -> tuple[np.ndarray, np.ndarray]:
    """Per-batch (codes, uniques) → global (codes, categories): categories merged, codes
    remapped; -1 (a missing value) stays -1. ``as_text`` maps uniques first (417 and "417"
    become one category)."""
    uniques = [list(u) if as_text is None else [as_text(v) for v in u] for _, u in pieces]
    merged_codes, categories = _factorized([v for u in uniques for v in u])
    offsets = np.cumsum([0] + [len(u) for u in uniques[:-1]])
    codes = np.concatenate([np.where(c >= 0, merged_codes[off + np.maximum(c, 0)], -1) if len(u) else c
                            for off, (c, _), u in zip(offsets, pieces, uniques)])
    return codes.astype(np.int32, copy=False), categories


class _FlowParts:
    """ac2g flow events, kept as compact arrays per batch (a Struct per flow would cost ~10x)."""

    def __init__(self):
        self.parts: list[dict] = []

    def add(self, flows: list) -> None:
        if not flows:
            return
        self.parts.append({
            "is_start": np.array([e.ph == "s" for e in flows], dtype=bool),
            "ts": _floats(flows, _TS_OF, len(flows)),  # None → NaN
            "pid": _factorized([e.pid for e in flows]),  # None → code -1
            "tid": _factorized([e.tid for e in flows]),
            "id": _factorized([e.id for e in flows]),
        })  # fmt: skip

    def columns(self) -> dict | None:
        if not self.parts:
            return None
        out = {k: np.concatenate([p[k] for p in self.parts]) for k in ("is_start", "ts")}
        out["pid"] = _merge_factorized([p["pid"] for p in self.parts], _id_str)
        out["tid"] = _merge_factorized([p["tid"] for p in self.parts], _id_str)
        out["id"] = _merge_factorized([p["id"] for p in self.parts])
        return out


def _build(src: _Source, source_bytes: int) -> Trace:
    parts, metas, flow_parts = _EventParts(), [], _FlowParts()
    skipped = 0
    for records, dropped, all_raw in src.batches:
        skipped += dropped + parts.add(records, metas, flow_parts, all_raw)
        del records
    if parts.n == 0:
        raise TraceError(
            "the trace has no usable complete ('ph': 'X') events"
            + (f" ({skipped} malformed events skipped)" if skipped else "")
            + "; export it with torch.profiler's export_chrome_trace after the profiled steps ran."
        )
    ts, dur = parts.column("ts"), parts.column("dur")
    ints, floats = parts.column("ints"), parts.column("floats")
    int_cols = {a: ints[:, i] for i, a in enumerate(_INT_ARGS)}
    float_cols = {a: floats[:, i] for i, a in enumerate(_FLOAT_ARGS)}
    del ints, floats
    cats = {key: parts.categorical(key, as_text=_id_str if key in ("pid", "tid") else None) for key in _CATEGORY_PARTS}
    del parts

    # Lanes: one per distinct (pid, tid).
    pid_codes, pid_uniques = cats["pid"]
    tid_codes, tid_uniques = cats["tid"]
    n_tid = len(tid_uniques)
    pair = pid_codes.astype(np.int64) * n_tid + tid_codes
    pair_uniques, pair_code = np.unique(pair, return_inverse=True)
    pair_code = pair_code.reshape(-1)
    keys = [(pid_uniques[p // n_tid], tid_uniques[p % n_tid]) for p in pair_uniques.tolist()]
    cat_codes, cat_uniques = cats["cat"]
    gpu_cat = np.isin(cat_uniques, GPU_LANE_CATS)[cat_codes]
    gpu_hint = {}
    if gpu_cat.any():
        idx = np.nonzero(gpu_cat)[0]
        for i in idx[np.unique(pair_code[idx], return_index=True)[1]]:
            gpu_hint[keys[pair_code[i]]] = (int(int_cols["device"][i]), int(int_cols["stream"][i]))
    names_meta = _metadata_names(metas)
    lanes = _lanes(keys, gpu_hint, names_meta)
    by_key = {(ln.pid, ln.tid): ln for ln in lanes}
    lane_of_pair = [by_key[k] for k in keys]
    lane_order = np.array([ln.order for ln in lane_of_pair], dtype=np.int32)[pair_code]
    lane_is_gpu = np.array([ln.kind == "gpu" for ln in lane_of_pair], dtype=bool)[pair_code]
    lane_device = np.array([ln.device for ln in lane_of_pair], dtype=np.int64)[pair_code]
    lane_stream = np.array([ln.stream for ln in lane_of_pair], dtype=np.int64)[pair_code]
    del pair, pair_code

    # GPU events take device/stream from their args, else from their lane; CPU events get -1.
    device = np.where(lane_is_gpu, np.where(int_cols["device"] >= 0, int_cols["device"], lane_device), -1)
    stream = np.where(lane_is_gpu, np.where(int_cols["stream"] >= 0, int_cols["stream"], lane_stream), -1)
    del lane_device, lane_stream

    start_ts = float(ts.min())
    # Kineto writes µs with 3 decimals (ns). Absolute ts near 5e12 µs parse with ~0.0005 µs
    # float error; rounding the difference to ns gives back the exact relative times.
    ts_rel = np.round(ts - start_ts, 3)  # < 2e21 after the magnitude check: no overflow
    del ts
    order = np.lexsort((-dur, ts_rel, lane_order))
    span_us = float((ts_rel + dur).max())
    lane_order_s = lane_order[order]
    ts_s, dur_s = ts_rel[order], dur[order]
    del ts_rel, dur, lane_order
    depth = _nesting_depth(lane_order_s, ts_s, ts_s + dur_s)

    def category(key: str, **kw) -> pd.Categorical:
        codes, uniques = cats[key]
        return pd.Categorical.from_codes(codes[order], categories=pd.Index(uniques, dtype=object), **kw)

    lane_names = [ln.name for ln in lanes]
    frame = {
        "name": category("name"),
        "cat": category("cat"),
        "pid": category("pid"),
        "tid": category("tid"),
        "lane": pd.Categorical.from_codes(lane_order_s, categories=pd.Index(lane_names, dtype=object), ordered=True),
        "lane_kind": pd.Categorical.from_codes(lane_is_gpu[order].astype(np.int8), categories=pd.Index(["cpu", "gpu"], dtype=object)),
        "lane_order": lane_order_s,
        "ts_us": ts_s,
        "dur_us": dur_s,
        "depth": depth,
        "correlation": int_cols["correlation"][order],
        "external_id": int_cols["external_id"][order],
        "device": np.clip(device[order], -1, np.iinfo(np.int16).max).astype(np.int16),
        "stream": np.clip(stream[order], -1, np.iinfo(np.int32).max).astype(np.int32),
        "grid": category("grid"),
        "block": category("block"),
        "registers_per_thread": float_cols["registers"][order],
        "shared_memory_bytes": float_cols["shared_memory"][order],
        "blocks_per_sm": float_cols["blocks_per_sm"][order],
        "warps_per_sm": float_cols["warps_per_sm"][order],
        "occupancy_pct": float_cols["occupancy"][order],
        "input_dims": category("input_dims"),
        "input_type": category("input_type"),
    }
    flow_cols = {
        "is_launch": np.isin(cat_uniques, LAUNCH_CATS)[cat_codes][order],
        "is_gpu": np.isin(cat_uniques, GPU_ACTIVITY_CATS)[cat_codes][order],
        "lane_order": lane_order_s, "ts_us": ts_s, "correlation": frame["correlation"],
    }  # fmt: skip
    del int_cols, float_cols, cats, device, stream
    events = pd.DataFrame(frame, columns=list(_EVENT_COLUMNS))
    del frame
    flow_frame, flow_skipped = _build_flows(flow_cols, flow_parts.columns(), start_ts, by_key)
    meta = _meta(src.top, names_meta, start_ts, span_us)
    return Trace(events=events, flows=flow_frame, meta=meta, skipped_events=skipped + flow_skipped,
                 source_bytes=source_bytes)


# ---------------------------------------------------------------------------------------------
# Stage 4: flows


def _flows_frame(corr, launch_row, gpu_row, delay_us) -> pd.DataFrame:
    return pd.DataFrame({
        "correlation": np.asarray(corr, np.int64), "launch_row": np.asarray(launch_row, np.int64),
        "gpu_row": np.asarray(gpu_row, np.int64), "delay_us": np.asarray(delay_us, np.float64),
    })  # fmt: skip


def _near(flow_ts: np.ndarray, gpu_ts: np.ndarray, start_ts: float) -> np.ndarray:
    """Which flow timestamps fall on one of the given GPU starts (relative µs), to the ns with
    1 ns slack for float rounding: a coarse filter before exact matching."""
    wanted_ns = np.rint(gpu_ts * 1000)
    wanted_ns = np.concatenate([wanted_ns - 1, wanted_ns, wanted_ns + 1])
    in_range = np.abs(flow_ts) <= _MAX_ABS_US  # False for NaN
    flow_ns = np.rint((np.where(in_range, flow_ts, start_ts) - start_ts) * 1000)
    return in_range & np.isin(flow_ns, wanted_ns)


def _build_flows(ev: dict, flows: dict | None, start_ts: float, lanes: dict) -> tuple[pd.DataFrame, int]:
    """Launch ↔ GPU pairs. ``ev`` holds the sorted event columns as numpy arrays, ``flows`` the
    ac2g flow events' columns (``_FlowParts.columns``).

    Two sources, because either may be missing: correlation ids in args, and ``ac2g`` flow
    events ("s" on the launch, "f" on the GPU activity, same id, located by lane and ts). Each
    GPU row gets one launch; where both sources speak for a row, the ac2g pair wins.
    """
    is_launch, is_gpu = ev["is_launch"], ev["is_gpu"]
    lane, ts, corr = ev["lane_order"], ev["ts_us"], ev["correlation"]
    n = len(ts)
    launch_of = np.full(n, -1, dtype=np.int64)
    flow_id_of = np.full(n, -1, dtype=np.int64)
    skipped = 0

    # 1) correlation ids: for each GPU row, the latest launch with its correlation that starts
    #    no later than it (else the first one): ids repeat only across processes or graphs.
    launch_idx = np.nonzero(is_launch & (corr >= 0))[0]
    gpu_idx = np.nonzero(is_gpu & (corr >= 0))[0]
    if len(launch_idx) and len(gpu_idx):
        ids = np.unique(corr[launch_idx])
        l_rank = np.searchsorted(ids, corr[launch_idx])
        g_rank = np.searchsorted(ids, corr[gpu_idx])
        known = (g_rank < len(ids)) & (ids[np.minimum(g_rank, len(ids) - 1)] == corr[gpu_idx])
        g_rank, g_rows = g_rank[known], gpu_idx[known]
        l_key, g_key, g_first = _grouped_keys(
            (l_rank, ts[launch_idx]), (g_rank, ts[g_rows]), (g_rank, np.zeros(len(g_rank)))
        )
        l_sort = np.argsort(l_key, kind="stable")
        l_key, l_rank_s, l_rows = l_key[l_sort], l_rank[l_sort], launch_idx[l_sort]
        before = np.searchsorted(l_key, g_key, side="right") - 1
        ok_before = (before >= 0) & (l_rank_s[np.maximum(before, 0)] == g_rank)
        first = np.searchsorted(l_key, g_first, side="left")
        pick = np.where(ok_before, before, np.minimum(first, len(l_key) - 1))
        launch_of[g_rows] = l_rows[pick]

    # 2) ac2g flow events, located on the launch / GPU row with the same lane and start. Kineto
    #    writes both sources and they agree, so flows are matched only for GPU rows still
    #    unlinked (traces without correlation args, or hand-made ones).
    if flows is not None:
        f_ts, is_start = flows["ts"], flows["is_start"]
        (pid_c, pid_u), (tid_c, tid_u), (id_c, id_u) = flows["pid"], flows["tid"], flows["id"]
        usable = (pid_c >= 0) & (tid_c >= 0) & (id_c >= 0) & np.isfinite(f_ts)
        skipped += int((~usable).sum())
        unlinked = np.nonzero(is_gpu & (launch_of < 0))[0]
        if len(unlinked) < int(is_gpu.sum()):  # only the flows that can reach those rows
            ends_near = usable & ~is_start & _near(f_ts, ts[unlinked], start_ts)
            usable &= ends_near | (is_start & np.isin(id_c, id_c[ends_near]))
        if len(unlinked) and usable.any():
            # lane of each distinct (pid, tid) of the flow events; -1 when no complete event has it
            pair = pid_c.astype(np.int64) * len(tid_u) + tid_c
            pair_u, pair_c = np.unique(np.where(usable, pair, -1), return_inverse=True)
            found = [None if p < 0 else lanes.get((pid_u[p // len(tid_u)], tid_u[p % len(tid_u)])) for p in pair_u.tolist()]
            f_lane = np.array([-1 if ln is None else ln.order for ln in found], dtype=np.int64)[pair_c.reshape(-1)]
            in_range = np.abs(f_ts) <= _MAX_ABS_US  # False for NaN; beyond it, no event sits there
            f_rel = np.round(np.where(in_range, f_ts, start_ts) - start_ts, 3)
            valid = usable & (f_lane >= 0) & in_range & (f_rel >= 0)

            def last_per_id(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                rows = np.nonzero(mask)[0][::-1]  # last event wins for a repeated id
                ids, first = np.unique(id_c[rows], return_index=True)
                return ids, rows[first]

            s_ids, s_rows = last_per_id(valid & is_start)
            f_ids, f_rows = last_per_id(valid & ~is_start)
            common, s_at, f_at = np.intersect1d(s_ids, f_ids, assume_unique=True, return_indices=True)
            if len(common):
                s_rows, f_rows = s_rows[s_at], f_rows[f_at]
                keys, want_s, want_f = _grouped_keys((lane, ts), (f_lane[s_rows], f_rel[s_rows]), (f_lane[f_rows], f_rel[f_rows]))

                def locate(want: np.ndarray, mask: np.ndarray) -> np.ndarray:
                    rows = np.nonzero(mask)[0]
                    if not len(rows):
                        return np.full(len(want), -1, dtype=np.int64)
                    rows = rows[np.argsort(keys[rows], kind="stable")]
                    sorted_keys = keys[rows]
                    pos = np.minimum(np.searchsorted(sorted_keys, want), len(rows) - 1)
                    return np.where(sorted_keys[pos] == want, rows[pos], -1)

                launch_rows, gpu_rows = locate(want_s, is_launch), locate(want_f, is_gpu)
                ok = (launch_rows >= 0) & (gpu_rows >= 0)
                launch_of[gpu_rows[ok]] = launch_rows[ok]
                flow_ids = np.array([_id_int(i) for i in id_u[common].tolist()], dtype=np.int64)
                flow_id_of[gpu_rows[ok]] = flow_ids[ok]

    gpu_rows = np.nonzero(launch_of >= 0)[0]
    launch_rows = launch_of[gpu_rows]
    order = np.lexsort((gpu_rows, launch_rows))
    gpu_rows, launch_rows = gpu_rows[order], launch_rows[order]
    # The GPU event's own correlation; else its launch's; else the flow id.
    flow_corr = corr[gpu_rows]
    flow_corr = np.where(flow_corr < 0, corr[launch_rows], flow_corr)
    flow_corr = np.where(flow_corr < 0, flow_id_of[gpu_rows], flow_corr)
    frame = _flows_frame(flow_corr, launch_rows, gpu_rows, np.round(ts[gpu_rows] - ts[launch_rows], 3))
    return frame, skipped


# ---------------------------------------------------------------------------------------------
# Metadata


def _opt_int(value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return _as_int(value.strip())
    return None


def _opt_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return bool(value)
    return None


def _meta(top: dict, names: dict, start_ts: float, span_us: float) -> TraceMeta:
    props = top.get("deviceProperties")
    props = tuple(p for p in props if isinstance(p, dict)) if isinstance(props, list) else ()
    dist = top.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else None
    trace_name = top.get("traceName")
    return TraceMeta(
        device_properties=props,
        base_time_ns=_opt_int(top.get("baseTimeNanoseconds")),
        schema_version=_opt_int(top.get("schemaVersion")),
        trace_name=trace_name if isinstance(trace_name, str) else "",
        cuda_driver_version=_opt_int(top.get("cuda_driver_version")),
        cuda_runtime_version=_opt_int(top.get("cuda_runtime_version")),
        cupti_version=_opt_int(top.get("cupti_version")),
        record_shapes=_opt_bool(top.get("record_shapes")),
        with_flops=_opt_bool(top.get("with_flops")),
        distributed=dist,
        rank=_opt_int(dist.get("rank")) if dist else None,
        start_ts_us=start_ts,
        span_us=span_us,
        process_names=dict(names["process"]),
        thread_names=dict(names["thread"]),
    )


# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector while a trace loads.

    Loading allocates millions of short-lived objects, which keeps triggering full collections
    that walk every live object again: at 1M events this took 11.3 s with the collector on and
    6.4 s with it off (bench/bench_ingest.py's machine). Nothing built here forms cycles, and
    reference counting still frees everything; the collector's previous state is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_trace(source, *, max_decompressed_bytes: int | None = None, max_events: int | None = None) -> Trace:
    """Parse ``source`` (bytes, or a path) into a ``Trace``; bad input raises ``TraceError``."""
    if max_decompressed_bytes is None or max_events is None:
        from lab.run.settings import HostSettings

        settings = HostSettings.from_env()
        if max_decompressed_bytes is None:
            max_decompressed_bytes = int(settings.max_trace_decompressed_mb * 2**20)
        if max_events is None:
            max_events = int(settings.max_trace_events)
    try:
        with _gc_paused():
            buf = _read_json_bytes(source, max_decompressed_bytes)
            source_bytes = len(buf)
            src = _decode(buf, max_events)
            del buf  # the raw events still point into it until their batches are decoded
            return _build(src, source_bytes)
    except TraceError:
        raise
    except RecursionError:
        raise _too_deep() from None
    except MemoryError:
        raise TraceError(
            "the trace does not fit in memory; profile fewer steps or upload a smaller trace."
        ) from None

"""Stages 1–2 of ``load_trace``: bytes or a file → JSON text → batches of event records.

1. ``read_json_bytes``: bytes or a file → the JSON text as bytes. Gzip is recognised by its
   magic bytes (1f 8b), never by the file name, and inflated incrementally so that a gzip bomb
   stops at ``max_decompressed_bytes`` instead of filling memory; by ISA-L (``isal``, pinned in
   requirements.txt) where installed, else by zlib: the same stream API, the same bytes.
2. ``decode``: JSON → batches of ``records.Event``. msgspec first locates each event's raw
   JSON (``list[msgspec.Raw]``), then decodes 8k events at a time into typed Structs
   (validated as they parse). A batch in which some event has an unexpected type is decoded
   event by event, and only the failing events go through the Python checks
   (``records.checked``); bad events are dropped and counted in ``skipped_events``.

One path, one schema: msgspec is a pinned requirement (wheels travel to the GPU box), so the
record type never depends on which imports succeed. The stdlib ``json`` parser stays for what
msgspec refuses by design and Python's own ``json.dumps`` writes: ``NaN`` / ``Infinity``
tokens and numbers beyond float range, in one event or anywhere in the document. What it
reads goes through the same checks into the same Structs. (orjson, once a fallback for hosts
without msgspec, rejects those tokens too, so it served no case msgspec does not.)
"""

from __future__ import annotations

import json
import os
import re
import types
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from lab.trace.model import TraceError
from lab.trace.records import (
    LIST_DECODER,
    RAW_DOC_DECODER,
    RAW_LIST_DECODER,
    TYPED_DOC_DECODER,
    Event,
    checked,
    typed_or_python,
)
from lab.trace.values import json_type

_inflate_lib: types.ModuleType
try:  # ISA-L's inflate: 0.105 s vs zlib's 0.139 s on a 114 MB-JSON trace (34 MB gzip); optional
    from isal import isal_zlib as _inflate_lib
except ImportError:  # pragma: no cover - exercised by tests/test_decode_isal.py with isal hidden
    _inflate_lib = zlib

__all__ = ["Source", "decode", "read_json_bytes", "too_deep"]

# Inflate in slices this size, so the decompressed-size cap is checked before memory is spent.
_INFLATE_CHUNK_BYTES = 8 << 20
_DEFLATE_SLICE_BYTES = 1 << 20  # compressed input handed to zlib per call
# Kineto traces gzip 10-20x (the bundled samples: 12x; synthetic repeated-step traces in
# bench/: see BENCHMARKS.md); deflate's ceiling is ~1032x. Past 200x the data is a run of
# repeats, i.e. a gzip bomb: stop early rather than inflating up to the size cap (1 GiB takes
# seconds). Only checked once 32 MiB are out, so small odd files are never refused for it.
_MAX_GZIP_RATIO = 200
_RATIO_CHECK_FROM_BYTES = 32 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_NON_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")  # what bytes.lstrip() does not strip
_RAISE_CAP = "profile fewer steps or raise PROFILER_LAB_MAX_TRACE_DECOMPRESSED_MB."

# Events turned into Python objects at a time. The raw JSON of every event is located first
# (cheap: 48 bytes per event); objects exist only for one batch (~6 MB) before they become
# column arrays, which keeps peak memory near the JSON size plus the final frame.
_BATCH_EVENTS = 8_192
# Up to this size the events are typed in the same parse that reads the document, instead of
# located first (list[msgspec.Raw]) and typed batch by batch: one parse instead of two plus a
# join per batch, 62 → 38 ms CPU on a 10 MB CPU trace, 125 → 90 ms on the 22.7 MB transformer
# step (min of 5, load 4). The price: every event is a Struct at once, the load's growth 3.4-3.6×
# the JSON instead of 1.5-1.9× (37 and 114 MB real CPU traces), so only small traces take it:
# at most ~170 MB more, inside the smallest reader's 256 MB (lab/read/limits.py); the rest
# stay near 2× (BENCHMARKS.md, "A 1 GB JSON trace in a reader-like process").
_ONE_PASS_MAX_BYTES = 48 << 20


# ---------------------------------------------------------------------------------------------
# Stage 1: source → JSON bytes


def read_json_bytes(source, cap_bytes: int) -> bytes | bytearray | memoryview:
    data: bytes | bytearray | memoryview
    if isinstance(source, (bytes, bytearray)):
        data = source
    elif isinstance(source, memoryview):
        try:
            data = source.cast("B")  # byte view of any contiguous buffer
        except TypeError:
            data = source.tobytes()  # non-contiguous: copy once
    elif isinstance(source, (str, os.PathLike)):
        data = _read_file(Path(source), cap_bytes)
    else:
        raise TraceError(
            f"cannot read a trace from a {type(source).__name__}; pass bytes or a path to a "
            ".json / .json.gz file."
        )
    if bytes(data[:2]) == _GZIP_MAGIC:
        return _gunzip(data, cap_bytes)
    if len(data) > cap_bytes:
        raise TraceError(
            f"the trace is {len(data) / 2**20:.0f} MiB, over the {cap_bytes / 2**20:.0f} MiB limit; " + _RAISE_CAP
        )
    return data


def _read_file(path: Path, cap_bytes: int) -> bytes:
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise TraceError(f"{path} is not a file; pass the path of a .json or .json.gz trace.")
        if size > cap_bytes:
            raise TraceError(
                f"{path} is {size / 2**20:.0f} MiB, over the {cap_bytes / 2**20:.0f} MiB limit for "
                "traces; " + _RAISE_CAP
            )
        return path.read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}; check the path.") from None


def _gunzip(data, cap_bytes: int) -> bytearray:
    """Inflate gzip (possibly several members) without ever holding more than the cap.

    Input goes in 1 MiB slices and output comes out 8 MiB at a time (``max_length``), so every
    check in ``_Inflated.add`` runs before more memory is spent and no call copies the whole
    input.
    """
    view = memoryview(data).cast("B")
    out = _Inflated(cap_bytes)
    pos = 0  # input bytes handed to zlib so far
    try:
        while True:  # one gzip member per round (RFC 1952 allows several, concatenated)
            pos = _inflate_member(view, pos, out)
            if pos >= len(view):
                return out.data
            if bytes(view[pos : pos + 2]) != _GZIP_MAGIC:
                if bytes(view[pos:]).strip(b"\x00"):  # zero padding after the end is harmless
                    raise TraceError("the gzip file has stray bytes after its end; re-export the trace.")
                return out.data
    except (zlib.error, _inflate_error()) as exc:
        raise TraceError(
            f"the gzip data is corrupt ({exc}); re-export the trace or upload the plain .json."
        ) from None


def _inflate_error() -> type[Exception]:
    error: type[Exception] = _inflate_lib.error
    return error


def _inflate_member(view: memoryview, pos: int, out: _Inflated) -> int:
    """Inflate the gzip member starting at ``pos`` into ``out``; returns where it ends."""
    inflater = _inflate_lib.decompressobj(wbits=31)  # 16 + 15: gzip header and trailer
    while not inflater.eof:
        tail = inflater.unconsumed_tail
        if tail:
            chunk = inflater.decompress(tail, _INFLATE_CHUNK_BYTES)
        elif pos < len(view):
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
        if chunk:
            out.add(chunk, consumed=pos - len(inflater.unconsumed_tail))
    # Bytes zlib read past this member's end belong to what follows it.
    return pos - len(inflater.unused_data)


class _Inflated:
    """The inflated text so far; each chunk is checked before it is kept."""

    def __init__(self, cap_bytes: int):
        self.data = bytearray()
        self.cap_bytes = cap_bytes
        self.looked_at_start = False

    def add(self, chunk: bytes, consumed: int) -> None:
        if b"\x00" in chunk:  # JSON text never holds NUL bytes; zero-filled bombs do
            raise TraceError(
                "the gzip file holds binary data, not JSON text; upload the .json or "
                ".json.gz trace that torch.profiler exported."
            )
        if not self.looked_at_start:
            # The first non-blank byte, found in place: chunk.lstrip() copied the whole 8 MiB
            # chunk (4.6 ms of the 22.7 MB transformer step's ~150 ms load, cProfile).
            first = _NON_BLANK.search(chunk)
            head = first.group() if first else b""
            if head:
                self.looked_at_start = True
                if head not in (b"{", b"["):  # refuse before inflating any more
                    raise TraceError(
                        "the gzip file does not contain JSON (a trace starts with '{' or "
                        "'['); upload the .json or .json.gz that torch.profiler exported."
                    )
        self.data += chunk
        n = len(self.data)
        if n > self.cap_bytes:
            raise TraceError(
                f"the gzip trace inflates past the {self.cap_bytes / 2**20:.0f} MiB limit "
                "(a gzip bomb, or a very long profile); " + _RAISE_CAP
            )
        if n >= _RATIO_CHECK_FROM_BYTES and n > _MAX_GZIP_RATIO * max(consumed, 1):
            raise TraceError(
                f"the gzip data inflates more than {_MAX_GZIP_RATIO}x, which no profiler "
                "trace does (this looks like a gzip bomb); upload the plain .json instead."
            )


# ---------------------------------------------------------------------------------------------
# Stage 2: JSON → event records


@dataclass
class Source:
    top: dict  # top-level keys other than traceEvents
    n_events: int
    batches: Iterator[tuple[list[Event], int]]  # (records, events dropped as malformed)


def decode(buf, max_events: int) -> Source:
    first = bytes(buf[:64]).lstrip()[:1]
    if not first and not bytes(buf).strip():
        raise TraceError("the trace is empty; upload the .json or .json.gz file torch.profiler exported.")
    if first in b'"-0123456789tfn':  # a JSON scalar, or garbage: let the parser say which
        return _decode_python(buf, max_events)
    if first not in (b"{", b"["):
        # Quote the start only when it reads as text: a bytes literal (b"y\xd3\xaf…") means nothing
        # to an attendee.
        head = bytes(buf[:20]).decode("ascii", errors="replace")
        shown = f"starts with “{head}”" if head.isprintable() and "\ufffd" not in head else "is binary data"
        raise TraceError(
            f"this is not JSON (it {shown}); upload the .json or .json.gz trace "
            "that torch.profiler's export_chrome_trace wrote."
        )
    if len(buf) <= _ONE_PASS_MAX_BYTES:
        typed = _decode_one_pass(buf, first, max_events)
        if typed is not None:
            return typed
    try:
        if first == b"[":
            raws, top = RAW_LIST_DECODER.decode(buf), {}
        else:
            doc = RAW_DOC_DECODER.decode(buf)
            if doc.traceEvents is msgspec.UNSET:
                raise _not_a_trace("a JSON object without a 'traceEvents' list")
            raws = doc.traceEvents
            top = {f: getattr(doc, f) for f in doc.__struct_fields__ if f != "traceEvents"}
    except msgspec.ValidationError:  # traceEvents is not a list: the Python route says what it is
        return _decode_python(buf, max_events)
    except msgspec.DecodeError as exc:  # not JSON, or NaN / huge numbers only stdlib json reads
        return _decode_python(buf, max_events, msgspec_error=str(exc))
    except RecursionError:
        raise too_deep() from None
    if len(raws) > max_events:
        raise _too_many(len(raws), max_events)
    return Source(top, len(raws), _typed_batches(raws))


def _decode_one_pass(buf, first: bytes, max_events: int) -> Source | None:
    """The document and its events typed in one parse; None when msgspec refuses it anywhere
    (an event of an unexpected type, NaN, not JSON...): the two-pass route then reads it and
    says, or checks event by event, exactly as it would have."""
    try:
        if first == b"[":
            events, top = LIST_DECODER.decode(buf), {}
        else:
            doc: Any = TYPED_DOC_DECODER.decode(buf)  # a TypedDoc (made by defstruct: untyped)
            if doc.traceEvents is msgspec.UNSET:
                return None
            events = doc.traceEvents
            top = {f: getattr(doc, f) for f in doc.__struct_fields__ if f != "traceEvents"}
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    except RecursionError:
        raise too_deep() from None
    if len(events) > max_events:
        raise _too_many(len(events), max_events)
    return Source(top, len(events), _sliced(events))


def _sliced(events: list[Event]) -> Iterator[tuple[list[Event], int]]:
    for i in range(0, len(events), _BATCH_EVENTS):
        yield events[i : i + _BATCH_EVENTS], 0


def _typed_batches(raws: list) -> Iterator[tuple[list[Event], int]]:
    """Typed decode, one batch of raw events per call; a batch with an unexpected type
    somewhere is decoded event by event instead."""
    for i in range(0, len(raws), _BATCH_EVENTS):
        chunk = raws[i : i + _BATCH_EVENTS]
        try:
            yield LIST_DECODER.decode(b"[" + b",".join(chunk) + b"]"), 0
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            # DecodeError here: bad UTF-8 inside a string, which locating events does not check
            yield checked(map(typed_or_python, chunk))


def _decode_python(buf, max_events: int, msgspec_error: str | None = None) -> Source:
    """The whole document as Python objects (``_loads``), its events through the checks."""
    obj = _loads(buf, msgspec_error)
    raw_events: Any
    if isinstance(obj, list):
        raw_events, top = obj, {}
    elif isinstance(obj, dict):
        raw_events = obj.get("traceEvents")
        if not isinstance(raw_events, list):
            what = "a JSON object without a 'traceEvents' list" if raw_events is None else (
                f"a JSON object whose 'traceEvents' is a {json_type(raw_events)}"
            )
            raise _not_a_trace(what)
        top = {k: v for k, v in obj.items() if k != "traceEvents"}
    else:
        raise _not_a_trace(f"a {json_type(obj)}")
    if len(raw_events) > max_events:
        raise _too_many(len(raw_events), max_events)
    batches = (checked(raw_events[i : i + _BATCH_EVENTS]) for i in range(0, len(raw_events), _BATCH_EVENTS))
    return Source(top, len(raw_events), batches)


def _loads(buf, msgspec_error: str | None):
    """Untyped decode: msgspec, then stdlib json, which also reads NaN/Infinity tokens and
    numbers beyond float range. An error names msgspec's reason when both refuse."""
    error = msgspec_error
    if msgspec_error is None:
        try:
            return msgspec.json.decode(buf)
        except RecursionError:
            raise too_deep() from None
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            error = str(exc)
    try:
        return json.loads(bytes(buf) if isinstance(buf, memoryview) else buf)
    except RecursionError:
        raise too_deep() from None
    except (ValueError, UnicodeDecodeError) as exc:
        detail = error or str(exc)
        raise TraceError(
            f"the trace is not valid JSON ({detail}); the file may be truncated or corrupt — "
            "re-export it with export_chrome_trace."
        ) from None


def too_deep() -> TraceError:
    return TraceError(
        "the JSON is nested too deeply to be a profiler trace; upload the trace that "
        "torch.profiler exported."
    )


def _not_a_trace(what: str) -> TraceError:
    return TraceError(
        f"this JSON is {what}, not a Chrome trace; a trace is an object with a 'traceEvents' "
        "list (or a bare list of events) as written by torch.profiler's export_chrome_trace."
    )


def _too_many(n: int, cap: int) -> TraceError:
    return TraceError(
        f"the trace has {n:,} events, over the limit of {cap:,}; profile fewer steps "
        "(schedule active=1) or raise PROFILER_LAB_MAX_TRACE_EVENTS."
    )

"""Large objects across a child's pipe as raw frames: a pickle (protocol 5) and its buffers.

Pickle protocol 5 hands every contiguous array over as a buffer of its own (a view, no copy),
sent as a frame each: neither side ever holds a second whole copy of the object (on the 509 MB
tile's ``Parsed`` that copy was 236 MB, a fifth of the reader's peak). On the receiving side
each buffer lands in a bytearray of its own that the unpickled arrays then use as they are
(writable, not copied). Used both ways: results from a reader, and the traces a multi-trace
job sends to one.

A small object (a view's answer, a table, an outline: at most ``COMPRESS_UP_TO_BYTES`` pickled)
goes instead as one zlib-compressed in-band pickle: such pickles are mostly column names, index
metadata and repeated labels, and compress about 3× (a 7 KB by-shape table to 2 KB, in ~0.1 ms);
zero-copy buffers would save nothing at that size. The receiver tells the two apart by the first
byte: a pickle of protocol ≥ 2 starts with PROTO (0x80), a zlib stream with 0x78.
"""

from __future__ import annotations

import pickle
import zlib
from typing import Any

__all__ = ["COMPRESS_UP_TO_BYTES", "frame_sizes", "pack", "receive_frames", "receive_object", "send_frames"]

# Objects whose pickle (head and buffers) is at most this go as one compressed frame. Past it,
# compressing costs more than it saves: zlib level 1 runs at ~100–300 MB/s here, while the pipe
# moves a GB/s, and a large object's buffers must not be copied into one in-band pickle.
COMPRESS_UP_TO_BYTES = 1 << 20
_ZLIB_LEVEL = 1  # the fastest level: most of the gain on small pickles (6 saves another ~5 %)
_ZLIB_FIRST_BYTE = 0x78  # every zlib stream's CMF byte at the default window; a pickle's is 0x80


def pack(obj: Any) -> list:
    """``obj`` as frames: the pickle first, then each out-of-band buffer (as memoryviews); or, for
    a small object, its in-band pickle compressed as the one frame."""
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    if len(head) + sum(r.nbytes for r in raws) <= COMPRESS_UP_TO_BYTES:
        return [zlib.compress(pickle.dumps(obj, protocol=5), _ZLIB_LEVEL)]
    return [head, *raws]


def frame_sizes(frames: list) -> tuple[int, ...]:
    return tuple(len(f) if isinstance(f, (bytes, bytearray)) else f.nbytes for f in frames)


def send_frames(conn, frames: list) -> None:
    for frame in frames:
        conn.send_bytes(frame)


def receive_frames(conn, frame_bytes: tuple[int, ...]) -> tuple[bytes, list[bytearray]]:
    """The head and buffers of ``len(frame_bytes)`` frames; raises EOFError/OSError if the pipe breaks."""
    head = conn.recv_bytes()
    buffers = []
    for size in frame_bytes[1:]:
        buffer = bytearray(size)
        if size:
            conn.recv_bytes_into(buffer)
        else:
            conn.recv_bytes()
        buffers.append(buffer)
    return head, buffers


def receive_object(conn, frame_bytes: tuple[int, ...]) -> Any:
    head, buffers = receive_frames(conn, frame_bytes)
    if head[:1] == bytes((_ZLIB_FIRST_BYTE,)):  # a small object, compressed whole by pack
        return pickle.loads(zlib.decompress(head))
    return pickle.loads(head, buffers=buffers)

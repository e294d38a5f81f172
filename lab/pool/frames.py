"""Large objects across a child's pipe as raw frames: a pickle (protocol 5) and its buffers.

Pickle protocol 5 hands every contiguous array over as a buffer of its own (a view, no copy),
sent as a frame each: neither side ever holds a second whole copy of the object (on the 509 MB
tile's ``Parsed`` that copy was 236 MB, a fifth of the reader's peak). On the receiving side
each buffer lands in a bytearray of its own that the unpickled arrays then use as they are
(writable, not copied). Used both ways: results from a reader, and the traces a multi-trace
job sends to one.
"""

from __future__ import annotations

import pickle
from typing import Any

__all__ = ["frame_sizes", "pack", "receive_frames", "receive_object", "send_frames"]


def pack(obj: Any) -> list:
    """``obj`` as frames: the pickle first, then each out-of-band buffer (as memoryviews)."""
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return [head, *(b.raw() for b in buffers)]


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
    return pickle.loads(head, buffers=buffers)

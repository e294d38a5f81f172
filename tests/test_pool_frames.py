"""What crosses a child's pipe (lab.pool.frames): small objects compressed whole, large ones as
zero-copy buffers; both come back equal, through a real pipe."""

from __future__ import annotations

import pickle
import threading
import zlib
from multiprocessing import Pipe

import numpy as np
import pandas as pd

from lab.pool.frames import COMPRESS_UP_TO_BYTES, frame_sizes, pack, receive_object, send_frames


def _through_a_pipe(obj):
    frames = pack(obj)
    here, there = Pipe()
    sender = threading.Thread(target=send_frames, args=(here, frames))  # a pipe's buffer is finite
    sender.start()
    out = receive_object(there, frame_sizes(frames))
    sender.join()
    return frames, out


def _table(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"name": [f"aten::op_{i % 7}" for i in range(rows)], "count": np.arange(rows),
                         "self_cpu_time_total_us": rng.random(rows), "cpu_time_total_us": rng.random(rows)})


def test_a_small_table_crosses_as_one_compressed_frame_smaller_than_its_pickle():
    table = _table(12)
    frames, out = _through_a_pipe(table)
    pickled = len(pickle.dumps(table, protocol=5))
    assert len(frames) == 1 and sum(frame_sizes(frames)) < pickled, (frame_sizes(frames), pickled)
    assert zlib.decompress(frames[0])[:1] == b"\x80"  # a pickle inside
    pd.testing.assert_frame_equal(out, table)


def test_a_large_array_crosses_as_its_own_buffer_uncompressed():
    big = np.arange(COMPRESS_UP_TO_BYTES // 8 + 1024, dtype=np.float64)
    frames, out = _through_a_pipe({"x": big, "label": "large"})
    assert len(frames) == 2 and frame_sizes(frames)[1] == big.nbytes  # the head, then the array as it is
    assert frames[0][:1] == b"\x80"
    assert out["label"] == "large" and np.array_equal(out["x"], big) and out["x"].flags.writeable

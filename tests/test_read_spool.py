"""A trace's bytes reach their reader as a spool file in shared memory (``lab.read.spool``),
and the file is gone once its read settles, whatever the outcome: read, refused,
cancelled while queued, its reader killed mid-parse, the pool shut down, refused before any
reader saw it; a dead server's files are swept by the next pool. Real reader processes, the
spool folder a temporary one (the box's /dev/shm is shared with other servers).
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lab.core import HostSettings
from lab.read import ReaderPool, ReadFailed, ReadFailureKind
from lab.read.spool import SPOOL_PREFIX, spool, spooled_by, sweep
from tests.test_readers import START_S, medium, started, wait_until_reading  # noqa: F401 - a fixture

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "tests" / "data" / "matmul_add_4096_bf16.json.gz"
pytestmark = [pytest.mark.subprocess, pytest.mark.pool, pytest.mark.timeout(600)]


def spooled(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith(SPOOL_PREFIX))


def seed_events() -> int:
    """Complete events ("ph": "X", one row each in ``Trace.events``) in the seed trace's JSON."""
    return sum(e.get("ph") == "X" for e in json.loads(gzip.decompress(SEED.read_bytes()))["traceEvents"])


def test_a_read_goes_by_a_spool_file_and_every_outcome_removes_it(tmp_path, medium):  # noqa: F811
    data = SEED.read_bytes()
    pool = ReaderPool(settings=HostSettings(reader_count=1), spool_dir=tmp_path, spool_min_bytes=1)
    ticket = pool.submit(data, label="seed.json.gz")  # starts the pool: queued while the reader warms up
    assert ticket.job.spooled and ticket.job.path is not None
    (file,) = spooled(tmp_path)
    assert str(file) == ticket.job.path and file.read_bytes() == data and spooled_by(file) == os.getpid()
    assert (file.stat().st_mode & 0o777) == 0o600
    queued = pool.submit(data, label="dropped.json.gz")
    assert len(spooled(tmp_path)) == 2
    assert queued.cancel()  # cancelled while queued (one reader, busy with the first)
    assert spooled(tmp_path) == [file]
    try:
        assert pool.wait_ready(START_S)
        parsed = ticket.result(timeout=START_S)
        assert len(parsed.trace.events) == seed_events()  # the mapped bytes, read whole
        assert spooled(tmp_path) == []
        with pytest.raises(ReadFailed) as refused:  # not a trace: refused, and its file goes too
            pool.read(b"this is not a trace {" + b" " * 2**20, label="notes.json")
        assert refused.value.kind == ReadFailureKind.TRACE
        assert spooled(tmp_path) == []
        killed = pool.submit(medium, label="killed.json")  # its reader killed while it maps the file
        wait_until_reading(killed)
        assert len(spooled(tmp_path)) == 1
        os.kill(pool.health().readers[0].pid, signal.SIGKILL)
        with pytest.raises(ReadFailed) as crashed:
            killed.result(timeout=60)
        assert crashed.value.kind == ReadFailureKind.CRASH
        assert spooled(tmp_path) == []
        waiting = [pool.submit(medium, label=f"left_{i}.json") for i in range(2)]
    finally:
        pool.shutdown()
    assert all(t.done() for t in waiting)  # the pool stopped: running and queued reads failed
    assert spooled(tmp_path) == []


def test_a_trace_refused_for_its_size_alone_is_never_spooled(tmp_path):
    claims = bytearray(gzip.compress(b"{}"))
    claims[-4:] = (2**32 - 1).to_bytes(4, "little")  # the gzip footer claims 4 GiB of JSON
    pool = ReaderPool(settings=HostSettings(reader_count=1, reader_memory_mb=256), spool_dir=tmp_path,
                      spool_min_bytes=1)
    try:
        ticket = pool.submit(bytes(claims), label="huge.json.gz")
        with pytest.raises(ReadFailed) as refused:
            ticket.result(timeout=0)
        assert refused.value.kind == ReadFailureKind.MEMORY
        assert spooled(tmp_path) == []
    finally:
        pool.shutdown()


def test_without_a_spool_folder_the_bytes_go_as_a_frame(tmp_path):
    with started(ReaderPool(settings=HostSettings(reader_count=1), spool_dir=tmp_path / "missing",
                            spool_min_bytes=1)) as pool:
        ticket = pool.submit(SEED.read_bytes(), label="seed.json.gz")
        assert not ticket.job.spooled and ticket.job.path is None
        assert len(ticket.result(timeout=START_S).trace.events) == seed_events()


def test_a_folder_without_room_for_it_is_not_used(tmp_path, monkeypatch):
    from lab.read import spool as spool_module

    free = os.statvfs(tmp_path)
    room = free.f_bavail * free.f_frsize
    monkeypatch.setattr(spool_module, "SPOOL_ROOM_FACTOR", 1)
    assert spool(b"x" * 16, tmp_path) is not None
    too_big = memoryview(bytearray(16))
    monkeypatch.setattr(spool_module, "SPOOL_ROOM_FACTOR", room // 16 + 1)  # 16 bytes "need" more than is free
    assert spool(too_big, tmp_path) is None
    assert len(spooled(tmp_path)) == 1


def test_sweep_removes_the_files_of_servers_no_longer_running(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"{SPOOL_PREFIX}{gone.pid}-0123456789abcdef"
    dead.write_bytes(b"left by a server that died")
    mine = Path(spool(b"a read in flight", tmp_path) or "")
    other = tmp_path / "someone-elses.json"
    other.write_bytes(b"{}")
    assert sweep(tmp_path) == 1
    assert not dead.exists() and mine.exists() and other.exists()
    dead.write_bytes(b"again")
    pool = ReaderPool(settings=HostSettings(reader_count=1), spool_dir=tmp_path).start()
    try:
        assert not dead.exists() and mine.exists()  # a starting pool sweeps
    finally:
        pool.shutdown()

"""Gzip traces inflate to the same bytes with ISA-L (``isal``) and with zlib, its fallback."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest

from lab.trace import decode, load_trace
from lab.trace.model import TraceError

DATA = Path(__file__).parent / "data"
CAP = 1 << 30


@pytest.fixture
def zlib_only(monkeypatch):
    """The module as it is on a host without isal."""
    monkeypatch.setattr(decode, "_inflate_lib", zlib)


def test_isal_is_used_when_installed():
    pytest.importorskip("isal")
    assert decode._inflate_lib.__name__ == "isal.isal_zlib"


@pytest.mark.parametrize("name", ["matmul_add_4096_bf16.json.gz", "groundtruth/cpu/llama_train.json.gz"])
def test_fallback_inflates_the_same_bytes(name, monkeypatch):
    raw = (DATA / name).read_bytes()
    expected = gzip.decompress(raw)
    assert bytes(decode.read_json_bytes(raw, CAP)) == expected
    monkeypatch.setattr(decode, "_inflate_lib", zlib)
    assert bytes(decode.read_json_bytes(raw, CAP)) == expected


def test_fallback_reads_the_same_trace(zlib_only):
    path = DATA / "groundtruth" / "cpu" / "resnet_amp.json.gz"
    with_zlib = load_trace(path)
    plain = load_trace(gzip.decompress(path.read_bytes()))
    assert with_zlib.events.equals(plain.events)
    assert with_zlib.flows.equals(plain.flows)


def test_multi_member_and_corrupt_gzip_with_both(monkeypatch):
    body = gzip.decompress((DATA / "matmul_add_4096_bf16.json.gz").read_bytes())
    half = len(body) // 2
    two = gzip.compress(body[:half]) + gzip.compress(body[half:])
    for lib in {decode._inflate_lib, zlib}:
        monkeypatch.setattr(decode, "_inflate_lib", lib)
        assert bytes(decode.read_json_bytes(two, CAP)) == body
        broken = bytearray(gzip.compress(body))
        broken[len(broken) // 2] ^= 0xFF
        with pytest.raises(TraceError, match="corrupt|truncated|stray"):
            decode.read_json_bytes(bytes(broken), CAP)

"""How many readers, how much memory each, and what a trace will need: the numbers and the words.

Measured on this repo's 2-core / 24 GiB box (``bench/bench_uploads.py``): the 509 MB-JSON
(34 MB gzipped, 2.05M events) tile of the H200 seed trace took 8.0 s to parse and 2.2 s to
analyse on one core; in a reader its address space peaked 0.88 GB above the reader's start-up
size of 0.32 GB (1.74× the JSON), its resident memory at 0.99 GB; the parsed result pickles to
236 MB (0.46× the JSON).
Nothing here imports pandas, torch or streamlit.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from lab.core.settings import HostSettings

__all__ = [
    "GZIP_RATIO_FLOOR", "MIB", "READER_NICE", "SMALL_READ_JSON_BYTES", "ReaderPlan", "address_space_needed",
    "analysis_refusal", "json_size_hint", "machine_memory_bytes", "memory_refusal", "process_memory", "reader_plan",
    "surely_too_big", "timeout_refusal",
]  # fmt: skip

MIB = 2**20
# Address space a read needs per byte of JSON, above the reader's start-up size: 1.74× measured
# on the 509 MB tile (see above), 2× with a margin; the estimate quoted to the visitor.
ADDRESS_SPACE_PER_JSON_BYTE = 2.0
# Refused before parsing only when even this lower factor does not fit (the inflated text alone
# is 1×): a trace that might fit is tried, with RLIMIT_AS behind it.
SURELY_NEEDED_PER_JSON_BYTE = 1.2
# Kineto JSON gzips 12–20× (the 509 MB tile: 15×); 8× is the floor used to size a .gz before
# inflating it, so a file whose gzip footer claims a tiny size still counts as large.
GZIP_RATIO_FLOOR = 8
# A read of at most this much JSON (~2 s) is "small": bundled samples, runs, most uploads. One
# reader is kept for small reads, so a page never waits behind someone's 500 MB trace.
SMALL_READ_JSON_BYTES = 64 * MIB
# Readers parse at a lower CPU priority than the server and the profiling workers: on 2 cores
# a click on another page must not wait for someone's upload.
READER_NICE = 10
# Defaults taken from the machine: readers' memory limits together at most half of it, 2–4
# readers, none allowed more than 8 GiB (a 1 GB-JSON trace, the largest the default
# max_trace_decompressed_mb lets in, needs ~2 GB); held uploads at most a quarter of it.
READERS_MEMORY_SHARE = 0.5
HELD_UPLOADS_SHARE = 0.25
MIN_READERS, MAX_READERS = 2, 4
MIN_READER_MEMORY_MB, MAX_READER_MEMORY_MB = 256, 8192


@dataclass(frozen=True, kw_only=True)
class ReaderPlan:
    """The pool's shape on this host, after 0 = "from the machine" was resolved."""

    count: int
    memory_mb: int  # address space each reader may add to its start-up size
    timeout_s: float
    large_slots: int  # readers a large read may occupy at once (the rest wait for small reads)
    held_uploads_mb: int


def machine_memory_bytes() -> int:
    """Physical memory, or the cgroup's limit when one is set and smaller."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        raw = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if raw.isdigit():
            total = min(total, int(raw))
    except OSError:
        pass
    return total


def reader_plan(settings: HostSettings, *, memory_bytes: int | None = None, cpus: int | None = None) -> ReaderPlan:
    """Readers, their memory and the held-uploads budget: the host's settings, 0 filled in."""
    memory = machine_memory_bytes() if memory_bytes is None else memory_bytes
    cpu_count = (os.cpu_count() or 1) if cpus is None else cpus
    count = settings.reader_count or max(MIN_READERS, min(MAX_READERS, cpu_count))
    share_mb = int(memory * READERS_MEMORY_SHARE / count / MIB) // 256 * 256
    memory_mb = settings.reader_memory_mb or max(MIN_READER_MEMORY_MB, min(MAX_READER_MEMORY_MB, share_mb))
    held_mb = settings.uploads_held_mb or int(memory * HELD_UPLOADS_SHARE / MIB)
    return ReaderPlan(count=count, memory_mb=memory_mb, timeout_s=settings.read_timeout_s,
                      large_slots=count - 1 if count >= 2 else count, held_uploads_mb=held_mb)


def json_size_hint(data: bytes | bytearray | memoryview | None, path: str | None = None) -> int:
    """About how many bytes of JSON ``data`` (or the file at ``path``) holds, without inflating it.

    Plain JSON: its length. Gzip: the larger of the last member's footer (ISIZE, the size mod
    2**32 the writer claims) and ``GZIP_RATIO_FLOOR`` × the compressed size.
    """
    if data is None:
        try:
            with open(path, "rb") as fh:  # type: ignore[arg-type]
                head = fh.read(2)
                size = os.fstat(fh.fileno()).st_size
                fh.seek(max(size - 4, 0))
                tail = fh.read(4)
        except (OSError, TypeError):
            return 0
    else:
        view = memoryview(data)
        head, tail, size = bytes(view[:2]), bytes(view[-4:]), len(view)
    if head != b"\x1f\x8b":
        return size
    claimed = struct.unpack("<I", tail)[0] if len(tail) == 4 else 0
    return max(claimed, GZIP_RATIO_FLOOR * size)


def address_space_needed(json_bytes: int) -> int:
    """The address space a read of ``json_bytes`` of JSON is expected to take (the quoted estimate)."""
    return int(json_bytes * ADDRESS_SPACE_PER_JSON_BYTE)


def surely_too_big(json_bytes: int, memory_mb: int) -> bool:
    """Whether a read of ``json_bytes`` cannot fit in a reader's ``memory_mb`` whatever the trace."""
    return json_bytes * SURELY_NEEDED_PER_JSON_BYTE > memory_mb * MIB


def _gb(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.1f} GB" if n_bytes >= 2**30 / 10 else f"{n_bytes / MIB:.0f} MB"


def memory_refusal(json_bytes: int, memory_mb: int) -> str:
    """The visitor's message when a trace needs more memory than one reader may take."""
    need, allowed = address_space_needed(json_bytes), memory_mb * MIB
    # A read that failed although the estimate fits needs more than the limit: say "over" it.
    amount = f"about {_gb(need)} (it allows {_gb(allowed)})" if need > allowed else f"over the {_gb(allowed)} it allows"
    return (f"this trace needs more memory than this host allows per upload: {amount}; trim it with a "
            "shorter schedule (fewer active steps) or open it in Perfetto (ui.perfetto.dev)")


def timeout_refusal(timeout_s: float) -> str:
    return (f"reading this trace took longer than this host allows per upload ({timeout_s:g} s); trim it with "
            "a shorter schedule (fewer active steps) or open it in Perfetto (ui.perfetto.dev)")


def analysis_refusal(exc: BaseException) -> str:
    """The visitor's message when a trace parsed but an analysis failed on it (the host sees the type)."""
    return (f"the lab could not analyse it ({type(exc).__name__}: {exc}); the file may be from "
            "an unusual profiler setup")


def process_memory(pid: int | None) -> tuple[int, int] | None:
    """(resident, address space) bytes of process ``pid`` from /proc, or None (gone, not Linux)."""
    if pid is None:
        return None
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmSize"):
            found[key] = int(value.split()[0]) * 1024
    if len(found) < 2:
        return None
    return found["VmRSS"], found["VmSize"]

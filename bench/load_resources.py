"""Where the load test's CPU and memory go: the server, its profiling worker(s) and Chromium.

On a small box the browsers compete with the server for the same cores, which a workshop's
laptops do not; these figures say how much.
"""

from __future__ import annotations

import platform
import threading
from pathlib import Path

from load_result import MemoryPeaks

__all__ = ["CpuSnapshot", "MemorySampler", "cpu_model", "cpu_used"]

# CPU seconds (user + system) so far, per process group ("server", "worker", "chromium") and pid.
CpuSnapshot = dict[str, dict[int, float]]
SAMPLE_EVERY_S = 1.0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _is_chromium(process) -> bool:
    try:
        return "chrom" in process.name().lower()
    except Exception:  # noqa: BLE001 - a process that just exited
        return False


class MemorySampler:
    """Every second: system available memory, RSS of the server's process group and of Chromium."""

    def __init__(self, server_pid: int):
        import psutil

        self._psutil = psutil
        self.server_pid = server_pid
        self.min_available_bytes = psutil.virtual_memory().available
        self.peak_server_bytes = 0
        self.peak_chromium_bytes = 0
        self.peak_chromium_procs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _rss(self, procs) -> int:
        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
                pass
        return total

    def _chromium(self) -> list:
        return [p for p in self._psutil.Process().children(recursive=True) if _is_chromium(p)]

    def sample(self) -> None:
        ps = self._psutil
        self.min_available_bytes = min(self.min_available_bytes, ps.virtual_memory().available)
        try:
            server = ps.Process(self.server_pid)
            self.peak_server_bytes = max(self.peak_server_bytes,
                                         self._rss([server, *server.children(recursive=True)]))
        except ps.NoSuchProcess:
            pass
        chromium = self._chromium()
        self.peak_chromium_procs = max(self.peak_chromium_procs, len(chromium))
        self.peak_chromium_bytes = max(self.peak_chromium_bytes, self._rss(chromium))

    def cpu_snapshot(self) -> CpuSnapshot:
        """CPU seconds (user + system) so far per process: the server, its worker(s), Chromium."""
        ps = self._psutil
        groups: dict[str, list] = {"server": [], "worker": [], "chromium": []}
        try:
            server = ps.Process(self.server_pid)
            groups["server"] = [server]
            groups["worker"] = server.children(recursive=True)
        except ps.NoSuchProcess:
            pass
        groups["chromium"] = self._chromium()
        snapshot: CpuSnapshot = {}
        for name, procs in groups.items():
            snapshot[name] = {}
            for p in procs:
                try:
                    t = p.cpu_times()
                    snapshot[name][p.pid] = t.user + t.system
                except (ps.NoSuchProcess, ps.AccessDenied):
                    pass
        return snapshot

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            self.sample()

    def start(self) -> MemorySampler:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> MemoryPeaks:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()
        return MemoryPeaks(min_available_bytes=self.min_available_bytes, peak_server_bytes=self.peak_server_bytes,
                           peak_chromium_bytes=self.peak_chromium_bytes, peak_chromium_procs=self.peak_chromium_procs)


def cpu_used(before: CpuSnapshot, after: CpuSnapshot) -> dict[str, float]:
    """CPU seconds per group between two snapshots (a process born in between counts in full)."""
    return {name: sum(t - before.get(name, {}).get(pid, 0.0) for pid, t in pids.items())
            for name, pids in after.items()}

"""What one load test found, as data: the driver returns a ``LoadResult``, the report formats
it, ``--json PATH`` writes it and tests/test_load_quick.py reads it back (no stdout scraping).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from page_clock import PageClock

__all__ = ["Figures", "LoadResult", "MemoryPeaks", "NewSession", "RoomResult", "SessionResult", "figures", "percentile"]


@dataclass(frozen=True)
class SessionResult:
    """One attendee's session: what it ran, its page clock and whether it saw only its own work."""

    index: int
    label: str
    size: int  # M=K=N
    load_s: float | None = None  # page load and form filling (Python clock)
    clock: PageClock = field(default_factory=PageClock)
    server_wait_s: float | None = None  # "Profiled … in N s" as the page reported it
    completed: bool = False
    isolated: bool = False
    checks: dict[str, bool] = field(default_factory=dict)
    error: str | None = None

    @property
    def wait_s(self) -> float | None:
        return self.clock.wait_s

    def part_s(self, start: str, end: str) -> float | None:
        return self.clock.part_s(start, end)

    @property
    def max_queue_pos(self) -> int:
        return self.clock.max_queue_pos


@dataclass(frozen=True)
class NewSession:
    """The check after the load: a fresh visitor loads the page and gets a 64³ run through."""

    ok: bool
    wait_s: float | None = None
    error: str | None = None
    # Where it stopped, for a failure's diagnosis: its page clock and the Showing box's value.
    clock: PageClock = field(default_factory=PageClock)
    showing: str | None = None
    events: tuple[str, ...] = ()  # the browser's console errors and warnings, websocket closes


@dataclass(frozen=True)
class MemoryPeaks:
    min_available_bytes: int
    peak_server_bytes: int  # RSS of the server with its worker
    peak_chromium_bytes: int  # summed over Chromium's processes: an upper bound
    peak_chromium_procs: int


@dataclass(frozen=True)
class RoomResult:
    """What the instructor's view showed at the end."""

    code: str | None
    expected: int  # attendees that joined (the sessions that loaded)
    joined: int | None  # the "Joined" metric
    runs_shared: int | None  # the "Runs shared" metric
    expected_runs: int  # attendees that completed their run
    names_listed: int  # expected display names found in "In the room: …"
    error: str | None = None

    @property
    def ok(self) -> bool:
        return (self.error is None and self.joined == self.expected and self.runs_shared == self.expected_runs
                and self.names_listed == self.expected)

    def verdict(self) -> str:
        def shown(value: int | None) -> str:
            return "—" if value is None else str(value)

        return (f"Room {self.code or '—'}: the instructor's view shows Joined {shown(self.joined)} "
                f"(expected {self.expected}), Runs shared {shown(self.runs_shared)} (expected "
                f"{self.expected_runs}), {self.names_listed}/{self.expected} names listed: "
                f"{'holds' if self.ok else 'FAILED'}" + (f" ({self.error})" if self.error else ""))


@dataclass(frozen=True)
class LoadResult:
    sessions: tuple[SessionResult, ...]
    warmup_load_s: float
    clicks_spread_s: float
    total_wall_s: float  # first click → last result (page clock)
    overall_s: float  # the whole driver, server start excluded
    health_after: str | None
    new_session: NewSession
    memory: MemoryPeaks | None
    load_concurrency: int
    cpu_phase_s: dict[str, float]  # CPU seconds per process group from the clicks to the last result
    phase_s: float  # that phase's wall time (Python clock, ±0.5 s)
    cpu_idle_s: dict[str, float]  # the same over idle_s with every page loaded and nothing clicked
    idle_s: float
    room: RoomResult | None = None  # --room: what the instructor's view showed at the end

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> LoadResult:
        data = json.loads(text)
        sessions = tuple(SessionResult(**{**s, "clock": PageClock(**s["clock"])}) for s in data.pop("sessions"))
        new = data.pop("new_session")
        memory = data.pop("memory")
        room = data.pop("room", None)
        return cls(sessions=sessions, new_session=NewSession(**{**new, "clock": PageClock(**new["clock"]),
                                                                     "events": tuple(new["events"])}),
                   memory=MemoryPeaks(**memory) if memory else None,
                   room=RoomResult(**room) if room else None, **data)

    @classmethod
    def read(cls, path: Path) -> LoadResult:
        return cls.from_json(path.read_text())


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (p95 of 20 values = the 19th smallest)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Figures:
    sessions: int
    completed: int
    isolated: int
    wait_p50_s: float | None
    wait_p95_s: float | None
    wait_max_s: float | None
    runs_per_min: float | None
    max_queue_pos: int
    sessions_saw_queue: int

    @property
    def isolation_holds(self) -> bool:
        return self.isolated == self.completed == self.sessions


def figures(result: LoadResult) -> Figures:
    sessions = result.sessions
    waits = [s.wait_s for s in sessions if s.wait_s is not None]
    done = [s for s in sessions if s.completed]
    return Figures(
        sessions=len(sessions), completed=len(done), isolated=sum(s.isolated for s in done),
        wait_p50_s=statistics.median(waits) if waits else None,
        wait_p95_s=percentile(waits, 95) if waits else None,
        wait_max_s=max(waits) if waits else None,
        runs_per_min=len(done) / result.total_wall_s * 60 if result.total_wall_s > 0 else None,
        max_queue_pos=max((s.max_queue_pos for s in sessions), default=0),
        sessions_saw_queue=sum(s.max_queue_pos > 0 for s in sessions))

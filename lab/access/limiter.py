"""Per-visitor rate limits: runs and uploads per minute, per browser session and per identity.

A sliding window: an event counts while ``now - at < window_s``, so a visitor never gets more
than ``limit`` events into any ``window_s`` seconds (a fixed window lets 2 × limit through
around its edge). The limiter is one object per server (the page makes it in
``st.cache_resource``, as it makes the ReaderPool), shared by every session's script thread,
so its state sits behind a lock. It holds one deque of timestamps per key it has seen within a
window; keys idle for a whole window are swept at most once a window, so it stays the size
of the visitors of the last minute (50 sessions × 2 actions × ≤ 12 floats).

Nothing reads a clock here: the caller passes ``now`` (``time.monotonic()`` on the page), so
tests step over a window's edges exactly, without sleeping.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass

__all__ = ["RATE_ACTIONS", "RATE_WINDOW_S", "RateDecision", "RateLimiter", "Visitor"]

# "…per minute": the window the host's PROFILER_LAB_RUNS_PER_MIN / _UPLOADS_PER_MIN count in.
RATE_WINDOW_S = 60.0
# What is counted, and how a refusal names it: (singular, plural, verb).
RATE_ACTIONS = {"run": ("run", "runs", "started"), "upload": ("trace", "traces", "opened"),
                "sign_in": ("sign-in attempt", "sign-in attempts", "made")}


@dataclass(frozen=True, kw_only=True)
class Visitor:
    """Who is asking: the browser session, and the signed-in identity when login is on (one
    person's tabs share the identity's budget; a session without one has its own)."""

    session: str
    identity: str | None = None

    def keys(self) -> tuple[str, ...]:
        own = (f"session:{self.session}",)
        return own if self.identity is None else (*own, f"identity:{self.identity}")


@dataclass(frozen=True, kw_only=True)
class RateDecision:
    """Whether one more ``action`` may start now; when not, how long until it may."""

    allowed: bool
    action: str  # a key of RATE_ACTIONS
    limit: int  # per window; 0 = no limit
    window_s: float
    count: int  # events in the window, this one included when allowed
    retry_after_s: float  # 0.0 when allowed
    by_identity: bool = False  # refused on the identity's count (all of its tabs), not this session's

    @property
    def wait_s(self) -> int:
        """The wait as the refusal says it: whole seconds, rounded up, at least 1."""
        return max(1, math.ceil(self.retry_after_s - 1e-9))

    def refusal(self) -> str:
        """The attendee's words: "You have started 6 runs in the last minute; try again in 23 s."."""
        one, many, verb = RATE_ACTIONS[self.action]
        what = one if self.count == 1 else many
        span = "minute" if self.window_s == 60 else f"{self.window_s:g} s"
        tabs = " (in all your tabs together)" if self.by_identity else ""
        return f"You have {verb} {self.count} {what} in the last {span}{tabs}; try again in {self.wait_s} s."


class RateLimiter:
    """Sliding-window counts per (action, key), thread-safe; one per server."""

    def __init__(self, *, window_s: float = RATE_WINDOW_S) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s!r}")
        self.window_s = window_s
        self._events: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()
        self._swept_at: float | None = None

    def allow(self, action: str, visitor: Visitor, *, limit: int, now: float) -> RateDecision:
        """Record one ``action`` for ``visitor`` at ``now`` and allow it, or refuse it (and
        record nothing) when any of the visitor's keys already has ``limit`` in the window."""
        if action not in RATE_ACTIONS:
            raise ValueError(f"unknown action {action!r}; one of {', '.join(RATE_ACTIONS)}")
        if limit <= 0:
            return RateDecision(allowed=True, action=action, limit=0, window_s=self.window_s, count=0,
                                retry_after_s=0.0)
        with self._lock:
            self._sweep(now)
            windows = [(key, self._window(action, key, now)) for key in visitor.keys()]
            refused = [(key, w[len(w) - limit] + self.window_s - now) for key, w in windows if len(w) >= limit]
            if refused:
                key, wait_s = max(refused, key=lambda kw: kw[1])
                return RateDecision(allowed=False, action=action, limit=limit, window_s=self.window_s,
                                    count=len(dict(windows)[key]), retry_after_s=wait_s,
                                    by_identity=key.startswith("identity:"))
            for _, w in windows:
                w.append(now)
            return RateDecision(allowed=True, action=action, limit=limit, window_s=self.window_s,
                                count=len(windows[0][1]), retry_after_s=0.0)

    def count(self, action: str, visitor: Visitor, *, now: float) -> int:
        """Events of ``action`` in the window for this session's key (for tests and status lines)."""
        with self._lock:
            return len(self._window(action, visitor.keys()[0], now))

    def tracked_keys(self) -> int:
        """How many (action, key) windows are held: bounded by the visitors of the last window."""
        with self._lock:
            return len(self._events)

    def _window(self, action: str, key: str, now: float) -> deque[float]:
        events = self._events.setdefault((action, key), deque())
        while events and now - events[0] >= self.window_s:
            events.popleft()
        return events

    def _sweep(self, now: float) -> None:
        # Once per window: drop the keys of visitors with nothing left in it.
        if self._swept_at is not None and now - self._swept_at < self.window_s:
            return
        self._swept_at = now
        for key in [k for k, events in self._events.items() if not events or now - events[-1] >= self.window_s]:
            del self._events[key]

"""Rooms: an instructor opens one, attendees join it by its code, and everyone's answers and run
summaries meet in the database (``lab.teach.db``) so that every server replica sees them.

``RoomStore`` is the one way in. The instructor of a room is whoever holds its instructor key
(returned once, at ``open_room``; only its SHA-256 is stored); a member is whoever holds their
member key. Rooms expire: a room past its time is gone when read (``RoomNotFound``) and purged
with everything in it. Every database failure becomes ``RoomsUnavailable`` with its reason.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from lab.teach.db import RoomSettings, RoomsUnavailable, connect, unavailable
from lab.teach.models import NAME_CHARS, Answer, Member, Room, RoomRun
from lab.teach.roofline import RunSummary

__all__ = [
    "CODE_ALPHABET", "Membership", "RoomKeys", "RoomNotFound", "RoomStore", "RoomView", "RunSummary",
    "normalize_code",
]  # fmt: skip

# No 0/O, 1/I/L, 2/Z, 5/S, 8/B: letters that read alike from the back of a room or in a font.
CODE_ALPHABET = "ACDEFGHJKMNPQRTUVWXY"
CODE_LENGTH = 5  # 20⁵ = 3.2 M codes: a clash among the few rooms alive at once is retried
CODE_ATTEMPTS = 8


class RoomNotFound(LookupError):
    """No room with that code (never was, or expired); the message says what to do."""


@dataclass(frozen=True, kw_only=True)
class RoomKeys:
    code: str
    instructor_key: str
    expires_at_s: float


@dataclass(frozen=True, kw_only=True)
class Membership:
    code: str
    member_key: str
    display_name: str
    seat: int


@dataclass(frozen=True, kw_only=True)
class RoomView:
    """What the instructor sees: who joined, each question's answers, the measured answers, the runs."""

    code: str
    expires_at_s: float
    joined: int
    names: tuple[str, ...]
    answers: dict[str, dict[str, int]]  # question key → choice → members who predicted it
    measured: dict[str, dict[str, int]]  # question key → choice → members whose trace measured it
    runs: tuple[RunSummary, ...]


def normalize_code(text: str) -> str:
    return "".join(ch for ch in (text or "").upper() if ch.isalnum())


def _sha256(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class RoomStore:
    """Rooms in one database. ``clock`` (Unix seconds) is injectable so tests can expire rooms."""

    def __init__(self, engine: Engine, *, url: str = "", room_ttl_s: float, clock: Callable[[], float] = time.time):
        self.engine, self.url, self.room_ttl_s, self.clock = engine, url, room_ttl_s, clock

    @classmethod
    def open(cls, settings: RoomSettings, *, clock: Callable[[], float] = time.time) -> RoomStore:
        return cls(connect(settings.database_url), url=settings.database_url, room_ttl_s=settings.room_ttl_s,
                   clock=clock)

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with Session(self.engine) as session:
                try:
                    yield session
                except RoomNotFound:
                    session.commit()  # an expired room met on the way is deleted all the same
                    raise
                except BaseException:
                    session.rollback()
                    raise
                session.commit()
        except SQLAlchemyError as exc:
            raise unavailable(self.url or str(self.engine.url), exc) from exc

    # ------------------------------------------------------------------ rooms

    def open_room(self) -> RoomKeys:
        """A new room with a fresh code; its instructor key is returned only here."""
        self.purge_expired()
        key = secrets.token_hex(16)
        now = self.clock()
        for _ in range(CODE_ATTEMPTS):
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            try:
                with self._session() as s:
                    s.add(Room(code=code, instructor_key_sha256=_sha256(key), created_at_s=now,
                               expires_at_s=now + self.room_ttl_s))
                return RoomKeys(code=code, instructor_key=key, expires_at_s=now + self.room_ttl_s)
            except RoomsUnavailable as exc:
                if not isinstance(exc.__cause__, IntegrityError):
                    raise
        raise RoomsUnavailable(f"no free room code after {CODE_ATTEMPTS} tries; try again")

    def _room(self, s: Session, code: str) -> Room:
        code = normalize_code(code)
        room = s.scalar(select(Room).where(Room.code == code))
        if room is not None and room.expires_at_s <= self.clock():
            s.delete(room)
            room = None
        if room is None:
            raise RoomNotFound(f"There is no room {code or '(empty)'}: check the code on the instructor's "
                               "screen (rooms expire a few hours after they open).")
        return room

    def purge_expired(self) -> int:
        """Delete every expired room and all it holds; returns how many went."""
        with self._session() as s:
            expired = s.scalars(select(Room).where(Room.expires_at_s <= self.clock())).all()
            for room in expired:
                s.delete(room)
            return len(expired)

    # ------------------------------------------------------------------ members

    def join(self, code: str, display_name: str) -> Membership:
        name = " ".join((display_name or "").split())[:NAME_CHARS] or "anonymous"
        key = secrets.token_hex(16)
        with self._session() as s:
            room = self._room(s, code)
            seat = int(s.scalar(select(func.count()).select_from(Member).where(Member.room_id == room.id)) or 0) + 1
            s.add(Member(room_id=room.id, member_key=key, display_name=name, seat=seat, joined_at_s=self.clock()))
            return Membership(code=room.code, member_key=key, display_name=name, seat=seat)

    def _member(self, s: Session, code: str, member_key: str) -> tuple[Room, Member]:
        room = self._room(s, code)
        member = s.scalar(select(Member).where(Member.room_id == room.id, Member.member_key == member_key))
        if member is None:
            raise RoomNotFound(f"You are not in room {room.code} any more: join it again from the sidebar.")
        return room, member

    def record_answer(self, code: str, member_key: str, question_key: str, choice: str) -> None:
        """A member's prediction (a second one for the same question replaces the first)."""
        with self._session() as s:
            room, member = self._member(s, code, member_key)
            row = s.scalar(select(Answer).where(Answer.member_id == member.id, Answer.question_key == question_key))
            if row is None:
                s.add(Answer(room_id=room.id, member_id=member.id, question_key=question_key, choice=choice,
                             answered_at_s=self.clock()))
            elif row.measured_choice is None:  # once revealed, a prediction is kept as it was
                row.choice, row.answered_at_s = choice, self.clock()

    def record_reveal(self, code: str, member_key: str, question_key: str, measured_choice: str) -> None:
        """What the member's trace measured for a question they predicted."""
        with self._session() as s:
            _, member = self._member(s, code, member_key)
            row = s.scalar(select(Answer).where(Answer.member_id == member.id, Answer.question_key == question_key))
            if row is not None:
                row.measured_choice, row.correct = measured_choice, row.choice == measured_choice

    def record_run(self, code: str, member_key: str, run: RunSummary) -> None:
        with self._session() as s:
            room, member = self._member(s, code, member_key)
            s.add(RoomRun(room_id=room.id, member_id=member.id, workload=run.workload, m=run.m, k=run.k, n=run.n,
                          dtype=run.dtype, device=run.device[:80], tflops=run.tflops,
                          intensity_flops_per_byte=run.intensity_flops_per_byte, created_at_s=self.clock()))

    # ------------------------------------------------------------------ the instructor

    def view(self, code: str, instructor_key: str) -> RoomView:
        with self._session() as s:
            room = self._room(s, code)
            if not secrets.compare_digest(room.instructor_key_sha256, _sha256(instructor_key)):
                raise PermissionError(f"only the instructor of room {room.code} sees its answers")
            members = s.scalars(select(Member).where(Member.room_id == room.id).order_by(Member.seat)).all()
            names = {m.id: m.display_name for m in members}
            answers: dict[str, Counter] = {}
            measured: dict[str, Counter] = {}
            for a in s.scalars(select(Answer).where(Answer.room_id == room.id)):
                answers.setdefault(a.question_key, Counter())[a.choice] += 1
                if a.measured_choice is not None:
                    measured.setdefault(a.question_key, Counter())[a.measured_choice] += 1
            runs = tuple(
                RunSummary(workload=r.workload, m=r.m, k=r.k, n=r.n, dtype=r.dtype, device=r.device, tflops=r.tflops,
                           intensity_flops_per_byte=r.intensity_flops_per_byte, display_name=names.get(r.member_id, ""))
                for r in s.scalars(select(RoomRun).where(RoomRun.room_id == room.id).order_by(RoomRun.id)))
            return RoomView(code=room.code, expires_at_s=room.expires_at_s, joined=len(members),
                            names=tuple(m.display_name for m in members),
                            answers={k: dict(v) for k, v in answers.items()},
                            measured={k: dict(v) for k, v in measured.items()}, runs=runs)

    def close_room(self, code: str, instructor_key: str) -> None:
        with self._session() as s:
            room = self._room(s, code)
            if not secrets.compare_digest(room.instructor_key_sha256, _sha256(instructor_key)):
                raise PermissionError(f"only the instructor of room {room.code} can close it")
            s.execute(delete(Room).where(Room.id == room.id))

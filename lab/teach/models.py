"""The rooms' tables (SQLAlchemy 2 declarative): rooms, their members, answers and run summaries.

Nothing else is stored: no traces, no code, no user text but a display name. Members, answers
and runs go with their room (``ondelete="CASCADE"``, and the ORM's ``delete-orphan`` for SQLite
connections without foreign keys enforced).
"""

from __future__ import annotations

from sqlalchemy import Boolean, Float, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

__all__ = ["Answer", "Base", "Member", "Room", "RoomRun", "SchemaVersion"]

CODE_CHARS = 5
NAME_CHARS = 40
KEY_CHARS = 64  # a hex token (secrets.token_hex(16)) or its SHA-256 (64 hex digits)


class Base(DeclarativeBase):
    pass


class SchemaVersion(Base):
    """One row: the schema version the migrations brought this database to (lab.teach.db)."""

    __tablename__ = "schema_version"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class Room(Base):
    __tablename__ = "rooms"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(CODE_CHARS), unique=True, index=True)
    instructor_key_sha256: Mapped[str] = mapped_column(String(KEY_CHARS))
    created_at_s: Mapped[float] = mapped_column(Float)  # Unix time
    expires_at_s: Mapped[float] = mapped_column(Float, index=True)
    members: Mapped[list[Member]] = relationship(back_populates="room", cascade="all, delete-orphan",
                                                 passive_deletes=True)
    answers: Mapped[list[Answer]] = relationship(cascade="all, delete-orphan", passive_deletes=True)
    runs: Mapped[list[RoomRun]] = relationship(cascade="all, delete-orphan", passive_deletes=True)


class Member(Base):
    __tablename__ = "members"
    __table_args__ = (UniqueConstraint("room_id", "member_key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    room_id: Mapped[int] = mapped_column(ForeignKey("rooms.id", ondelete="CASCADE"), index=True)
    member_key: Mapped[str] = mapped_column(String(KEY_CHARS))
    display_name: Mapped[str] = mapped_column(String(NAME_CHARS))
    seat: Mapped[int] = mapped_column(Integer)  # 1, 2, … in joining order: the sweep's shape per seat
    joined_at_s: Mapped[float] = mapped_column(Float)
    room: Mapped[Room] = relationship(back_populates="members")


class Answer(Base):
    """A member's prediction for one question, and (once revealed) what their trace measured."""

    __tablename__ = "answers"
    __table_args__ = (UniqueConstraint("member_id", "question_key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    room_id: Mapped[int] = mapped_column(ForeignKey("rooms.id", ondelete="CASCADE"), index=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"))
    question_key: Mapped[str] = mapped_column(String(80))
    choice: Mapped[str] = mapped_column(String(80))
    measured_choice: Mapped[str | None] = mapped_column(String(80), nullable=True)
    correct: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    answered_at_s: Mapped[float] = mapped_column(Float)


class RoomRun(Base):
    """A run's summary: its shape, dtype, device and the two roofline coordinates."""

    __tablename__ = "room_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    room_id: Mapped[int] = mapped_column(ForeignKey("rooms.id", ondelete="CASCADE"), index=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"))
    workload: Mapped[str] = mapped_column(String(40))
    m: Mapped[int] = mapped_column(Integer)
    k: Mapped[int] = mapped_column(Integer)
    n: Mapped[int] = mapped_column(Integer)
    dtype: Mapped[str] = mapped_column(String(16))
    device: Mapped[str] = mapped_column(String(80))
    tflops: Mapped[float] = mapped_column(Float)
    intensity_flops_per_byte: Mapped[float] = mapped_column(Float)
    created_at_s: Mapped[float] = mapped_column(Float)

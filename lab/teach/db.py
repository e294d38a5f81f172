"""The rooms' database: where it is, connecting to it, and its migrations.

SQLite by default (a file under ``PROFILER_LAB_DATA_DIR``, nothing to start); PostgreSQL (or any
SQLAlchemy URL) when the host sets ``PROFILER_LAB_DATABASE_URL``, so several server replicas
share one room. Migrations: a ``schema_version`` table and ``MIGRATIONS``, ordered functions
each taking the schema one version up, run inside one transaction at start. Chosen over Alembic
because the schema is four tables: Alembic would add its own package, a config file, an env.py
and a versions folder for what is, today, one ``create_all``. Move to Alembic when a migration
needs autogeneration or branches.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from lab.teach.models import Base, SchemaVersion

_VERSION_TABLE = Base.metadata.tables[SchemaVersion.__tablename__]

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "RoomSettings", "RoomsUnavailable", "connect", "migrate", "safe_url"]

DATABASE_URL_VAR = "PROFILER_LAB_DATABASE_URL"
DATA_DIR_VAR = "PROFILER_LAB_DATA_DIR"
ROOM_TTL_VAR = "PROFILER_LAB_ROOM_TTL_H"
# A workshop is a morning or an afternoon: rooms outlive it a little, then go.
DEFAULT_ROOM_TTL_H = 4.0
# A database that does not answer within this is "down": the page must not hang on it.
CONNECT_TIMEOUT_S = 3
# Any fixed number: the PostgreSQL advisory lock that serialises migrations across replicas.
MIGRATION_LOCK_KEY = 1_770_017


class RoomsUnavailable(RuntimeError):
    """The rooms database cannot be used; the message says where it is and that the lab still works."""


@dataclass(frozen=True, kw_only=True)
class RoomSettings:
    database_url: str
    room_ttl_s: float = DEFAULT_ROOM_TTL_H * 3600.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RoomSettings:
        env = os.environ if env is None else env
        url = env.get(DATABASE_URL_VAR, "").strip()
        if not url:
            data_dir = Path(env.get(DATA_DIR_VAR, "") or Path.home() / ".local" / "share" / "profiler-lab")
            url = f"sqlite:///{data_dir / 'rooms.sqlite3'}"
        try:
            ttl_h = float(env.get(ROOM_TTL_VAR, "") or DEFAULT_ROOM_TTL_H)
        except ValueError as exc:
            raise RoomsUnavailable(f"{ROOM_TTL_VAR}={env.get(ROOM_TTL_VAR)!r} is not a number of hours "
                                   f"(e.g. {DEFAULT_ROOM_TTL_H:g})") from exc
        return cls(database_url=url, room_ttl_s=max(ttl_h, 0.0) * 3600.0)


def safe_url(url: str) -> str:
    """The URL as a message may show it: the password masked."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as unparsable, never echoed
        return "(an unreadable database URL)"


def unavailable(url: str, exc: BaseException) -> RoomsUnavailable:
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:200]
    return RoomsUnavailable(
        f"Rooms are unavailable: the rooms database at {safe_url(url)} cannot be reached ({reason}). "
        f"Everything else in the lab works; the host can check {DATABASE_URL_VAR} and that the database is up.")


def _v1_tables(conn: Connection) -> None:
    Base.metadata.create_all(conn)


# Ordered: MIGRATIONS[i] takes the schema from version i to i + 1. Append, never edit.
MIGRATIONS: tuple[Callable[[Connection], None], ...] = (_v1_tables,)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(engine: Engine) -> int:
    """Bring the database to ``SCHEMA_VERSION`` (in one transaction); returns the version it was at."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":  # replicas starting at once migrate one after another
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        _VERSION_TABLE.create(conn, checkfirst=True)
        row = conn.execute(select(SchemaVersion.version).where(SchemaVersion.id == 1)).scalar()
        was = int(row or 0)
        if was > SCHEMA_VERSION:
            raise RoomsUnavailable(f"the rooms database is at schema version {was}, newer than this lab's "
                                   f"{SCHEMA_VERSION}: upgrade the lab, or point {DATABASE_URL_VAR} elsewhere")
        for step in MIGRATIONS[was:]:
            step(conn)
        if row is None:
            conn.execute(_VERSION_TABLE.insert().values(id=1, version=SCHEMA_VERSION))
        elif was < SCHEMA_VERSION:
            conn.execute(_VERSION_TABLE.update().where(SchemaVersion.id == 1).values(version=SCHEMA_VERSION))
    return was


def _sqlite_foreign_keys(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")  # members, answers and runs go with their room
    # WAL: readers (the instructor's view every few seconds) never block an attendee's write.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def connect(url: str) -> Engine:
    """An engine for ``url``, migrated; ``RoomsUnavailable`` with the reason if it cannot be used."""
    try:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(url, connect_args={"timeout": CONNECT_TIMEOUT_S})
            event.listen(engine, "connect", _sqlite_foreign_keys)
        else:
            if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() in ("", "psycopg2"):
                parsed = parsed.set(drivername="postgresql+psycopg")  # the driver requirements.txt pins
            engine = create_engine(parsed, pool_pre_ping=True, connect_args={"connect_timeout": CONNECT_TIMEOUT_S})
        migrate(engine)
        return engine
    except RoomsUnavailable:
        raise
    except (SQLAlchemyError, OSError, ValueError) as exc:
        raise unavailable(url, exc) from exc

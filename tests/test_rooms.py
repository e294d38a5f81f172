"""Rooms against SQLite and a real PostgreSQL server: shared answers, isolation, expiry, a database down.

PostgreSQL: a throwaway cluster (initdb + pg_ctl, as the postgres user when run as root) in a
temporary directory, reached through its Unix socket on a free port. ``.ci/run`` installs
postgresql; outside CI a machine without it skips those tests with the reason, in CI they fail.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import inspect, select

from lab.teach.db import SCHEMA_VERSION, RoomSettings, RoomsUnavailable, connect, migrate
from lab.teach.models import Answer, Member, RoomRun, SchemaVersion
from lab.teach.rooms import CODE_ALPHABET, RoomNotFound, RoomStore, RunSummary

PG_START_TIMEOUT_S = 60


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found if isinstance(found, str) else (found[-1] if found else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture(scope="module")
def pg_url():
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        reason = "PostgreSQL is not installed (apt-get install -y postgresql; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="lab-pg-"))
    data, port = root / "data", _free_port()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    run = dict(check=True, capture_output=True, text=True, timeout=PG_START_TIMEOUT_S)
    subprocess.run(_as_postgres([initdb, "-D", str(data), "-A", "trust", "-U", "lab", "--no-sync"]), **run)
    opts = f"-p {port} -k {root} -c listen_addresses=''"
    try:
        subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w",
                                     "-t", str(PG_START_TIMEOUT_S), "start"]), **run)
    except subprocess.CalledProcessError as exc:
        log = (root / "log").read_text() if (root / "log").exists() else ""
        pytest.fail(f"pg_ctl start failed: {exc.stderr} {log[-2000:]}")
    yield f"postgresql+psycopg://lab@/postgres?host={root}&port={port}"
    subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), capture_output=True,
                   timeout=PG_START_TIMEOUT_S)
    shutil.rmtree(root, ignore_errors=True)


# The PostgreSQL half starts a server (initdb, pg_ctl): out of the fast tier; SQLite stays in it.
@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=[pytest.mark.rooms, pytest.mark.subprocess])])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'rooms.sqlite3'}"
    url = request.getfixturevalue("pg_url")
    # A clean schema per test: the tables go, the migrations bring them back.
    from sqlalchemy import create_engine

    from lab.teach.models import Base

    engine = create_engine(url)
    with engine.begin() as conn:
        Base.metadata.drop_all(conn)
    engine.dispose()
    return url


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def store(url: str, clock=None, ttl_s: float = 3600.0) -> RoomStore:
    return RoomStore.open(RoomSettings(database_url=url, room_ttl_s=ttl_s), clock=clock or Clock())


def summary(m: int, tflops: float) -> RunSummary:
    return RunSummary(workload="matmul_add", m=m, k=m, n=m, dtype="float32", device="cpu", tflops=tflops,
                      intensity_flops_per_byte=m / 6.0)


def test_two_sessions_in_one_room_see_each_others_answers(url):
    # Two stores on one database: two server replicas, or two sessions of one server.
    a, b = store(url), store(url)
    keys = a.open_room()
    assert len(keys.code) == 5 and set(keys.code) <= set(CODE_ALPHABET)
    ann = a.join(keys.code, "Ann")
    bob = b.join(keys.code.lower(), "  Bob  ")  # codes are read case-insensitively
    assert (ann.seat, bob.seat, bob.display_name) == (1, 2, "Bob")
    a.record_answer(keys.code, ann.member_key, "linear.bias", "aten::addmm, inside the GEMM")
    b.record_answer(keys.code, bob.member_key, "linear.bias", "a separate aten::add")
    b.record_answer(keys.code, bob.member_key, "linear.t_kernel", "yes")
    b.record_reveal(keys.code, bob.member_key, "linear.t_kernel", "no")
    b.record_run(keys.code, bob.member_key, summary(256, 0.05))
    for s in (a, b):  # either replica shows the instructor the same room
        view = s.view(keys.code, keys.instructor_key)
        assert view.joined == 2 and view.names == ("Ann", "Bob")
        assert view.answers == {"linear.bias": {"aten::addmm, inside the GEMM": 1, "a separate aten::add": 1},
                                "linear.t_kernel": {"yes": 1}}
        assert view.measured == {"linear.t_kernel": {"no": 1}}
        assert [(r.m, r.display_name) for r in view.runs] == [(256, "Bob")]
    with pytest.raises(PermissionError):
        a.view(keys.code, ann.member_key)  # an attendee's key is no instructor's


def test_a_second_answer_replaces_the_first_until_revealed(url):
    s = store(url)
    keys = s.open_room()
    me = s.join(keys.code, "me")
    s.record_answer(keys.code, me.member_key, "q", "yes")
    s.record_answer(keys.code, me.member_key, "q", "no")
    assert s.view(keys.code, keys.instructor_key).answers == {"q": {"no": 1}}
    s.record_reveal(keys.code, me.member_key, "q", "no")
    s.record_answer(keys.code, me.member_key, "q", "yes")  # after the reveal: kept as predicted
    assert s.view(keys.code, keys.instructor_key).answers == {"q": {"no": 1}}


def test_two_rooms_never_mix(url):
    s = store(url)
    one, two = s.open_room(), s.open_room()
    assert one.code != two.code
    x, y = s.join(one.code, "x"), s.join(two.code, "y")
    s.record_answer(one.code, x.member_key, "q", "yes")
    s.record_run(one.code, x.member_key, summary(64, 0.01))
    s.record_answer(two.code, y.member_key, "q", "no")
    v1, v2 = s.view(one.code, one.instructor_key), s.view(two.code, two.instructor_key)
    assert (v1.joined, v1.answers, len(v1.runs)) == (1, {"q": {"yes": 1}}, 1)
    assert (v2.joined, v2.answers, len(v2.runs)) == (1, {"q": {"no": 1}}, 0)
    with pytest.raises(PermissionError):
        s.view(two.code, one.instructor_key)
    with pytest.raises(RoomNotFound):  # a member of one room cannot write into the other
        s.record_answer(two.code, x.member_key, "q", "yes")


def test_an_expired_room_is_gone_and_purged(url):
    clock = Clock()
    s = store(url, clock, ttl_s=600.0)
    old = s.open_room()
    member = s.join(old.code, "late")
    s.record_answer(old.code, member.member_key, "q", "yes")
    s.record_run(old.code, member.member_key, summary(64, 0.01))
    clock.now += 601.0
    with pytest.raises(RoomNotFound, match="expire"):
        s.join(old.code, "later")
    with pytest.raises(RoomNotFound):
        s.view(old.code, old.instructor_key)
    fresh = s.open_room()  # opening a room purges the expired ones
    with s.engine.connect() as conn:  # nothing of the old room is left in any table
        assert conn.execute(select(Member.id)).all() == []
        assert conn.execute(select(Answer.id)).all() == []
        assert conn.execute(select(RoomRun.id)).all() == []
    assert s.view(fresh.code, fresh.instructor_key).joined == 0


def test_migrations_bring_a_database_to_the_current_version_once(url):
    engine = connect(url)
    assert migrate(engine) == SCHEMA_VERSION  # already there: nothing to do
    with engine.connect() as conn:
        assert conn.execute(select(SchemaVersion.version)).scalars().all() == [SCHEMA_VERSION]
    assert {"rooms", "members", "answers", "room_runs"} <= set(inspect(engine).get_table_names())


def test_a_database_that_is_down_gives_a_clear_message():
    port = _free_port()  # nothing listens there
    url = f"postgresql://lab:secret@127.0.0.1:{port}/rooms"
    with pytest.raises(RoomsUnavailable) as info:
        store(url)
    text = str(info.value)
    assert "Rooms are unavailable" in text and f"127.0.0.1:{port}" in text
    assert "secret" not in text and "Everything else in the lab works" in text
    assert "PROFILER_LAB_DATABASE_URL" in text


def test_a_database_that_goes_away_mid_workshop_gives_the_same_message(tmp_path):
    s = store(f"sqlite:///{tmp_path / 'rooms.sqlite3'}")
    keys = s.open_room()
    from sqlalchemy import create_engine

    s.engine = create_engine(f"postgresql+psycopg://lab@127.0.0.1:{_free_port()}/rooms",
                             connect_args={"connect_timeout": 2})  # the server is gone
    with pytest.raises(RoomsUnavailable, match="Rooms are unavailable"):
        s.join(keys.code, "x")


def test_default_settings_use_a_sqlite_file_under_the_data_dir(tmp_path):
    settings = RoomSettings.from_env({"PROFILER_LAB_DATA_DIR": str(tmp_path / "data")})
    assert settings.database_url == f"sqlite:///{tmp_path / 'data' / 'rooms.sqlite3'}"
    assert settings.room_ttl_s == 4 * 3600
    s = store(settings.database_url)
    assert (tmp_path / "data" / "rooms.sqlite3").exists() and s.open_room().code
    assert RoomSettings.from_env({"PROFILER_LAB_DATABASE_URL": "postgresql://h/db"}).database_url == "postgresql://h/db"
    with pytest.raises(RoomsUnavailable, match="PROFILER_LAB_ROOM_TTL_H"):
        RoomSettings.from_env({"PROFILER_LAB_ROOM_TTL_H": "soon"})


def test_a_database_from_a_newer_lab_is_refused_with_the_fix(tmp_path):
    url = f"sqlite:///{tmp_path / 'rooms.sqlite3'}"
    engine = connect(url)
    with engine.begin() as conn:
        conn.execute(SchemaVersion.__table__.update().values(version=SCHEMA_VERSION + 1))  # type: ignore[attr-defined]
    with pytest.raises(RoomsUnavailable, match="newer than this lab"):
        migrate(engine)


def test_an_empty_database_is_migrated_from_version_zero(tmp_path):
    from sqlalchemy import create_engine

    engine = create_engine(f"sqlite:///{tmp_path / 'rooms.sqlite3'}")
    assert migrate(engine) == 0  # was at 0: every migration ran
    assert migrate(engine) == SCHEMA_VERSION

"""The page's rooms through AppTest: predict then reveal alone, an instructor and an attendee in one
room (SQLite), and a rooms database that is down (a clear message; everything else still works)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TIMEOUT_S = 300
Q_KEY = "tiny_vs_large.self_cpu_vs_cuda"

pytestmark = pytest.mark.timeout(900)


def plain(markdown: str) -> str:
    return re.sub(r"\\(.)", r"\1", markdown)


def healthy(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.warning, [w.value for w in at.warning]


def page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    healthy(at)
    return at


def button(at, label: str):
    return next(b for b in at.button if b.label == label)


def predict_and_open_recording(at, choice: str) -> None:
    at.radio(key=f"predict_{Q_KEY}").set_value(choice)
    button(at, "Lock in my predictions").click()
    at.run()
    healthy(at)
    button(at, "Open the H200 recording").click()
    at.run()
    healthy(at)


def test_a_database_that_is_down_says_so_and_the_lab_still_teaches(monkeypatch):
    monkeypatch.setenv("PROFILER_LAB_DATABASE_URL", "postgresql://lab:pw@127.0.0.1:9/rooms")  # nothing there
    at = page()
    down = [plain(i.value) for i in at.sidebar.info if "Rooms are unavailable" in plain(i.value)]
    assert down and "127.0.0.1:9" in down[0] and "pw" not in down[0].replace("PROFILER_LAB", "")
    assert not [b for b in at.button if b.label == "Open a room (instructor)"]
    assert [t.label for t in at.tabs][:2] == ["Summary", "Table"]  # the page itself is all there
    predict_and_open_recording(at, "Self CPU")
    text = " ".join(plain(m.value) for m in at.markdown)
    assert "Reveal — Tiny vs large" in text and "Answer: **Self CPU**" in text
    assert at.session_state["teach_score"][Q_KEY] is True


def test_instructor_sees_an_attendees_prediction_and_reveal(monkeypatch, tmp_path):
    monkeypatch.setenv("PROFILER_LAB_DATABASE_URL", f"sqlite:///{tmp_path / 'rooms.sqlite3'}")
    teacher = page()
    button(teacher, "Open a room (instructor)").click()
    teacher.run()
    healthy(teacher)
    code = teacher.session_state["room_instructor"].code
    assert any(code in latex.value for latex in teacher.latex)  # the code, big
    assert [m.value for m in teacher.metric if m.label == "Joined"] == ["0"]

    attendee = page()
    attendee.text_input(key="room_code").input(code.lower())
    attendee.text_input(key="room_name").input("Ada")
    button(attendee, "Join the room").click()
    attendee.run()
    healthy(attendee)
    assert attendee.session_state["room_member"].seat == 1
    predict_and_open_recording(attendee, "Self CUDA")  # a wrong prediction: the trace says Self CPU
    assert attendee.session_state["teach_score"][Q_KEY] is False

    teacher.run()
    healthy(teacher)
    assert [m.value for m in teacher.metric if m.label == "Joined"] == ["1"]
    captions = [plain(c.value) for c in teacher.caption]
    assert "1 answer · measured: Self CPU (1)" in captions, captions
    assert "In the room: Ada" in captions

"""The page's rooms through AppTest: predict then reveal alone, an instructor and an attendee in one
room (SQLite), and a rooms database that is down (a clear message; everything else still works)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TIMEOUT_S = 300
Q_KEY = "tiny_vs_large.self_cpu_vs_cuda"

pytestmark = [pytest.mark.apptest, pytest.mark.timeout(900)]


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
    # A question revealed without a prediction is never scored, even if predicted afterwards.
    late = "tiny_vs_large.gpu_busy"
    assert at.session_state["teach_score"][late] is None
    at.radio(key=f"predict_{late}").set_value("less than half")
    button(at, "Lock in my predictions").click()
    at.run()
    healthy(at)
    assert at.session_state["teach_score"][late] is None
    assert "Your predictions: 1 of 1 right" in [c.value for c in at.sidebar.caption]


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


def test_the_reveal_outlines_its_events_and_opens_the_timeline_on_its_window(monkeypatch, tmp_path):
    monkeypatch.setenv("PROFILER_LAB_DATABASE_URL", f"sqlite:///{tmp_path / 'rooms.sqlite3'}")
    at = page()
    predict_and_open_recording(at, "Self CPU")
    key = "tiny_vs_large.gpu_busy"
    before = len(list(at.get("vega_lite_chart")))
    at.toggle(key=f"reveal_show_{key}").set_value(True)
    at.run()
    healthy(at)
    charts = list(at.get("vega_lite_chart"))
    assert len(charts) == before + 1
    (outlined,) = [c for c in charts if "the evidence" in c.proto.spec]  # the outline layer
    assert "#d62728" in outlined.proto.spec
    rows = [r for d in outlined.proto.datasets
            for r in pa.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pylist()]
    outlined_names = {r["name"] for r in rows if set(r) == {"row", "start_us", "draw_end_us", "name"}}
    assert outlined_names and all(n.startswith("nvjet") or "elementwise" in n for n in outlined_names)
    next(b for b in at.button if b.key == f"reveal_tl_{key}").click()
    at.run()
    healthy(at)
    assert at.session_state["view"] == "Timeline"
    # The Timeline opens on the reveal's window: the same range on its slider.
    from lab.lessons import questions_for

    (slider,) = [s for s in at.slider if s.label.startswith("Time window")]
    assert [f.value for f in at.selectbox if f.label == "Zoom to"] == ["step 1"]
    assert slider.value[1] > slider.value[0] > 0
    from lab.analysis import Run, analyze
    from lab.lessons import LESSONS
    from lab.samples import lesson_samples
    from lab.trace import load_trace

    runs = []
    for run, sample in zip(LESSONS["tiny_vs_large"].runs, lesson_samples(LESSONS["tiny_vs_large"].runs)):
        trace = load_trace(sample.read_bytes())
        runs.append(Run(run.name, trace, analyze(trace)))
    (q,) = [q for q in questions_for("tiny_vs_large", "cuda") if q.key == key]
    assert slider.value == pytest.approx(q.answer(runs).where.window_us)
    # Layer 0 is the lane bands (no x), layer 1 the bars.
    domains = [json.loads(c.proto.spec)["layer"][1]["encoding"]["x"]["scale"].get("domain")
               for c in at.get("vega_lite_chart")]
    assert pytest.approx(list(slider.value)) in domains  # the Timeline's chart shows that window


def test_alone_one_click_runs_the_sweep_and_opens_your_roofline(monkeypatch, tmp_path):
    monkeypatch.setenv("PROFILER_LAB_DATABASE_URL", f"sqlite:///{tmp_path / 'rooms.sqlite3'}")
    from lab.teach import ALONE_SWEEP

    at = page()
    button(at, "Run the size sweep here").click()
    at.run()
    healthy(at)
    device = "cuda" if any("cuda" in s.run.device.kind for s in at.session_state["runs"]) else "cpu"
    shapes = ALONE_SWEEP[device]
    runs = at.session_state["runs"][-len(shapes):]
    assert [(s.run.config.m, s.run.config.k, s.run.config.n) for s in runs] == list(shapes)
    assert all(s.run.config.step_label == "size_sweep" for s in runs)
    (chart,) = [c for c in at.get("vega_lite_chart") if "arithmetic intensity" in c.proto.spec]
    tables = [pa.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pylist() for d in chart.proto.datasets]
    # The points (the labels' dataset holds one row per shape and dtype: a subset of them).
    rows = max((t for t in tables if t and "shape" in t[0]), key=len)
    assert sorted(r["shape"] for r in rows) == sorted(f"{m}×{k}×{n}" for m, k, n in shapes)
    assert all(r["tflops"] > 0 and r["region"] in ("latency-bound", "memory-bound", "compute-bound") for r in rows)
    assert any(c.value.startswith("Roof: ") for c in at.caption)
    # "Your roofline" is no block above "Showing", over every view of every run: it is a view of
    # its own, listed once a sweep ran and opened by it, below the subject line.
    assert at.session_state["view"] == "Roofline" and "Roofline" in [t.label for t in at.tabs]
    def role(e) -> str | None:
        if e.type == "selectbox" and e.label == "Showing":
            return "showing"
        return "roofline" if e.type == "markdown" and "Your roofline" in e.value else None

    order = [r for r in map(role, at.main) if r]
    assert order == ["showing", "roofline"], order
    at.session_state["view"] = "Summary"
    at.run()
    healthy(at)
    assert not [m for m in at.main.markdown if "Your roofline" in m.value]
    assert not [c for c in at.get("vega_lite_chart") if "arithmetic intensity" in c.proto.spec]

"""Numbers the page shows in words: Compare's totals read like a report, not raw data,
and a number two boxes both show is one number.

AppTest, as tests/test_app.py (its helpers and fixture): a real worker for the CPU run, the H200
recordings from lab/samples/.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from lab.samples import list_samples  # noqa: E402
from lab.views.tables import NOTE_FOOTNOTES  # noqa: E402
from tests.test_app import APP, TIMEOUT_S, assert_healthy, open_view, plain, submit, wait_for_device  # noqa: E402

pytestmark = [pytest.mark.apptest, pytest.mark.timeout(1200)]

H200_SAMPLE = "sample:matmul_add_4096_bf16.json.gz"
SNAKE = re.compile(r"\b[a-z0-9]+(?:_[a-z0-9]+)+\b")
# A number with its unit: "33.0 %", "8.0×", "1.0 per step" — what two boxes must agree on.
NUMBER = re.compile(r"(\d[\d,]*\.?\d*)\s?(%|×| kernels per step| operators per step)")


@pytest.fixture
def at():
    """A first visit in a session of its own (as tests/test_app.py's)."""
    app = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    app.run()
    return app


def _cells(frame) -> list[str]:
    return [str(v) for v in frame.to_numpy().ravel()]


def test_compare_of_a_cpu_run_and_an_h200_sample_reads_as_text(at):
    wait_for_device(at)
    submit(at, cfg_m=32, cfg_k=32, cfg_n=32, cfg_step_label="cpu_side")
    assert_healthy(at)
    assert at.session_state["runs"], ([e.value for e in at.error], [c.value for c in at.caption][:8])
    run_key = at.session_state["runs"][-1].key
    at.session_state["cmp_a"], at.session_state["cmp_b"] = run_key, H200_SAMPLE
    at.session_state["_cmp_newest_run"] = run_key  # keep the pair: no "newest run" swap
    open_view(at, "Compare")
    frames = [df.value for df in at.dataframe]
    totals = frames[0]
    assert "Trace span" in set(totals["total"]) and "Launch delay (median)" in set(totals["total"])
    for frame in frames:
        for column in frame.columns:  # headers a reader knows: "A (µs)", not a_us
            assert not SNAKE.fullmatch(str(column)), (column, list(frame.columns))
    text = _cells(totals)
    assert not any(SNAKE.fullmatch(t) for t in totals["total"]), list(totals["total"])
    assert not any(t.lower() in ("nan", "none", "<na>") for t in text), text  # a CPU run's launch delay: "—"
    assert "—" in set(totals.loc[totals["total"] == "Launch delay (median)", "A"])
    assert not any(re.search(r"[−-]0(\.0+)?(\s|%|$)", t) for t in text), text
    for t in totals["A"].tolist() + totals["B"].tolist():  # µs at 3 significant digits, never 1234.568
        assert not re.search(r"\d\.\d{3}", t), t
    for frame in frames[1:]:
        assert not any(t.lower() == "nan" for t in _cells(frame))
    # One scale, or each its own: a run ten times shorter than the other starts on its own.
    (scale,) = [t for t in at.toggle if t.label == "One time scale for both"]
    scale.set_value(False)
    at.run()
    assert_healthy(at)
    assert any("Each timeline spans its own trace" in c.value for c in at.caption)
    assert len(at.get("vega_lite_chart")) == 2


def _check_and_reveal(at) -> tuple[list[str], list[str]]:
    checks = [plain(m.value) for m in at.markdown if any(
        icon in m.value for icon in (":material/check_circle:", ":material/cancel:", ":material/info:"))
        and " — " in m.value and not m.value.startswith("Answer")]
    answers = [plain(m.value) for m in at.markdown if m.value.startswith("Answer:")]
    return checks, answers


def _numbers(lines: list[str]) -> set[tuple[str, str]]:
    return {(n.replace(",", ""), unit) for line in lines for n, unit in NUMBER.findall(line)}


def _reveal_numbers_agree(checks: list[str], answers: list[str], subjects: tuple[str, ...]) -> None:
    """Each quantity both boxes name (GPU busy, the GEMM's share, kernels per step) is one value."""
    for subject in subjects:
        said_check = _numbers([c for c in checks if subject in c])
        said_reveal = _numbers([a for a in answers if subject in a])
        assert said_check and said_reveal, (subject, checks, answers)
        assert said_reveal <= said_check, (subject, said_check, said_reveal)


@pytest.mark.parametrize(("lesson", "subjects"), [
    ("tiny_vs_large", ("GPU busy",)),
    ("attention", ("kernels per step",)),
    ("sdpa_backends", ("kernels per step",)),
    ("memory_roofs", ("softmax",)),
])
def test_lesson_check_and_reveal_say_one_number_on_the_h200_recording(at, lesson, subjects):
    at.selectbox(key="lesson_key").set_value(lesson)
    at.run()
    at.button(key="open_lesson_recording").click()
    at.run()
    assert_healthy(at)
    checks, answers = _check_and_reveal(at)
    _reveal_numbers_agree(checks, answers, subjects)


def test_lesson_check_and_reveal_say_one_number_on_a_cpu_run(at):
    at.selectbox(key="lesson_key").set_value("tiny_vs_large")
    at.run()
    at.button(key="run_lesson").click()
    at.run()
    assert_healthy(at)
    if at.session_state["runs"][-1].run.device.kind != "cpu":
        pytest.skip("the CPU phrasing needs a CPU host")
    checks, answers = _check_and_reveal(at)
    _reveal_numbers_agree(checks, answers, ("Self CPU % in the table",))  # the GEMM op's share, both boxes


def test_the_table_view_of_an_h200_recording_reads_as_text(at):
    """The Table of the first visit's H200 recording: the GPU kernel list's headers are
    words (it showed total_us, share_pct, registers_per_thread), its times those of the raw JSON;
    the record_function rows carry a short mark beside the name, each note whole under the table."""
    open_view(at, "Table")
    table, kernels, *more = [df.value for df in at.dataframe]  # more: the ops against their roof
    for frame in (table, kernels, *more):
        for column in frame.columns:
            assert not SNAKE.fullmatch(str(column)), (column, list(frame.columns))
    sample = next(s for s in list_samples() if s.file == H200_SAMPLE.removeprefix("sample:"))
    raw = [e for e in json.loads(gzip.decompress(sample.read_bytes()))["traceEvents"]
           if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    by_name = Counter()
    for e in raw:
        by_name[e["name"]] += e["dur"]
    assert dict(zip(kernels["Kernel"], kernels["Total (µs)"])) == pytest.approx(dict(by_name))
    assert list(table.columns[:2]) == ["Name", "Note"]
    marks = {m for m in table["Note"] if m}
    notes = [plain(c.value) for c in at.caption if plain(c.value)[:1] in ("¹", "²")]
    assert marks == {"label ¹", "label ²"} and sorted(n[:1] for n in notes) == sorted("¹²"), (marks, notes)
    assert {n[2:] for n in notes} == set(NOTE_FOOTNOTES.values())

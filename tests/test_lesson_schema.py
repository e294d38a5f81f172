"""Every lesson is complete (``lab.lessons.schema.schema_problems``), whatever the number of lessons:
text and at least one run, a check, one to three questions on each device it runs on, claims, and
an H200 recording of each run where it needs a GPU. The registry is the package's modules, so a
lesson is found by scanning, and one that lacks a part is refused at import with what it lacks.
"""

from __future__ import annotations

import sys
import textwrap
from dataclasses import replace

import pytest

from lab.lessons import LESSONS, LessonSchemaError, scan_lessons, schema_problems
from lab.lessons.schema import MAX_QUESTIONS
from lab.samples import lesson_samples


def _recordings(lesson) -> list[str]:
    """The run names of ``lesson`` that have an H200 recording among the samples."""
    samples = lesson_samples(lesson.runs) or []
    return [run.name for run, _ in zip(lesson.runs, samples)]


@pytest.mark.parametrize("key", list(LESSONS))
def test_every_lesson_is_complete(key):
    lesson = LESSONS[key]
    assert schema_problems(lesson, recordings=_recordings(lesson)) == [], key
    # What the schema says, checked here directly too, so a lax schema check cannot hide a gap.
    assert lesson.title and lesson.text and lesson.runs and callable(lesson.check) and lesson.claims
    devices = ("cuda",) if lesson.needs_gpu else ("cpu",) if lesson.host_only else ("cuda", "cpu")
    for device in devices:
        assert 1 <= sum(device in q.devices for q in lesson.questions) <= MAX_QUESTIONS, (key, device)


def test_every_lesson_module_defines_its_lesson():
    """Each module of lab/lessons is a lesson, except the schema and the two shared kits."""
    import pkgutil

    import lab.lessons as package

    modules = {info.name for info in pkgutil.iter_modules(package.__path__)}
    lessons = {name for name in modules if hasattr(sys.modules.get(f"lab.lessons.{name}"), "LESSON")}
    assert modules - lessons == {"schema", "answers", "checks"}
    assert {sys.modules[f"lab.lessons.{name}"].LESSON.key for name in lessons} == set(LESSONS)


def test_a_lesson_without_a_check_is_rejected():
    lesson = next(iter(LESSONS.values()))
    assert schema_problems(lesson) == []
    without = replace(lesson, check=None)
    assert any("a check" in p for p in schema_problems(without))


@pytest.mark.parametrize("change, lacks", [
    (dict(questions=()), "questions"),
    (dict(claims=()), "claims"),
    (dict(runs=()), "at least one run"),
    (dict(text=" "), "a text"),
])
def test_a_lesson_lacking_a_part_is_rejected(change, lacks):
    lesson = LESSONS["tiny_vs_large"]
    assert any(lacks in p for p in schema_problems(replace(lesson, **change)))


def test_too_many_questions_are_rejected():
    lesson = LESSONS["tiny_vs_large"]
    gpu = [q for q in lesson.questions if "cuda" in q.devices]
    crowded = replace(lesson, questions=lesson.questions + tuple(replace(q, key=f"{q.key}_again") for q in gpu))
    assert any("questions a cuda run answers" in p for p in schema_problems(crowded))


def test_a_gpu_lesson_without_its_recording_is_rejected():
    lesson = LESSONS["fp32_vs_tf32"]
    assert lesson.needs_gpu
    assert schema_problems(lesson, recordings=_recordings(lesson)) == []
    assert any("recording" in p for p in schema_problems(lesson, recordings=[]))


def test_the_scan_refuses_a_module_whose_lesson_lacks_a_check(tmp_path, monkeypatch):
    """A lesson module written without a check stops the registry with what it lacks."""
    package = tmp_path / "scanned_lessons"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "no_check.py").write_text(textwrap.dedent("""
        from dataclasses import replace
        from lab.lessons import LESSONS
        LESSON = replace(LESSONS["linear"], key="no_check", check=None)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(LessonSchemaError, match="no_check.*a check"):
        scan_lessons("scanned_lessons")
    (package / "no_check.py").write_text("from lab.lessons import LESSONS\nLESSON = LESSONS['linear']\n")
    sys.modules.pop("scanned_lessons.no_check", None)
    assert list(scan_lessons("scanned_lessons")) == ["linear"]


def test_a_run_takes_its_workloads_own_sizes():
    """A lesson's run is written in the workload's typed sizes, which become the worker's
    RunConfig m, k, n; sizes of another workload's type are refused with the type it takes."""
    from lab.core.workloads import GemmShape, Rows
    from lab.lessons.schema import lesson_run

    run = lesson_run("loop", "row_loop", "rows", gpu=Rows(rows=64, columns=4096), cpu=Rows(rows=8, columns=256))
    assert (run.gpu.m, run.gpu.k, run.gpu.n) == (64, 4096, 1) and (run.cpu.m, run.cpu.k, run.cpu.n) == (8, 256, 1)
    assert Rows.of(run.gpu) == Rows(rows=64, columns=4096)
    with pytest.raises(TypeError, match=r"'row_loop' takes Rows\(rows, columns\)"):
        lesson_run("loop", "row_loop", "rows", gpu=GemmShape(m=64, k=4096, n=1), cpu=None)

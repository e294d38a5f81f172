"""The lessons: one module each in this package, found by scanning it.

Each lesson module defines ``LESSON`` (a ``schema.Lesson``: its text, runs, check, questions and
claims, all in that one file); ``schema`` says what each part is. ``answers`` and ``checks`` hold
what several lessons' questions and checks are built from. The registry is built once, here, by
scanning the package (``pkgutil``): adding a lesson is adding its module, and a module whose
lesson lacks a part (``schema.schema_problems``) stops the import with what it lacks.

What the page and the readers use: ``LESSONS`` (key → lesson, in the sidebar's order),
``QUESTIONS`` (every lesson's), ``lesson_configs`` (a lesson's runs on a device),
``lesson_signals`` (a lesson's check on its runs), ``questions_for`` / ``asked_on`` /
``skipped_for`` (which questions a device's runs answer, which a form asks, which it skips and
why) and ``answer_questions``. ``lesson_signals`` and ``answer_questions`` are what the page hands
a reader job (``lab.read.Job.code``), so that the readers import no lesson code of their own.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence

from lab.analysis.bundle import Run
from lab.lessons.schema import (
    ANY_DEVICE,
    CPU,
    GPU,
    Answer,
    Band,
    Claim,
    Lesson,
    LessonRun,
    Question,
    Signal,
    Where,
    band_of,
    lesson_configs,
    schema_problems,
)

__all__ = [
    "ANY_DEVICE", "CPU", "GPU", "LESSONS", "QUESTIONS", "RECORDING_LEAD",
    "Answer", "Band", "Claim", "Lesson", "LessonRun",
    "LessonSchemaError", "Question",
    "Signal", "Where", "answer_questions", "asked_on", "band_of",
    "explanation_for", "lesson_configs", "lesson_signals", "questions_for",
    "scan_lessons", "schema_problems", "skipped_for",
]  # fmt: skip


class LessonSchemaError(Exception):
    """A lesson module's ``LESSON`` lacks a part the schema requires (the message names them)."""


def scan_lessons(package: str = __name__) -> dict[str, Lesson]:
    """Every ``LESSON`` defined by a module of ``package``, by key, in the lessons' order; a lesson
    that lacks a part of the schema, or a key used twice, is refused with what is wrong."""
    found: list[Lesson] = []
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        lesson = getattr(importlib.import_module(f"{package}.{info.name}"), "LESSON", None)
        if isinstance(lesson, Lesson):
            if problems := schema_problems(lesson):
                raise LessonSchemaError(f"the lesson '{lesson.key}' ({info.name}.py) lacks: {'; '.join(problems)}")
            found.append(lesson)
    keys = [lesson.key for lesson in found]
    if len(set(keys)) != len(keys):
        raise LessonSchemaError(f"two lessons share a key: {sorted(k for k in keys if keys.count(k) > 1)}")
    return {lesson.key: lesson for lesson in sorted(found, key=lambda lesson: (lesson.order, lesson.key))}


LESSONS: dict[str, Lesson] = scan_lessons()
QUESTIONS: tuple[Question, ...] = tuple(q for lesson in LESSONS.values() for q in lesson.questions)
if len({q.key for q in QUESTIONS}) != len(QUESTIONS):
    raise LessonSchemaError("two questions share a key")


def lesson_signals(lesson_key: str, runs: list[Run]) -> list[Signal]:
    """The signals of ``lesson_key``'s check in ``runs`` (in the lesson's order)."""
    return LESSONS[lesson_key].check(runs)


def questions_for(lesson_key: str, device_kind: str) -> tuple[Question, ...]:
    """The questions asked before ``lesson_key`` opens runs of ``device_kind`` ("cuda" or "cpu"); a
    host-only lesson's runs are CPU runs on any host."""
    lesson = LESSONS[lesson_key]
    kind = CPU if lesson.host_only else device_kind
    return tuple(q for q in lesson.questions if kind in q.devices)


def answer_questions(lesson_key: str, device_kind: str, runs: Sequence[Run]) -> tuple[tuple[str, Answer], ...]:
    """(question key, answer) of each of the lesson's questions that runs of ``device_kind`` answer."""
    return tuple((q.key, q.answer(runs)) for q in questions_for(lesson_key, device_kind))


def asked_on(lesson_key: str, device_kind: str) -> tuple[Question, ...]:
    """The lesson's prediction form on a host of ``device_kind``: its own questions, then the GPU
    ones the lesson's H200 recording answers (a CPU host asks both), each once."""
    kinds = [device_kind] + ([GPU] if device_kind != GPU else [])
    seen: dict[str, Question] = {}
    for kind in kinds:
        for q in questions_for(lesson_key, kind):
            seen.setdefault(q.key, q)
    return tuple(seen.values())


def skipped_for(lesson_key: str, device_kind: str) -> tuple[tuple[Question, str], ...]:
    """The lesson's GPU questions a CPU run cannot answer, each with why (said on the page)."""
    return tuple((q, f"needs a GPU run: {q.why_gpu}") for q in LESSONS[lesson_key].questions
                 if device_kind not in q.devices and q.why_gpu)


# What a CPU run's explanation says first: the figures it quotes from the H200 recording are the
# recording's, not the run's (a CPU run shows its own figures in the check and the reveal above it).
RECORDING_LEAD = ("**On the lab's H200 recording** (your runs are CPU runs: their own figures are in the "
                  "lesson check and the reveal; the figures below are the recording's):")


def explanation_for(lesson_key: str, *, recorded: bool) -> str:
    """The lesson's explanation as the page shows it beside opened runs: as written beside its H200
    recording (``recorded``) or a GPU lesson's own runs; beside CPU runs, led by ``RECORDING_LEAD``
    when it quotes a figure of the H200 recording (a claim with ``device="cuda"``)."""
    lesson = LESSONS[lesson_key]
    if not lesson.explain or recorded or lesson.host_only:
        return lesson.explain
    quotes_recording = any(c.device == GPU and c.says in lesson.explain for c in lesson.claims)
    return f"{RECORDING_LEAD}\n\n{lesson.explain}" if quotes_recording else lesson.explain

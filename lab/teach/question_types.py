"""What a question is and what its answer says: ``Question``, ``Answer``, ``Band`` (a numeric
choice), ``Where`` (where the evidence is) and ``where_window`` (a step's window and the events in
it). The questions are in ``questions.py`` and ``questions_workshop.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lab.analysis.signals import Run

__all__ = ["ANY_DEVICE", "CPU", "GPU", "MAX_HIGHLIGHT", "Answer", "Band", "Question", "Where", "band_of", "question",
           "where_window"]

GPU: str = "cuda"
CPU: str = "cpu"
ANY_DEVICE: tuple[str, ...] = (GPU, CPU)
# The most event ids a reveal highlights: a 10-step trace has ~20 kernels; more is noise.
MAX_HIGHLIGHT = 40


@dataclass(frozen=True, kw_only=True)
class Where:
    """Where the evidence is: a key_averages row, or a timeline window and its events."""

    text: str
    row: str | None = None  # a key_averages row name
    window_us: tuple[float, float] | None = None  # µs since trace start, as the Timeline shows it
    step: int | None = None  # the window is this step's (0-based): the Timeline's "Zoom to" window
    run: int = 0  # which of the lesson's runs (index) the window or row is in
    event_ids: tuple[int, ...] = ()  # positions in that run's ``trace.events``
    event_names: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Answer:
    choice: str  # the right one of ``Question.choices``
    measured: float  # the number the choice was read from
    measured_text: str  # that number in words
    where: Where


@dataclass(frozen=True, kw_only=True)
class Band:
    """A numeric choice: values below ``below`` (and at or above the previous band's) read as ``label``."""

    label: str
    below: float = float("inf")


@dataclass(frozen=True, kw_only=True)
class Question:
    key: str  # "<lesson>.<what>", unique; the room stores answers under it
    lesson: str
    text: str
    choices: tuple[str, ...]
    answer: Callable[[Sequence[Run]], Answer]
    devices: tuple[str, ...] = ANY_DEVICE  # the device kinds whose runs can answer it
    why_gpu: str = ""  # for a GPU-only question: why a CPU run cannot answer it
    # Per choice, the words that would give it away if shown before the prediction, besides the
    # choice's own label (lab.teach.giveaway): "1" → "one kernel", "no" → "swaps strides".
    tells: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def tells_for(self, choice: str) -> tuple[str, ...]:
        return next((words for label, words in self.tells if label == choice), ())


def question(key: str, text: str, choices: Sequence[str], answer: Callable[[Sequence[Run]], Answer],
             devices: Sequence[str] = ANY_DEVICE, why_gpu: str = "",
             tells: dict[str, Sequence[str]] | None = None) -> Question:
    """One question from one row of a question table (its lesson is the key's first part)."""
    return Question(key=key, lesson=key.split(".", 1)[0], text=text, choices=tuple(choices), answer=answer,
                    devices=tuple(devices), why_gpu=why_gpu,
                    tells=tuple((c, tuple(w)) for c, w in (tells or {}).items()))


def band_of(value: float, bands: Sequence[Band]) -> str:
    return next(b.label for b in bands if value < b.below or b is bands[-1])


def _step_window(run: Run, index: int = 0) -> tuple[float, float]:
    """Step ``index``'s CPU window stretched to the next step's start (its GPU work shows too)."""
    steps = run.analysis.steps
    if not len(steps):
        return 0.0, float(run.analysis.utilization.trace_span_us)
    start = float(steps["start_us"].iloc[index])
    end = float(steps["end_us"].iloc[index])
    if index + 1 < len(steps):
        end = max(end, float(steps["start_us"].iloc[index + 1]))
    return start, end


def _in_window(run: Run, rows: np.ndarray, window: tuple[float, float]) -> np.ndarray:
    ts = run.trace.events["ts_us"].to_numpy(dtype=float)[rows]
    return rows[(ts >= window[0]) & (ts <= window[1])][:MAX_HIGHLIGHT]


def _where_window(run: Run, index: int, rows: np.ndarray, text: str, step: int = 0,
                  window: tuple[float, float] | None = None) -> Where:
    """Step ``step``'s window (or ``window``) and the events of ``rows`` that start in it."""
    window = window or _step_window(run, step)
    shown = _in_window(run, rows, window)
    names = tuple(dict.fromkeys(str(n) for n in run.trace.events["name"].to_numpy()[shown]))
    return Where(text=text, window_us=window, step=step if len(run.analysis.steps) else None, run=index,
                 event_ids=tuple(int(i) for i in shown), event_names=names)


where_window = _where_window

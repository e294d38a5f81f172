"""What a lesson is, in one place: ``Lesson`` and its parts.

A lesson is one module of ``lab/lessons/`` that defines ``LESSON``, a ``Lesson``:

- its **text** (``title``, ``text``: what a learner reads before predicting: the task and where
  to look, never the answer) and what is shown once its runs opened (``look_for``, ``explain``);
- its **runs** (``LessonRun``: one run, or two to compare), each a workload with the lab's
  ``RunConfig`` on a GPU and on a CPU (None: the run needs a GPU), written with the workload's own
  typed sizes (``lesson_run``: ``Rows(rows=64, columns=4096)``, never a bare m/k/n);
- its **check** (``Check``): a pure function of the opened runs (``Run``: name, Trace, Analysis,
  in the lesson's order) returning ``Signal``s, each a yes/no with the numbers behind it;
- its **questions** (``Question``, one to three per device): asked before the runs open, each
  ``answer`` a pure function of the runs that then open (never a stored value), returning an
  ``Answer``: the right choice, the number it was read from and ``Where`` the evidence is;
- its **claims** (``Claim``): every sentence of ``text`` or ``explain`` that states what a trace
  shows, as a figure of ``lab.analysis.figures.FIGURES`` read from a run and the value or range
  it must have, checked on the lesson's H200 recording (``device="cuda"``) or on a CPU run
  (``device="cpu"``) by tests/test_claims.py.

``schema_problems`` says what a lesson lacks; the registry (``lab.lessons``) refuses a lesson
with any.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lab.analysis.bundle import Run
from lab.core.config import ConfigError, RunConfig
from lab.core.workloads import WORKLOADS, Sizes

__all__ = [
    "ANY_DEVICE", "CPU", "CPU_RUN", "GPU", "GPU_RECORDING", "MAX_QUESTIONS", "Answer", "Band", "Check", "Claim",
    "Lesson", "LessonRun", "Question", "Signal", "Where", "band_of", "claim_between", "claim_equals",
    "lesson_configs", "lesson_run", "question", "schema_problems",
]  # fmt: skip

GPU: str = "cuda"
CPU: str = "cpu"
ANY_DEVICE: tuple[str, ...] = (GPU, CPU)
# A claim's device: the lesson's H200 recording, or a CPU run of the lesson made in the test.
GPU_RECORDING, CPU_RUN = GPU, CPU
# A lesson asks at most this many questions on one device: a prediction form a learner fills in
# under a minute, before each run.
MAX_QUESTIONS = 3


# --------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class Signal:
    """One thing a lesson's check looks for in its runs: found or not, and the numbers behind it."""

    title: str
    present: bool
    evidence: str
    # False where the lesson's effect is not expected on this kind of trace (said in evidence):
    # the page shows it as information, not as a missing signal.
    expected: bool = True


Check = Callable[[list[Run]], list[Signal]]


# --------------------------------------------------------------------------- claims


@dataclass(frozen=True, kw_only=True)
class Claim:
    """A sentence of a lesson that states what a trace shows, as data to check."""

    says: str  # the lesson's words that state it, verbatim (in its text or explain)
    figure: str  # a name in lab.analysis.figures.FIGURES
    run: str  # the run it is read from: a run name of this lesson, or "<lesson key>:<run name>"
    args: tuple = ()  # the figure's further arguments (an op name, a kernel-name pattern)
    over: str | None = None  # divide by the same figure of this run (a ratio: "8.0× faster")
    low: float = float("-inf")  # a number holds when low <= value <= high
    high: float = float("inf")
    equals: str | float | None = None  # or it must equal this (a name, a count)
    device: str = GPU_RECORDING  # "cuda": the H200 recording; "cpu": a CPU run of the lesson

    def holds(self, value: float | str) -> bool:
        if self.equals is not None:
            return value == self.equals
        return isinstance(value, (int, float)) and self.low <= float(value) <= self.high


def claim_between(says: str, figure: str, run: str, low: float, high: float, **kw) -> Claim:
    return Claim(says=says, figure=figure, run=run, low=low, high=high, **kw)


def claim_equals(says: str, figure: str, run: str, equals: str | float, **kw) -> Claim:
    return Claim(says=says, figure=figure, run=run, equals=equals, **kw)


# --------------------------------------------------------------------------- questions


@dataclass(frozen=True, kw_only=True)
class Where:
    """Where the evidence is: a key_averages row, a timeline window and its events, or a view."""

    text: str
    row: str | None = None  # a key_averages row name
    window_us: tuple[float, float] | None = None  # µs since trace start, as the Timeline shows it
    step: int | None = None  # the window is this step's (0-based): the Timeline's "Zoom to" window
    run: int = 0  # which of the lesson's runs (index) the window or row is in
    event_ids: tuple[int, ...] = ()  # positions in that run's ``trace.events``
    event_names: tuple[str, ...] = ()
    # The view that shows the evidence when it is neither the Table nor the Timeline ("Memory": the
    # peak's op and label are marked there); "" for those two, which ``row`` / ``window_us`` name.
    view: str = ""


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


def band_of(value: float, bands: Sequence[Band]) -> str:
    return next(b.label for b in bands if value < b.below or b is bands[-1])


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
    """One question from one row of a lesson's question table (its lesson is the key's first part)."""
    return Question(key=key, lesson=key.split(".", 1)[0], text=text, choices=tuple(choices), answer=answer,
                    devices=tuple(devices), why_gpu=why_gpu,
                    tells=tuple((c, tuple(w)) for c, w in (tells or {}).items()))


# --------------------------------------------------------------------------- runs and the lesson


@dataclass(frozen=True)
class LessonRun:
    name: str  # short name shown above its results, e.g. "eager"
    gpu: RunConfig
    cpu: RunConfig | None  # None: this run needs a GPU


@dataclass(frozen=True, kw_only=True)
class Lesson:
    """A lesson (the module doc says what each part is for)."""

    key: str
    title: str
    text: str  # markdown, our own words: shown before the predictions
    look_for: str  # what the check looks for in the trace: shown after the runs opened
    runs: tuple[LessonRun, ...]  # one run, or two to compare
    check: Check  # the signals of the opened runs
    questions: tuple[Question, ...]  # asked before the runs open
    claims: tuple[Claim, ...]  # the facts text and explain state, as checks on the recordings
    # Where the lesson stands in the sidebar's list: lower first (the lessons build on each other).
    order: float
    cpu_refusal: str | None = None  # why a CPU host cannot run it, where it needs a GPU
    explain: str = ""  # markdown: what the runs show, shown after they opened (with the reveal)
    # Its runs are processes on the host's CPU cores on any host (a gloo job): on a GPU host too
    # ``lesson_configs`` gives the CPU configs; no H200 recording; its questions are a CPU run's.
    host_only: bool = False

    @property
    def is_pair(self) -> bool:
        return len(self.runs) == 2

    @property
    def needs_gpu(self) -> bool:
        return self.cpu_refusal is not None or any(r.cpu is None for r in self.runs)


def lesson_configs(lesson: Lesson, device_kind: str) -> tuple[tuple[str, RunConfig], ...]:
    """The (name, config) pairs to run for ``lesson`` on a "cpu" or "cuda" device."""
    if device_kind == GPU and not lesson.host_only:
        return tuple((r.name, r.gpu) for r in lesson.runs)
    if lesson.needs_gpu:
        raise ConfigError(lesson.cpu_refusal or f"the lesson '{lesson.title}' needs a CUDA GPU")
    return tuple((r.name, r.cpu) for r in lesson.runs if r.cpu is not None)


def lesson_run(name: str, workload: str, label: str, *, gpu: Sizes, cpu: Sizes | None, gpu_dtype: str = "bfloat16",
               **both) -> LessonRun:
    """One run of a lesson: its name, the workload and its step label, the workload's sizes on a GPU
    and on a CPU (``lab.core.workloads.sizes``, the type the workload names; ``cpu=None``: the run
    needs a GPU), the GPU's dtype (the CPU's is the default float32), and keywords for both configs
    (``profile_memory=True``, ``active=3``). The sizes become the ``RunConfig``'s ``m``, ``k``, ``n``."""
    wanted = WORKLOADS[workload].sizes
    for sizes in (gpu, cpu):
        if sizes is not None and type(sizes) is not wanted:
            raise TypeError(f"the run '{name}' gives {type(sizes).__name__} sizes; '{workload}' takes "
                            f"{wanted.__name__}({', '.join(wanted.names())})")
    m, k, n = gpu.dims()
    gpu_config = RunConfig(device="auto", workload=workload, m=m, k=k, n=n, dtype=gpu_dtype, step_label=label, **both)
    if cpu is None:
        return LessonRun(name, gpu_config, None)
    m, k, n = cpu.dims()
    cpu_config = RunConfig(device="cpu", workload=workload, m=m, k=k, n=n, step_label=label, **both)
    return LessonRun(name, gpu_config, cpu_config)


def schema_problems(lesson: Lesson, recordings: Sequence[str] | None = None) -> list[str]:
    """What ``lesson`` lacks, in words (empty: it is complete): text and at least one run, a check,
    one to three questions on each device it runs on, claims, and — where it needs a GPU — its
    recordings (``recordings``: the run names with an H200 sample; None: not checked here)."""
    problems = []
    if not (lesson.title.strip() and lesson.text.strip() and lesson.look_for.strip()):
        problems.append("a title, a text and what its check looks for")
    if not lesson.runs:
        problems.append("at least one run")
    if not callable(lesson.check):
        problems.append("a check (a function of its runs returning signals)")
    for device in (GPU,) if lesson.needs_gpu else (CPU,) if lesson.host_only else ANY_DEVICE:
        asked = sum(device in q.devices for q in lesson.questions)
        if not 1 <= asked <= MAX_QUESTIONS:
            problems.append(f"one to {MAX_QUESTIONS} questions a {device} run answers (has {asked})")
    if any(q.lesson != lesson.key for q in lesson.questions):
        problems.append("questions keyed '<its key>.<what>'")
    if not lesson.claims:
        problems.append("claims (what its text states, checked on the recordings)")
    if lesson.needs_gpu and recordings is not None and set(recordings) != {r.name for r in lesson.runs}:
        problems.append("an H200 recording of each run (it needs a GPU)")
    return problems

"""What a lesson is: ``Lesson`` (its text and runs), ``LessonRun`` (one run's GPU and CPU configs)
and ``lesson_configs``. The lessons themselves are in ``lessons.py`` and ``lessons_workshop.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.core.claims import Claim
from lab.core.config import ConfigError, RunConfig

__all__ = ["Lesson", "LessonRun", "lesson_configs", "lesson_run"]


@dataclass(frozen=True)
class LessonRun:
    name: str  # short name shown above its results, e.g. "eager"
    gpu: RunConfig
    cpu: RunConfig | None  # None: this run needs a GPU


@dataclass(frozen=True)
class Lesson:
    """A lesson. What a learner reads before predicting is ``title`` and ``text`` (with the
    questions, ``lab.teach.questions``): they set the task and name where to look, never the
    answer. ``look_for`` (what the lab's check looks for) and ``explain`` (what the recordings
    show, with their figures) are shown once the lesson's runs opened, beside the reveal.
    Every sentence of ``text`` or ``explain`` that states what a trace shows has a ``Claim``
    (``lab.core.claims``), checked on its recording by tests/test_claims.py."""

    key: str
    title: str
    text: str  # markdown, our own words: shown before the predictions
    look_for: str  # the signal the lab detects in the trace (lab.analysis.signals): shown after
    runs: tuple[LessonRun, ...]  # one run, or two to compare
    cpu_refusal: str | None = None
    explain: str = ""  # markdown: what the runs show, shown after they opened (with the reveal)
    claims: tuple[Claim, ...] = ()  # the facts text and explain state, as checks on the recordings

    @property
    def is_pair(self) -> bool:
        return len(self.runs) == 2


def lesson_configs(lesson: Lesson, device_kind: str) -> tuple[tuple[str, RunConfig], ...]:
    """The (name, config) pairs to run for ``lesson`` on a "cpu" or "cuda" device."""
    if device_kind == "cuda":
        return tuple((r.name, r.gpu) for r in lesson.runs)
    if lesson.cpu_refusal or any(r.cpu is None for r in lesson.runs):
        raise ConfigError(lesson.cpu_refusal or f"the lesson '{lesson.title}' needs a CUDA GPU")
    return tuple((r.name, r.cpu) for r in lesson.runs if r.cpu is not None)


def _gpu(**kw) -> RunConfig:
    return RunConfig(device="auto", **kw)


def _cpu(**kw) -> RunConfig:
    return RunConfig(device="cpu", **kw)


def lesson_run(name: str, workload: str, label: str, gpu: tuple[int, int, int], cpu: tuple[int, int, int] | None,
               *, gpu_dtype: str = "bfloat16", **both) -> LessonRun:
    """One run of a lesson from one row of its table: the workload and its step label, the (m, k, n)
    on a GPU and on a CPU (None: the run needs a GPU), the GPU's dtype (the CPU's is the default
    float32), and keywords for both configs (``profile_memory=True``, ``active=3``)."""
    m, k, n = gpu
    gpu_config = _gpu(workload=workload, m=m, k=k, n=n, dtype=gpu_dtype, step_label=label, **both)
    if cpu is None:
        return LessonRun(name, gpu_config, None)
    cm, ck, cn = cpu
    return LessonRun(name, gpu_config, _cpu(workload=workload, m=cm, k=ck, n=cn, step_label=label, **both))

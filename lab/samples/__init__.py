"""Recorded GPU traces shipped with the lab, and their manifest (see scripts/record_samples.py)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SAMPLES_DIR = Path(__file__).resolve().parent
MANIFEST = SAMPLES_DIR / "manifest.json"


@dataclass(frozen=True)
class Sample:
    file: str
    title: str
    device: str = ""
    torch: str = ""
    recorded: str = ""
    note: str = ""
    lesson: str = ""  # key of the lesson (lab.lessons) this sample illustrates, if any
    lessons: tuple = ()  # every lesson whose run this sample is (a config can serve several)
    cuda: str = ""
    config: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)  # per-iteration µs with and without the profiler

    @property
    def path(self) -> Path:
        return SAMPLES_DIR / self.file

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()


def sample_for(config: dict) -> Sample | None:
    """The recorded sample of ``config`` (a RunConfig.to_dict()), device aside, if there is one."""

    def key(d: dict) -> tuple:
        return tuple(sorted((k, v) for k, v in d.items() if k != "device"))

    wanted = key(config)
    return next((s for s in list_samples() if s.config and key(s.config) == wanted), None)


@functools.lru_cache(maxsize=1)
def list_samples() -> tuple[Sample, ...]:
    """The bundled samples in manifest order; entries whose file is missing are left out.

    Read once per process: the page asks on every rerun, and the files ship with the code.
    """
    data = json.loads(MANIFEST.read_text())
    known = set(Sample.__dataclass_fields__)
    fields: list[dict[str, Any]] = [
        {k: tuple(v) if isinstance(v, list) else v for k, v in entry.items() if k in known} for entry in data["samples"]
    ]
    samples = [Sample(**f) for f in fields]
    return tuple(s for s in samples if s.path.exists())


def lesson_samples(runs) -> list[Sample] | None:
    """The recorded GPU samples of a lesson's runs (``Lesson.runs``), in order; None if any is missing."""
    found = [sample_for(run.gpu.to_dict()) for run in runs]
    present = [s for s in found if s is not None]
    return present if len(present) == len(found) else None

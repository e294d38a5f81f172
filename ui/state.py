"""Per-session results (``st.session_state``) and the shared, bounded caches.

Each visitor's runs and uploads live in their own session; nothing here is module-level
mutable state. The caches are keyed by a digest of the trace bytes, so one session can only
hit an entry by holding the very same bytes.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import streamlit as st

from lab.run import RunResult
from lab.samples import Sample, list_samples

MAX_RUNS = 8  # per session: each run keeps its trace (≈0.1–5 MB) in memory
MAX_UPLOADS = 4
# First visit: the seed exercise as recorded on an H200 (eager 4096³ bf16: a GEMM then an add
# kernel per step). It shows kernels, streams and launches on any host, GPU or not.
DEFAULT_SAMPLE_KEY = "sample:matmul_add_4096_bf16.json.gz"


@dataclass(frozen=True)
class Subject:
    """Something the views can show: a run of this session, a bundled sample or an upload."""

    key: str  # "run:3", "sample:<file>", "upload:2"
    title: str
    trace_bytes: bytes
    digest: str
    run: RunResult | None = None
    sample: Sample | None = None

    @property
    def kind(self) -> str:
        return self.key.split(":", 1)[0]


def digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _session_list(name: str) -> list:
    return st.session_state.setdefault(name, [])


def _next_id() -> int:
    n = st.session_state.get("_subject_counter", 0) + 1
    st.session_state["_subject_counter"] = n
    return n


def add_run(result: RunResult, name: str | None = None) -> Subject:
    runs = _session_list("runs")
    c = result.config
    title = name or f"{c.step_label} · {c.workload} {c.shape_text} {c.dtype} {result.device.kind}"
    subject = Subject(key=f"run:{_next_id()}", title=f"Run: {title} ({time.strftime('%H:%M:%S')})",
                      trace_bytes=result.trace_gz, digest=digest_of(result.trace_gz), run=result)
    runs.append(subject)
    del runs[:-MAX_RUNS]
    st.session_state["subject"] = subject.key
    return subject


def has_upload(digest: str) -> bool:
    return any(s.digest == digest for s in _session_list("uploads"))


def add_upload(name: str, data: bytes) -> Subject:
    uploads = _session_list("uploads")
    digest = digest_of(data)
    for existing in uploads:  # the uploader hands the same file back on every rerun
        if existing.digest == digest:
            return existing
    subject = Subject(key=f"upload:{_next_id()}", title=f"Upload: {name}", trace_bytes=data, digest=digest)
    uploads.append(subject)
    del uploads[:-MAX_UPLOADS]
    st.session_state["subject"] = subject.key
    return subject


def sample_subjects() -> list[Subject]:
    return [_sample_subject(s) for s in list_samples()]


@st.cache_resource(show_spinner=False)
def _sample_bytes(file: str) -> bytes:
    return next(s for s in list_samples() if s.file == file).read_bytes()


def _sample_subject(sample: Sample) -> Subject:
    data = _sample_bytes(sample.file)
    return Subject(key=f"sample:{sample.file}", title=f"Sample: {sample.title}", trace_bytes=data,
                   digest=digest_of(data), sample=sample)


def all_subjects() -> list[Subject]:
    """Newest runs first, then uploads, then the bundled samples."""
    return [*reversed(_session_list("runs")), *reversed(_session_list("uploads")), *sample_subjects()]


def current_subject(subjects: list[Subject]) -> Subject | None:
    """The subject the "Showing" box points at; on a first visit, the default sample.

    Also repairs ``session_state["subject"]`` when it names something gone (a run pushed out
    by MAX_RUNS), so the selectbox is never handed a value outside its options.
    """
    if not subjects:
        return None
    by_key = {s.key: s for s in subjects}
    key = st.session_state.get("subject")
    if key not in by_key:
        key = DEFAULT_SAMPLE_KEY if DEFAULT_SAMPLE_KEY in by_key else subjects[0].key
        st.session_state["subject"] = key
    return by_key[key]

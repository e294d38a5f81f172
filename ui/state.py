"""Per-session results (``st.session_state``) and the shared, bounded caches.

Each visitor's runs and uploads live in their own session; nothing here is module-level
mutable state. The caches are keyed by a digest of the trace bytes, so one session can only
hit an entry by holding the very same bytes. An upload keeps no bytes: once read, its parsed
form lives in the reader pool's store under this session's random ``owner`` token and the
upload's digest (``ui.upload``).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

import streamlit as st

from lab.analysis import RanksAnalysis
from lab.core import RunResult
from lab.samples import Sample, list_samples

MAX_RUNS = 8  # per session: each run keeps its trace (≈0.1–5 MB) in memory
MAX_UPLOADS = 4
MAX_RANK_GROUPS = 2  # per session: a group holds every rank's parsed trace in the pool's store
# First visit: the seed exercise as recorded on an H200 (eager 4096³ bf16: a GEMM then an add
# kernel per step). It shows kernels, streams and launches on any host, GPU or not.
DEFAULT_SAMPLE_KEY = "sample:matmul_add_4096_bf16.json.gz"


@dataclass(frozen=True)
class Subject:
    """Something the views can show: a run of this session, a bundled sample or an upload."""

    key: str  # "run:3", "sample:<file>", "upload:2", "ranks:4"
    title: str
    trace_bytes: bytes  # b"" for an upload: its bytes were let go once it was read
    digest: str  # for ranks: the lowest rank's, which the single-trace views show
    run: RunResult | None = None
    sample: Sample | None = None
    # A group of one job's ranks: (file name, digest) per rank, by rank, and their analysis.
    ranks: tuple[tuple[str, str], ...] = ()
    ranks_analysis: RanksAnalysis | None = None
    # A job opened from a trace directory: each rank's file on the server, by rank (read in full
    # only when its timeline is asked for; the job itself came from the ranks' summaries).
    rank_paths: tuple[str, ...] = ()
    ranks_findings: tuple = ()  # the job's findings (lab.judge.judge_ranks), computed in a reader

    @property
    def kind(self) -> str:
        return self.key.split(":", 1)[0]


def subject_timing(subject: Subject) -> tuple[float, float] | None:
    """(profiled, unprofiled) median µs per iteration of a run or a sample; None for an upload."""
    if subject.run is not None:
        return subject.run.timing.profiled_median_us, subject.run.timing.unprofiled_median_us
    timing = subject.sample.timing if subject.sample is not None else None
    if timing and timing.get("profiled_median_us") and timing.get("unprofiled_median_us"):
        return float(timing["profiled_median_us"]), float(timing["unprofiled_median_us"])
    return None


def digest_of(data: bytes) -> str:
    """128 bits of SHA-256: the CPU's SHA instructions make it 0.10 s on a 114.8 MB upload where
    blake2b (16 bytes, as before) took 0.23 s on this box (hashlib, one thread)."""
    return hashlib.sha256(data).hexdigest()[:32]


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


def owner() -> str:
    """This session's random token: the key under which the server keeps its parsed uploads."""
    return st.session_state.setdefault("_owner", secrets.token_hex(16))


def has_upload(digest: str) -> bool:
    return any(s.digest == digest for s in _session_list("uploads"))


def add_upload(name: str, digest: str, *, title: str | None = None) -> tuple[Subject, list[Subject]]:
    """Add an upload already read (its ``Outline`` is in the pool's store) and select it on the
    next page run; returns it and the uploads pushed out by ``MAX_UPLOADS`` (to release)."""
    uploads = _session_list("uploads")
    for existing in uploads:  # the uploader hands the same file back on every rerun
        if existing.digest == digest:
            return existing, []
    subject = Subject(key=f"upload:{_next_id()}", title=title or f"Upload: {name}", trace_bytes=b"", digest=digest)
    uploads.append(subject)
    dropped = uploads[:-MAX_UPLOADS]
    del uploads[:-MAX_UPLOADS]
    # The "Showing" box may already be drawn in this run (an upload settles at the page's end):
    # its value changes at the start of the next run, in current_subject.
    st.session_state["_select_subject"] = subject.key
    return subject, dropped


def has_ranks(group_key: str) -> bool:
    return any(s.ranks and group_key == ranks_key(d for _, d in s.ranks) for s in _session_list("rank_groups"))


def ranks_key(digests) -> str:
    """One key per set of files, whatever order they came in."""
    return "+".join(sorted(digests))


def add_ranks(members: list[tuple[str, str]], analysis: RanksAnalysis, findings: tuple = (), *,
              paths: tuple[str, ...] = (), title: str | None = None) -> tuple[Subject, list[Subject]]:
    """Add a group of one job's ranks, already read (each ``Outline`` is in the pool's store), and
    open its Ranks view on the next page run; returns it and the groups pushed out (to release)."""
    groups = _session_list("rank_groups")
    names = ", ".join(name for name, _ in members)
    subject = Subject(key=f"ranks:{_next_id()}", title=title or f"Ranks: {len(members)} ranks of one job ({names})",
                      trace_bytes=b"", digest=members[0][1], ranks=tuple(members), ranks_analysis=analysis,
                      ranks_findings=tuple(findings), rank_paths=paths)
    groups.append(subject)
    dropped = groups[:-MAX_RANK_GROUPS]
    del groups[:-MAX_RANK_GROUPS]
    st.session_state["_select_subject"] = subject.key
    st.session_state["_select_view"] = "Ranks"
    return subject, dropped


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
    """Newest runs first, then groups of ranks, uploads, then the bundled samples."""
    return [*reversed(_session_list("runs")), *reversed(_session_list("rank_groups")),
            *reversed(_session_list("uploads")), *sample_subjects()]


def has_own_subjects() -> bool:
    """Whether this visitor has a run, an upload or a job of their own (not only the samples)."""
    return any(_session_list(name) for name in ("runs", "rank_groups", "uploads"))


def current_subject(subjects: list[Subject]) -> Subject | None:
    """The subject the "Showing" box points at; on a first visit, the default sample.

    Also repairs ``session_state["subject"]`` when it names something gone (a run pushed out
    by MAX_RUNS), so the selectbox is never handed a value outside its options.
    """
    if not subjects:
        return None
    by_key = {s.key: s for s in subjects}
    if st.session_state.get("_select_subject") in by_key:
        st.session_state["subject"] = st.session_state.pop("_select_subject")
    if "_select_view" in st.session_state:  # before the tabs are drawn, as "subject" before its box
        st.session_state["view"] = st.session_state.pop("_select_view")
    key = st.session_state.get("subject")
    if key not in by_key:
        key = DEFAULT_SAMPLE_KEY if DEFAULT_SAMPLE_KEY in by_key else subjects[0].key
        st.session_state["subject"] = key
    return by_key[key]


@dataclass(frozen=True)
class OpenedLesson:
    """The lesson the visitor last ran or opened, with its runs' loaded traces in the lesson's order."""

    key: str
    subject_keys: tuple[str, ...]
    subjects: list[Subject]
    loaded: list
    finished: bool = False  # a newer run or upload arrived since it opened: its boxes fold away


def arrivals() -> int:
    """How many runs, uploads and groups of ranks this session has added so far."""
    return int(st.session_state.get("_subject_counter", 0))


def opened_lesson(subjects: list[Subject], load) -> OpenedLesson | None:
    """The lesson last opened (``ui.run.open_lesson``) with each run loaded; None when none was,
    or one of its runs fell out of the session's history or could not be read."""
    check = st.session_state.get("lesson_check")
    if not check:
        return None
    by_key = {s.key: s for s in subjects}
    chosen = [by_key.get(k) for k in check["subjects"]]
    if not chosen or any(s is None for s in chosen):
        return None
    loaded = [load(s) for s in chosen]
    if any(x is None for x in loaded):
        return None
    return OpenedLesson(key=check["lesson"], subject_keys=tuple(check["subjects"]),
                        subjects=[s for s in chosen if s is not None], loaded=loaded,
                        finished=arrivals() > check.get("arrivals", arrivals()))

"""The reader process side: a fresh interpreter that parses and analyses traces, one at a time.

It starts as ``python -c READER_CODE`` (not multiprocessing: see ``lab.pool.spawn``), finds its
end of the socketpair in ``PROFILER_LAB_READER_FD``, reads ``InitReader``, imports the trace
and analysis packages, reads one bundled sample (so every lazy import and first allocation is
paid), then caps its own address space at that size plus the host's ``reader_memory_mb``
(``RLIMIT_AS``), lowers its CPU priority, offers itself first to the kernel's OOM killer, and
says ``Ready``. Each ``Task`` (a ``ReadRequest``, or a multi-trace job of ``lab.read.jobs``)
gets ``Progress`` updates and one ``Done`` (followed by the pickled result) or ``Failure``. Any
other message, or the server's end closing, ends it. After running out of memory it says so and
exits: the pool starts a fresh one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import mmap
import os
import resource
import time

from lab.pool import ChildPipe, Done, Failure, Progress, Ready, Task, child_entry, pack
from lab.read.kept import KeptTraces
from lab.read.limits import MIB, analysis_refusal, memory_refusal, process_memory
from lab.read.protocol import InitReader, Parsed, ReaderLimits, ReadFailureKind, ReadRequest

__all__ = ["OOM_SCORE_ADJ", "READER_CODE", "READER_FD_ENV", "REREAD_STAGE"]

READER_CODE = "from lab.read.reader import _reader_entry; _reader_entry()"
READER_FD_ENV = "PROFILER_LAB_READER_FD"
# Of the server, its workers and its readers, a reader is what the kernel's OOM killer should
# end when the box runs out anyway (1000 = first choice; raising it needs no privilege).
OOM_SCORE_ADJ = 800
# The stage a job reports while it reads again a trace its reader no longer keeps.
REREAD_STAGE = "reading again"


def _reader_entry() -> None:
    """Entry point of a reader interpreter (see ``READER_CODE``)."""
    child_entry(READER_FD_ENV, _reader_main)


def _reader_main(conn, init: InitReader) -> None:
    pipe = ChildPipe(conn)
    try:
        steps = _Steps()
        steps.warm_up(init.warm_code)
    except BaseException as error:  # noqa: BLE001 - report, then exit: nothing can be read
        pipe.send(Ready(pid=os.getpid(), usable=False, error=f"{type(error).__name__}: {error}"))
        return
    base, limit, confine_error = _confine(init)
    steps.kept = KeptTraces(init.keep_bytes)
    pipe.send(Ready(pid=os.getpid(), info=ReaderLimits(base_address_space=base, limit_bytes=limit),
                    error=confine_error))
    while _serve_next(pipe, steps, init.memory_mb):
        pass


def _serve_next(pipe: ChildPipe, steps: _Steps, memory_mb: int) -> bool:
    """Take the next request (and its bytes) and serve it; False when the reader must exit.

    A function of its own so that the request's bytes die with its frame, not while idle.
    """
    task = pipe.recv()
    if not isinstance(task, Task):
        return False
    received, data = pipe.recv_frames(task)
    if not received:
        return False
    return _serve_one(pipe, steps, task, data, memory_mb)


def _confine(init: InitReader) -> tuple[int, int, str | None]:
    """Lower priority, volunteer for the OOM killer, cap the address space; (base, limit, error)."""
    problems = []
    try:
        os.nice(init.nice)
    except OSError as exc:
        problems.append(f"nice: {exc}")
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write(str(OOM_SCORE_ADJ))
    except OSError:
        pass  # not Linux, or a sandbox without /proc: the limit below still holds
    memory = process_memory(os.getpid())
    if memory is None:  # no /proc: the start-up size is unknown, so no limit can be placed above it
        problems.append("RLIMIT_AS not set: this system has no /proc/<pid>/status")
        return 0, 0, "; ".join(problems)
    base = memory[1]
    limit = base + init.memory_mb * MIB
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError) as exc:
        problems.append(f"RLIMIT_AS not set: {exc}")
        limit = 0
    return base, limit, "; ".join(problems) or None


class _Steps:
    """The pipeline's stages, imported once (pandas, msgspec: ~1 s) and warmed up."""

    def __init__(self):
        self.kept = KeptTraces(0)  # the parsed traces this reader keeps (lab.read.kept), sized once confined
        self.trace = importlib.import_module("lab.trace")
        self.analysis = importlib.import_module("lab.analysis")
        self.settings = importlib.import_module("lab.core.settings")
        self.jobs = importlib.import_module("lab.read.jobs")
        self.here = importlib.import_module("lab.read.here")

    def warm_up(self, warm_code=()) -> None:
        """One bundled sample read, and each of the page's ``warm_code`` called once on it (a
        visitor's first question must not pay its imports: 0.3 s for lab.teach on the 2-core box)."""
        samples = importlib.import_module("lab.samples")
        found = samples.list_samples()
        if found:
            parsed = self.parse(found[0].read_bytes(), self.settings.HostSettings(), None, None)
            runs = [self.analysis.Run(found[0].title, parsed.trace, parsed.analysis)]
            for code in warm_code:
                code(runs)
        # What the imports and the warm-up left (~2·10^5 objects: pandas, numpy, altair's grammar)
        # out of the collector's sight: every full collection while a trace was read traversed them,
        # 0.2-0.3 s pauses on the 2-core host (the pipeline fuzz test's slowest cases).
        gc.collect()
        gc.freeze()

    def rank_summary(self, parsed: Parsed, name: str):
        """One rank's summary with its attribution (median µs per step by cause) beside it."""
        summary = self.analysis.rank_summary(parsed.trace, name, parsed.analysis)
        causes = parsed.explanation.attribution.median_us() if parsed.explanation is not None else None
        return summary if causes is None else dataclasses.replace(summary, causes=causes)

    def parse(self, buf, settings, config, peak, progress: _Progress | None = None) -> Parsed:
        # The one pipeline, shared with the CLI's reads in its own process (lab.read.here).
        return self.here.parse(buf, settings=settings, config=config, peak=peak,
                               on_stage=None if progress is None else progress.stage)


class _Progress:
    """What one read has got to, kept apart from its frames so a failure can still be described."""

    def __init__(self, pipe: ChildPipe, read_id: int):
        self.pipe, self.read_id, self.json_bytes = pipe, read_id, 0

    def stage(self, name: str) -> None:
        self.pipe.send(Progress(ticket_id=self.read_id, stage=name, input_bytes=self.json_bytes))


def _read(steps: _Steps, request: ReadRequest, data, progress: _Progress) -> list:
    """The ``Parsed`` of the request's trace (its ``Outline`` for the page) as frames
    (``lab.pool.frames``: the pickle and its out-of-band buffers, so no second whole copy of the
    result is ever held).

    ``load_trace`` gets the bytes as they came (gzip or not) and inflates them itself, so the
    inflated text dies inside it once decoded: holding it here would add its size to the peak.
    """
    progress.stage("parsing")
    if request.spooled:  # the server's file in shared memory (lab.read.spool): mapped, not copied
        with _mapped(request.path) as view:
            parsed = steps.parse(view, request.settings, request.config, request.peak, progress)
    else:
        parsed = steps.parse(data if data is not None else request.path, request.settings, request.config,
                             request.peak, progress)
    progress.json_bytes = parsed.trace.source_bytes
    if request.keep is not None:
        steps.kept.put(request.keep, parsed)
    if request.rank_of_job is not None:  # one rank of a job: its summary is all the server gets
        return _sent(progress, steps.rank_summary(parsed, request.rank_of_job))
    if request.outline and request.keep is not None:  # the page's read: the frames stay here
        return _sent(progress, steps.here.outline(parsed, request.keep))
    return _sent(progress, parsed)


def _sent(progress: _Progress, result) -> list:
    progress.stage("sending")
    return pack(result)


@contextlib.contextmanager
def _mapped(path):
    """A read-only view of the file at ``path``, unmapped afterwards. Still referred to then (a
    failure's traceback holds the decoder's frames), it is left to the collector: closing a
    mapping with views on it raises, and nothing may read freed memory."""
    with open(path, "rb") as fh:
        mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mapping)
    try:
        yield view
    finally:
        try:
            view.release()
            mapping.close()
        except BufferError:
            pass


def _serve_one(pipe: ChildPipe, steps: _Steps, task: Task, data, memory_mb: int) -> bool:
    """Run one task and send the outcome; False when this reader must exit."""
    progress = _Progress(pipe, task.ticket_id)
    progress.json_bytes = getattr(task.job, "json_hint", 0)
    started = time.monotonic()
    failure = None
    try:
        frames = _run_with_room(steps, task.job, data, progress)
    except BaseException as exc:  # noqa: BLE001 - untrusted input: every failure becomes a message
        # Built here, sent below: once this block ends the traceback (and the frames holding the
        # trace's buffers) is gone, so a reader out of memory has room to say so.
        failure = _failure(exc, task.ticket_id, progress.json_bytes, memory_mb, steps)
        frames = None
    if failure is not None:
        pipe.send(failure)
        return not failure.fatal
    del data
    assert frames is not None  # no failure: the task returned
    pipe.send_packed(Done(ticket_id=task.ticket_id, input_bytes=progress.json_bytes,
                          seconds=time.monotonic() - started,
                          peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024), frames)
    return True


def _run_with_room(steps: _Steps, job, data, progress: _Progress) -> list:
    """``_run``; out of memory while it kept traces, once more without them."""
    try:
        return _run(steps, job, data, progress)
    except BaseException as exc:
        if not (_out_of_memory(exc) and steps.kept.clear()):
            raise
    gc.collect()
    return _run(steps, job, data, progress)


def _run(steps: _Steps, job, data, progress: _Progress) -> list:
    """The frames of one task's result: a trace read, or a multi-trace job (``lab.read.jobs``)."""
    if isinstance(job, ReadRequest):
        return _read(steps, job, data, progress)
    if data.refs:
        data = _resolve(steps, data, progress)
    progress.stage("analysing")
    result = steps.jobs.run_job(job, data)
    progress.stage("sending")
    return pack(result)


def _resolve(steps: _Steps, given, progress: _Progress):
    """The job's input with its refs' traces filled in: each from what this reader keeps, or read
    again from the ref's file (and kept) when it holds it no longer."""
    found = []
    for ref in given.refs:
        parsed = steps.kept.get(ref.key)
        if parsed is None:
            progress.stage(REREAD_STAGE)
            parsed = steps.parse(ref.path, ref.settings, ref.config, ref.peak)
            steps.kept.put(ref.key, parsed)
        found.append(parsed)
    return dataclasses.replace(given, refs=(), traces=tuple(p.trace for p in found),
                               analyses=tuple(p.analysis for p in found), findings=tuple(p.findings for p in found),
                               explanations=tuple(p.explanation for p in found))


def _out_of_memory(exc: BaseException) -> bool:
    # load_trace turns a MemoryError into a TraceError "from None": the MemoryError stays its context.
    cause: BaseException | None = exc
    seen = 0
    while cause is not None and seen < 8:
        if isinstance(cause, MemoryError):
            return True
        cause, seen = cause.__context__, seen + 1
    return False


def _failure(exc: BaseException, read_id: int, json_bytes: int, memory_mb: int, steps: _Steps) -> Failure:
    name = type(exc).__name__
    if _out_of_memory(exc):
        return Failure(ticket_id=read_id, kind=ReadFailureKind.MEMORY, input_bytes=json_bytes, fatal=True,
                       message=memory_refusal(json_bytes, memory_mb), error_type=name)
    if isinstance(exc, steps.trace.TraceError):
        return Failure(ticket_id=read_id, kind=ReadFailureKind.TRACE, message=str(exc), input_bytes=json_bytes,
                       error_type=name)
    if isinstance(exc, steps.jobs.JobRefused):  # a multi-trace job refused its traces: the message says why
        return Failure(ticket_id=read_id, kind=ReadFailureKind.ANALYSIS, message=str(exc), error_type=exc.error_type)
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: stop serving
        return Failure(ticket_id=read_id, kind=ReadFailureKind.CRASH, input_bytes=json_bytes, fatal=True,
                       message=f"the trace reader stopped ({name}); read it again", error_type=name)
    # It parsed, but an analysis failed on it: say so plainly; the host sees the type.
    return Failure(ticket_id=read_id, kind=ReadFailureKind.ANALYSIS, input_bytes=json_bytes, error_type=name,
                   message=analysis_refusal(exc))

"""``app.py`` with time stamps at each step of an upload, for ``bench/bench_upload_verdict.py``.

Run as ``streamlit run bench/timed_app.py``: every page run executes ``app.py`` unchanged, and
the first one wraps a few functions (once per server) so that each writes ``{"t": time.time(),
"ev": …}`` as a JSON line to ``$PROFILER_LAB_STAMPS``. Server, readers and browser share one
machine, hence one wall clock, so the bench lines these up with the page's ``Date.now()``:

    run_start / run_end   a page run (the script thread) begins / ends (a rerun ends one too)
    arrived               ``ui.early_read.EarlyReads.on_file``: the server stored the file (its PUT)
    accept                ``ui.upload.accept_upload`` is called: the script holds the upload's bytes
    submitted             ``ReaderPool.submit`` returned: the read is queued (on arrival, or by the page)
    stage:<s>             a reader's Progress arrived (parsing: it holds the trace; analysing: the
                          Trace is built; sending: analyses and insights done, packing the result)
    received              the result's frames are received and unpickled in the server
    settled               ``ui.upload._settle`` returned: the upload joins the session
    summary_start / _end  ``ui.views.summary_view`` drew the Summary (verdict included)
    <part>:start / :end   each part of a page run (``PARTS``: the sidebar's forms, the upload box,
                          the lesson panels, the own-trace lesson, a reader job, the tabs, the
                          wait at the end), for the per-run breakdown (``--timeline``)

Nothing here changes what the page does; ``app.py`` is the page.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
STAMPS = os.environ.get("PROFILER_LAB_STAMPS", "/tmp/profiler_lab_stamps.jsonl")
_LOCK = threading.Lock()


def stamp(ev: str, **extra) -> None:
    line = json.dumps({"t": time.time(), "ev": ev, **extra})
    with _LOCK, open(STAMPS, "a") as fh:
        fh.write(line + "\n")


def _wrap(owner, name: str, before: str | None = None, after: str | None = None) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args, **kwargs):
        if before:
            stamp(before)
        try:
            return original(*args, **kwargs)
        finally:
            if after:
                stamp(after)

    setattr(owner, name, timed)


# (module, function) of each part of a page run stamped as "<module>.<function>:start/:end";
# app.py calls them through their modules, so wrapping the module's attribute times each call.
PARTS = (
    ("ui.controls", "run_form"), ("ui.controls", "lesson_picker"), ("ui.teach", "predict_form"),
    ("ui.room", "room_sidebar"), ("ui.upload", "upload_box"), ("ui.tracedir", "trace_dir_box"),
    ("ui.state", "all_subjects"), ("ui.views", "lesson_check"), ("ui.teach", "reveal"),
    ("ui.cache", "load"), ("ui.cache", "job_result"), ("ui.own_trace", "own_trace_lesson"),
    ("ui.upload", "await_new_upload"), ("ui.upload", "await_upload"), ("ui.own_trace", "own_trace_box"),
    ("ui.run", "settle_interrupted"), ("ui.run", "await_worker"),
    ("ui.views", "table_view"), ("ui.views", "timeline_view"), ("ui.tensorboard", "tensorboard_view"),
)


def _install() -> None:
    import importlib

    from lab.read import ReaderPool
    from lab.read.queue import ReadQueue
    from ui import upload, views
    from ui.early_read import EarlyReads

    for module, name in PARTS:
        _wrap(importlib.import_module(module), name, before=f"{module}.{name}:start", after=f"{module}.{name}:end")

    _wrap(EarlyReads, "on_file", before="arrived")
    _wrap(upload, "accept_upload", before="accept")
    _wrap(ReaderPool, "submit", after="submitted")
    _wrap(upload, "_settle", after="settled")
    _wrap(views, "summary_view", before="summary_start", after="summary_end")
    progress = ReadQueue.progress

    def timed_progress(self, ticket, stage, *args, **kwargs):
        stamp(f"stage:{stage}")
        return progress(self, ticket, stage, *args, **kwargs)

    ReadQueue.progress = timed_progress  # type: ignore[method-assign]
    record_done = ReadQueue.record_done

    def timed_done(self, *args, **kwargs):
        stamp("received")
        return record_done(self, *args, **kwargs)

    ReadQueue.record_done = timed_done  # type: ignore[method-assign]


if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
_installed = sys.modules.setdefault("_profiler_lab_timed", type(sys)("_profiler_lab_timed"))
if not getattr(_installed, "done", False):
    _install()
    _installed.done = True  # type: ignore[attr-defined]
stamp("run_start")
try:
    exec(compile(APP.read_text(), str(APP), "exec"), {"__name__": "__main__", "__file__": str(APP)})
finally:
    stamp("run_end")

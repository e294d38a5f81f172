"""The Streamlit script thread runs no analysis: every trace is read, and every
multi-trace computation (ranks, compare, a lesson's signals and answers, the by-shape table, the
TensorBoard tab's views) is done, in a reader process; the page's script only lays out what came
back.

The guard wraps the analysis entry points — every function ``lab.analysis`` exports, and what
``analyze`` and the by-shape tables are built from — wherever they are bound in this process
(``from lab.analysis import f`` binds ``f`` in the importer too), and records each call made on
a Streamlit script thread (``ScriptRunner.scriptThread``: AppTest runs the page there, as the
server does). The readers are other processes: what they run is not seen, as it should be.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402
from test_app import APP, TIMEOUT_S, assert_healthy, assert_ranks_view, errors, gloo_pair, open_view  # noqa: E402

pytestmark = [pytest.mark.apptest, pytest.mark.timeout(1200)]
SCRIPT_THREAD = "ScriptRunner.scriptThread"
# Exported by lab.analysis but no computation: reads ``deviceProperties[0].name`` of the trace's
# metadata (the Summary's device line).
NOT_ANALYSIS = {"device_name"}


def _entry_points() -> list:
    import lab.analysis as analysis
    from lab.analysis import bundle, operators

    exported = [getattr(analysis, name) for name in analysis.__all__ if name not in NOT_ANALYSIS]
    return [f for f in (*exported, bundle.analyze, bundle.trace_key_averages, operators.operator_summary)
            if inspect.isfunction(f)]


@pytest.fixture
def script_thread_calls(monkeypatch) -> list[str]:
    """The analysis calls made on a script thread while the test runs (names, in order)."""
    calls: list[str] = []
    originals = {id(f): f for f in _entry_points()}

    def guarded(f):
        @functools.wraps(f)
        def call(*args, **kwargs):
            if threading.current_thread().name.startswith(SCRIPT_THREAD):
                calls.append(f"{f.__module__}.{f.__qualname__}")
            return f(*args, **kwargs)
        return call

    wrappers = {key: guarded(f) for key, f in originals.items()}
    for module in [m for m in list(sys.modules.values()) if getattr(m, "__name__", "").startswith(("lab", "ui"))]:
        for name, value in list(vars(module).items()):
            if id(value) in wrappers and value is originals[id(value)]:
                monkeypatch.setattr(module, name, wrappers[id(value)])
    # A lesson's runs (``Run``: a trace, its analysis and timing) are the reader job's input to the
    # questions and signals: built in the reader, never on the script thread.
    from lab.analysis import Run

    monkeypatch.setattr(Run, "__init__", guarded(Run.__init__))
    return calls


def test_the_guard_records_a_call_on_a_script_thread_and_not_elsewhere(script_thread_calls):
    import lab.analysis as analysis

    with pytest.raises(TypeError):  # called for real, wrongly: the call is still seen
        analysis.analyze()
    assert script_thread_calls == []  # the test's own thread is not a script thread
    worker = threading.Thread(target=lambda: pytest.raises(TypeError, analysis.compare_analyses), name=SCRIPT_THREAD)
    worker.start()
    worker.join()
    assert script_thread_calls == ["lab.analysis.compare.compare_analyses"]
    from lab.analysis import Run

    maker = threading.Thread(target=lambda: Run("a", None, None), name=SCRIPT_THREAD)  # type: ignore[arg-type]
    maker.start()
    maker.join()
    assert script_thread_calls[-1] == "lab.analysis.bundle.Run.__init__"
    # The TensorBoard tab's views (a reader job since they left analyze): computed on the script
    # thread, they are seen too.
    views = threading.Thread(target=lambda: pytest.raises(TypeError, analysis.tensorboard_views), name=SCRIPT_THREAD)
    views.start()
    views.join()
    assert script_thread_calls[-1] == "lab.analysis.tensorboard.tensorboard_views"


def test_pages_that_read_compare_teach_group_and_rank_run_no_analysis_in_the_script(script_thread_calls):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()  # a first visit: a GPU sample, read in a reader
    assert_healthy(at)
    at.session_state["view"] = "Table"
    at.run()
    at.toggle(key="tbl_shape").set_value(True)  # the by-shape table, on its first toggle
    at.run()
    assert_healthy(at)
    assert "Input shapes" in at.dataframe[0].value.columns, [list(df.value.columns) for df in at.dataframe]
    open_view(at, "TensorBoard")  # its three views, computed on the tab's first opening, in a reader
    assert errors(at) == [] and at.dataframe[0].value["step"].iloc[-1] == "average"
    at.radio(key="tb_part").set_value("Kernels")
    at.run()
    assert_healthy(at)
    assert "tensor_cores" in at.dataframe[0].value.columns
    # A lesson's H200 recording: its signals (the lesson check), its answers (the reveal), Compare.
    at.selectbox(key="lesson_key").set_value("eager_vs_compile")
    at.run()
    at.button(key="open_lesson_recording").click()
    at.run()
    assert_healthy(at)
    assert at.session_state["view"] == "Compare" and errors(at) == []
    totals = at.dataframe[0].value
    assert "Kernels" in set(totals["total"])  # Compare names its totals in words
    checks = [m.value for m in at.markdown if ":material/" in m.value and " — " in m.value]
    assert len(checks) == 3, checks  # the lesson check's signals
    assert any(m.value.startswith("Answer: **") for m in at.markdown)  # the reveal's answers
    # One job's ranks, opened together.
    at.file_uploader(key="upload").set_value(gloo_pair("cpu"))
    at.run()
    assert_healthy(at)
    assert_ranks_view(at, n_calls=4)
    assert any("Straggler: rank 1" in t.value for t in at.text)
    open_view(at, "Summary")
    assert script_thread_calls == []


def test_a_job_from_a_trace_directory_runs_no_analysis_in_the_script(script_thread_calls, monkeypatch, tmp_path):
    """A trace directory's listing, a span opened as a job (each rank's summary read in a
    reader, the job combined in a reader), its ranks stacked (read in full by the readers), and
    one worker opened as a trace."""
    from test_app_tracedir import write_job

    write_job(tmp_path)
    monkeypatch.setenv("PROFILER_LAB_TRACE_DIR", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    assert_healthy(at)
    at.button(key="dir_open_job").click().run()
    assert_healthy(at)
    assert at.session_state["view"] == "Ranks"
    assert any("Straggler: rank 1" in t.value for t in at.text)
    assert at.multiselect[0].value == [0, 1]  # both ranks stacked: each read in full, in a reader
    assert any("ranks' timelines on one clock" in c.value for c in at.caption)
    at.button(key="dir_open_trace").click().run()
    assert_healthy(at)
    assert at.session_state["subject"].startswith("upload:")
    open_view(at, "Summary")
    assert script_thread_calls == []

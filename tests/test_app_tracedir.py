"""The page on a trace directory (PROFILER_LAB_TRACE_DIR) through AppTest: the listing and a job.

A temporary directory holds two ranks of one job under tensorboard_trace_handler's names
(``<worker>.<time_ns>.pt.trace.json.gz``, worker = ``<host>_<pid>`` as torch defaults it): the
gloo pair of the ground-truth corpus, whose ranks come from their ``distributedInfo``.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
GLOO = ROOT / "tests" / "data" / "groundtruth" / "cpu"
TIMEOUT_S = 300

pytestmark = [pytest.mark.apptest, pytest.mark.timeout(900)]


def write_job(directory: Path, run: str = "ddp_run") -> list[Path]:
    """The gloo pair as torch's tensorboard_trace_handler names them, one worker (pid) per rank."""
    (directory / run).mkdir(parents=True)
    stamp = time.time_ns()
    out = []
    for rank in (0, 1):
        path = directory / run / f"vm_{4100 + rank}.{stamp + rank * 1000}.pt.trace.json.gz"
        shutil.copy(GLOO / f"gloo_ddp_rank{rank}.json.gz", path)
        out.append(path)
    return out


def listing(at):
    """The "Traces on this server" expander."""
    (box,) = [e for e in at.expander if e.label.startswith("Traces on this server")]
    return box


@pytest.fixture
def at(monkeypatch, tmp_path):
    write_job(tmp_path)
    monkeypatch.setenv("PROFILER_LAB_TRACE_DIR", str(tmp_path))
    app = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_directory_lists_the_run_and_its_two_workers_and_opens_the_job_in_ranks(at):
    run = at.selectbox(key="dir_run")
    assert run.value.endswith(":ddp_run") and "2 workers · 1 span" in run.format_func(run.value)
    files = listing(at).dataframe[0].value
    assert sorted(files["worker"]) == ["vm_4100", "vm_4101"]
    assert list(files["rank"]) in ([1, 0], [0, 1]) and set(files["world_size"]) == {2} and set(files["steps"]) == {2}
    at.button(key="dir_open_job").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [e.value for e in at.error] == []
    assert at.session_state["subject"].startswith("ranks:")
    assert at.session_state["view"] == "Ranks" and [t.label for t in at.tabs][-1] == "Ranks"
    (table,) = [d.value for d in at.dataframe if "Collective calls (total)" in d.value.columns]
    assert list(table["Rank"]) == [0, 1] and list(table["Collective calls (total)"]) == [4, 4]
    assert any("Straggler: rank 1" in t.value for t in at.text)


def test_one_worker_opens_as_a_trace(at):
    at.button(key="dir_open_trace").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["subject"].startswith("upload:")
    assert "Ranks" not in [t.label for t in at.tabs]


def test_a_64_rank_job_shows_the_heat_map_and_the_straggler(monkeypatch, tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from make_synthetic_job import make_job

    make_job(tmp_path / "job64", ranks=64, straggler=37, seed=1)
    monkeypatch.setenv("PROFILER_LAB_TRACE_DIR", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    assert "64 workers · 1 span" in at.selectbox(key="dir_run").format_func(at.selectbox(key="dir_run").value)
    at.button(key="dir_open_job").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [e.value for e in at.error] == []
    assert at.session_state["view"] == "Ranks"
    (table,) = [d.value for d in at.dataframe if "Collective calls (total)" in d.value.columns]
    assert list(table["Rank"]) == list(range(64))
    assert "Compute per step (ms)" in table and "compute_ms" not in table  # per step, in words
    assert any("Straggler: rank 37" in t.value for t in at.text)
    # The job's findings, judged with the ranks: each with what its fix would save.
    cards = [m.value for m in at.markdown if "· saves" in m.value]
    assert any("A straggler rank" in c and "per step" in c for c in cards), cards
    specs = [c.proto.spec for c in at.get("vega_lite_chart")]
    assert any('"hconcat"' in s and "communication (ms)" in s for s in specs)  # the heat map
    picks = at.multiselect[0]
    assert picks.value == [0, 37]  # the lowest rank and the straggler stacked, not 64 timelines

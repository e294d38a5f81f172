"""The Streamlit page through AppTest: real script runs, a real worker process, real traces.

Each test gets its own AppTest (its own browser session, ``at``), so the tests pass in any order
(checked with pytest-randomly and in reverse); what a test needs first (a run, a lesson pair)
it does itself. The page's ProfileService is one per process (st.cache_resource), shared by
every AppTest: the worker starts once (seconds), and a fresh page costs a script run (~0.3 s).
``submit`` fills the whole form each time, as a visitor's click sends it.

How AppTest exposes what the browser would get (Streamlit 1.67):
- tabs: ``st.tabs(key="view", on_change="rerun")`` is a widget; ``at.session_state["view"] = …``
  then ``at.run()`` opens a tab, and only the open tab's elements exist in the tree.
- the Altair chart: an ``UnknownElement`` of type "vega_lite_chart" (``at.get("vega_lite_chart")``)
  whose proto holds the Vega-Lite spec (JSON) and the datasets (Arrow IPC bytes).
- download buttons: the proto holds only a media URL; the bytes live in the run's
  MemoryMediaFileStorage, which ``media`` below keeps a handle on.
- file uploads: ``at.file_uploader[0].set_value((name, bytes, mime))`` is supported.
"""

from __future__ import annotations

import gc
import gzip
import io
import json
import re
import time
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("streamlit")
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
H200_TRACE = ROOT / "tests" / "data" / "matmul_add_4096_bf16.json.gz"
TIMEOUT_S = 300  # one script run that profiles: the worker may still be importing torch on 2 busy cores
LABEL = "ws_step_7"

pytestmark = [pytest.mark.apptest, pytest.mark.pool, pytest.mark.timeout(1200)]


# ------------------------------------------------------------------------------ helpers


class _KeepStorage(MemoryMediaFileStorage):
    """AppTest makes a fresh media storage per run and drops it; keep the latest to read downloads."""

    latest: MemoryMediaFileStorage | None = None

    def __init__(self, media_endpoint: str) -> None:
        super().__init__(media_endpoint)
        type(self).latest = self


@pytest.fixture
def at(monkeypatch):
    """A first visit in a session of its own."""
    monkeypatch.setattr("streamlit.testing.v1.app_test.MemoryMediaFileStorage", _KeepStorage)
    app = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    app.run()
    return app


def plain(markdown: str) -> str:
    """Undo md_escape: the text a reader sees."""
    return re.sub(r"\\(.)", r"\1", markdown)


def magic_writes(at) -> list[str]:
    """What Streamlit's magic wrote for a bare expression's value (e.g. a stray ``None``)."""
    return [m.value for m in at.markdown if m.value in ("`None`", "None")]


def errors(at) -> list[str]:
    return [plain(e.value) for e in at.error]


def assert_healthy(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not magic_writes(at)
    # Streamlit shows misuse (e.g. a widget given a default and a session-state value) as warnings.
    assert not at.warning, [w.value for w in at.warning]


def open_view(at, name: str) -> None:
    at.session_state["view"] = name
    at.run()
    assert_healthy(at)


def charts(at) -> list:
    return list(at.get("vega_lite_chart"))


def chart_rows(chart) -> list[dict]:
    """Every row of every dataset the chart ships to the browser."""
    rows = []
    for dataset in chart.proto.datasets:
        rows += pa.ipc.open_stream(io.BytesIO(dataset.data.data)).read_all().to_pylist()
    return rows


def chart_lanes(chart) -> list[str]:
    """The lane axis: the lane names its labels show (the y axis's labelExpr holds them as a JSON
    list, one per lane's middle row), wherever the layer puts it."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            y = node.get("y")
            axis = y.get("axis") if isinstance(y, dict) else None
            if isinstance(axis, dict) and "labelExpr" in axis:
                found.append(json.loads(axis["labelExpr"].split("[indexof(")[0]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(chart.proto.spec))
    assert found, "the timeline's lane axis has no labels"
    return found[0]


def download_bytes(at, key: str) -> bytes:
    button = next(b for b in at.get("download_button") if b.key == key)
    filename = button.proto.url.rsplit("/", 1)[-1]
    return _KeepStorage.latest.get_file(filename).content


def wait_for_device(at, timeout_s: float = TIMEOUT_S) -> None:
    """Rerun (as the page's own 1 s fragment would) until the worker has warmed up."""
    deadline = time.monotonic() + timeout_s
    while not any(c.value.startswith("Detected:") for c in at.sidebar.caption):
        assert time.monotonic() < deadline, "the profiling worker did not start"
        time.sleep(1.0)
        at.run()


def sidebar_text(at) -> str:
    return "\n".join(t.value for t in at.sidebar.text)


def runs_served(at) -> int:
    return int(re.search(r"runs served: (\d+)", sidebar_text(at)).group(1))


# cfg_device "cpu": the page's form runs stay on the CPU whatever the host has, so these tests
# mean the same on a GPU box (the page on CUDA is tested in test_gpu.py).
FORM_DEFAULTS = {"cfg_device": "cpu", "cfg_exact": "", "cfg_step_label": "matmul_add", "cfg_matmul_label": "",
                 "cfg_add_label": "", "cfg_dtype": "float32", "cfg_active": 3, "cfg_repeat": 1,
                 "cfg_m": 64, "cfg_k": 64, "cfg_n": 64}


def set_form(at, **values) -> None:
    """Set form widgets by key (sliders, text inputs, radios, number inputs) as a user would."""
    for key, value in values.items():
        _find(at, key).set_value(value)


def _find(at, key):
    for kind in ("select_slider", "text_input", "radio", "number_input", "checkbox", "selectbox"):
        for widget in at.get(kind):
            if widget.key == key:
                return widget
    raise KeyError(key)


def submit(at, **values) -> None:
    """Fill the form (defaults, then ``values``) and click "Run profile".

    Like the browser, AppTest keeps a form's edits staged until its submit button is clicked
    and drops them on any other rerun, so every submit sets the whole form again.
    """
    set_form(at, **{**FORM_DEFAULTS, **values})
    next(b for b in at.form_submit_button if b.label == "Run profile").click()  # not the own-trace form
    at.run()


def reset_workload(at) -> None:
    if _find(at, "cfg_workload").value != "matmul_add":
        _find(at, "cfg_workload").set_value("matmul_add")  # outside the form: applies at once
        at.run()


# ------------------------------------------------------------------------------ first visit


def test_first_visit_shows_a_gpu_sample_and_runs_nothing(at):
    assert_healthy(at)
    assert at.session_state["subject"] == "sample:matmul_add_4096_bf16.json.gz"
    assert [t.label for t in at.tabs] == ["Summary", "Table", "Timeline", "Memory", "Insights", "Trace", "TensorBoard",
                                         "Compare"]
    assert any("recorded on an NVIDIA H200" in plain(i.value) for i in at.info)
    labels = {m.label for m in at.metric}
    assert {"GPU busy", "GEMM kernel"} <= labels, labels
    open_view(at, "Timeline")
    (chart,) = charts(at)
    assert any(lane.startswith("GPU 0") for lane in chart_lanes(chart))

    # Moving the form's widgets (even many times) runs nothing: only "Run profile" submits.
    before = runs_served(at)
    set_form(at, cfg_m=2048, cfg_step_label="not_submitted")
    at.run()
    set_form(at, cfg_m=64)
    at.run()
    assert_healthy(at)
    assert runs_served(at) == before
    assert not at.session_state.get("runs")
    open_view(at, "Summary")


def test_a_page_run_with_a_warm_worker_moves_the_servers_start_up_heap_out_of_the_collectors_sight(at):
    """The server's start-up objects are frozen once a worker is warm (``ui.run.settle_heap``):
    else a full collection over them lands inside a visitor's first click (0.17 s on an H100 host)."""
    from ui.run import settle_heap

    settle_heap.clear()
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    at.run()
    assert_healthy(at)
    assert gc.get_freeze_count() > 0


def test_summary_and_insights_show_the_judged_findings_in_one_list(at):
    """The first visit's sample (4096³ bf16, eager): the Summary leads with the verdict and the
    top findings, with no second "Top insight" list; the Insights tab lists every judged finding,
    a note marked as one, with its caveat and its link."""
    from lab.analysis import analyze
    from lab.judge import judge_trace
    from lab.trace import load_trace

    trace = load_trace(H200_TRACE)
    judged = judge_trace(trace, analyze(trace))
    shown = [plain(m.value) for m in at.markdown]
    assert "**Findings, largest saving first**" in [m.value for m in at.markdown]
    assert not any("Top insight" in m for m in shown)
    assert any(judged.findings[0].title in m for m in shown)
    open_view(at, "Insights")
    shown = [plain(m.value) for m in at.markdown]
    for finding in judged.findings:
        assert any(finding.title in m and ("· note" in m) == finding.is_note for m in shown), finding.title
    captions = [plain(c.value) for c in at.caption]
    assert any("profiler_recipe" in c for c in captions)


# ------------------------------------------------------------------------------ a run


def test_run_profile_shows_the_label_in_table_timeline_and_trace(at):
    submit(at, cfg_m=64, cfg_k=32, cfg_n=128, cfg_dtype="bfloat16", cfg_step_label=LABEL,
           cfg_matmul_label="ws_mm", cfg_add_label="ws_add")
    assert_healthy(at)
    assert errors(at) == []
    subject = at.session_state["subject"]
    assert subject.startswith("run:")
    (run,) = at.session_state["runs"]
    assert (run.run.config.m, run.run.config.k, run.run.config.n, run.run.config.dtype) == (64, 32, 128, "bfloat16")
    assert at.session_state["view"] == "Summary"
    assert "Per iteration, no profiler" in {m.label for m in at.metric}

    open_view(at, "Table")
    names = list(at.dataframe[0].value["Name"])
    assert LABEL in names and "ws_mm" in names and "ws_add" in names, names
    assert "aten::mm" in names

    open_view(at, "Timeline")
    (chart,) = charts(at)
    lanes = chart_lanes(chart)
    assert lanes and all("GPU" not in lane for lane in lanes), lanes  # a CPU run: CPU threads only
    rows = chart_rows(chart)
    assert {row["name"] for row in rows} >= {LABEL, "ws_mm", "ws_add"}
    assert {row["lane"] for row in rows if "lane" in row} <= set(lanes)

    open_view(at, "Trace")
    data = download_bytes(at, "dl_trace_gz")
    trace = json.loads(gzip.decompress(data))
    names = {e.get("name") for e in trace["traceEvents"]}
    assert LABEL in names and "aten::mm" in names


# ------------------------------------------------------------------------------ memory


def _max_total_allocated(trace_json: dict) -> dict:
    """Brute force: the largest "Total Allocated" per device of the trace's [memory] records."""
    best: dict = {}
    for e in trace_json["traceEvents"]:
        if e.get("ph") == "i" and e.get("name") == "[memory]":
            a = e["args"]
            device = "cpu" if a["Device Type"] == 0 else f"cuda:{a['Device Id']}"
            best[device] = max(best.get(device, 0), a["Total Allocated"])
    return best


def _memory_chart_peaks(at) -> dict:
    (chart,) = charts(at)
    rows = chart_rows(chart)
    allocated = [r for r in rows if r.get("kind") == "allocated"]
    assert allocated, "the Memory chart ships no allocated curve"
    assert len(rows) <= 4_000 + 16  # the curve's budget plus the peak marks and step bands
    return {d: max(r["bytes"] for r in allocated if r["device"] == d) for d in {r["device"] for r in allocated}}


def test_memory_view_of_a_profile_memory_run(at):
    """The lab's own workload run with profile_memory: the Memory tab draws the curve with the
    trace's peak, the peak's table, the steps; a trace without memory says how to get one."""
    open_view(at, "Memory")
    assert not charts(at)
    assert any("profile_memory=True" in plain(i.value) for i in at.info)  # the H200 sample has none

    submit(at, cfg_m=256, cfg_k=128, cfg_n=192, cfg_profile_memory=True)
    assert_healthy(at)
    assert errors(at) == []
    (run,) = at.session_state["runs"]
    assert run.run.config.profile_memory
    open_view(at, "Memory")
    want = _max_total_allocated(json.loads(gzip.decompress(run.run.trace_gz)))
    assert want and _memory_chart_peaks(at) == want
    devices = at.dataframe[0].value
    assert list(devices["device"]) == list(want)
    assert any("allocator records" in c.value for c in at.caption)
    assert len(at.dataframe) >= 2 and "step" in at.dataframe[1].value  # the per-step table
    assert any("Memory peak" in plain(m.value) for m in at.markdown)  # the peak's owner, as an insight


def test_uploaded_profile_memory_trace_gets_memory_columns_and_view(at):
    trace = ROOT / "tests" / "data" / "groundtruth" / "cuda" / "seed_mem.json.gz"
    upload(at, "seed_mem.json.gz", trace.read_bytes())
    assert_healthy(at)
    open_view(at, "Table")
    table = at.dataframe[0].value
    assert {"Device mem", "Self device mem"} <= set(table.columns), list(table.columns)
    open_view(at, "Memory")
    assert _memory_chart_peaks(at) == _max_total_allocated(json.loads(gzip.decompress(trace.read_bytes())))


# ------------------------------------------------------------------------------ refusals


REFUSALS = [
    pytest.param({"cfg_exact": "0,64,64"}, "M must be a whole number ≥ 1", id="M=0 via exact sizes"),
    pytest.param({"cfg_exact": "20000,64,64"}, "above this host's limit of 16384", id="exact sizes over the limit"),
    pytest.param({"cfg_exact": "64 by 64"}, "must be three whole numbers", id="exact sizes not numbers"),
    pytest.param({"cfg_dtype": "float16"}, "float16 matmul on CPU", id="float16 on CPU"),
    pytest.param({"cfg_dtype": "tf32"}, "tf32 is a tensor-core mode", id="tf32 on CPU"),
    pytest.param({"cfg_step_label": ""}, "must be 1–64 characters (got 0)", id="empty label"),
    pytest.param({"cfg_matmul_label": "two\nlines"}, "printable characters only", id="newline in a label"),
    pytest.param({"cfg_active": 32, "cfg_repeat": 8}, "this host allows 64", id="steps over max_steps"),
]


@pytest.mark.parametrize("values, expected", REFUSALS)
def test_refused_config_shows_one_message_and_the_page_keeps_working(at, values, expected):
    wait_for_device(at)  # then the page itself refuses device-dependent configs, before queuing
    served = runs_served(at)
    submit(at, **values)
    assert_healthy(at)
    assert len(errors(at)) == 1, errors(at)
    assert expected in errors(at)[0]
    assert runs_served(at) == served  # refused before reaching the worker
    assert [t.label for t in at.tabs][:1] == ["Summary"]  # the views still render
    at.run()
    assert errors(at) == []  # the message belongs to that click, not to the session


def test_run_far_over_the_time_limit_is_refused_with_an_estimate(at):
    # 16384³ float32 on the CPU: ~8.8 TFLOP per step; minutes on any CPU, refused before queuing.
    wait_for_device(at)  # the estimate needs the worker's measured rates
    served = runs_served(at)
    started = time.monotonic()
    submit(at, cfg_exact="16384,16384,16384")
    took_s = time.monotonic() - started
    assert_healthy(at)
    assert len(errors(at)) == 1, errors(at)
    message = errors(at)[0]
    assert "on this host's CPU" in message and "or smaller" in message and "about " in message
    assert "PROFILER_LAB" not in message
    assert runs_served(at) == served
    print(f"refused in one page run of {took_s:.2f} s")


def test_sliders_show_the_exact_sizes_they_are_overridden_by(at):
    # An empty label makes the page refuse the click (nothing runs); the form keeps what was sent.
    submit(at, cfg_exact="1000,3000,500", cfg_step_label="")
    assert_healthy(at)
    sliders = {w.key: w for w in at.get("select_slider")}
    shown = [(sliders[f"cfg_{d}"].value, sliders[f"cfg_{d}"].label) for d in "mkn"]
    # Each slider at the stop nearest its exact size (on the log scale), its label naming the size.
    assert [v for v, _ in shown] == [1024, 4096, 512], shown
    assert all(f"= {size} (exact size" in label for size, (_, label) in zip((1000, 3000, 500), shown)), shown
    submit(at, cfg_exact="", cfg_step_label="")  # cleared: plain slider labels again
    assert not any("exact size" in w.label for w in at.get("select_slider"))


def test_label_boxes_stop_at_64_characters(at):
    # The browser's text boxes refuse a 65th character (max_chars); AppTest's input() mimics that.
    from lab.core.config import MAX_LABEL_CHARS

    for key in ("cfg_step_label", "cfg_matmul_label", "cfg_add_label"):
        box = _find(at, key)
        assert box.max_chars == MAX_LABEL_CHARS == 64
        before = box.value
        box.input("y" * 65)
        assert box.value == before
    # A 65-character value sent anyway (as a crafted request could) is cut to 64 by Streamlit's
    # text_input itself before the page sees it; the run then goes ahead with those 64.
    long_label = "".join(chr(ord("a") + i % 26) for i in range(65))
    submit(at, cfg_m=16, cfg_k=16, cfg_n=16, cfg_step_label=long_label)
    assert_healthy(at)
    assert errors(at) == []
    assert at.session_state["runs"][-1].run.config.step_label == long_label[:64]


def test_shape_too_big_for_memory_is_refused_before_allocating(at):
    # Attention materializes heads × tokens² scores: 16384 tokens and heads ≈ 32 TiB in float32.
    _find(at, "cfg_workload").set_value("attention_naive")
    at.run()
    submit(at, cfg_exact="16384,64,16384")
    assert_healthy(at)
    assert len(errors(at)) == 1, errors(at)
    assert "choose smaller M, K or N" in errors(at)[0]
    reset_workload(at)


# ------------------------------------------------------------------------------ uploads


def upload(at, name: str, data: bytes, mime: str = "application/gzip") -> None:
    at.file_uploader(key="upload").set_value((name, data, mime))
    at.run()


def test_upload_h200_trace_shows_gpu_lanes_and_kernels(at):
    upload(at, "my_h200.json.gz", H200_TRACE.read_bytes())
    assert_healthy(at)
    assert errors(at) == []
    assert at.session_state["subject"].startswith("upload:")
    open_view(at, "Table")
    kernels = next(df.value for df in at.dataframe if "Kernel" in df.value)  # the kernel list, by its header
    assert len(kernels) >= 2
    assert any("gemm" in n.lower() or "nvjet" in n.lower() for n in kernels["Kernel"]), list(kernels["Kernel"])
    assert any("elementwise" in n for n in kernels["Kernel"])  # the separate bias-add kernel
    open_view(at, "Timeline")
    (chart,) = charts(at)
    assert any(lane.startswith("GPU 0") for lane in chart_lanes(chart))
    assert any(row.get("cat") == "kernel" for row in chart_rows(chart))


def _bad_upload_then_page_still_works(at, name: str, data: bytes, expected: str) -> None:
    shown = at.session_state["subject"]
    upload(at, name, data)
    assert_healthy(at)
    assert len(errors(at)) == 1, errors(at)
    assert expected in errors(at)[0], errors(at)
    assert at.session_state["subject"] == shown  # the refused file never replaced what was shown
    assert all(s.title != f"Upload: {name}" for s in at.session_state.get("uploads", []))
    open_view(at, "Summary")  # the uploader still holds the bad file: the message stays, once
    assert len(errors(at)) == 1
    assert at.metric  # and the shown trace's views still render
    at.file_uploader(key="upload").set_value(None)
    at.run()
    assert errors(at) == []


def test_garbage_upload_is_refused_with_one_message(at):
    _bad_upload_then_page_still_works(at, "notes.json", b"this is not a trace {", "cannot be opened")


def test_binary_upload_error_prints_no_bytes_literal(at):
    noise = b"y\xd3\xaf" + bytes(range(128, 200))
    _bad_upload_then_page_still_works(at, "noise.json", noise, "is binary data")


def test_upload_name_is_shown_as_text_not_markdown(at):
    name = "**bold** [link](http://example.com).json"
    upload(at, name, b"[1, 2, 3]")
    (message,) = [e.value for e in at.error]
    assert "\\*\\*bold\\*\\*" in message and "\\[link\\]\\(http" in message  # escaped: shown as typed
    at.file_uploader(key="upload").set_value(None)
    at.run()


def test_oversized_upload_is_refused(at):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROFILER_LAB_MAX_UPLOAD_MB", "1")
        at.run()  # the page reads host settings on every run
        big = b'{"traceEvents": [], "pad": "' + b"x" * (3 * 2**19) + b'"}'  # 1.5 MiB
        _bad_upload_then_page_still_works(at, "big.json", big, "this host accepts traces up to 1 MB")


def test_gzip_bombs_are_refused(at):
    # Zeros: refused at the first inflated chunk (JSON never holds NUL), whatever the cap.
    zeros = gzip.compress(bytes(64 * 2**20), compresslevel=9)  # 64 MiB → ~64 KiB
    _bad_upload_then_page_still_works(at, "zeros.json.gz", zeros, "not JSON text")
    # Valid-looking JSON that inflates past the host's cap (lowered here to keep the test fast).
    spaces = gzip.compress(b'{"traceEvents": [' + b" " * (32 * 2**20) + b"]}", compresslevel=9)
    assert len(spaces) < 2**20
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROFILER_LAB_MAX_TRACE_DECOMPRESSED_MB", "8")
        _bad_upload_then_page_still_works(at, "spaces.json.gz", spaces, "inflates past the 8 MiB limit")


# ------------------------------------------------------------------------------ ranks: several files of one job

GLOO = ROOT / "tests" / "data" / "groundtruth"


def gloo_pair(kind: str) -> list[tuple[str, bytes, str]]:
    return [(f"gloo_ddp_rank{r}.json.gz", (GLOO / kind / f"gloo_ddp_rank{r}.json.gz").read_bytes(), "application/gzip")
            for r in (0, 1)]


def assert_ranks_view(at, n_calls: int) -> None:
    assert errors(at) == []
    assert at.session_state["subject"].startswith("ranks:")
    assert [t.label for t in at.tabs][-1] == "Ranks" and at.session_state["view"] == "Ranks"
    table = at.dataframe[0].value
    assert list(table["Rank"]) == [0, 1] and list(table["Collective calls (total)"]) == [n_calls, n_calls]
    assert not any("_" in c for c in table.columns)  # headers in words
    (chart,) = charts(at)
    lanes = chart_lanes(chart)
    assert any(lane.startswith("rank 0 · ") for lane in lanes) and any(lane.startswith("rank 1 · ") for lane in lanes)
    assert {row["lane"].split(" · ")[0] for row in chart_rows(chart) if "lane" in row} == {"rank 0", "rank 1"}


def test_two_file_upload_opens_the_ranks_view_with_both_ranks(at):
    at.file_uploader(key="upload").set_value(gloo_pair("cpu"))
    at.run()
    assert_healthy(at)
    assert_ranks_view(at, n_calls=4)  # each rank's c10d::allreduce_ calls in the raw JSON
    assert any("Straggler: rank 1" in t.value for t in at.text)
    open_view(at, "Summary")  # the job first (its straggler), then the lowest rank's own trace
    assert errors(at) == []
    assert any(m.value.startswith("**The job: 2 ranks of a world of 2 over gloo") for m in at.markdown)
    texts = [t.value for t in at.text]
    assert texts[0].startswith("Straggler: rank 1 runs the same work as the others")
    assert any(m.value == "**Rank 0 on its own**" for m in at.markdown)
    open_view(at, "Ranks")
    # From the Ranks view to a single trace: no Ranks tab, and the page falls back to Summary.
    at.selectbox(key="subject").set_value("sample:matmul_add_4096_bf16.json.gz")
    at.run()
    assert_healthy(at)
    assert "Ranks" not in [t.label for t in at.tabs] and at.session_state["view"] == "Summary"


def test_zip_of_ranks_opens_the_ranks_view(at):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, _ in gloo_pair("cuda"):
            z.writestr(f"job/{name}", data)
    at.file_uploader(key="upload").set_value(("job.zip", buf.getvalue(), "application/zip"))
    at.run()
    assert_healthy(at)
    assert_ranks_view(at, n_calls=6)


def test_zip_members_are_bounded_like_one_upload():
    from ui.upload import zip_members

    def zipped(members: dict[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, data in members.items():
                z.writestr(name, data)
        return buf.getvalue()

    pair = {f"run/{name}": data for name, data, _ in gloo_pair("cpu")}
    assert zip_members("job.zip", zipped({**pair, "README.txt": b"notes"}), 2**20) == list(pair.items())
    bomb = zipped({"rank0.json": bytes(2**21), "rank1.json": bytes(2**21)})  # 4 MiB of zeros, ~8 KiB zipped
    assert len(bomb) < 2**15 and "inflate past 1 MB" in zip_members("bomb.zip", bomb, 2**20)
    assert "not a zip archive" in zip_members("x.zip", b"PK not really", 2**20)
    assert "holds no .json" in zip_members("notes.zip", zipped({"a.txt": b"x"}), 2**20)


def test_traces_of_two_jobs_are_refused_together_and_a_single_trace_has_no_ranks_view(at):
    cpu, cuda = gloo_pair("cpu")[0], gloo_pair("cuda")[0]
    at.file_uploader(key="upload").set_value([cpu, (f"other_{cuda[0]}", cuda[1], cuda[2])])
    at.run()
    assert any("cannot be opened as one job's ranks" in e and "rank 0 appears 2 times" in e for e in errors(at))
    assert not any(s.key.startswith("ranks:") for s in at.session_state.get("rank_groups", []))
    assert "Ranks" not in [t.label for t in at.tabs]
    upload(at, *cpu)  # one file of a distributed job: a single trace, as before
    assert_healthy(at)
    assert errors(at) == [] and at.session_state["subject"].startswith("upload:")
    assert "Ranks" not in [t.label for t in at.tabs]


# ------------------------------------------------------------------------------ lessons, compare, sessions


def run_lesson(at, lesson_key: str) -> None:
    at.selectbox(key="lesson_key").set_value(lesson_key)
    at.run()
    at.button(key="run_lesson").click()
    at.run()


def test_lesson_pair_opens_compare_with_both_timelines(at):
    run_lesson(at, "cold_vs_warm")
    assert_healthy(at)
    assert errors(at) == []
    assert at.session_state["view"] == "Compare"
    a, b = at.session_state["cmp_a"], at.session_state["cmp_b"]
    titles = {s.key: s.title for s in at.session_state["runs"]}
    assert "cold" in titles[a] and "warm" in titles[b]
    open_view(at, "Compare")
    assert len(charts(at)) == 2
    frames = [df.value for df in at.dataframe]
    if at.session_state["runs"][-1].run.device.kind == "cuda":  # lessons run on the host's device
        totals, _kernels, operators = frames
    else:
        totals, operators = frames  # no kernel table: two CPU runs
        assert any("Neither trace has GPU kernels" in c.value for c in at.caption)
    assert "Trace span" in set(totals["total"])
    assert totals["meaning"].str.len().gt(0).all()
    assert "aten::mm" in set(operators["name"]) and set(operators["status"]) <= {"both", "gone", "new"}


def test_lesson_pair_run_reports_its_lesson_signals(at):
    # The cold vs warm lesson runs; then the lesson check reads both traces.
    run_lesson(at, "cold_vs_warm")
    assert_healthy(at)
    checks = [plain(m.value) for m in at.markdown if any(
        icon in m.value for icon in (":material/check_circle:", ":material/cancel:", ":material/info:"))]
    assert any("first step" in c for c in checks), checks
    if at.session_state["runs"][-1].run.device.kind == "cpu":  # a GPU lesson run on a CPU: said so
        assert any(":material/info:" in c and "H200 recording" in c for c in checks), checks


def test_open_the_h200_recording_of_a_lesson(at):
    at.selectbox(key="lesson_key").set_value("eager_vs_compile")
    at.run()
    at.button(key="open_lesson_recording").click()
    at.run()
    assert_healthy(at)
    assert at.session_state["view"] == "Compare"
    assert at.session_state["cmp_a"].startswith("sample:matmul_add_4096x4096x4096_bfloat16")
    assert at.session_state["cmp_b"].startswith("sample:matmul_add_compiled_4096x4096x4096_bfloat16")
    checks = [plain(m.value) for m in at.markdown if ":material/" in m.value and " — " in m.value]
    assert len(checks) == 3 and all(":material/check_circle:" in c for c in checks), checks
    assert any("bias" in c for c in checks)


def _page_texts(at, where) -> list[str]:
    """Every markdown, caption and radio label (a question) of ``where``, in page order."""
    return ([plain(m.value) for m in where.markdown] + [plain(c.value) for c in where.caption]
            + [r.label for r in where.radio])


def test_before_the_predictions_the_page_shows_only_the_set_up(at):
    """What lab.teach.giveaway.shown_before says a learner reads before predicting is what the
    page shows: the lesson's text, then the form's questions; "look for" and the explanation come
    only with the lesson check, once the recording opened."""
    from lab.lessons import LESSONS, questions_for
    from lab.samples import lesson_samples
    from lab.teach.giveaway import shown_before

    key = "sdpa_backends"
    lesson = LESSONS[key]
    at.selectbox(key="lesson_key").set_value(key)
    at.run()
    sidebar = _page_texts(at, at.sidebar) + [o for box in at.selectbox for o in box.options]
    options = [c for r in at.sidebar.radio for c in r.options]
    notes = {s.note for s in lesson_samples(lesson.runs)}  # shown in a sample's Summary, when open
    asked = [r.label.removesuffix(" (GPU)") for r in at.sidebar.radio if r.key.startswith("predict_")]
    assert asked, "no questions in the form"
    for q in (q for q in questions_for(key, "cuda") + questions_for(key, "cpu") if q.text in asked):
        for text in set(shown_before(q, "cpu")) - notes:  # every text the definition lists is on the page
            assert any(text in t for t in sidebar) or text in options, text
    everything = _page_texts(at, at)
    assert not any(lesson.look_for in t for t in everything), "look for shown before the predictions"
    assert not any(lesson.explain[:60] in t for t in everything), "explanation shown before the predictions"
    # The lesson text comes before the form's first question in the sidebar.
    order = [plain(str(e.value)) if e.type == "markdown" else getattr(e, "label", "") for e in at.sidebar
             if e.type in ("markdown", "radio")]
    assert order.index(lesson.text) < order.index(asked[0])
    at.button(key="open_lesson_recording").click()
    at.run()
    assert_healthy(at)
    main = _page_texts(at, at.main)
    assert any(lesson.explain[:60] in t for t in main) and any(lesson.look_for in t for t in main)


def test_compare_two_h200_samples_diffs_their_kernels(at):
    # Eager vs torch.compile as recorded on the H200: the add kernel is gone, a bias GEMM is new.
    at.session_state["cmp_a"] = "sample:matmul_add_4096_bf16.json.gz"
    at.session_state["cmp_b"] = "sample:matmul_add_4096_bf16_compiled.json.gz"
    open_view(at, "Compare")
    assert len(charts(at)) == 2
    totals, kernels, operators = [df.value for df in at.dataframe]
    assert "Kernels" in set(totals["total"])
    status = dict(zip(kernels["name"], kernels["status"]))
    assert any("elementwise" in name and state == "gone" for name, state in status.items()), status
    assert "new" in set(status.values())
    assert len(operators) > 0


def _no_none_cells(frames) -> None:
    for frame in frames:
        assert not frame.isna().any().any(), frame
        assert not frame.astype(str).isin(["None", "nan", "<NA>"]).any().any(), frame


def test_compare_after_two_runs_is_run_2_vs_run_1_with_whole_counts_and_no_none(at):
    submit(at, cfg_m=32, cfg_k=32, cfg_n=32, cfg_step_label="run_one")
    submit(at, cfg_m=48, cfg_k=48, cfg_n=48, cfg_step_label="run_two")
    assert_healthy(at)
    first, second = at.session_state["runs"]
    open_view(at, "Compare")
    # The visitor's previous run is the baseline, not a sample.
    assert (at.session_state["cmp_a"], at.session_state["cmp_b"]) == (first.key, second.key)
    _no_none_cells([df.value for df in at.dataframe])
    # The A/B labels start with what tells runs apart (a selectbox cuts the end off).
    labels = at.selectbox(key="cmp_a").options
    for size, name in ((first.run.config.shape_text, "run_one"), (second.run.config.shape_text, "run_two")):
        assert any(re.fullmatch(rf"Run \d\d:\d\d:\d\d · {size} float32 cpu · {name}", x) for x in labels), labels
    # Two H200 samples: kernel counts are whole numbers, and kernels new in B have a "—" ratio.
    at.session_state["cmp_a"] = "sample:matmul_add_4096_bf16.json.gz"
    at.session_state["cmp_b"] = "sample:matmul_add_4096_bf16_compiled.json.gz"
    open_view(at, "Compare")
    totals, kernels, operators = [df.value for df in at.dataframe]
    _no_none_cells([totals, kernels, operators])
    counts = totals[totals["total"] == "Kernels"]
    assert len(counts) == 1 and all(str(v).replace(",", "").isdigit() for v in counts[["A", "B"]].iloc[0])
    assert "—" in set(kernels.loc[kernels["status"] == "new", "B / A"])
    assert kernels["A calls"].dtype.kind == "i" and kernels["B calls"].dtype.kind == "i"


def test_after_refusals_a_valid_run_still_works(at):
    wait_for_device(at)
    for values, _expected in ((p.values[0], p.values[1]) for p in REFUSALS[:2]):
        submit(at, **values)
        assert len(errors(at)) == 1, errors(at)
    submit(at, cfg_m=32, cfg_k=32, cfg_n=32, cfg_step_label="after_refusals")
    assert_healthy(at)
    assert errors(at) == []
    assert at.session_state["runs"][-1].run.config.step_label == "after_refusals"


def test_each_session_keeps_its_own_results(at):
    submit(at, cfg_m=32, cfg_k=32, cfg_n=32, cfg_step_label="first_session")
    assert_healthy(at)
    other = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    other.run()
    assert not other.exception
    assert not other.session_state.get("runs")
    assert other.session_state["subject"].startswith("sample:")
    assert [r.run.config.step_label for r in at.session_state["runs"]] == ["first_session"]  # untouched


# ------------------------------------------------------------------------------ status lines


def test_page_script_has_no_bare_expression_for_magic_to_write():
    # Streamlit's magic st.writes the value of every expression statement of the page script
    # that is not a plain call (a conditional expression of two calls writes "None"). ruff's
    # B018 flags constants and names, not those; this finds them all.
    import ast

    tree = ast.parse(Path(APP).read_text())
    docstrings = {id(node.body[0]) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and ast.get_docstring(node, clean=False) is not None}
    written = [f"line {node.lineno}: {ast.unparse(node)[:60]}" for node in ast.walk(tree)
               if isinstance(node, ast.Expr) and id(node) not in docstrings
               and not isinstance(node.value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom))]
    assert written == []


def test_status_lines_say_queue_position_and_stage():
    from lab.run.service import TicketStatus
    from ui.run import describe

    queued = TicketStatus(id=1, state="queued", stage=None, queue_position=3, elapsed_s=2.0, estimate_s=9.6,
                          worker=None, device=None)
    assert describe(queued, "warm") == "warm: queued — position 3 (2 runs ahead), result in about 10 s · 2.0 s"
    running = TicketStatus(id=1, state="running", stage="profiling", queue_position=None, elapsed_s=1.3,
                           estimate_s=None, worker=0, device="cpu")
    assert describe(running, "run") == "run: profiling on cpu · 1.3 s"
    estimated = TicketStatus(id=2, state="queued", stage=None, queue_position=1, elapsed_s=0.5, estimate_s=None,
                             worker=None, device=None, run_estimate_s=12.4)
    assert describe(estimated, "big") == ("big: queued — position 1 (next to run) · 0.5 s · the run itself "
                                          "takes about 12 s")
    estimated = TicketStatus(id=2, state="running", stage="profiling", queue_position=None, elapsed_s=3.0,
                             estimate_s=None, worker=0, device="cpu", run_estimate_s=12.4)
    assert describe(estimated, "big") == "big: profiling on cpu · 3.0 s of about 12 s estimated"


def test_force_fresh_option_only_when_the_host_reuses_results(at, monkeypatch):
    assert "cfg_force_fresh" not in [c.key for c in at.checkbox]  # reuse is off by default
    monkeypatch.setenv("PROFILER_LAB_REUSE_WINDOW_S", "60")
    other = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    other.run()
    assert not other.exception
    assert "cfg_force_fresh" in [c.key for c in other.checkbox]

"""lab/tables.py against torch itself: a tiny real CPU profile, torch's own text tables and
percentages, and torch's table builder on hand-made events (stacks, header)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab.core.result import KEY_AVERAGES_COLUMNS
from lab.views import tables
from lab.views.tables import (
    CPU_ANNOTATION_NOTE,
    GPU_ANNOTATION_NOTE,
    format_key_averages,
    key_averages_view,
    limit_text_table,
    sort_column,
    to_csv_bytes,
    trace_table,
)
from lab.vocab import SORT_KEYS, TORCH_SORT_KEYS

torch = pytest.importorskip("torch")  # conftest sets KINETO_LOG_LEVEL=6 before any profile

DATA = Path(__file__).parent / "data"
LABEL = "matmul_add"


@pytest.fixture(scope="module")
def profile():
    """One tiny CPU profile with shapes, memory and FLOPs: (torch averages, KEY_AVERAGES frame)."""
    from torch.profiler import ProfilerActivity, record_function

    x, w, b = torch.randn(64, 48), torch.randn(48, 32), torch.randn(32)
    with torch.profiler.profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                                profile_memory=True, with_flops=True) as prof:
        for _ in range(3):
            with record_function(LABEL):
                torch.add(torch.matmul(x, w), b)
    averages = prof.key_averages()
    return averages, averages_frame(averages)


def averages_frame(averages) -> pd.DataFrame:
    """FunctionEventAvg → KEY_AVERAGES_COLUMNS, the mapping lab.run.runner uses (torch ≥ 2.4 names)."""
    rows = [{
        "name": e.key, "input_shapes": "", "count": e.count,
        "self_cpu_us": e.self_cpu_time_total, "cpu_total_us": e.cpu_time_total,
        "self_device_us": e.self_device_time_total, "device_total_us": e.device_time_total,
        "self_cpu_memory_bytes": e.self_cpu_memory_usage, "cpu_memory_bytes": e.cpu_memory_usage,
        "self_device_memory_bytes": e.self_device_memory_usage, "device_memory_bytes": e.device_memory_usage,
        "flops": e.flops, "is_user_annotation": bool(e.is_user_annotation),
        "device_type": str(e.device_type).rsplit(".", 1)[-1].lower(),
    } for e in averages]
    return pd.DataFrame(rows, columns=list(KEY_AVERAGES_COLUMNS))


def torch_rows(text: str) -> list[list[str]]:
    """Cells of a torch table's rows (between the 2nd and last dashed rule)."""
    lines = text.split("\n")
    rules = [i for i, line in enumerate(lines) if line.startswith("-") and set(line) <= {"-", " "}]
    return [re.split(r"\s{2,}", line.strip()) for line in lines[rules[1] + 1: rules[-1]]]


# --------------------------------------------------------------------------- views


@pytest.mark.parametrize("label", list(SORT_KEYS))
def test_sort_is_descending_and_ties_keep_torch_order(profile, label):
    _, df = profile
    view = key_averages_view(df, sort_by=label, row_limit=-1, show_annotations=True)
    column = SORT_KEYS[label]
    assert len(view) == len(df) and sort_column(label) == column == sort_column(column)
    values = view[column].to_numpy(dtype=float)
    assert (np.diff(values) <= 0).all()
    # Names are unique in key_averages: equal keys must keep their original relative order.
    original = {name: i for i, name in enumerate(df["name"])}
    for value in set(values):
        positions = [original[n] for n in view.loc[view[column] == value, "name"]]
        assert positions == sorted(positions)


def test_sort_matches_torch_table_order(profile):
    averages, df = profile
    for label in ("Self CPU", "CPU total", "Count", "CPU memory", "FLOPs"):
        text = averages.table(sort_by=TORCH_SORT_KEYS[label], row_limit=-1)
        torch_names = [cells[0] for cells in torch_rows(text)]
        view = key_averages_view(df, sort_by=label, row_limit=-1, show_annotations=True)
        assert list(view["name"]) == torch_names, label  # short names: torch prints them whole


def test_row_limit_and_annotation_filter(profile):
    _, df = profile
    n = len(df)
    assert len(key_averages_view(df, sort_by="Self CPU", row_limit=2, show_annotations=True)) == 2
    assert len(key_averages_view(df, sort_by="Self CPU", row_limit=n + 5, show_annotations=True)) == n
    assert len(key_averages_view(df, sort_by="Self CPU", row_limit=0, show_annotations=True)) == 0
    shown = key_averages_view(df, sort_by="CPU total", row_limit=-1, show_annotations=True)
    hidden = key_averages_view(df, sort_by="CPU total", row_limit=-1, show_annotations=False)
    assert LABEL in set(shown["name"]) and LABEL not in set(hidden["name"])
    assert not hidden["is_user_annotation"].any() and len(hidden) == n - int(df["is_user_annotation"].sum())
    # The limit applies after the filter: still N rows, none of them annotations.
    top = key_averages_view(df, sort_by="CPU total", row_limit=2, show_annotations=False)
    assert list(top["name"]) == list(hidden["name"][:2])
    note = shown.set_index("name")["note"]
    assert note[LABEL] == CPU_ANNOTATION_NOTE and note["aten::mm"] == ""
    with pytest.raises(ValueError, match="not a sort key"):
        key_averages_view(df, sort_by="Wall time", row_limit=5, show_annotations=True)


def test_percentages_equal_torch_table(profile):
    averages, df = profile
    text = averages.table(sort_by="self_cpu_time_total", row_limit=-1)
    header = re.split(r"\s{2,}", text.split("\n")[1].strip())
    view = key_averages_view(df, sort_by="Self CPU", row_limit=-1, show_annotations=True)
    for cells, (_, row) in zip(torch_rows(text), view.iterrows()):
        assert cells[0] == row["name"]
        assert float(cells[header.index("Self CPU %")].rstrip("%")) == pytest.approx(row["self_cpu_pct"], abs=0.006)
        assert float(cells[header.index("CPU total %")].rstrip("%")) == pytest.approx(row["cpu_total_pct"], abs=0.006)


def test_gpu_annotation_row_is_explained_and_can_exceed_100_pct():
    # A step of two kernels (60 + 40 µs) under a 110 µs GPU annotation range; torch sums device
    # time without annotations (100 µs), so the annotation's share is 110 %.
    rows = [
        ("matmul_add", 1, 500.0, 900.0, 0.0, 110.0, True, "cpu"),
        ("matmul_add", 1, 0.0, 0.0, 110.0, 110.0, True, "cuda"),
        ("gemm_kernel", 1, 0.0, 0.0, 60.0, 60.0, False, "cuda"),
        ("add_kernel", 1, 0.0, 0.0, 40.0, 40.0, False, "cuda"),
        ("aten::mm", 1, 300.0, 350.0, 0.0, 60.0, False, "cpu"),
        ("aten::add", 1, 50.0, 50.0, 0.0, 40.0, False, "cpu"),
    ]
    df = pd.DataFrame([{
        "name": n, "input_shapes": "", "count": c, "self_cpu_us": s, "cpu_total_us": t,
        "self_device_us": sd, "device_total_us": td, "self_cpu_memory_bytes": 0, "cpu_memory_bytes": 0,
        "self_device_memory_bytes": 0, "device_memory_bytes": 0, "flops": 0,
        "is_user_annotation": a, "device_type": d} for n, c, s, t, sd, td, a, d in rows])
    view = key_averages_view(df, sort_by="Self device", row_limit=-1, show_annotations=True)
    top = view.iloc[0]
    assert top["device_type"] == "cuda" and top["is_user_annotation"]
    assert top["self_device_pct"] == pytest.approx(110.0) and top["note"] == GPU_ANNOTATION_NOTE
    assert view.set_index("name").loc["gemm_kernel", "self_device_pct"] == pytest.approx(60.0)
    assert view.loc[view["name"] == "aten::mm", "self_cpu_pct"].item() == pytest.approx(300 / 850 * 100)
    hidden = key_averages_view(df, sort_by="Self device", row_limit=-1, show_annotations=False)
    assert list(hidden["name"][:2]) == ["gemm_kernel", "add_kernel"]


def test_notes_are_marks_beside_the_name_and_footnotes_under_the_table():
    """As the table's last column, the Note column's sentences would be out of view and cut at
    1280 px. Instead a short mark beside the name, each note whole in a footnote, numbered in the
    order the rows shown use them; no column when no row shown has a note."""
    rows = [("gemm_kernel", False, "cuda"), ("matmul_add", True, "cpu"), ("aten::mm", False, "cpu"),
            ("matmul_add", True, "cuda"), ("step", True, "cpu")]
    df = pd.DataFrame([{"name": n, "count": 1, "self_cpu_us": 10.0 * (5 - i), "cpu_total_us": 10.0 * (5 - i),
                        "self_device_us": 1.0, "device_total_us": 1.0, "is_user_annotation": a, "device_type": d}
                       for i, (n, a, d) in enumerate(rows)])
    view = key_averages_view(df, sort_by="Self CPU", row_limit=-1, show_annotations=True)
    table = format_key_averages(view)
    assert list(table.data.columns[:2]) == ["Name", "Note"]
    marks = dict(zip(range(len(rows)), table.data["Note"]))
    assert marks == {0: "", 1: "label ¹", 2: "", 3: "label ²", 4: "label ¹"}
    assert table.footnotes == (f"¹ {tables.NOTE_FOOTNOTES[CPU_ANNOTATION_NOTE]}",
                               f"² {tables.NOTE_FOOTNOTES[GPU_ANNOTATION_NOTE]}")
    assert "CPU total includes the ops inside it" in table.footnotes[0]
    assert "out of the device totals" in table.footnotes[1] and "100 %" in table.footnotes[1]
    assert max(len(m) for m in table.data["Note"]) <= len("label ¹")  # what ui.views.NOTE_COLUMN_PX fits
    hidden = format_key_averages(key_averages_view(df, sort_by="Self CPU", row_limit=-1, show_annotations=False))
    assert "Note" not in hidden.data.columns and hidden.footnotes == ()
    # The CSV keeps each row's note whole.
    assert set(view["note"]) == {"", CPU_ANNOTATION_NOTE, GPU_ANNOTATION_NOTE}


# --------------------------------------------------------------------------- formatting


def test_format_units_scale_back_to_raw(profile):
    _, df = profile
    view = key_averages_view(df, sort_by="CPU total", row_limit=-1, show_annotations=True)
    table = format_key_averages(view)
    data, formats, units = table.data, table.column_formats, table.units
    assert len(data) == len(view) and list(data["Name"]) == list(view["name"])
    scale = {"µs": 1.0, "ms": 1e3, "s": 1e6, "B": 1.0, "KB": 1024.0, "MB": 1024.0**2, "GB": 1024.0**3,
             "FLOP": 1.0, "KFLOP": 1e3, "MFLOP": 1e6, "GFLOP": 1e9, "TFLOP": 1e12}
    raw = {"Self CPU": "self_cpu_us", "CPU total": "cpu_total_us", "CPU mem": "cpu_memory_bytes",
           "Self CPU mem": "self_cpu_memory_bytes", "FLOPs": "flops"}
    for label, column in raw.items():
        unit = units[label]
        np.testing.assert_allclose(data[label].to_numpy() * scale[unit], view[column].to_numpy(dtype=float))
        assert formats[label].endswith(" " + unit)
        # One unit per column, the largest that keeps the biggest value ≥ 1.
        top = np.abs(view[column].to_numpy(dtype=float)).max()
        assert 1 <= top / scale[unit] < (1024 if unit.endswith("B") else 1000)
    # A CPU-only run has no device time: those columns are left out rather than shown as 0.
    assert not {"Self device", "Device total", "Self device %"} & set(data.columns)
    assert formats["Calls"] == "%d" and formats["Self CPU %"] == "%.2f%%"
    assert "Note" in data.columns


def test_the_table_from_a_trace_uses_the_same_views():
    from lab.analysis import trace_key_averages
    from lab.trace.load import load_trace

    trace = load_trace(DATA / "matmul_add_1024_fp32.json.gz")
    df = trace_table(trace_key_averages(trace))
    assert list(df.columns) == list(KEY_AVERAGES_COLUMNS)
    view = key_averages_view(df, sort_by="Device total", row_limit=-1, show_annotations=False)
    assert "matmul_add" not in set(view["name"]) and (np.diff(view["device_total_us"]) <= 0).all()
    # Memory columns of a trace without profile_memory: absent, not zeros. FLOPs are there when the
    # trace was recorded with_flops (torch computes them from the recorded shapes, and so does the lab).
    table = format_key_averages(view)
    assert {"Self device", "Device total"} <= set(table.data.columns)
    assert not {"CPU mem", "Self CPU mem"} & set(table.data.columns)
    assert trace.meta.with_flops and "FLOPs" in table.data.columns
    mm = view[view["name"] == "aten::mm"]
    shapes = trace.events.loc[trace.events["name"] == "aten::mm", "input_dims"].astype(str)
    (m, k), (_, n) = eval(shapes.iloc[0])[:2]  # [[M, K], [K, N]] as recorded
    assert int(mm["flops"].iloc[0]) == 2 * m * k * n * int(mm["count"].iloc[0])


def test_csv_round_trip(profile):
    _, df = profile
    view = key_averages_view(df, sort_by="Self CPU", row_limit=-1, show_annotations=True)
    back = pd.read_csv(io.BytesIO(to_csv_bytes(view)), keep_default_na=False)
    assert list(back.columns) == list(view.columns)
    assert list(back["name"]) == list(view["name"])
    np.testing.assert_allclose(back["self_cpu_us"], view["self_cpu_us"])
    assert list(back["count"]) == list(view["count"])


# --------------------------------------------------------------------------- text tables


def test_limit_text_table_equals_torch_row_limit(profile):
    averages, _ = profile
    n = len(averages)
    for sort_by in ("self_cpu_time_total", "cpu_time_total", "count", "cpu_memory_usage"):
        full = averages.table(sort_by=sort_by, row_limit=-1)
        for limit in (0, 1, 2, n - 1, n, n + 3, -1):
            assert limit_text_table(full, limit) == averages.table(sort_by=sort_by, row_limit=limit), (sort_by, limit)


def test_limit_text_table_with_stacks_and_header():
    """Rows that continue over stack lines, and the optional header, as torch lays them out."""
    from torch.autograd.profiler_util import EventList, FunctionEvent

    events = EventList([
        FunctionEvent(id=i, name=f"op{i}", thread=0, start_us=0, end_us=10 * (i + 1),
                      stack=[f"model.py({i}): forward", "train.py(7): step"])
        for i in range(4)
    ])
    for header in (None, "Top ops"):
        full = events.table(sort_by="cpu_time_total", row_limit=-1, header=header)
        assert "train.py(7): step" in full
        for limit in range(6):
            want = events.table(sort_by="cpu_time_total", row_limit=limit, header=header)
            assert limit_text_table(full, limit) == want
    assert limit_text_table("not a table", 3) == "not a table"


def test_trace_derived_table_shares_device_time_as_torch_does():
    """The table rebuilt from a trace has torch's kernel rows: their Self device % adds up to
    100 %, over exactly the GPU activity of the trace, and the GEMM op carries most of it."""
    import gzip
    import json

    from lab.analysis import analyze
    from lab.trace.load import load_trace

    path = Path(__file__).parent / "data" / "matmul_add_4096_bf16.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    gpu_us = sum(e["dur"] for e in raw if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    trace = load_trace(path)
    df = tables.trace_table(analyze(trace).key_averages)
    view = tables.key_averages_view(df, sort_by="Self device", row_limit=-1, show_annotations=False)
    kernels = view[view["device_type"] != "cpu"]
    assert kernels["self_device_us"].sum() == pytest.approx(gpu_us, rel=1e-6)
    assert kernels["self_device_pct"].sum() == pytest.approx(100.0, abs=1e-6)
    mm = view[view["name"] == "aten::mm"]
    assert float(mm["self_device_pct"].iloc[0]) > 50  # the GEMM dominates the 4096³ bf16 step

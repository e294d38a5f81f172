"""lab/timeline.py on the real H200 traces and on a ≥200k-event trace made by tiling one.

Expected values are derived here from trace.events / trace.flows directly (brute-force masks),
not copied from the module's output.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import corpus
import numpy as np
import pytest

from lab.trace.load import Trace
from lab.views.timeline import ANNOTATION_CATS, CAT_COLORS, LINK_COLUMNS, MARK_COLUMNS, build_timeline, timeline_chart

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from make_large_trace import tile_trace  # noqa: E402  (the benches' generator)

DATA = Path(__file__).parent / "data"
TRACES = ("matmul_add_1024_fp32", "matmul_add_4096_bf16", "matmul_add_4096_bf16_compiled")
LARGE_EVENTS = 200_000


@pytest.fixture(scope="module", params=TRACES)
def real_trace(request) -> Trace:
    return corpus.trace(DATA / f"{request.param}.json.gz")


@pytest.fixture(scope="module")
def large_trace() -> Trace:
    small = corpus.trace(DATA / "matmul_add_1024_fp32.json.gz")
    big = tile_trace(small, -(-LARGE_EVENTS // len(small.events)))
    assert len(big.events) >= LARGE_EVENTS
    return big


def overlapping(trace: Trace, w0: float, w1: float) -> np.ndarray:
    ts = trace.events["ts_us"].to_numpy()
    return (ts <= w1) & (ts + trace.events["dur_us"].to_numpy() >= w0)


def is_annotation(trace: Trace) -> np.ndarray:
    ev = trace.events
    annotation = ev["cat"].astype(str).isin(ANNOTATION_CATS)
    return (annotation | ev["name"].astype(str).str.startswith("ProfilerStep#")).to_numpy()


# --------------------------------------------------------------------------- real traces


def test_real_trace_fits_whole(real_trace):
    data = build_timeline(real_trace, show_profiler_lanes=True)
    ev = real_trace.events
    assert list(data.marks.columns) == list(MARK_COLUMNS)
    assert list(data.links.columns) == list(LINK_COLUMNS)
    # ~100 events: every one is drawn as itself, with its own times.
    assert data.total_events == len(ev) == data.shown_events == len(data.marks)
    assert data.merged_events == 0 and data.note == ""
    assert (data.marks["merged_count"] == 1).all()
    expected = ev[["name", "ts_us", "dur_us"]].astype({"name": str}).sort_values(["name", "ts_us"])
    got = data.marks[["name", "start_us", "dur_us"]].sort_values(["name", "start_us"])
    np.testing.assert_allclose(got["start_us"].to_numpy(), expected["ts_us"].to_numpy())
    np.testing.assert_allclose(got["dur_us"].to_numpy(), expected["dur_us"].to_numpy())
    assert (got["name"].to_numpy() == expected["name"].to_numpy()).all()
    # Lanes: CPU threads first, then GPU streams, in lane_order.
    lane_order = ev.groupby("lane", observed=True)["lane_order"].min().sort_values()
    assert data.lanes == tuple(str(v) for v in lane_order.index)
    assert any(lane.startswith("CPU thread") for lane in data.lanes)
    assert any(lane.startswith("GPU 0 stream") for lane in data.lanes)


def test_real_trace_links_cover_every_launch(real_trace):
    data = build_timeline(real_trace)
    ev, flows = real_trace.events, real_trace.flows
    assert len(flows) > 0
    assert set(data.links["correlation"]) == set(flows["correlation"])
    # The matmul and add kernels are the GPU work whose External id is an aten::mm/addmm or
    # aten::add op's; each has a link from a CPU lane to a GPU lane.
    ext_of = lambda names: set(ev.loc[ev["name"].astype(str).isin(names), "external_id"])  # noqa: E731
    gpu = ev.iloc[flows["gpu_row"].to_numpy()]
    is_kernel = (gpu["cat"].astype(str) == "kernel").to_numpy()
    corr = flows["correlation"].to_numpy()
    matmul = corr[is_kernel & gpu["external_id"].isin(ext_of({"aten::mm", "aten::addmm"})).to_numpy()]
    add = corr[is_kernel & gpu["external_id"].isin(ext_of({"aten::add"})).to_numpy()]
    kernel_corr = corr[is_kernel]
    assert len(matmul) == 10  # one GEMM kernel in each of the ten profiled steps
    assert set(matmul) <= set(data.links["correlation"]) and set(kernel_corr) <= set(data.links["correlation"])
    if "compiled" not in str(ev["name"].cat.categories.tolist()):
        assert len(add) == 10
    assert set(add) <= set(data.links["correlation"])
    links = data.links.set_index("correlation").loc[list(matmul) + list(add)]
    assert links["launch_lane"].str.startswith("CPU").all() and links["gpu_lane"].str.startswith("GPU").all()
    assert (links["gpu_x_us"] >= links["launch_x_us"]).all()  # a kernel starts after its launch


def test_chart_spec_has_lanes_rows_links_and_zoom(real_trace):
    data = build_timeline(real_trace)
    spec = timeline_chart(data).to_dict()
    bands, bars, rules = spec["layer"]
    y = bars["encoding"]["y"]
    n_rows = sum(n for _, _, n in data.lane_rows)
    assert y["type"] == "quantitative" and y["scale"]["domain"] == [0, n_rows] and y["scale"]["reverse"]
    axis = bands["encoding"]["y"]["axis"]  # lane names at each lane's middle row
    assert axis["values"] == [first + n / 2 for _, first, n in data.lane_rows]
    assert [lane for lane, _, _ in data.lane_rows] == list(data.lanes)
    for lane in data.lanes:
        assert lane in axis["labelExpr"]
    assert bars["encoding"]["x"]["title"] == "time (µs since trace start)"
    assert bars["encoding"]["opacity"]["field"] == "busy_frac"
    scale = bars["encoding"]["color"]["scale"]
    assert scale["range"] == [CAT_COLORS[k] for k in scale["domain"]]
    rows = spec["datasets"][bars["data"]["name"]]
    assert len(rows) == len(data.marks)
    assert {r["lane"] for r in rows} == set(data.lanes) - {""}
    assert rules["mark"]["type"] == "rule"
    assert len(spec["datasets"][rules["data"]["name"]]) == len(data.links)
    # Altair hoists a layer's selection to the top level, naming the layer it belongs to.
    (zoom,) = spec.get("params", []) + bars.get("params", [])
    assert zoom["select"]["type"] == "interval" and zoom["select"]["encodings"] == ["x"] and zoom["bind"] == "scales"
    assert zoom.get("views", [bars.get("name")]) == [bars.get("name")]
    assert spec["width"] == "container" and spec["height"] >= n_rows * 3  # height follows the rows
    assert spec["autosize"]["type"] == "fit-x"  # the plot's own height, not the whole chart's


def test_window_clips_and_keeps_only_overlapping(real_trace):
    ev = real_trace.events
    kernels = ev[ev["cat"].astype(str) == "kernel"]
    k = kernels.iloc[len(kernels) // 2]
    w0, w1 = float(k["ts_us"]) + float(k["dur_us"]) / 2, float(k["ts_us"]) + float(k["dur_us"]) * 3
    data = build_timeline(real_trace, start_us=w0, end_us=w1, show_profiler_lanes=True)
    assert data.total_events == int(overlapping(real_trace, w0, w1).sum()) == len(data.marks)
    assert (data.marks["start_us"] >= w0).all() and (data.marks["end_us"] <= w1).all()
    clipped = data.marks[data.marks["name"] == str(k["name"])].iloc[0]
    assert clipped["start_us"] == w0 and clipped["dur_us"] == pytest.approx(float(k["dur_us"]))


def test_window_errors_and_empty_window(real_trace):
    with pytest.raises(ValueError, match="greater than start_us"):
        build_timeline(real_trace, start_us=10.0, end_us=10.0)
    far = float((real_trace.events["ts_us"] + real_trace.events["dur_us"]).max()) + 1e6
    data = build_timeline(real_trace, start_us=far, end_us=far + 10)
    assert data.total_events == 0 and len(data.marks) == 0 and len(data.links) == 0
    assert [lane for lane, _, _ in data.lane_rows] == list(data.lanes)
    timeline_chart(data).to_dict()
    # A trace with no events at all still gives a (blank) chart rather than an error.
    empty = replace(real_trace, events=real_trace.events.iloc[:0], flows=real_trace.flows.iloc[:0])
    blank = build_timeline(empty)
    assert blank.lanes == () and blank.total_events == 0 and len(blank.marks) == 0
    timeline_chart(blank).to_dict()


def test_tiny_budget_folds_rows_and_conserves_events(real_trace):
    for budget in (60, 12, 4):
        data = build_timeline(real_trace, max_marks=budget, show_profiler_lanes=True)
        assert data.mark_count <= budget
        assert int(data.marks["merged_count"].sum()) + data.hidden_events == data.total_events == len(real_trace.events)
        assert data.shown_events + data.merged_events + data.hidden_events == data.total_events
        assert "merged" in data.note
        if data.hidden_events:
            assert "lanes" in data.note


# --------------------------------------------------------------------------- large trace


def _windows(trace: Trace):
    span = float((trace.events["ts_us"] + trace.events["dur_us"]).max())
    return [(None, None), (span * 0.30, span * 0.40), (span * 0.50, span * 0.53), (span * 0.70, span * 0.705)]


@pytest.mark.parametrize("which", range(4))
def test_large_trace_stays_in_budget_and_loses_nothing(large_trace, which):
    start, end = _windows(large_trace)[which]
    data = build_timeline(large_trace, start_us=start, end_us=end)
    w0, w1 = data.window
    inside = overlapping(large_trace, w0, w1)
    marks = data.marks
    assert data.mark_count <= 5_000
    assert data.total_events == int(inside.sum())
    # Nothing silently lost: real marks + merged counts = events overlapping the window, but
    # for the profiler's own lanes (hidden by default).
    own = large_trace.events["pid"].astype(str).isin(["-1", "Spans"]).to_numpy()
    assert data.hidden_profiler_events == int((inside & own).sum())
    assert int(marks["merged_count"].sum()) == data.total_events - data.hidden_profiler_events
    assert data.hidden_events == 0
    if data.merged_events:
        assert "merged" in data.note and "zoom in" in data.note
    else:
        assert len(marks) == data.total_events - data.hidden_profiler_events
    # Annotations remain: each overlapping annotation is a real mark or counted in a merged bar
    # that holds annotations only (coloured as one), never folded into a generic merged bar.
    ann_inside = int((inside & is_annotation(large_trace)).sum())
    ann_marks = marks[marks["cat"].isin(ANNOTATION_CATS)]
    assert ann_inside > 0
    assert int(ann_marks["merged_count"].sum()) == ann_inside
    assert set(ann_marks["kind"]) <= set(ANNOTATION_CATS)
    if ann_inside <= 2_500:  # within the annotations' half of the budget: each one shown
        assert (ann_marks["merged_count"] == 1).all()
    # Merged bars lie in the window and within their lane.
    assert (marks["start_us"] >= w0).all() and (marks["end_us"] <= w1).all()
    assert set(marks["lane"]) <= set(data.lanes)


def test_large_trace_full_view_merges_and_zoom_shows_real_events(large_trace):
    full = build_timeline(large_trace)
    assert full.merged_events > 0 and full.total_events == len(large_trace.events)
    generic = (full.marks["merged_count"] > 1) & ~full.marks["cat"].isin(ANNOTATION_CATS)
    merged = int(full.marks.loc[generic, "merged_count"].sum())
    assert full.note.startswith(f"{merged:,} events shorter than")
    # Zoomed to ~one step's worth of events: every event is itself, and links come back.
    ev = large_trace.events
    middle_launch = large_trace.flows["launch_row"].to_numpy()[len(large_trace.flows) // 2]
    w0 = float(ev["ts_us"].to_numpy()[middle_launch]) - 100.0
    data = build_timeline(large_trace, start_us=w0, end_us=w0 + 2_000.0)
    assert data.merged_events == 0 and data.note == "" and len(data.links) > 0
    ts = ev["ts_us"].to_numpy()
    launch, gpu = large_trace.flows["launch_row"].to_numpy(), large_trace.flows["gpu_row"].to_numpy()
    both_in = (ts[launch] >= w0) & (ts[launch] <= w0 + 2_000) & (ts[gpu] >= w0) & (ts[gpu] <= w0 + 2_000)
    assert len(data.links) == int(both_in.sum())
    assert timeline_chart(data).to_dict()["layer"][2]["mark"]["type"] == "rule"


def test_events_wider_than_the_bin_are_never_merged(large_trace):
    """With a tight budget, every non-annotation event at least one bin wide stays itself."""
    span = float((large_trace.events["ts_us"] + large_trace.events["dur_us"]).max())
    w0, w1 = span * 0.5, span * 0.503
    data = build_timeline(large_trace, start_us=w0, end_us=w1, max_marks=300, width_px=1200,
                          show_profiler_lanes=True)
    assert data.merged_events > 0 and data.depth_cap is None
    assert data.bin_us >= (w1 - w0) / 1200  # never finer than a pixel
    ev = large_trace.events
    ts, end = ev["ts_us"].to_numpy(), (ev["ts_us"] + ev["dur_us"]).to_numpy()
    clipped_start = np.maximum(ts, w0)
    wide = overlapping(large_trace, w0, w1) & ~is_annotation(large_trace) & (
        np.minimum(end, w1) - clipped_start >= data.bin_us)
    expected = set(zip(ev["name"].astype(str).to_numpy()[wide], np.round(clipped_start[wide], 6)))
    real = data.marks[data.marks["merged_count"] == 1]
    got = set(zip(real["name"], np.round(real["start_us"].to_numpy(), 6)))
    assert len(expected) > 0 and expected <= got


def test_dense_links_are_left_out_with_a_note(large_trace):
    """Hundreds of links across 1,200 px hide the bars: they are counted, not drawn."""
    ev = large_trace.events
    middle_launch = large_trace.flows["launch_row"].to_numpy()[len(large_trace.flows) // 2]
    w0 = float(ev["ts_us"].to_numpy()[middle_launch])
    w1 = w0 + 200_000.0
    data = build_timeline(large_trace, start_us=w0, end_us=w1)
    assert data.merged_events == 0  # few enough events to show each one...
    ts = ev["ts_us"].to_numpy()
    launch, gpu = large_trace.flows["launch_row"].to_numpy(), large_trace.flows["gpu_row"].to_numpy()
    both_in = int(((ts[launch] >= w0) & (ts[launch] <= w1) & (ts[gpu] >= w0) & (ts[gpu] <= w1)).sum())
    assert both_in > 1_200 * 0.25  # ...but more links than one per 4 px
    assert len(data.links) == 0 and data.hidden_links == both_in
    assert f"{both_in:,} launch → GPU links are not drawn" in data.note

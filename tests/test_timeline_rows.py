"""The timeline on deep real stacks (with_stack, SDPA math): rows, links, Python folding, the
profiler's own lanes and merged bars' busy share.

Expectations come from the raw Chrome JSON (``traceEvents``: ts/dur, ``correlation``,
``Python parent id``), not from the module's output.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import corpus
import numpy as np
import pytest

from lab.analysis import analyze
from lab.trace.load import Trace
from lab.views.timeline import DEFAULT_MAX_MARKS, DEFAULT_PYTHON_LEVELS, build_timeline, timeline_chart

GROUNDTRUTH = Path(__file__).parent / "data" / "groundtruth" / "cuda"
DEEP = ("llama_train_stack", "sdpa_backends")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def raw_events(name: str) -> list[dict]:
    doc = json.loads(gzip.decompress((GROUNDTRUTH / f"{name}.json.gz").read_bytes()))
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture(scope="module", params=DEEP)
def deep(request) -> tuple[str, Trace, list[dict]]:
    return request.param, corpus.trace(GROUNDTRUTH / f"{request.param}.json.gz"), raw_events(request.param)


def _link_window(trace: Trace) -> tuple[float, float]:
    """~40 kernels around the middle one: few enough links to be drawn."""
    ev = trace.events
    ts = np.sort(ev.loc[ev["cat"].astype(str) == "kernel", "ts_us"].to_numpy())
    mid = len(ts) // 2
    return float(ts[max(mid - 20, 0)]) - 50.0, float(ts[min(mid + 20, len(ts) - 1)]) + 50.0


@pytest.mark.parametrize("levels", [DEFAULT_PYTHON_LEVELS, None])
def test_links_end_on_their_bars_rows_at_any_depth(deep, levels):
    name, trace, raw = deep
    w0, w1 = _link_window(trace)
    data = build_timeline(trace, start_us=w0, end_us=w1, python_levels=levels)
    assert len(data.links) > 0, data.note
    by_corr: dict[int, dict[str, dict]] = {}
    for e in raw:
        corr = (e.get("args") or {}).get("correlation")
        if corr is not None:
            side = "gpu" if e["cat"] in GPU_CATS else "launch" if e["cat"] in ("cuda_runtime", "cuda_driver") else None
            if side:
                by_corr.setdefault(int(corr), {})[side] = e
    rows = {lane: (first, n) for lane, first, n in data.lane_rows}
    marks = data.marks
    deepest_launch = 0
    for link in data.links.itertuples():
        pair = by_corr[link.correlation]
        # The raw JSON's launch → kernel delay, in µs.
        assert link.gpu_x_us - link.launch_x_us == pytest.approx(pair["gpu"]["ts"] - pair["launch"]["ts"], abs=1e-3)
        for lane, x, y, want in ((link.launch_lane, link.launch_x_us, link.launch_y, pair["launch"]),
                                 (link.gpu_lane, link.gpu_x_us, link.gpu_y, pair["gpu"])):
            first, n = rows[lane]
            assert first < y < first + n  # inside its lane's band
            # The end point is the middle of that event's bar: same name and row, at its start.
            on = marks[(marks["lane"] == lane) & (marks["row"] + 0.5 == y)
                       & ((marks["start_us"] - x).abs() < 1e-6) & (marks["name"] == want["name"])]
            assert len(on) == 1, (name, link)
            assert (on["draw_end_us"] > on["start_us"]).all()  # a bar with width, not a point
        deepest_launch = max(deepest_launch, int(link.launch_y - rows[link.launch_lane][0]))
    if name == "llama_train_stack" and levels is None:
        assert deepest_launch >= 10  # launches deep under Python frames: the case in the issue


def test_bars_fill_the_middle_of_their_rows(deep):
    _, trace, _ = deep
    data = build_timeline(trace)
    spec = timeline_chart(data).to_dict()
    bars = spec["layer"][1]
    calc = {t["as"]: t["calculate"] for t in bars["transform"]}
    top, bottom = (float(calc[k].split("+")[1]) for k in ("y_top", "y_bottom"))
    assert top + bottom == pytest.approx(1.0) and 0 < top < 0.5  # centred on row + 0.5
    n_rows = sum(n for _, _, n in data.lane_rows)
    assert int(data.marks["row"].max()) < n_rows and int(data.marks["row"].min()) >= 0
    for lane, first, n in data.lane_rows:
        depth = data.marks.loc[data.marks["lane"] == lane, "depth"]
        assert n == (int(depth.max()) + 1 if len(depth) else 1)
        assert (data.marks.loc[data.marks["lane"] == lane, "row"] == first + depth).all()


def _python_levels(raw: list[dict]) -> list[int]:
    """Each python_function event's Python ancestors, following ``Python parent id``."""
    py = [e for e in raw if e["cat"] == "python_function"]
    parent = {e["args"]["Python id"]: e["args"].get("Python parent id") for e in py}
    levels = []
    for e in py:
        level, up = 0, e["args"].get("Python parent id")
        while up is not None and up in parent:
            level, up = level + 1, parent[up]
        levels.append(level)
    return levels


def test_python_stacks_fold_to_a_few_levels_and_the_toggle_shows_all():
    raw = raw_events("llama_train_stack")
    trace = corpus.trace(GROUNDTRUTH / "llama_train_stack.json.gz")
    levels = _python_levels(raw)
    assert max(levels) > 20  # a deep with_stack trace
    # A budget that holds every event: counts per category are then exact.
    folded = build_timeline(trace, max_marks=20_000)
    python = folded.marks[folded.marks["cat"] == "python_function"]
    kept = sum(level < DEFAULT_PYTHON_LEVELS for level in levels)
    assert int(python["merged_count"].sum()) == kept
    assert folded.folded_python == len(levels) - kept
    assert int(python["depth"].max()) < DEFAULT_PYTHON_LEVELS
    assert f"{len(levels) - kept:,} Python frames" in folded.note
    every = build_timeline(trace, python_levels=None, max_marks=20_000)
    python_all = every.marks[every.marks["cat"] == "python_function"]
    assert int(python_all["merged_count"].sum()) == len(levels) and every.folded_python == 0
    # The ops under the frames move up: the main thread needs far fewer rows.
    main = next(lane for lane in folded.lanes if "python3" in lane)
    rows = {lane: n for lane, _, n in folded.lane_rows}
    rows_all = {lane: n for lane, _, n in every.lane_rows}
    assert rows[main] <= rows_all[main] - (max(levels) + 1 - DEFAULT_PYTHON_LEVELS) // 2
    # Nothing else is lost: the non-Python events are all drawn (as themselves or merged).
    others = folded.marks[folded.marks["cat"] != "python_function"]
    counts = Counter(e["cat"] for e in raw if e["cat"] != "python_function")
    shown = others.groupby("cat")["merged_count"].sum()
    assert int(shown.sum()) == sum(counts.values()) - folded.hidden_profiler_events


def test_profiler_lanes_hidden_by_default_and_labelled_when_shown():
    trace = corpus.trace(GROUNDTRUTH / "sdpa_backends.json.gz")
    raw = raw_events("sdpa_backends")
    own = [e for e in raw if not str(e["pid"]).lstrip("-").isdigit() or int(e["pid"]) < 0]
    assert len(own) == 2  # Kineto's buffer request (pid -1) and the session's span ("Spans")
    hidden = build_timeline(trace)
    assert set(hidden.profiler_lanes) == {"CPU thread 0 (pid -1)", "Spans PyTorch Profiler"}
    assert not set(hidden.profiler_lanes) & set(hidden.lanes)
    assert hidden.hidden_profiler_events == len(own)
    shown = build_timeline(trace, show_profiler_lanes=True)
    assert set(shown.profiler_lanes) <= set(shown.lanes) and shown.hidden_profiler_events == 0
    axis = timeline_chart(shown).to_dict()["layer"][0]["encoding"]["y"]["axis"]
    assert axis["labelExpr"].count("profiler's own") == 2


def _union_us(intervals: list[tuple[float, float]]) -> float:
    total, reach = 0.0, -np.inf
    for s, e in sorted(intervals):
        total += max(0.0, e - max(s, reach))
        reach = max(reach, e)
    return total


def test_merged_bars_show_their_busy_share_and_dominant_category():
    """Whole-trace view of a GPU busy ~6 %: the kernel row's bars are mostly empty, and say so."""
    trace = corpus.trace(GROUNDTRUTH / "llama_train_stack.json.gz")
    raw = raw_events("llama_train_stack")
    data = build_timeline(trace, max_marks=600, width_px=400)
    w0, w1 = data.window
    assert data.depth_cap is None and data.bin_us > 0
    t0 = min(e["ts"] for e in raw)
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in raw if e["cat"] == "gpu_user_annotation"]
    # Depth on the stream: 1 under a GPU annotation, else 0.
    gpu = [(e["ts"] - t0, e["ts"] - t0 + e["dur"], e["cat"],
            int(any(a <= e["ts"] and e["ts"] + e["dur"] <= b for a, b in spans)))
           for e in raw if e["cat"] in GPU_CATS]
    lane = next(lane for lane in data.lanes if lane.startswith("GPU"))
    row_marks = data.marks[(data.marks["lane"] == lane) & (data.marks["cat"].isin(GPU_CATS))]
    merged = row_marks[row_marks["merged_count"] > 1]
    assert len(merged) > 10
    for bar in merged.itertuples():
        # Brute force: the GPU events shorter than the bin that start in this bar's bin.
        k = int((bar.start_us - w0) // data.bin_us)
        members = [(s, e, c) for s, e, c, d in gpu
                   if d == bar.depth and e - s < data.bin_us and int((s - w0) // data.bin_us) == k]
        assert len(members) == bar.merged_count
        covered = _union_us([(s, min(e, w1)) for s, e, _ in members])
        assert bar.busy_us == pytest.approx(covered, abs=1e-6)
        assert bar.busy_frac == pytest.approx(min(covered / (bar.draw_end_us - bar.start_us), 1.0), abs=1e-9)
        time_by_cat = Counter()
        for s, e, c in members:
            time_by_cat[c] += min(e, w1) - s
        assert time_by_cat[bar.cat] == max(time_by_cat.values()) and bar.kind == bar.cat
    # Ink on the row: every bar's busy time adds up to the GPU's covered time, a few % of the window.
    assert row_marks["busy_us"].sum() == pytest.approx(_union_us([(s, e) for s, e, _, _ in gpu]), rel=1e-6)
    assert row_marks["busy_us"].sum() / (w1 - w0) < 0.1
    assert (merged["busy_frac"] < 0.5).mean() > 0.5  # not a solid band


def test_each_step_window_gets_its_own_level_of_detail():
    """A step window ("step 2") is rebuilt for that window: in budget, and unmerged where it fits."""
    trace = corpus.trace(GROUNDTRUTH / "llama_train_stack.json.gz")
    whole = build_timeline(trace)
    steps = analyze(trace).steps
    assert len(steps) == 2 and whole.merged_events > 0
    for i in range(len(steps)):
        w0, w1 = float(steps["start_us"].iloc[i]), float(steps["end_us"].iloc[i])
        for budget in (DEFAULT_MAX_MARKS, 20_000):
            data = build_timeline(trace, start_us=w0, end_us=w1, max_marks=budget)
            drawn = data.total_events - data.folded_python - data.hidden_profiler_events
            assert data.mark_count <= budget and int(data.marks["merged_count"].sum()) == drawn
            if drawn <= budget:
                assert data.merged_events == 0 and len(data.marks) == drawn
            else:
                assert data.merged_events < whole.merged_events  # finer than the whole-trace view

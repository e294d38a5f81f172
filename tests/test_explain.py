"""Attribution: every µs of each step to one cause — checked against a brute-force labelling
written from the raw JSON with plain loops, on every trace of the corpus small enough for it."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import corpus
import pytest
from tracebuild import annotation, build, kernel, launch, op

from lab.explain import CAUSES, attribute, explain
from lab.trace import load_trace

REPO = Path(__file__).resolve().parents[1]
CORPUS = sorted((REPO / "tests" / "data" / "groundtruth").glob("*/*.json.gz")) + sorted(
    (REPO / "lab" / "samples").glob("*.json.gz")) + sorted((REPO / "tests" / "data" / "explain").glob("*.json.gz"))
# The plain-loop labelling is O(segments × events): traces up to this many events.
BRUTE_MAX_EVENTS = 4000

SYNC = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaStreamWaitEvent",
        "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize"}


def _raw(path: Path) -> list[dict]:
    raw = json.loads(gzip.decompress(path.read_bytes()))
    return [e for e in raw["traceEvents"] if e.get("ph") == "X" and "dur" in e and "ts" in e]


def _key(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@pytest.mark.parametrize("path", CORPUS, ids=_key)
def test_causes_sum_to_each_steps_wall_time(path):
    att = corpus.explanation(path).attribution
    cols = [f"{c.key}_us" for c in CAUSES]
    total = att.steps[cols].sum(axis=1)
    assert (att.steps[cols] >= -1e-9).all().all()
    assert ((total - att.steps["wall_us"]).abs() <= 0.005 * att.steps["wall_us"] + 1e-6).all()
    # The windows tile the steps: each starts where the last ended.
    assert (att.steps["start_us"].iloc[1:].to_numpy() == att.steps["end_us"].iloc[:-1].to_numpy()).all()


def _brute(events: list[dict], step_name: str | None) -> tuple[dict[str, float], float]:
    """Busy GPU time per window total and the total wall, by plain loops over the raw events: the
    steps (ProfilerStep#N, or the annotation the lab chose; none: the whole trace), each step's
    completion the later of the next step's start and the end of the GPU work its launches queued
    (launch call and GPU activity paired by correlation); the first step's start the later of its
    own and the end of the GPU work queued before it."""
    t0 = min(e["ts"] for e in events)
    steps = sorted((e for e in events if step_name is not None and e.get("cat") in ("cpu_op", "user_annotation")
                    and (str(e["name"]).startswith("ProfilerStep#") if step_name == "ProfilerStep"
                         else e["name"] == step_name)), key=lambda e: e["ts"])
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if steps:
        starts = [s["ts"] for s in steps]
        period_end = starts[1:] + [steps[-1]["ts"] + steps[-1]["dur"]]
        runtime = {e["args"].get("correlation"): e for e in events
                   if e.get("cat") in ("cuda_runtime", "cuda_driver") and isinstance(e.get("args"), dict)}
        done = list(period_end)
        for g in gpu:
            call = runtime.get((g.get("args") or {}).get("correlation"))
            if call is None:
                continue
            for i, (s, pe) in enumerate(zip(starts, period_end)):
                if s <= call["ts"] < pe:
                    done[i] = max(done[i], g["ts"] + g["dur"])
        for i in range(1, len(done)):
            done[i] = max(done[i], done[i - 1])
        # The first step begins once the GPU has run what earlier, unrecorded steps queued: the
        # GPU work whose launch is not in the trace (or before the step) that starts before the
        # first work this step launched.
        first = starts[0]
        call_ts = {id(g): (runtime.get((g.get("args") or {}).get("correlation")) or {}).get("ts") for g in gpu}
        own = [g["ts"] for g in gpu if call_ts[id(g)] is not None and starts[0] <= call_ts[id(g)] < period_end[0]]
        if own:
            carry = [g["ts"] + g["dur"] for g in gpu
                     if (call_ts[id(g)] is None or call_ts[id(g)] < starts[0]) and g["ts"] < min(own)]
            if carry:
                first = min(max(first, max(carry)), done[0])
        windows = list(zip([first] + done[:-1], done))
    else:
        windows = [(t0, max(e["ts"] + e["dur"] for e in events))]
    busy = 0.0
    for lo, hi in windows:
        spans = sorted((max(g["ts"], lo), min(g["ts"] + g["dur"], hi)) for g in gpu)
        cur_lo = cur_hi = None
        for a, b in spans:
            if b <= a:
                continue
            if cur_hi is None or a > cur_hi:
                if cur_hi is not None:
                    busy += cur_hi - cur_lo
                cur_lo, cur_hi = a, b
            else:
                cur_hi = max(cur_hi, b)
        if cur_hi is not None:
            busy += cur_hi - cur_lo
    return {"busy": busy}, sum(hi - lo for lo, hi in windows)


# Complete events counted as '"ph": "X"' in the bytes, without decoding them (at least ``_raw``'s
# count, so no trace over the limit slips in): decoding every corpus trace here cost collection
# 7.6 s on this box, for the same selection.
_COMPLETE = re.compile(rb'"ph"\s*:\s*"X"')
SMALL = [p for p in CORPUS if len(_COMPLETE.findall(gzip.decompress(p.read_bytes()))) <= BRUTE_MAX_EVENTS]


@pytest.mark.parametrize("path", SMALL, ids=_key)
def test_gpu_work_and_wall_time_equal_a_brute_force_over_the_raw_json(path):
    events = _raw(path)
    att = corpus.explanation(path).attribution
    step_name = {"ProfilerStep": "ProfilerStep", "window": None}.get(
        att.source, str(att.steps["name"].iloc[0]).rsplit(" #", 1)[0])
    want, wall = _brute(events, step_name)
    assert att.steps["wall_us"].sum() == pytest.approx(wall, rel=1e-6, abs=0.01)  # absolute µs stamps: ns rounding
    work = sum(att.steps[f"{c.key}_us"].sum() for c in CAUSES if c.side == "work")
    if any(str(e["name"]).startswith(("gloo:", "nccl:", "c10d:")) and e.get("cat") == "user_annotation"
           for e in events):  # a host waiting for a CPU-side collective (gloo) is communication, not GPU work
        work -= att.steps["communication_us"].sum() - _gpu_comm_us(events, att)
    if att.has_gpu:
        assert work == pytest.approx(want["busy"], rel=5e-3, abs=0.5)


def _gpu_comm_us(events: list[dict], att) -> float:
    """NCCL kernels' time inside the windows (GPU communication; gloo has none)."""
    lo, hi = float(att.steps["start_us"].iloc[0]), float(att.steps["end_us"].iloc[-1])
    t0 = min(e["ts"] for e in events)
    return sum(max(0.0, min(e["ts"] - t0 + e["dur"], hi) - max(e["ts"] - t0, lo)) for e in events
               if e.get("cat") == "kernel" and "nccl" in str(e["name"]).lower())


def _brute_host_label(events: list[dict], lane: tuple, t: float) -> str:
    """The host cause at instant t by the documented priority, by a loop over the thread's events."""
    order = ["profiler", "sync", "compile", "input", "optimizer", "launch", "dispatch", "python"]
    hits = set()
    for e in events:
        if (e["pid"], e["tid"]) != lane or not (e["ts"] <= t < e["ts"] + e["dur"]):
            continue
        name, cat = str(e["name"]), e.get("cat")
        if cat == "overhead":
            hits.add("profiler")
        if name in SYNC:
            hits.add("sync")
        if re.search(r"\(dynamo_timed\)$|^(?:dynamo|entire_frame_compile|backend_compile|inductor_compile)$", name):
            hits.add("compile")
        if name.startswith(("enumerate(DataLoader)#", "enumerate(DataPipe)#")):
            hits.add("input")
        if name.startswith(("Optimizer.step#", "Optimizer.zero_grad#")):
            hits.add("optimizer")
        if cat in ("cuda_runtime", "cuda_driver"):
            hits.add("launch")
        if cat == "cpu_op":
            hits.add("dispatch")
        if cat in ("user_annotation", "python_function"):
            hits.add("python")
    return next((k for k in order if k in hits), "unrecorded")


def test_a_hand_made_step_is_attributed_as_a_person_would():
    # One step of 1,000 µs: DataLoader 300 µs (GPU idle), an op that launches a 200 µs GEMM, a sync
    # that waits for it, then 100 µs of Python (the queue drained by the sync), then nothing recorded.
    ev = [
        annotation("ProfilerStep#0", 1000, 1000),
        annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1000, 300),
        op("aten::mm", 1300, 20),
        launch(1305, 10, 1),
        kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 1320, 200, 1),
        op("cudaDeviceSynchronize", 1330, 195, cat="cuda_runtime"),
        annotation("loss_bookkeeping", 1525, 100),
        annotation("ProfilerStep#1", 2000, 10),
    ]
    att = attribute(build(ev, device_properties=[]))
    row = att.steps.iloc[0]
    assert row["wall_us"] == 1000
    assert row["input_us"] == pytest.approx(300)
    assert row["gemm_us"] == pytest.approx(200)
    # Idle 1520-1525 inside the sync; then the step's Python the sync held back, for as long as it
    # waited (1525 + 195 µs): 200 µs. The rest of the step is Python (ProfilerStep covers it).
    assert row["sync_us"] == pytest.approx(5 + 195)
    assert row["dispatch_us"] == pytest.approx(10) and row["launch_us"] == pytest.approx(10)
    assert row["unrecorded_us"] == pytest.approx(0)
    # Brute force over the idle instants: the host label by the same priority, by plain loops; the
    # drained stretch (1525-1720) moves from Python to sync.
    lane = (100, 100)
    labels = [_brute_host_label(ev, lane, t + 0.5) for t in range(1000, 2000) if not 1320 <= t < 1520]
    drained = sum(1 for t in range(1525, 1720) if _brute_host_label(ev, lane, t + 0.5) == "python")
    assert row["python_us"] == pytest.approx(labels.count("python") - drained)
    assert row["input_us"] == pytest.approx(labels.count("input"))
    assert row["sync_us"] == pytest.approx(labels.count("sync") + drained)


def test_a_cpu_trace_counts_its_ops_work_by_class():
    att = attribute(build([
        annotation("step", 0, 100), op("aten::addmm", 10, 60), op("aten::relu", 70, 20),
        annotation("step", 100, 100), op("aten::addmm", 110, 60), op("aten::relu", 170, 20),
    ]))
    med = att.median_us()
    assert not att.has_gpu
    assert med["gemm"] == pytest.approx(60) and med["elementwise"] == pytest.approx(20)
    assert med["python"] == pytest.approx(20)


def test_a_trace_without_steps_is_one_window_that_says_what_it_cannot_know():
    trace = build([op("aten::mm", 0, 50), op("aten::add", 60, 10)],
                  device_properties=[{"id": 0, "name": "NVIDIA H200"}])
    att = attribute(trace)
    assert att.source == "window" and len(att.steps) == 1
    assert att.steps["wall_us"].iloc[0] == pytest.approx(70)
    assert any("no GPU activity" in u for u in att.unknown)
    assert any("no steps" in u for u in att.unknown) and any("record_shapes=True" in u for u in att.unknown)


def test_explain_survives_a_trace_with_no_events_of_interest():
    ex = explain(build([op("aten::empty", 0, 1)]))
    assert len(ex.attribution.steps) == 1 and ex.roofs.empty


def _nested(rng, lo: float, hi: float, depth: int, out: list) -> None:
    """Random properly nested intervals inside [lo, hi): (start, end, depth, parent index)."""
    parent = len(out) - 1 if depth else -1
    t = lo
    while t < hi - 2 and len(out) < 900:
        a = t + float(rng.integers(0, 3))
        b = min(hi, a + float(rng.integers(1, 40)))
        if b <= a:
            break
        out.append((a, b, depth, parent))
        if depth < 4 and b - a > 3 and rng.random() < 0.6:
            _nested(rng, a, b, depth + 1, out)
        t = b


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_segment_cover_and_innermost_equal_a_loop_over_the_events(seed):
    """The attribution's two searches (which segments a set of events covers, and the innermost
    event around each segment), on random nested events, against a loop over segment midpoints;
    a few rows and many (the two ways ``covered`` counts)."""
    import numpy as np

    from lab.explain.segments import Segments, innermost

    rng = np.random.default_rng(seed)
    ev: list = []
    _nested(rng, 0.0, 6000.0, 0, ev)
    ts = np.array([e[0] for e in ev])
    end = np.array([e[1] for e in ev])
    depth = [e[2] for e in ev]
    parent = np.array([e[3] for e in ev], dtype=np.int64)
    bounds = np.unique(np.concatenate([ts, end]))
    mid = (bounds[:-1] + bounds[1:]) / 2
    assert len(ev) > 600 and max(depth) >= 3  # more rows than the few-rows way takes, nested deep
    for size in (7, 300, len(ev)):  # under and over the few-rows threshold
        rows = np.sort(rng.choice(len(ev), size=min(size, len(ev)), replace=False))
        got = Segments(bounds, ts, end).covered(rows)
        want = [any(ts[r] <= m < end[r] for r in rows) for m in mid]
        assert got.tolist() == want
        inner = innermost(np.arange(len(mid)), rows, Segments(bounds, ts, end), parent)
        brute = []
        for m in mid:
            around = [r for r in rows if ts[r] <= m < end[r]]
            brute.append(max(around, key=lambda r: depth[r]) if around else -1)
        assert inner.tolist() == brute


def test_the_bars_label_a_step_by_the_number_the_verdict_names():
    """slow_step: the verdict names ProfilerStep#N; the bar of the slowest step (by the raw JSON's
    ProfilerStep durations) carries that N, not its position among the profiled steps."""
    from lab.judge import judge_trace
    from lab.measure import measure
    from lab.views.explained import attribution_chart, attribution_frame

    path = REPO / "tests/data/explain/slow_step.json.gz"
    steps = [e for e in _raw(path) if str(e.get("name", "")).startswith("ProfilerStep#")]
    slowest = max(steps, key=lambda e: e["dur"])["name"]
    trace = load_trace(path)
    m = measure(trace)
    ex = explain(m)
    assert slowest in judge_trace(trace, m.analysis, ex).verdict
    frame = attribution_frame(ex)
    tallest = frame.groupby("label")["us"].sum().idxmax()
    assert tallest == slowest.rpartition("#")[2]
    numbers = sorted({int(s["name"].rpartition("#")[2]) for s in steps})
    assert set(frame["label"]) == {str(n) for n in numbers}
    # the bars run in step order (not by a sum over each step's causes)
    assert attribution_chart(ex).to_dict()["encoding"]["x"]["sort"] == [str(n) for n in numbers]


def test_a_finding_that_saves_nothing_says_so():
    """slow_step's "GPU-bound at the roof" saves nothing (its work runs at the roof): the text says
    "nothing to recover", never "saves 0.0 µs"."""
    from lab.judge import judge_trace
    from lab.measure import measure
    from lab.views.explained import explanation_dict, explanation_text

    trace = load_trace(REPO / "tests/data/explain/slow_step.json.gz")
    m = measure(trace)
    ex = explain(m)
    judged = judge_trace(trace, m.analysis, ex)
    zero = [f for f in judged.findings if f.scope != "note" and f.saving_us <= 0]
    assert zero
    text = explanation_text(explanation_dict(ex, judged))
    assert all(f"{f.title}: nothing to recover" in text for f in zero)
    assert "saves 0.0" not in text


def test_a_step_a_synchronize_held_gets_the_synchronize_advice():
    """slow_step: its slowest step is blocked in a synchronize (raw JSON) for as long as the
    attribution's synchronisation holds most of that step's extra time, and the slow-step finding's
    advice speaks of that synchronize."""
    from lab.judge import judge_trace
    from lab.measure import measure

    path = REPO / "tests/data/explain/slow_step.json.gz"
    raw = _raw(path)
    steps = sorted((e for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")
                    and e.get("cat") in ("cpu_op", "user_annotation")), key=lambda e: e["dur"])
    slow = steps[-1]
    blocked = sum(e["dur"] for e in raw if e["name"] in SYNC and slow["ts"] <= e["ts"] < slow["ts"] + slow["dur"])
    trace = load_trace(path)
    m = measure(trace)
    outlier = next(o for o in explain(m).outliers if o.name == slow["name"])
    top, top_us = outlier.extra_by_cause[0]
    assert top == "sync" and top_us == pytest.approx(blocked, rel=0.05) and top_us >= 0.5 * outlier.extra_us
    finding = next(f for f in judge_trace(trace, m.analysis, explain(m)).findings if f.rule == "slow_step")
    assert slow["name"] in finding.title and "A synchronize held that step" in finding.suggestion

"""profile_memory: ``Trace.memory`` (the "[memory]" instants), the memory analysis and its
insights, the CLI's ``memory`` command.

Expectations come from ``json.loads`` of the raw files and brute-force loops here, never from
the code under test.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import corpus
import numpy as np
import pytest
import tracebuild as tb

from lab.trace import load_trace
from lab.trace.model import MEMORY_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
GROUNDTRUTH = ROOT / "tests" / "data" / "groundtruth"
MEMORY_TRACES = [GROUNDTRUTH / "cuda" / "seed_mem.json.gz", GROUNDTRUTH / "cuda" / "llama_train_mem.json.gz",
                 ROOT / "bench" / "data" / "transformer_step_h200.json.gz"]
DEVICE_TYPES = {0: "cpu", 1: "cuda"}


def _raw(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _ns(ts: float) -> int:
    return round(ts * 1000)


# --------------------------------------------------------------------------- Trace.memory


@pytest.mark.parametrize("path", MEMORY_TRACES, ids=lambda p: p.name)
def test_memory_frame_equals_the_raw_records(path):
    """Every "[memory]" instant, in time order, on the events' clock (ns-exact), every column."""
    raw = _raw(path)
    events = raw["traceEvents"]
    start_ns = min(_ns(e["ts"]) for e in events if e.get("ph") == "X")
    records = [e for e in events if e.get("ph") == "i" and e.get("name") == "[memory]"]
    records.sort(key=lambda e: _ns(e["ts"]))  # stable: file order within a tie
    tr = corpus.trace(path)
    m = tr.memory
    assert list(m.columns) == list(MEMORY_COLUMNS)
    assert len(m) == len(records) > 0 and tr.skipped_events == 0 and tr.has_memory
    assert (np.rint(m["ts_us"].to_numpy() * 1000).astype(np.int64) == [_ns(e["ts"]) - start_ns for e in records]).all()
    for column, key in (("bytes", "Bytes"), ("addr", "Addr"), ("total_allocated_bytes", "Total Allocated"),
                        ("total_reserved_bytes", "Total Reserved"), ("device_id", "Device Id")):
        assert m[column].tolist() == [e["args"][key] for e in records], column
    assert m["device_type"].astype(str).tolist() == [DEVICE_TYPES[e["args"]["Device Type"]] for e in records]
    # The allocating thread's lane: the lane of the events with the same (pid, tid).
    lanes = {(str(p), str(t)): int(o) for p, t, o in tr.events[["pid", "tid", "lane_order"]].drop_duplicates()
             .itertuples(index=False)}
    assert m["lane_order"].tolist() == [lanes.get((str(e["pid"]), str(e["tid"])), -1) for e in records]


def test_trace_without_profile_memory_has_an_empty_memory_frame():
    tr = corpus.trace(ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz")
    assert len(tr.memory) == 0 and not tr.has_memory
    assert list(tr.memory.columns) == list(MEMORY_COLUMNS)


def test_bad_memory_records_are_dropped_and_counted():
    good = tb.memory(1010.0, 4096, 4096)
    no_bytes = tb.memory(1020.0, 0, 4096)
    del no_bytes["args"]["Bytes"]
    text_bytes = tb.memory(1030.0, 0, 4096)
    text_bytes["args"]["Bytes"] = "4096"  # typed decoding refuses it: the Python checks drop it
    no_args = {k: v for k, v in tb.memory(1040.0, 1, 1).items() if k != "args"}
    other_instant = {"ph": "i", "cat": "", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": 100,
                     "tid": 100, "ts": 1000.0}
    host = tb.memory(1050.5, -512, 0, device_type=0, device_id=-1, total_reserved=0)
    tr = tb.build([tb.op("aten::empty", 1000.0, 100.0), good, no_bytes, text_bytes, no_args, other_instant, host])
    assert tr.skipped_events == 3
    assert tr.memory["ts_us"].tolist() == [10.0, 50.5]
    assert tr.memory["bytes"].tolist() == [4096, -512]
    assert tr.memory["device_type"].astype(str).tolist() == ["cuda", "cpu"]
    assert tr.memory["device_id"].tolist() == [0, -1]


def test_memory_records_survive_the_stdlib_route():
    """A NaN token sends the whole document through json.loads and the Python checks: the
    memory records come out the same."""
    doc = tb.document([tb.op("aten::empty", 1000.0, 100.0, weird=1), tb.memory(1010.0, 4096, 4096),
                       tb.memory(1005.0, 8, 4104, device_type=0)])
    text = json.dumps(doc).replace('"weird": 1', '"weird": NaN')
    assert "NaN" in text
    tr = load_trace(text.encode())
    assert tr.memory["ts_us"].tolist() == [5.0, 10.0]
    assert tr.memory["total_allocated_bytes"].tolist() == [4104, 4096]
    assert not math.isnan(tr.memory["addr"].iloc[0])


# --------------------------------------------------------------------------- analysis


def _records(raw: dict) -> list[dict]:
    recs = [e for e in raw["traceEvents"] if e.get("ph") == "i" and e.get("name") == "[memory]"]
    return sorted(recs, key=lambda e: _ns(e["ts"]))


def _device_of(e: dict) -> str:
    a = e["args"]
    return "cpu" if a["Device Type"] == 0 else f"{DEVICE_TYPES[a['Device Type']]}:{a['Device Id']}"


@pytest.fixture(scope="module", params=MEMORY_TRACES, ids=lambda p: p.name)
def real(request):
    from lab.analysis import analyze

    path = request.param
    trace = corpus.trace(path)
    return path, _raw(path), trace, analyze(trace)


def test_peak_is_the_largest_total_allocated_and_names_what_ran(real):
    """Per device: the peak equals max "Total Allocated" of its records (first reaching it), and
    the op is the innermost CPU event of the allocating thread holding that record's time."""
    path, raw, trace, analysis = real
    memory = analysis.memory
    records = _records(raw)
    start_ns = min(_ns(e["ts"]) for e in raw["traceEvents"] if e.get("ph") == "X")
    for dev in memory.devices:
        mine = [e for e in records if _device_of(e) == dev.device]
        best = max(e["args"]["Total Allocated"] for e in mine)
        first = next(e for e in mine if e["args"]["Total Allocated"] == best)
        assert dev.peak.allocated_bytes == best
        assert round(dev.peak.ts_us * 1000) == _ns(first["ts"]) - start_ns
        assert dev.peak.reserved_bytes == first["args"]["Total Reserved"]
        holding = [e for e in raw["traceEvents"] if e.get("ph") == "X" and e.get("cat") in
                   ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver") and (e["pid"], e["tid"]) ==
                   (first["pid"], first["tid"]) and _ns(e["ts"]) <= _ns(first["ts"]) <= _ns(e["ts"]) + _ns(e["dur"])]
        if holding:  # the innermost: the latest start, then the shortest
            inner = max(holding, key=lambda e: (_ns(e["ts"]), -_ns(e["dur"])))
            assert dev.peak.op == inner["name"]
        assert dev.records == len(mine)
        assert dev.allocations == sum(e["args"]["Bytes"] > 0 for e in mine)
    assert memory.main.device == ("cuda:0" if "cuda" in {_device_of(e).split(":")[0] for e in records} else "cpu")


def test_per_step_figures_equal_brute_force(real):
    path, raw, trace, analysis = real
    from lab.analysis.diagnoses.steps import step_spans

    spans = step_spans(trace)
    steps = analysis.memory.steps
    if not len(spans):
        assert steps.empty
        return
    start_ns = min(_ns(e["ts"]) for e in raw["traceEvents"] if e.get("ph") == "X")
    records = _records(raw)
    for dev in analysis.memory.devices:
        mine = [e for e in records if _device_of(e) == dev.device]
        rows = steps[steps["device"] == dev.device].reset_index(drop=True)
        assert len(rows) == len(spans)
        for k, (a, b) in enumerate(zip(spans.start_us, spans.period_end_us, strict=True)):
            a_ns, b_ns = round(a * 1000), round(b * 1000)
            inside = [e for e in mine if a_ns <= _ns(e["ts"]) - start_ns < b_ns]
            before = [e for e in mine if _ns(e["ts"]) - start_ns < a_ns]
            level_in = (before[-1]["args"]["Total Allocated"] if before
                        else mine[0]["args"]["Total Allocated"] - mine[0]["args"]["Bytes"])
            upto = [e for e in mine if _ns(e["ts"]) - start_ns < b_ns]
            level_out = upto[-1]["args"]["Total Allocated"] if upto else level_in
            assert rows["allocations"][k] == sum(e["args"]["Bytes"] > 0 for e in inside)
            assert rows["frees"][k] == sum(e["args"]["Bytes"] < 0 for e in inside)
            assert rows["peak_allocated_bytes"][k] == max([level_in] + [e["args"]["Total Allocated"] for e in inside])
            assert rows["end_allocated_bytes"][k] == level_out


@pytest.mark.parametrize("max_points", [8, 50, 600, 4000])
def test_series_is_bounded_and_keeps_every_peak(real, max_points):
    from lab.analysis.memory.analyze import memory_series

    path, raw, trace, analysis = real
    series = memory_series(trace, max_points=max_points)
    assert len(series.points) <= max_points
    for dev in analysis.memory.devices:
        got = series.points[(series.points["device"] == dev.device) & (series.points["kind"] == "allocated")]
        assert got["bytes"].max() == dev.peak.allocated_bytes
        assert (np.diff(got["ts_us"].to_numpy()) >= 0).all()


def test_series_is_exact_when_it_fits(real):
    """Under the budget the step function through the points gives every record's "Total
    Allocated" at that record's time (the last point at or before it)."""
    from lab.analysis.memory.analyze import memory_series

    path, raw, trace, analysis = real
    series = memory_series(trace, max_points=100_000)
    assert not series.reduced
    m = trace.memory
    for dev in analysis.memory.devices:
        pts = series.points[(series.points["device"] == dev.device) & (series.points["kind"] == "allocated")]
        t, v = pts["ts_us"].to_numpy(), pts["bytes"].to_numpy()
        from lab.analysis.memory.analyze import device_names

        rows = np.flatnonzero(device_names(m) == dev.device)
        ts = m["ts_us"].to_numpy()[rows]
        last = np.r_[ts[1:] != ts[:-1], True]  # several records at one time: the level after the last
        at = np.searchsorted(t, ts[last], side="right") - 1
        assert (v[at] == m["total_allocated_bytes"].to_numpy()[rows][last]).all()


def test_series_window_carries_the_level_in():
    from lab.analysis.memory.analyze import memory_series

    trace = corpus.trace(MEMORY_TRACES[-1])
    m = trace.memory
    cuda = m[m["device_type"].astype(str) == "cuda"]
    w0, w1 = 12_000.0, 13_000.0
    series = memory_series(trace, start_us=w0, end_us=w1)
    pts = series.points[(series.points["device"] == "cuda:0") & (series.points["kind"] == "allocated")]
    assert pts["ts_us"].iloc[0] == w0 and pts["ts_us"].iloc[-1] == w1
    assert pts["bytes"].iloc[0] == cuda.loc[cuda["ts_us"] <= w0, "total_allocated_bytes"].iloc[-1]
    assert series.records == int(((m["ts_us"] >= w0) & (m["ts_us"] <= w1)).sum())


# --------------------------------------------------------------------------- insights


def _stepped(per_step: list[list[int]], *, device_type: int = 1, reserved_extra: int = 2 << 20,
             start_level: int = 0) -> dict:
    """A document of len(per_step) ProfilerStep#N spans (1,000 µs each), each with one op holding
    its records: per_step[k] lists the bytes of step k's records, in order."""
    events, level, t = [], start_level, 1000.0
    for k, records in enumerate(per_step):
        events.append(tb.annotation(f"ProfilerStep#{k + 1}", t, 1000.0))
        events.append(tb.op("aten::work", t + 10, 900.0))
        for i, nbytes in enumerate(records):
            level += nbytes
            events.append(tb.memory(t + 20 + i * 800.0 / max(len(records), 1), nbytes, level, device_type=device_type,
                                    device_id=0 if device_type else -1, total_reserved=level + reserved_extra))
        t += 1000.0
    return tb.document(events)


def _findings(trace) -> dict:
    """The judge's findings of an analysed trace, by title."""
    from lab.analysis import analyze
    from lab.judge import judge_trace

    return {f.title: f for f in judge_trace(trace, analyze(trace)).findings}


def _insights(doc: dict) -> dict:
    return _findings(load_trace(json.dumps(doc).encode()))


LEAK = "Memory grows step after step: a leak candidate"
FRAG = "Reserved memory far above allocated: fragmentation"
CHURN = "Allocator churn: many small allocations per step"
PEAK = "Memory peak and what was running"


def test_memory_growth_fires_when_every_step_keeps_some():
    kept = 4096
    found = _insights(_stepped([[1 << 20, kept, -(1 << 20)]] * 4))
    assert LEAK in found and found[LEAK].scope == "note" and found[LEAK].saving_us == 0  # memory, not time
    assert "4.00 KiB to 16.00 KiB" in found[LEAK].evidence and "+4.00 KiB per step" in found[LEAK].evidence


def test_memory_growth_silent_in_a_steady_loop_and_after_a_first_step_rise():
    steady = [[1 << 20, -(1 << 20)]] * 4
    first_only = [[1 << 20, 8192, -(1 << 20)]] + steady[1:]  # optimizer state made once
    two_steps = [[1 << 20, 4096, -(1 << 20)]] * 2  # one rise is not a trend
    for doc in (_stepped(steady), _stepped(first_only), _stepped(two_steps)):
        assert LEAK not in _insights(doc)


def test_fragmentation_fires_when_reserved_is_far_above_the_peak():
    gib = 1 << 30
    found = _insights(_stepped([[gib, -gib]] * 2, reserved_extra=gib))  # 2 GiB reserved, 1 GiB peak
    assert FRAG in found and "expandable_segments:True" in found[FRAG].suggestion
    assert "2.00×" in found[FRAG].evidence
    assert FRAG not in _insights(_stepped([[gib, -gib]] * 2, reserved_extra=gib // 4))  # 1.25×
    assert FRAG not in _insights(_stepped([[1 << 20, -(1 << 20)]] * 2, reserved_extra=60 << 20))  # small gap
    assert FRAG not in _insights(_stepped([[gib, -gib]] * 2, device_type=0, reserved_extra=gib))  # the CPU


def test_allocator_churn_fires_on_thousands_of_small_allocations_per_step():
    from lab.judge.memory_rules import CHURN_MIN_SMALL_PER_STEP

    many = [[512, -512] * CHURN_MIN_SMALL_PER_STEP] * 3
    found = _insights(_stepped(many))
    assert CHURN in found and f"{CHURN_MIN_SMALL_PER_STEP:,} allocations" in found[CHURN].evidence
    few = [[512, -512] * (CHURN_MIN_SMALL_PER_STEP - 1) + [4 << 20, -(4 << 20)]] * 3
    assert CHURN not in _insights(_stepped(few))


def test_peak_owner_names_the_op_label_and_step():
    doc = _stepped([[1 << 20, -(1 << 20)], [1 << 20, 3 << 20, -(4 << 20)], [1 << 20, -(1 << 20)]])
    found = _insights(doc)
    assert "peaked at 4.00 MiB" in found[PEAK].evidence
    assert "inside aten::work" in found[PEAK].evidence and "during step 2" in found[PEAK].evidence


def test_memory_rules_stay_silent_without_memory_and_on_the_corpus_steady_loops(real):
    """The seed's matmul samples have no [memory] records: no memory insight. The corpus's
    profile_memory traces are steady training/inference loops: only the peak's owner."""
    from lab.judge import judge_trace

    for name in ("matmul_add_1024_fp32", "matmul_add_4096_bf16"):
        trace = corpus.trace(ROOT / "tests" / "data" / f"{name}.json.gz")
        assert not {LEAK, FRAG, CHURN, PEAK} & set(_findings(trace))
    path, raw, trace, analysis = real
    titles = {f.title for f in judge_trace(trace, analysis).findings}
    assert PEAK in titles and not {LEAK, FRAG, CHURN, OOM} & titles
    assert not len(trace.out_of_memory) and not any(e.get("name") == "[OutOfMemory]" for e in raw["traceEvents"])


# --------------------------------------------------------------------------- [OutOfMemory]

# Recorded on the H200 (torch 2.11): profile_memory, three small steps, then a caught 400 GiB
# torch.empty inside record_function("too_big") — Kineto writes one "[OutOfMemory]" instant.
OOM_TRACE = GROUNDTRUTH / "cuda" / "cuda_oom.json.gz"
OOM = "Out of memory: an allocation was refused"


def test_out_of_memory_records_equal_the_raw_json_and_the_insight_names_what_ran():
    raw = _raw(OOM_TRACE)
    events = raw["traceEvents"]
    start_ns = min(_ns(e["ts"]) for e in events if e.get("ph") == "X")
    (rec,) = [e for e in events if e.get("ph") == "i" and e.get("name") == "[OutOfMemory]"]
    trace = corpus.trace(OOM_TRACE)
    (row,) = trace.out_of_memory.itertuples(index=False)
    assert round(row.ts_us * 1000) == _ns(rec["ts"]) - start_ns
    assert (row.bytes, row.total_allocated_bytes, row.total_reserved_bytes, row.device_id, str(row.device_type)) == (
        rec["args"]["Bytes"], rec["args"]["Total Allocated"], rec["args"]["Total Reserved"], rec["args"]["Device Id"],
        DEVICE_TYPES[rec["args"]["Device Type"]])
    assert len(trace.memory) == sum(e.get("name") == "[memory]" for e in events)  # kept apart from [memory]
    # What ran: the innermost user_annotation holding the record's time (brute force).
    holding = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
               and _ns(e["ts"]) <= _ns(rec["ts"]) <= _ns(e["ts"]) + _ns(e["dur"])]
    label = max(holding, key=lambda e: (_ns(e["ts"]), -_ns(e["dur"])))["name"]
    insight = _findings(trace)[OOM]
    # The run stopped there: the whole window is what a fix gives back, and it leads the judgement.
    assert insight.severity == "critical" and insight.scope == "once" and insight.saving_us == insight.base_us
    gib = rec["args"]["Bytes"] / 2**30
    assert f"{gib:.2f} GiB was refused" in insight.evidence and f"record_function '{label}'" in insight.evidence


def test_a_real_cpu_leak_is_found(tmp_path):
    """A CPU loop that keeps one new tensor per step, profiled with profile_memory by torch."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from lab.analysis import analyze

    kept, w = [], torch.randn(256, 256)

    def step():
        y = (w @ w).relu()
        kept.append(y.sum(0).clone())  # 1 KiB kept per step

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                 schedule=schedule(wait=1, warmup=1, active=4)) as prof:
        for _ in range(6):
            step()
            prof.step()
    path = tmp_path / "leak.json"
    prof.export_chrome_trace(str(path))
    trace = corpus.trace(path)
    found = _findings(trace)
    assert LEAK in found and "cpu" in found[LEAK].evidence
    averages = {e.key: e for e in prof.key_averages()}
    ours = analyze(trace).key_averages.set_index("name")
    for name in ("aten::mm", "aten::clone"):  # and the memory columns are torch's
        assert ours.loc[name, "cpu_memory_bytes"] == averages[name].cpu_memory_usage


# --------------------------------------------------------------------------- view and CLI


def test_memory_view_shares_the_timeline_axis_and_stays_in_budget():
    from lab import views as lv

    trace = corpus.trace(MEMORY_TRACES[-1])
    for window in ((None, None), (12_000.0, 40_000.0)):
        view = lv.build_memory_view(trace, start_us=window[0], end_us=window[1], max_points=500)
        timeline = lv.build_timeline(trace, start_us=window[0], end_us=window[1])
        assert view.window == timeline.window
        assert len(view.series.points) <= 500
        spec = lv.memory_chart(view).to_dict()
        domains = [layer["encoding"]["x"]["scale"]["domain"] for layer in spec["layer"]]
        assert domains and all(d == list(view.window) for d in domains)
    whole = lv.build_memory_view(trace)
    assert whole.peaks["bytes"].max() == trace.memory["total_allocated_bytes"].max()
    assert lv.build_memory_view(corpus.trace(ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz")) is None


def _lab(*args: str):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFILER_LAB_")} | {"KINETO_LOG_LEVEL": "6"}
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.subprocess
def test_cli_memory_prints_peaks_steps_and_insights_and_csv():
    import csv

    from lab.views.memory import MEMORY_CSV_COLUMNS

    path = MEMORY_TRACES[-1]
    records = _records(_raw(path))
    proc = _lab("memory", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "cuda:0: 8,440 records" in proc.stdout and "peak allocated 3.07 GiB" in proc.stdout
    assert "[note] Memory peak and what was running" in proc.stdout
    proc = _lab("memory", str(path), "--csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(proc.stdout.splitlines()))
    assert tuple(rows[0]) == MEMORY_CSV_COLUMNS
    whole = {r["device"]: r for r in rows if r["step"] == "-1"}
    for device, row in whole.items():
        mine = [e for e in records if _device_of(e) == device]
        assert int(row["peak_allocated_bytes"]) == max(e["args"]["Total Allocated"] for e in mine)
        assert int(row["allocations"]) == sum(e["args"]["Bytes"] > 0 for e in mine)
        assert int(row["allocated_bytes"]) == sum(e["args"]["Bytes"] for e in mine if e["args"]["Bytes"] > 0)
    assert sum(r["step"] != "-1" for r in rows) == 4 * len(whole)  # four ProfilerSteps per device


@pytest.mark.subprocess
def test_cli_memory_refuses_a_trace_without_memory_in_one_line():
    proc = _lab("memory", str(ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "profile_memory=True" in proc.stderr


def test_report_json_carries_each_devices_peak():
    from lab.views.report import build_report

    trace = corpus.trace(MEMORY_TRACES[0])
    (cuda,) = build_report(trace)["memory"]
    assert cuda["device"] == "cuda:0"
    assert cuda["peak_allocated_bytes"] == max(e["args"]["Total Allocated"] for e in _records(_raw(MEMORY_TRACES[0])))
    assert build_report(corpus.trace(ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz"))["memory"] is None


def test_the_labs_own_profile_memory_run_gets_torchs_memory_columns_from_its_trace(small_cpu_result):
    """The worker's run records profile_memory and keeps torch's key_averages: the table rebuilt
    from its exported trace has the same memory columns, row for row."""
    from lab.analysis import trace_key_averages

    torch_rows = small_cpu_result.key_averages
    ours = trace_key_averages(load_trace(small_cpu_result.trace_gz))
    columns = ["self_cpu_memory_bytes", "cpu_memory_bytes", "self_device_memory_bytes", "device_memory_bytes"]
    want = {(r.name, r.device_type): r for r in torch_rows.itertuples(index=False)}
    assert (torch_rows["cpu_memory_bytes"] != 0).any()
    for row in ours.itertuples(index=False):
        w = want[(row.name, row.device_type)]
        assert [getattr(row, c) for c in columns] == [getattr(w, c) for c in columns], row.name

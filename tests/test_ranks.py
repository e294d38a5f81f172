"""Ranks of one torch.distributed job, on the committed 2-rank gloo traces (tests/data/groundtruth).

``cpu/``: torchrun --nproc-per-node 2, DDP over gloo on CPU. ``cuda/``: 2 processes with gloo
sharing one H200. Every expectation is computed here from the raw JSON with plain Python loops
(no lab helper): the collective events, their union, the compute events, the intersections.
"""

from __future__ import annotations

import copy
import gzip
import json
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lab.analysis import RanksError, analyze, analyze_ranks
from lab.analysis.ranks.job import rank_from_name
from lab.judge import judge_ranks
from lab.trace import load_trace
from lab.views import build_ranks_timeline, rank_table
from lab.views.ranks_tables import table_headers
from tests import tracebuild as tb

ROOT = Path(__file__).resolve().parents[1]
GT = ROOT / "tests" / "data" / "groundtruth"
KINDS = ("cpu", "cuda")
COMM_PREFIXES = ("c10d::", "gloo:", "nccl:", "record_param_comms", "ProcessGroupNCCL", "ProcessGroupGloo")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")


def paths(kind: str) -> list[Path]:
    return [GT / kind / f"gloo_ddp_rank{r}.json.gz" for r in (0, 1)]


def raw(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


@pytest.fixture(scope="module")
def job():
    """Per kind: the raw JSON, the Traces, and analyze_ranks' answer (with each trace's Analysis)."""
    out = {}
    for kind in KINDS:
        docs = [raw(p) for p in paths(kind)]
        traces = [load_trace(p) for p in paths(kind)]
        ranks = analyze_ranks(traces, [p.name for p in paths(kind)], analyses=[analyze(t) for t in traces])
        out[kind] = (docs, traces, ranks)
    return out


# ---------------------------------------------------------------- brute force on the raw JSON


def complete(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def union(intervals) -> list[list[float]]:
    merged: list[list[float]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def length(intervals, lo: float, hi: float) -> float:
    return sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in intervals)


def intersect(a, b) -> list[tuple[float, float]]:
    return [(max(s1, s2), min(e1, e2)) for s1, e1 in a for s2, e2 in b if min(e1, e2) > max(s1, s2)]


def minus(a, b) -> list[tuple[float, float]]:
    """A \\ B, interval by interval."""
    out = []
    for s, e in a:
        pieces = [(s, e)]
        for bs, be in b:
            pieces = [p for ps, pe in pieces for p in ((ps, min(pe, bs)), (max(ps, be), pe)) if p[1] > p[0]]
        out += pieces
    return out


def span(e: dict) -> tuple[float, float]:
    return (e["ts"], e["ts"] + e["dur"])


def window(doc: dict) -> tuple[float, float]:
    steps = sorted((e for e in complete(doc) if e["name"].startswith("ProfilerStep#")
                    and e["cat"] == "user_annotation"), key=lambda e: e["ts"])
    return steps[0]["ts"], steps[-1]["ts"] + steps[-1]["dur"]


def collectives(doc: dict) -> list[dict]:
    return [e for e in complete(doc) if e.get("cat") not in GPU_CATS and e["name"].startswith(COMM_PREFIXES)]


def cpu_compute(doc: dict, started=lambda e: True) -> list[list[float]]:
    """cpu_ops outside any collective, each thread's collectives cut out of them (``started``:
    only the ops it accepts)."""
    comm = collectives(doc)
    pieces = []
    for e in complete(doc):
        if e.get("cat") != "cpu_op" or e["name"].startswith(COMM_PREFIXES) or not started(e):
            continue
        same = [c for c in comm if (c["pid"], c["tid"]) == (e["pid"], e["tid"])]
        if any(c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"] for c in same):
            continue
        pieces += minus([span(e)], union(span(c) for c in same))
    return union(pieces)


def gpu_compute(doc: dict) -> list[list[float]]:
    return union(span(e) for e in complete(doc)
                 if e.get("cat") == "kernel" and not e["name"].lower().startswith("nccl"))


# ---------------------------------------------------------------- communication, compute, overlap


@pytest.mark.parametrize("kind", KINDS)
def test_comm_time_is_the_union_of_each_ranks_collective_events(job, kind):
    docs, _, ranks = job[kind]
    for doc, row in zip(docs, ranks.ranks, strict=True):
        assert row.rank == doc["distributedInfo"]["rank"]
        comm = union(span(e) for e in collectives(doc))
        assert len(comm) >= 2  # gloo's ranges on its threads and the c10d calls: real collectives, not zero
        assert row.comm_source == "host collective ops"  # gloo: no NCCL kernel in either trace
        assert row.comm_in_window_us == pytest.approx(length(comm, *window(doc)), rel=1e-9, abs=0.01)


@pytest.mark.parametrize("kind", KINDS)
def test_compute_and_overlap_are_brute_force_interval_intersections(job, kind):
    docs, _, ranks = job[kind]
    for doc, row in zip(docs, ranks.ranks, strict=True):
        comm = union(span(e) for e in collectives(doc))
        compute = gpu_compute(doc) if kind == "cuda" else cpu_compute(doc)
        w = window(doc)
        assert row.compute_in_window_us == pytest.approx(length(compute, *w), rel=1e-9, abs=0.01)
        overlap = length(intersect(comm, compute), *w)
        assert overlap > 0
        assert row.overlap_us == pytest.approx(overlap, rel=1e-9, abs=0.01)
        assert row.overlap_pct == pytest.approx(100 * overlap / row.comm_in_window_us, abs=1e-3)


def test_gpu_rank_busy_idle_and_launch_delay_from_the_raw_events(job):
    docs, _, ranks = job["cuda"]
    for doc, row in zip(docs, ranks.ranks, strict=True):
        w = window(doc)
        busy = union(span(e) for e in complete(doc) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
        assert row.gpu_busy_us == pytest.approx(length(busy, *w), rel=1e-9, abs=0.01)
        assert row.idle_us == pytest.approx((w[1] - w[0]) - length(busy, *w), rel=1e-9, abs=0.01)
        assert row.window_us == pytest.approx(w[1] - w[0], abs=1e-3)
        starts = {e["id"]: e["ts"] for e in doc["traceEvents"] if e.get("ph") == "s" and e.get("cat") == "ac2g"}
        ends = [e["ts"] - starts[e["id"]] for e in doc["traceEvents"]
                if e.get("ph") == "f" and e.get("cat") == "ac2g" and e["id"] in starts]
        assert row.launch_delay_us == pytest.approx(statistics.median(ends), abs=0.01)


def test_nccl_kernels_are_the_communication_when_a_rank_has_them():
    """HTA's overlap: the NCCL kernel's time under a compute kernel on the same GPU."""
    events = [tb.annotation("ProfilerStep#1", 0, 1000), tb.launch(10, 5, 1), tb.launch(20, 5, 2),
              tb.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100, 400, 1),
              tb.kernel("sm90_gemm", 300, 500, 2)]
    doc = tb.document(events)
    traces = []
    for r in (0, 1):
        d = copy.deepcopy(doc)
        d["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": 2}
        traces.append(load_trace(json.dumps(d).encode()))
    ranks = analyze_ranks(traces, ["a.json", "b.json"])
    row = ranks.ranks[0]
    assert (row.comm_source, row.comm_us, row.compute_us, row.overlap_us) == ("NCCL kernels", 400.0, 500.0, 200.0)
    assert row.overlap_pct == 50.0


# ---------------------------------------------------------------- ranks, jobs, refusals


@pytest.mark.parametrize(("name", "rank"), [
    ("rank0.json", 0), ("trace_rank_1.pt.trace.json.gz", 1), ("job-rank-2-host.json", 2), ("RANK13.json", 13),
    ("worker3.json", None), ("frank2.json", None), ("rank.json", None), ("dir_rank9/rank_4.json", 4),
    ("rank3/trace.json", 3),
])
def test_rank_from_file_name(name, rank):
    assert rank_from_name(name) == rank


def _variant(path: Path, **info) -> bytes:
    doc = raw(path)
    if info.pop("drop", False):
        doc.pop("distributedInfo")
    doc.get("distributedInfo", {}).update(info)
    return json.dumps(doc).encode()


def test_rank_and_world_from_distributed_info_else_from_the_name():
    p0, p1 = paths("cpu")
    traces = [load_trace(_variant(p0, drop=True)), load_trace(_variant(p1, drop=True))]
    ranks = analyze_ranks(traces[::-1], ["b_rank_1.json", "a-rank-0.json"])
    assert ranks.rank_ids == (0, 1)  # sorted by rank, whatever the order given
    assert [i.source for i in ranks.infos] == ["file name", "file name"]
    assert ranks.world_size == 2 and ranks.backend == ""
    real = analyze_ranks([load_trace(p1), load_trace(p0)], ["x.json", "y.json"])  # names say nothing
    assert real.rank_ids == (0, 1) and [i.source for i in real.infos] == ["distributedInfo"] * 2
    assert (real.world_size, real.backend) == (2, "gloo")
    with pytest.raises(RanksError, match="names no rank.*rank<N>"):
        analyze_ranks(traces, ["a.json", "b_rank_1.json"])


@pytest.mark.parametrize(("change", "message"), [
    ({"world_size": 4}, "world sizes differ.*Open the traces of one run together"),
    ({"backend": "nccl"}, "backends differ"),
    ({"rank": 0}, "rank 0 appears 2 times.*one trace per rank"),
    ({"rank": 2}, "outside the job's world size of 2"),
])
def test_traces_of_different_jobs_are_refused_with_the_fix(change, message):
    p0, p1 = paths("cpu")
    with pytest.raises(RanksError, match=message):
        analyze_ranks([load_trace(p0), load_trace(_variant(p1, **change))], [p0.name, p1.name])


def test_missing_ranks_are_a_warning_and_one_trace_is_refused():
    p0, p1 = paths("cpu")
    ranks = analyze_ranks([load_trace(_variant(p0, world_size=4)), load_trace(_variant(p1, world_size=4))],
                          [p0.name, p1.name])
    assert ranks.world_size == 4
    assert any("ranks 2, 3 of the job's 4 are missing" in w for w in ranks.warnings)
    with pytest.raises(RanksError, match="at least two traces"):
        analyze_ranks([load_trace(p0)], [p0.name])


# ---------------------------------------------------------------- straggler and insights


def _job_clock(doc: dict, docs: list[dict], ts: float) -> float:
    """``ts`` of ``doc`` in µs after rank 0's baseTimeNanoseconds + first event (differences first:
    base + ts is ~1.8e15 µs, where a float keeps 0.25 µs)."""
    first = docs[0]
    return ((doc["baseTimeNanoseconds"] - first["baseTimeNanoseconds"]) / 1000
            + (ts - min(e["ts"] for e in complete(first))))


def _abs_call_starts(doc: dict, docs: list[dict]) -> list[float]:
    return sorted(_job_clock(doc, docs, e["ts"]) for e in complete(doc) if e["name"].startswith("c10d::"))


@pytest.mark.parametrize("kind", KINDS)
def test_straggler_is_the_rank_whose_calls_start_last_by_the_median_lateness(job, kind):
    docs, _, ranks = job[kind]
    starts = [_abs_call_starts(d, docs) for d in docs]
    n = min(map(len, starts))
    late = [statistics.median(s[i] - min(x[i] for x in starts) for i in range(n)) for s in starts]
    s = ranks.straggler
    assert s is not None and s.matched_calls == n
    assert s.rank == late.index(max(late))
    assert s.late_median_us == pytest.approx(max(late), abs=1e-3)
    firsts = [_job_clock(d, docs, min(e["ts"] for e in complete(d))) for d in docs]
    offsets = [f - min(firsts) for f in firsts]
    assert ranks.offsets_us == pytest.approx(offsets, abs=1e-3)


LOW_OVERLAP, STRAGGLER, SCHEDULING, IMBALANCE = "low_overlap", "straggler", "rank_scheduling", "compute_imbalance"


def _in_steps(doc: dict, ts: float) -> bool:
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in complete(doc) if e["name"].startswith("ProfilerStep#"))
    return steps[0][0] <= ts < steps[-1][1]


def test_rank_findings_fire_on_the_cpu_job_and_stay_quiet_where_it_is_even(job):
    cpu = {f.rule: f for f in judge_ranks(job["cpu"][2])}
    cuda = {f.rule: f for f in judge_ranks(job["cuda"][2])}
    # CPU: rank 1 is 118 ms late in 360 ms steps, computes 34 % more, rank 0's comm is 21 % overlapped;
    # but both ranks ran the same ops on the same shapes (from the JSON): not an imbalance of work.
    docs = job["cpu"][0]
    works = [Counter((e["name"], json.dumps(e["args"].get("Input Dims"))) for e in complete(d)
                     if e["cat"] == "cpu_op" and _in_steps(d, e["ts"])) for d in docs]
    assert works[0] == works[1]
    assert set(cpu) == {LOW_OVERLAP, STRAGGLER, SCHEDULING}
    assert IMBALANCE not in cpu and "the same work" in cpu[STRAGGLER].evidence
    assert "cores of its own" in cpu[STRAGGLER].suggestion  # a host-scheduling straggler: give it cores
    assert "Rank 1 starts its collectives last" in cpu[STRAGGLER].evidence
    assert "bucket_cap_mb" in cpu[LOW_OVERLAP].suggestion and "no_sync" in cpu[LOW_OVERLAP].suggestion
    # The H200 pair: 0.4 ms apart in 48.5 ms steps, compute within 0.2 %; gloo hides 1 % of its comm.
    assert set(cuda) == {LOW_OVERLAP}


# ---------------------------------------------------------------- stacked timeline, table, CLI


@pytest.mark.parametrize("max_marks", [5_000, 300, 40])
def test_stacked_timeline_keeps_the_single_timelines_budget_in_total(job, max_marks):
    _, traces, ranks = job["cuda"]
    data = build_ranks_timeline(traces, ranks, max_marks=max_marks)
    assert data.mark_count <= max_marks
    assert {lane.split(" · ")[0] for lane in data.marks["lane"]} == {"rank 0", "rank 1"}
    assert data.shown_events + data.merged_events + data.hidden_events + data.left_out_events == data.total_events
    assert data.total_events == sum(len(t.events) for t in traces)
    # Each rank's lanes sit below the ranks above: every mark on a row of its own lane's band.
    bands = {lane: (first, first + rows) for lane, first, rows in data.lane_rows}
    assert [lane for lane, _, _ in data.lane_rows] == list(data.lanes)
    assert all(bands[lane][0] <= row < bands[lane][1] for lane, row in zip(data.marks["lane"], data.marks["row"]))


def test_stacked_timeline_puts_each_rank_on_the_jobs_clock(job):
    docs, traces, ranks = job["cpu"]
    data = build_ranks_timeline(traces, ranks)
    for rank, doc in enumerate(docs):
        marks = data.marks[data.marks["lane"].str.startswith(f"rank {rank} · ")]
        t0 = min(e["ts"] for e in complete(doc))
        first_step = min(e["ts"] for e in complete(doc) if e["name"] == "ProfilerStep#2")  # CPU only here
        step_mark = marks[marks["name"] == "ProfilerStep#2"]["start_us"].iloc[0]
        assert step_mark == pytest.approx(ranks.offsets_us[rank] + first_step - t0, abs=1e-3)
    late = max(range(2), key=ranks.offsets_us.__getitem__)  # the rank whose trace starts later (rank 1)
    early = build_ranks_timeline(traces, ranks, start_us=0.0, end_us=0.9 * ranks.offsets_us[late])
    assert {lane.split(" · ")[0] for lane in early.marks["lane"]} == {f"rank {1 - late}"}


@pytest.mark.subprocess
def test_rank_table_and_cli(job, tmp_path):
    table = rank_table(job["cpu"][2])
    h = table_headers(True)
    assert list(table[h["rank"]]) == [0, 1] and table[h["comm"]].gt(0).all()
    assert h["gpu_busy"] not in table and rank_table(job["cuda"][2])[h["gpu_busy"]].gt(0).all()
    out = subprocess.run([sys.executable, "-m", "lab", "ranks", "--json", *map(str, paths("cpu"))],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [r["rank"] for r in data["ranks"]] == [0, 1] and data["straggler"]["rank"] == 1
    assert data["ranks"][1]["comm_us"] == pytest.approx(job["cpu"][2].ranks[1].comm_us)
    bad = subprocess.run([sys.executable, "-m", "lab", "ranks", str(paths("cpu")[0]), str(paths("cuda")[0])],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert bad.returncode == 2 and "rank 0 appears 2 times" in bad.stderr and "Traceback" not in bad.stderr


# --------------------------------------------------------------------------- by launch


def step_periods(doc: dict) -> list[tuple[float, float, bool]]:
    """(start, end, end inclusive) per ProfilerStep: its start to the next step's start; the last to its end."""
    steps = sorted((e for e in complete(doc) if e["name"].startswith("ProfilerStep#")
                    and e["cat"] == "user_annotation"), key=lambda e: e["ts"])
    return [(e["ts"], nxt["ts"], False) for e, nxt in zip(steps, steps[1:])] + [
        (steps[-1]["ts"], steps[-1]["ts"] + steps[-1]["dur"], True)]


def in_steps(doc: dict, t: float) -> bool:
    return any(s <= t < e or (last and t == e) for s, e, last in step_periods(doc))


def launch_ts(doc: dict) -> dict:
    """correlation → the launch call's start (the cuda_runtime / cuda_driver event with that correlation)."""
    return {e["args"]["correlation"]: e["ts"] for e in complete(doc)
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}


def launched_kernels(doc: dict, nccl: bool) -> list[dict]:
    at = launch_ts(doc)
    return [e for e in complete(doc) if e.get("cat") == "kernel" and e["name"].lower().startswith("nccl") == nccl
            and in_steps(doc, at.get(e["args"]["correlation"], e["ts"]))]


def total(intervals) -> float:
    return sum(e - s for s, e in intervals)


@pytest.mark.parametrize("kind", KINDS)
def test_gloo_comm_and_compute_are_the_work_launched_in_the_steps(job, kind):
    """gloo: communication = the union of the host collective ranges that start in a step, not
    clipped to the window (gloo's ranges end on its own threads after the step); compute = the
    kernels launched in a step (cuda) or the ops started in one (cpu)."""
    docs, _, ranks = job[kind]
    for doc, row in zip(docs, ranks.ranks, strict=True):
        comm = union(span(e) for e in collectives(doc) if in_steps(doc, e["ts"]))
        assert row.comm_us == pytest.approx(total(comm), rel=1e-9, abs=0.01) and row.comm_us > 0
        if kind == "cuda":
            compute = union(span(e) for e in launched_kernels(doc, nccl=False))
        else:
            compute = cpu_compute(doc, started=lambda e, d=doc: in_steps(d, e["ts"]))
        assert row.compute_us == pytest.approx(total(compute), rel=1e-9, abs=0.01) and row.compute_us > 0
        assert row.comm_us >= row.comm_in_window_us - 0.01
    table = rank_table(ranks)  # per step: each rank's total over its steps ÷ its steps
    assert table[table_headers(True)["comm_in_window"]].tolist() == pytest.approx(
        [r.comm_in_window_us / r.steps / 1000 for r in ranks.ranks])


def nccl_job(n_steps: int = 2, *, tail_us: float = 900.0) -> list[dict]:
    """A 2-rank NCCL job by hand: per step, a GEMM and an all-reduce launched from the step, the
    all-reduce kernel running on past the step's end by ``tail_us`` on rank 1 (rank 0: half)."""
    docs = []
    for rank in (0, 1):
        events, t, corr = [], 1000.0, 1
        for k in range(n_steps):
            events.append(tb.annotation(f"ProfilerStep#{k + 1}", t, 1000.0))
            events.append(tb.op("c10d::allreduce_", t + 400, 50, **{"External id": corr}))
            events += [tb.launch(t + 10, 5, corr), tb.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", t + 30, 300, corr),
                       tb.launch(t + 410, 5, corr + 1, name="cudaLaunchKernelExC"),
                       tb.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 600, 400 + tail_us / (2 - rank),
                                 corr + 1)]
            t += 1000.0 + 2000.0  # the next step starts after the tail has ended
            corr += 2
        doc = tb.document(events)
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
        docs.append(doc)
    return docs


def test_nccl_comm_is_the_collective_gpu_work_launched_in_the_steps():
    """The issue's H200 job: rank 1's NCCL kernels launched in its two steps ran past each CPU
    step's end, so the window cut them. By launch: the union (= the sum here: one stream) of
    the NCCL kernels whose launch call lies in a step, brute-forced from the JSON."""
    docs = nccl_job()
    ranks = analyze_ranks([load_trace(json.dumps(d).encode()) for d in docs], ["r0.json", "r1.json"])
    for doc, row in zip(docs, ranks.ranks, strict=True):
        nccl = launched_kernels(doc, nccl=True)
        assert len(nccl) == 2 and all(e["ts"] + e["dur"] > s + 1000 for e, (s, _, _) in zip(nccl, step_periods(doc)))
        assert row.comm_source == "NCCL kernels"
        assert row.comm_us == pytest.approx(total(union(span(e) for e in nccl)), abs=1e-6)
        assert row.comm_us == pytest.approx(sum(e["dur"] for e in nccl), abs=1e-6)  # one stream: sum = union
        compute = launched_kernels(doc, nccl=False)
        assert row.compute_us == pytest.approx(sum(e["dur"] for e in compute), abs=1e-6)
        w = window(doc)
        assert row.comm_in_window_us == pytest.approx(length(union(span(e) for e in nccl), *w), abs=1e-6)
        assert row.comm_in_window_us < row.comm_us  # the window figure cuts the tail


def _two_ranks(docs: list[dict], *, base_ns: int | None = None, drop_steps_of: int | None = None):
    docs = copy.deepcopy(docs)
    for r, d in enumerate(docs):
        if base_ns is not None:
            d["baseTimeNanoseconds"] = base_ns
        if r == drop_steps_of:
            d["traceEvents"] = [e for e in d["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    return analyze_ranks([load_trace(json.dumps(d).encode()) for d in docs], ["r0.json", "r1.json"])


def _late(docs: list[dict], rank: int, us: float) -> list[dict]:
    docs = copy.deepcopy(docs)
    for e in docs[rank]["traceEvents"]:
        if "ts" in e:
            e["ts"] += us
    return docs


def test_straggler_is_named_on_the_jobs_clock_only():
    """Lateness compares ranks' timestamps: a warning only when every trace has the job's clock
    (baseTimeNanoseconds); without it the finding holds only on one host, and says so."""
    docs = _late(nccl_job(), 1, 400.0)  # rank 1's collectives start 400 µs later, steps of ~3 ms
    with_clock = {f.rule: f for f in judge_ranks(_two_ranks(docs, base_ns=1_790_857_026_000_000_000))}
    assert with_clock[STRAGGLER].caveat == "" and "rank 1" in with_clock[STRAGGLER].evidence
    without = {f.rule: f for f in judge_ranks(_two_ranks(docs))}
    assert "lack baseTimeNanoseconds" in without[STRAGGLER].caveat


def test_compute_imbalance_needs_steps_on_every_rank_or_none():
    """Per-step compute on one rank against a whole trace on another is no imbalance."""
    docs = nccl_job()
    both = _two_ranks(docs)
    assert IMBALANCE not in {f.rule for f in judge_ranks(both)}  # equal work per step
    mixed = _two_ranks(docs, drop_steps_of=1)
    assert [r.steps for r in mixed.ranks] == [2, 0]
    assert IMBALANCE not in {f.rule for f in judge_ranks(mixed)}


# ---------------------------------------------------------------- the rank findings' premises and savings


def _exposed_per_step(doc: dict) -> tuple[float, float]:
    """(communication in the steps' window no compute hides, per step; its overlapped share %), from the JSON."""
    lo, hi = window(doc)
    comm = [(max(s, lo), min(e, hi)) for s, e in union(span(k) for k in launched_kernels(doc, nccl=True))
            if min(e, hi) > max(s, lo)]
    compute = union(span(k) for k in launched_kernels(doc, nccl=False))
    hidden = total(intersect(comm, compute))
    steps = sum(e["name"].startswith("ProfilerStep#") for e in complete(doc))
    return (total(comm) - hidden) / steps, 100 * hidden / total(comm)


def test_low_overlap_saves_the_communication_no_compute_hides():
    docs = nccl_job()
    found = {f.rule: f for f in judge_ranks(_two_ranks(docs))}
    exposed = [_exposed_per_step(d) for d in docs]
    assert all(share < 50 for _, share in exposed)
    hit = found[LOW_OVERLAP]
    assert hit.scope == "per step" and hit.saving_us == pytest.approx(max(e for e, _ in exposed), rel=1e-6)


def test_low_overlap_silent_when_compute_hides_the_communication():
    """Symptom: communication holds a large share of each rank's window. Premise absent: a GEMM runs
    beside every all-reduce, so most of it is overlapped."""
    docs = copy.deepcopy(nccl_job())
    for doc in docs:
        kernels = [e for e in complete(doc) if e.get("cat") == "kernel"]
        for gemm, nccl in zip(kernels[0::2], kernels[1::2], strict=True):  # GEMM then all-reduce, each step
            gemm["ts"], gemm["dur"] = nccl["ts"], nccl["dur"]
    for doc in docs:
        lo, hi = window(doc)
        comm = length(union(span(k) for k in launched_kernels(doc, nccl=True)), lo, hi)
        assert 100 * comm / (hi - lo) >= 20  # the symptom: a large share of the window
        assert _exposed_per_step(doc)[1] >= 50  # the premise fails: at least half of it overlapped
    assert LOW_OVERLAP not in {f.rule for f in judge_ranks(_two_ranks(docs))}


def test_a_straggler_late_by_a_sliver_of_the_step_is_no_finding():
    """Symptom: one rank starts its collectives last. Premise absent: by under 5 % of a step."""
    docs = _late(nccl_job(), 1, 50.0)
    starts = sorted(e["ts"] for e in complete(docs[0]) if e["name"].startswith("ProfilerStep#"))
    assert 100 * 50.0 / (starts[1] - starts[0]) < 5  # 50 µs late in steps of 3 ms (start to start)
    ranks = _two_ranks(docs, base_ns=1_790_857_026_000_000_000)
    assert ranks.straggler is not None and ranks.straggler.rank == 1
    assert STRAGGLER not in {f.rule for f in judge_ranks(ranks)}

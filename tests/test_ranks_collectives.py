"""Collectives matched across ranks (lab.analysis.ranks.collectives) and the straggler's cause.

Hand-made NCCL jobs, one per collective kind, carry Kineto's collective args on their kernels;
the expected skew, waits, transfer, size, algbw and busbw are computed here from the events and
from NCCL's formulas (nccl-tests doc/PERFORMANCE.md), written out again in this file.

The real recordings (tests/data/ranks/gloo_straggler_{2,4}: scripts/record_gloo_straggler.py,
DDP over gloo on this host's CPUs, one rank sleeping in ``load_batch``) are read from their raw
JSON with plain loops: the gloo:all_reduce ranges on the job's clock, the ops by shape.
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lab.analysis import analyze, analyze_ranks
from lab.judge import judge_ranks
from lab.trace import load_trace
from tests import tracebuild as tb

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "tests" / "data" / "ranks"
PLANT_TOLERANCE = 0.15  # the others' waits equal the planted sleep within 15 %

# NCCL's bus bandwidth factors, from nccl-tests doc/PERFORMANCE.md, and the bytes of Kineto's dtypes.
BUS = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
       "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
       "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0}
DTYPE_BYTES = {"Float": 4, "BFloat16": 2, "Half": 2}
KERNELS = {"allreduce": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "allgather": "ncclDevKernel_AllGather_RING_LL",
           "reduce_scatter": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL",
           "all_to_all": "ncclDevKernel_SendRecv", "broadcast": "ncclDevKernel_Broadcast_RING_LL",
           "reduce": "ncclDevKernel_Reduce_Sum_f32_RING_LL"}


def nccl_kernel(kind: str, ts: float, dur: float, corr: int, *, seq: int | None, n: int, nelems: tuple[int, int],
                dtype: str = "Float", group: str = "0") -> dict:
    e = tb.kernel(KERNELS[kind], ts, dur, corr)
    e["args"].update({"Collective name": kind, "dtype": dtype, "In msg nelems": nelems[0],
                      "Out msg nelems": nelems[1], "Group size": n, "Process Group Name": group,
                      "Process Group Ranks": str(list(range(n)))})
    if seq is not None:
        e["args"]["Seq"] = seq
    return e


def job(per_rank_events: list[list[dict]]) -> list[dict]:
    docs = []
    for rank, events in enumerate(per_rank_events):
        doc = tb.document([tb.annotation("ProfilerStep#1", 0, 20_000), *events])
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": len(per_rank_events)}
        doc["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
        docs.append(doc)
    return docs


def ranks_of(docs: list[dict]):
    traces = [load_trace(json.dumps(d).encode()) for d in docs]
    return analyze_ranks(traces, [f"rank{r}.json" for r in range(len(docs))])


def kernel_times(doc: dict) -> list[tuple[float, float, dict]]:
    return sorted((e["ts"], e["ts"] + e["dur"], e["args"]) for e in doc["traceEvents"]
                  if e.get("cat") == "kernel" and "Collective name" in e.get("args", {}))


# Per kind: (in nelems, out nelems) as torch records them for 4 ranks (all_gather: out = n × in;
# reduce_scatter: in = n × out), and the dtype.
SHAPES = {"allreduce": ((1 << 20, 1 << 20), "Float"), "allgather": ((1 << 18, 1 << 20), "BFloat16"),
          "reduce_scatter": ((1 << 20, 1 << 18), "BFloat16"), "all_to_all": ((1 << 20, 1 << 20), "Float"),
          "broadcast": ((1 << 19, 1 << 19), "Half"), "reduce": ((1 << 19, 1 << 19), "Float")}


@pytest.mark.parametrize("kind", list(SHAPES))
def test_each_collective_kind_gets_skew_waits_transfer_size_and_nccls_bandwidths(kind):
    n = 4
    nelems, dtype = SHAPES[kind]
    starts = [(100.0, 900.0), (340.0, 1_000.0), (120.0, 1_500.0), (200.0, 950.0)]  # (1st, 2nd) start per rank
    ends = [(1_300.0, 2_000.0), (1_320.0, 2_050.0), (1_310.0, 2_600.0), (1_305.0, 2_020.0)]
    docs = job([[nccl_kernel(kind, s, e - s, 10 + k, seq=k + 1, n=n, nelems=nelems, dtype=dtype)
                 for k, (s, e) in enumerate(zip(starts[r], ends[r], strict=True))] for r in range(n)])
    ranks = ranks_of(docs)
    table = ranks.collectives
    assert table is not None and len(table) == 2
    for k in range(2):
        got = table.iloc[k]
        s = [kernel_times(d)[k][0] for d in docs]
        e = [kernel_times(d)[k][1] for d in docs]
        last = max(s)
        transfer = statistics.median(max(0.0, x - last) for x in e)
        size = max(nelems) * DTYPE_BYTES[dtype]
        algbw = size / transfer / 1e3  # bytes per µs → GB/s
        assert got["start_skew_us"] == pytest.approx(last - min(s))
        assert got["transfer_us"] == pytest.approx(transfer)
        assert got["size_bytes"] == size
        assert got["algbw_gbs"] == pytest.approx(algbw)
        assert got["busbw_gbs"] == pytest.approx(algbw * BUS[kind](n))
        assert got["last_rank"] == s.index(last) and got["first_rank"] == s.index(min(s))
        waits = ranks.waits[ranks.waits["collective"] == got["collective"]].set_index("rank")["wait_us"]
        assert waits.to_dict() == pytest.approx({r: last - s[r] for r in range(n)})
    for r, row in enumerate(ranks.ranks):  # the rank's wait: summed over its collectives
        s = [t[0] for t in kernel_times(docs[r])]
        lasts = [max(kernel_times(d)[k][0] for d in docs) for k in range(2)]
        assert row.comm_wait_us == pytest.approx(sum(x - y for x, y in zip(lasts, s, strict=True)))


def test_sequence_numbers_match_collectives_that_order_would_mismatch():
    """Rank 1's profile missed the first collective: by order its first would meet the others'
    first; by Seq it meets their second."""
    n = 3

    def ar(ts, seq, corr):
        return nccl_kernel("allreduce", ts, 200, corr, seq=seq, n=n, nelems=(1024, 1024))

    docs = job([[ar(100, 1, 1), ar(1_000, 2, 2)], [ar(1_050, 2, 2)], [ar(130, 1, 1), ar(1_010, 2, 2)]])
    ranks = ranks_of(docs)
    table = ranks.collectives
    assert list(table["seq"].astype(float)) == [1.0, 2.0]
    assert list(table["ranks"]) == [2, 3]
    assert table.iloc[1]["start_skew_us"] == pytest.approx(1_050 - 1_000)
    assert table.iloc[1]["last_rank"] == 1


def test_without_sequence_numbers_collectives_match_by_order_within_each_process_group():
    """Two groups whose collectives interleave differently on each rank: matched per group."""
    def ar(ts, group, corr):
        return nccl_kernel("allreduce", ts, 100, corr, seq=None, n=2, nelems=(256, 256), group=group)

    docs = job([[ar(100, "tp", 1), ar(300, "dp", 2), ar(500, "tp", 3)],
                [ar(150, "dp", 1), ar(320, "tp", 2), ar(600, "tp", 3)]])
    table = ranks_of(docs).collectives.set_index(["group", "start_us"]).sort_index()
    by_group = {g: list(t["start_skew_us"]) for g, t in table.groupby(level="group")}
    assert by_group["tp"] == pytest.approx([320 - 100, 600 - 500])
    assert by_group["dp"] == pytest.approx([300 - 150])


# ---------------------------------------------------------------- real gloo recordings


def recording(name: str) -> tuple[dict, list[dict]]:
    folder = JOBS / name
    facts = json.loads((folder / "facts.json").read_text())
    docs = [json.loads(gzip.decompress(p.read_bytes())) for p in sorted(folder.glob("rank*.pt.trace.json.gz"))]
    return facts, sorted(docs, key=lambda d: d["distributedInfo"]["rank"])


def steps_of(doc: dict) -> list[tuple[float, float]]:
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"]
                   if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))
    return [(s, steps[i + 1][0] if i + 1 < len(steps) else e) for i, (s, e) in enumerate(steps)]


def clock(doc: dict, ts: float) -> float:
    return doc["baseTimeNanoseconds"] / 1e3 + ts


def brute_waits(docs: list[dict]) -> list[float]:
    """Per rank, its wait per step: the i-th gloo:all_reduce of every rank is one collective."""
    calls = [sorted(clock(d, e["ts"]) for e in d["traceEvents"] if e.get("name") == "gloo:all_reduce") for d in docs]
    n = min(map(len, calls))
    total = [0.0] * len(docs)
    for k in range(n):
        last = max(c[k] for c in calls)
        for r, c in enumerate(calls):
            (s0, _), (_, s1) = steps_of(docs[r])[0], steps_of(docs[r])[-1]
            if clock(docs[r], s0) <= c[k] < clock(docs[r], s1):
                total[r] += last - c[k]
    return [t / len(steps_of(d)) for t, d in zip(total, docs, strict=True)]


def brute_work(doc: dict) -> Counter:
    (s0, _), (_, s1) = steps_of(doc)[0], steps_of(doc)[-1]
    return Counter((e["name"], json.dumps(e.get("args", {}).get("Input Dims"))) for e in doc["traceEvents"]
                   if e.get("cat") == "cpu_op" and s0 <= e["ts"] < s1)


@pytest.fixture(scope="module", params=["gloo_straggler_2", "gloo_straggler_4"])
def real(request):
    facts, docs = recording(request.param)
    folder = JOBS / request.param
    paths = sorted(folder.glob("rank*.pt.trace.json.gz"))
    traces = [load_trace(p) for p in paths]
    ranks = analyze_ranks(traces, [p.name for p in paths], analyses=[analyze(t) for t in traces])
    return facts, docs, ranks, judge_ranks(ranks)


def test_real_recordings_name_the_straggler_by_its_planted_cause(real):
    facts, docs, ranks, insights = real
    plant_us = facts["sleep_ms"] * 1e3
    s = ranks.straggler
    assert s is not None and s.rank == facts["straggler"]
    assert s.cause is not None and s.cause.name == facts["range"] and s.cause.precedes == "its forward"
    # The range's own time per step, from the JSON: the straggler's load_batch holds the sleep.
    me = docs[s.rank]
    (s0, _), (_, s1) = steps_of(me)[0], steps_of(me)[-1]
    mine = sum(e["dur"] for e in me["traceEvents"] if e.get("name") == facts["range"] and s0 <= e["ts"] < s1)
    assert s.cause.mine_us == pytest.approx(mine / len(steps_of(me)))
    assert abs(s.cause.extra_us - plant_us) <= PLANT_TOLERANCE * plant_us
    (hit,) = [f for f in insights if f.rule == "straggler"]
    assert hit.evidence.startswith(f"Rank {s.rank} spends ") and "'load_batch' before its forward" in hit.evidence


def test_real_recordings_waits_the_straggler_none_the_others_the_plant(real):
    facts, docs, ranks, insights = real
    plant_us = facts["sleep_ms"] * 1e3
    expected = brute_waits(docs)
    for r, row in enumerate(ranks.ranks):
        assert row.comm_wait_us / row.steps == pytest.approx(expected[r], rel=1e-6, abs=1.0)
        if r == facts["straggler"]:
            assert expected[r] < 0.05 * plant_us
        else:
            assert abs(expected[r] - plant_us) <= PLANT_TOLERANCE * plant_us, (r, expected[r])
    # What fixing the straggler saves per step: the others' wait for it (their median), the plant.
    (hit,) = [f for f in insights if f.rule == "straggler"]
    others = [w for r, w in enumerate(expected) if r != facts["straggler"]]
    assert hit.scope == "per step" and hit.saving_us == pytest.approx(statistics.median(others), rel=1e-6, abs=1.0)
    assert abs(hit.saving_us - plant_us) <= PLANT_TOLERANCE * plant_us


def test_real_recordings_equal_work_is_never_called_an_imbalance(real):
    _, docs, ranks, insights = real
    works = [brute_work(d) for d in docs]
    assert all(w == works[0] for w in works)  # the premise, from the JSON: same ops, same shapes
    assert ranks.same_work is True
    assert "compute_imbalance" not in {f.rule for f in insights}


def test_real_recordings_all_reduce_size_is_the_models_gradients(real):
    facts, docs, ranks, _ = real
    dims = {json.dumps(e["args"]["Input Dims"]) for d in docs for e in d["traceEvents"]
            if e.get("name") == "gloo:all_reduce"}
    (only,) = dims
    (elements,) = json.loads(only)[0]
    assert set(ranks.collectives["size_bytes"]) == {elements * 4}  # float32 gradients in one bucket
    n = facts["ranks"]
    assert (ranks.collectives["busbw_gbs"] == ranks.collectives["algbw_gbs"] * 2 * (n - 1) / n).all()


@pytest.mark.subprocess
def test_cli_reads_a_recorded_job_directory_and_names_the_cause():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFILER_LAB_")} | {"KINETO_LOG_LEVEL": "6"}
    proc = subprocess.run([sys.executable, "-m", "lab", "ranks", str(JOBS / "gloo_straggler_4")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "skipped 1 file that is not a trace: facts.json" in proc.stderr
    assert "Rank 2 spends " in proc.stdout and "'load_batch' before its forward" in proc.stdout


# ---------------------------------------------------------------- the view: per step, in words, every lane


def test_rank_table_is_per_step_in_words_with_waits_and_transfers(real):
    from lab.views import rank_table
    from lab.views.ranks_tables import table_headers

    _, docs, ranks, _ = real
    table = rank_table(ranks)
    h = table_headers(True)
    assert not any("_" in c for c in table.columns)
    expected = brute_waits(docs)
    assert table[h["wait"]].tolist() == pytest.approx([w / 1e3 for w in expected], abs=1e-3)
    for row, (_, got) in zip(ranks.ranks, table.iterrows(), strict=True):
        assert got[h["compute"]] == pytest.approx(row.compute_us / row.steps / 1e3)
        assert got[h["idle"]] == pytest.approx(row.idle_us / row.steps / 1e3)
        assert got[h["compute"]] < got[h["step"]] * 1.01  # per step, so never above the step itself


def test_an_open_jobs_summary_leads_with_the_straggler_and_its_cause(real):
    from lab.views import job_summary

    facts, _, ranks, insights = real
    job = job_summary(ranks, insights)
    assert job.headline.startswith(f"{facts['ranks']} ranks of a world of {facts['ranks']} over gloo")
    assert job.straggler.startswith(f"Straggler: rank {facts['straggler']} spends ")
    assert "'load_batch' before its forward" in job.straggler
    assert job.top_finding is not None and job.top_finding.rule == "straggler"
    assert "all_reduce" in job.collectives and "busbw" in job.collectives


def test_stacked_timeline_labels_every_lane(real):
    import math

    from lab.views import build_ranks_timeline, timeline_chart
    from lab.views.timeline_chart import LANE_LABEL_MIN_PX

    _, _, ranks, _ = real
    traces = [load_trace(p) for p in sorted((JOBS / f"gloo_straggler_{len(ranks.ranks)}").glob("rank*.gz"))]
    data = build_ranks_timeline(traces, ranks)
    spec = timeline_chart(data).to_dict()
    axes = [layer["encoding"]["y"].get("axis") for layer in spec["layer"] if "y" in layer.get("encoding", {})]
    # Every layer states the lane axis: Vega-Lite merges the layers' axes, and one left at its
    # default (labelOverlap on) hid every other lane's label in Chromium.
    assert len(axes) >= 2 and all(a is not None and a["labelOverlap"] is False for a in axes)
    axis = axes[0]
    assert len(axis["values"]) == len(data.lanes) == len(data.lane_rows)
    assert all(json.dumps(lane)[1:-1] in axis["labelExpr"] for lane in data.lanes)
    rows = sum(n for _, _, n in data.lane_rows)
    thinnest = min(n for _, _, n in data.lane_rows)
    assert math.floor(spec["height"] / rows * thinnest) >= LANE_LABEL_MIN_PX  # room for each label


def test_host_ranges_borrow_record_param_comms_args_in_order():
    """gloo's ranges carry no collective args; the rank's record_param_comms ops do (torch's
    metadata): matched in order, their Seq, group and size go to the ranges."""
    from lab.analysis.ranks.collectives import rank_collectives

    events, doc_args = [], []
    for k, ts in enumerate((100.0, 900.0)):
        args = {"Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 1000 * (k + 1),
                "Out msg nelems": 1000 * (k + 1), "Group size": 2, "Process Group Name": "7", "Seq": 40 + k}
        doc_args.append(args)
        events += [tb.op("record_param_comms", ts, 5, **args), tb.annotation("gloo:all_reduce", ts + 10, 300)]
    trace = load_trace(json.dumps(tb.document([tb.annotation("ProfilerStep#1", 0, 2_000), *events])).encode())
    rows = trace.collective_args
    assert set(trace.events["name"].take(rows["row"]).astype(str)) == {"record_param_comms"}
    got = rank_collectives(trace)
    assert list(got["seq"]) == [a["Seq"] for a in doc_args] and set(got["group"]) == {"7"}
    assert list(got["size_bytes"]) == [a["In msg nelems"] * 2 for a in doc_args]  # bf16: 2 bytes
    first = 0.0  # the ProfilerStep's start: the trace's first event, where ts_us counts from
    assert list(got["start_us"]) == [e["ts"] - first for e in events if e["name"] == "gloo:all_reduce"]


# ---------------------------------------------------------------- the cause and the premise, by hand


def test_straggler_cause_names_the_largest_excess_and_never_noise():
    from lab.analysis.ranks.cause import CAUSE_MIN_SHARE, straggler_cause

    others = [{"load_batch": 100.0, "forward": 5_000.0}, {"load_batch": 120.0, "forward": 5_300.0},
              {"load_batch": 90.0, "forward": 4_900.0}]
    mine = {"load_batch": 60_100.0, "forward": 5_400.0, "logging": 300.0}
    cause = straggler_cause(mine, others, late_us=59_000.0, precedes={"load_batch": "its forward"})
    assert cause is not None and cause.name == "load_batch" and cause.precedes == "its forward"
    assert cause.extra_us == pytest.approx(60_100.0 - statistics.median([100.0, 120.0, 90.0]))
    assert cause.text == "'load_batch' before its forward"
    # An excess under CAUSE_MIN_SHARE of the lateness is not named: scheduling noise, not a cause.
    small = {"load_batch": 100.0 + 0.9 * CAUSE_MIN_SHARE * 59_000.0, "forward": 5_000.0}
    assert straggler_cause(small, others, late_us=59_000.0) is None


def _ranked(events_per_rank: list[list[dict]]):
    docs = []
    for rank, events in enumerate(events_per_rank):
        doc = tb.document(events)
        doc["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": len(events_per_rank)}
        doc["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
        docs.append(doc)
    traces = [load_trace(json.dumps(d).encode()) for d in docs]
    return analyze_ranks(traces, [f"rank{r}.json" for r in range(len(docs))])


def test_compute_imbalance_is_reported_when_the_work_differs_and_says_where():
    """Rank 1 runs twice the matmuls: the premise fails (different work), so it is an imbalance."""
    def rank(n_mm: int) -> list[dict]:
        events = [tb.annotation("ProfilerStep#1", 0, 10_000)]
        events += [tb.op("aten::mm", 100 + 1_000 * k, 900, **{"Input Dims": [[64, 64], [64, 64]]}) for k in range(n_mm)]
        events.append(tb.op("c10d::allreduce_", 9_000, 500))
        return events

    ranks = _ranked([rank(3), rank(6)])
    assert ranks.same_work is False and "aten::mm" in ranks.work_note
    titles = {f.rule: f for f in judge_ranks(ranks)}
    assert "compute_imbalance" in titles and "the ranks' work differs" in titles["compute_imbalance"].evidence

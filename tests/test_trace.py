"""load_trace on the three real H200 traces, small hand-made traces, and one golden file.

Every expected number is derived independently here from ``json.loads`` of the raw file (or
written by hand for the tiny traces), never copied from load_trace's own output.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from decimal import Decimal
from pathlib import Path

import msgspec
import numpy as np
import pandas.testing as pdt
import pytest

import lab.trace.decode as decode_mod
import lab.trace.records as records_mod
from lab.core.settings import HostSettings
from lab.trace.load import GPU_ACTIVITY_CATS, Trace, TraceError, load_trace

DATA = Path(__file__).parent / "data"
TRACES = ["matmul_add_1024_fp32", "matmul_add_4096_bf16", "matmul_add_4096_bf16_compiled"]
LAUNCH_NAMES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cuLaunchKernel",
                "cudaMemsetAsync", "cudaMemcpyAsync", "cudaGraphLaunch"}


def _path(name: str) -> Path:
    return DATA / f"{name}.json.gz"


def _raw(name: str) -> dict:
    return json.loads(gzip.decompress(_path(name).read_bytes()))


@pytest.fixture(scope="module", params=TRACES)
def real(request):
    name = request.param
    return name, _raw(name), load_trace(_path(name))


def _x(raw: dict) -> list[dict]:
    return [e for e in raw["traceEvents"] if e.get("ph") == "X"]


# ---- real traces vs brute force -------------------------------------------------------------


def test_counts_per_category_match_brute_force(real):
    _, raw, tr = real
    expected = Counter(e.get("cat", "") for e in _x(raw))
    got = tr.events["cat"].astype(str).value_counts().to_dict()
    assert got == dict(expected)
    assert tr.skipped_events == 0


def test_kernel_duration_total_matches_brute_force(real):
    _, raw, tr = real
    expected = sum(e["dur"] for e in _x(raw) if e.get("cat") == "kernel")
    got = tr.events.loc[tr.events["cat"] == "kernel", "dur_us"].sum()
    assert got == pytest.approx(expected, abs=1e-6)
    assert expected > 0


def test_times_start_at_zero_and_span(real):
    _, raw, tr = real
    xs = _x(raw)
    first = min(e["ts"] for e in xs)
    assert tr.events["ts_us"].min() == 0.0
    assert tr.meta.start_ts_us == first
    assert tr.meta.span_us == pytest.approx(max(e["ts"] + e["dur"] for e in xs) - first, abs=2e-3)
    # Relative start of one known event, to the nanosecond Kineto wrote.
    kernel = next(e for e in xs if e.get("cat") == "kernel")
    row = tr.events[(tr.events["cat"] == "kernel")].iloc[0]
    assert row["ts_us"] == pytest.approx(kernel["ts"] - first, abs=1e-3)


def test_every_gpu_activity_is_linked_to_a_launch(real):
    _, raw, tr = real
    ev = tr.events
    gpu_rows = set(np.nonzero(ev["cat"].isin(GPU_ACTIVITY_CATS).to_numpy())[0])
    flows = tr.flows
    assert set(flows["gpu_row"]) == gpu_rows
    assert flows["gpu_row"].is_unique
    launch_names = set(ev["name"].astype(str).to_numpy()[flows["launch_row"].to_numpy()])
    assert launch_names <= LAUNCH_NAMES
    # Launch and GPU event carry the same correlation id as the raw trace's args.
    assert (ev["correlation"].to_numpy()[flows["launch_row"]] == flows["correlation"].to_numpy()).all()
    assert (ev["correlation"].to_numpy()[flows["gpu_row"]] == flows["correlation"].to_numpy()).all()
    # delay = GPU start − launch start, recomputed from the raw file keyed by correlation.
    raw_launch_ts = {e["args"]["correlation"]: e["ts"] for e in _x(raw)
                     if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    raw_gpu_ts = {e["args"]["correlation"]: e["ts"] for e in _x(raw) if e.get("cat") in GPU_ACTIVITY_CATS}
    for corr, delay in zip(flows["correlation"], flows["delay_us"]):
        assert delay == pytest.approx(raw_gpu_ts[corr] - raw_launch_ts[corr], abs=1e-3)
    assert len(flows) == len(raw_gpu_ts)


@pytest.mark.parametrize("name", TRACES[:2])
def test_matmul_and_add_kernels_appear_in_flows(name):
    tr = load_trace(_path(name))
    linked = set(tr.events["name"].astype(str).to_numpy()[tr.flows["gpu_row"].to_numpy()])
    assert any("gemm" in n or "nvjet" in n for n in linked), linked
    assert any("CUDAFunctor_add" in n for n in linked), linked


def test_lanes_are_named_and_ordered(real):
    _, raw, tr = real
    ev = tr.events
    lanes = list(ev["lane"].cat.categories)
    assert "CPU thread 417 (python3)" in lanes
    assert "GPU 0 stream 7" in lanes
    distinct = {(str(e["pid"]), str(e["tid"])) for e in _x(raw)}
    assert ev.groupby(["pid", "tid"], observed=True).ngroups == len(distinct) == len(lanes)
    # CPU lanes first, then GPU; rows sorted by (lane_order, ts_us).
    kinds = ev.drop_duplicates("lane_order").sort_values("lane_order")["lane_kind"].tolist()
    assert kinds == sorted(kinds, key=lambda k: k == "gpu")
    assert (np.diff(ev["lane_order"].to_numpy()) >= 0).all()
    same_lane = np.diff(ev["lane_order"].to_numpy()) == 0
    assert (np.diff(ev["ts_us"].to_numpy())[same_lane] >= 0).all()
    gpu = ev[ev["lane_kind"] == "gpu"]
    assert (gpu["device"] == 0).all() and (gpu["stream"] == 7).all()
    cpu = ev[ev["lane_kind"] == "cpu"]
    assert (cpu["device"] == -1).all() and (cpu["stream"] == -1).all()


def test_kernel_args_parsed(real):
    _, raw, tr = real
    raw_k = sorted((e for e in _x(raw) if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    got = tr.events[tr.events["cat"] == "kernel"].sort_values("ts_us")
    a = raw_k[0]["args"]
    row = got.iloc[0]
    assert row["grid"] == str(a["grid"]) and row["block"] == str(a["block"])
    assert row["registers_per_thread"] == a["registers per thread"]
    assert row["shared_memory_bytes"] == a["shared memory"]
    assert row["blocks_per_sm"] == a["blocks per SM"]
    assert row["warps_per_sm"] == a["warps per SM"]
    assert row["occupancy_pct"] == a["est. achieved occupancy %"]
    assert row["external_id"] == a["External id"]
    assert row["correlation"] == a["correlation"]
    cpu = tr.events[tr.events["name"] == "aten::add"]
    if len(cpu):
        raw_add = next(e for e in _x(raw) if e["name"] == "aten::add")
        assert cpu.iloc[0]["input_dims"] == str(raw_add["args"]["Input Dims"])
        assert cpu.iloc[0]["input_type"] == str(raw_add["args"]["Input type"])
        assert cpu.iloc[0]["concrete_inputs"] == str(raw_add["args"]["Concrete Inputs"])
        assert cpu.iloc[0]["input_strides"] == str(raw_add["args"].get("Input Strides", ""))


def test_times_are_exact_to_the_ns(real):
    """ts_us/dur_us hold the written ns exactly: equal ends in the file stay equal (nesting and
    torch's table compare them). Brute force: the file's decimals, read as Decimal."""
    name, _, tr = real
    raw = json.loads(gzip.decompress(_path(name).read_bytes()), parse_float=Decimal)
    xs = [e for e in raw["traceEvents"] if e.get("ph") == "X"]
    first = min(e["ts"] for e in xs)
    want = Counter((e["name"], int((e["ts"] - first) * 1000), int((e["ts"] - first + e["dur"]) * 1000)) for e in xs)
    start = np.rint(tr.events["ts_us"].to_numpy() * 1000).astype(np.int64)
    end = start + np.rint(tr.events["dur_us"].to_numpy() * 1000).astype(np.int64)
    assert Counter(zip(tr.events["name"].astype(str), start.tolist(), end.tolist())) == want


def test_columns_and_dtypes_follow_the_contract(real):
    _, _, tr = real
    ev = tr.events
    expected = {
        "name": "category", "cat": "category", "pid": "category", "tid": "category",
        "lane": "category", "lane_kind": "category", "lane_order": "int32", "ts_us": "float64",
        "dur_us": "float64", "depth": "int16", "correlation": "int64", "external_id": "int64",
        "device": "int16", "stream": "int32", "grid": "category", "block": "category",
        "registers_per_thread": "float64", "shared_memory_bytes": "float64",
        "blocks_per_sm": "float64", "warps_per_sm": "float64", "occupancy_pct": "float64",
        "input_dims": "category", "input_type": "category", "input_strides": "category",
        "concrete_inputs": "category",
        "copy_bytes": "float64",
    }  # fmt: skip
    assert {c: str(t) for c, t in ev.dtypes.items()} == expected
    assert list(tr.flows.columns) == ["correlation", "launch_row", "gpu_row", "delay_us"]
    assert [str(t) for t in tr.flows.dtypes] == ["int64", "int64", "int64", "float64"]
    cpu_op = ev[ev["cat"] == "cpu_op"]
    assert (cpu_op["correlation"] == -1).all()
    assert cpu_op["registers_per_thread"].isna().all()
    assert (ev.loc[ev["cat"] == "cuda_runtime", "grid"] == "").all()


def test_depth_matches_a_stack_walk_on_real_traces(real):
    _, _, tr = real
    ev = tr.events
    for _, lane in ev.groupby("lane_order"):
        stack, expected = [], []
        for start, dur in zip(lane["ts_us"], lane["dur_us"]):
            while stack and stack[-1] <= start:
                stack.pop()
            expected.append(len(stack))
            stack.append(start + dur)
        assert lane["depth"].tolist() == expected
    # In the seed exercise: annotation (0) > aten::matmul (1) > aten::mm (2) > launch (3).
    launches = ev[(ev["cat"].isin(["cuda_runtime", "cuda_driver"]))
                  & ev["name"].isin(["cudaLaunchKernelExC", "cuLaunchKernelEx"])]
    assert set(launches["depth"]) <= {3, 4}


def test_metadata(real):
    name, raw, tr = real
    meta = tr.meta
    assert meta.device_properties[0]["name"] == "NVIDIA H200"
    assert meta.device_properties[0]["numSms"] == 132
    assert meta.base_time_ns == raw["baseTimeNanoseconds"]
    assert meta.schema_version == raw["schemaVersion"]
    assert meta.trace_name == raw["traceName"]
    assert meta.cuda_runtime_version == raw["cuda_runtime_version"]
    assert meta.cupti_version == raw["cupti_version"]
    if "record_shapes" in raw:
        assert meta.record_shapes is True and meta.with_flops is True
    else:
        assert meta.record_shapes is None
    assert meta.distributed is None and meta.rank is None
    assert meta.process_names["417"] == "python3"
    assert meta.thread_names[("0", "7")] == "stream 7 "
    assert tr.source_bytes == len(gzip.decompress(_path(name).read_bytes()))
    assert tr.has_gpu


# ---- input forms give equal frames ----------------------------------------------------------


def _assert_same(a: Trace, b: Trace) -> None:
    pdt.assert_frame_equal(a.events, b.events)
    pdt.assert_frame_equal(a.flows, b.flows)
    assert a.skipped_events == b.skipped_events


@pytest.mark.parametrize("name", TRACES)
def test_plain_gzip_bare_list_path_and_bytes_agree(name, tmp_path):
    gz = _path(name).read_bytes()
    plain = gzip.decompress(gz)
    by_path = load_trace(_path(name))
    by_str_path = load_trace(str(_path(name)))
    _assert_same(by_path, load_trace(gz))
    _assert_same(by_path, by_str_path)
    _assert_same(by_path, load_trace(plain))
    _assert_same(by_path, load_trace(bytearray(plain)))
    _assert_same(by_path, load_trace(memoryview(plain)))
    bare = json.dumps(json.loads(plain)["traceEvents"]).encode()
    _assert_same(by_path, load_trace(bare))
    # Content decides, not the name: gzip saved as .json, plain JSON saved as .gz.
    (tmp_path / "looks_plain.json").write_bytes(gz)
    (tmp_path / "looks_gzip.json.gz").write_bytes(plain)
    _assert_same(by_path, load_trace(tmp_path / "looks_plain.json"))
    _assert_same(by_path, load_trace(tmp_path / "looks_gzip.json.gz"))
    # Several gzip members concatenated are one stream.
    half = len(plain) // 2
    _assert_same(by_path, load_trace(gzip.compress(plain[:half]) + gzip.compress(plain[half:])))


# The one decode path has three routes to the same records (lab/trace/records.py); each must
# give the same frames. (These replace the tests of the removed orjson / stdlib-only decoders,
# which monkeypatched msgspec and orjson away: same inputs, same expectations.)
ROUTES = ["typed", "typed in batches", "stdlib document", "python checks"]


class _RefusesEverything:
    """Stands in for msgspec's typed decoders: every batch and every event is refused."""

    def decode(self, buf):
        raise msgspec.ValidationError("refused for the test")


def _take_route(route: str, payload: bytes, monkeypatch) -> bytes:
    """``payload`` as it must be loaded to take ``route``:

    - typed: as it is (msgspec validates while it parses; a small trace in one parse);
    - typed in batches: as it is, with the one-parse route off (as for a trace over
      ``decode._ONE_PASS_MAX_BYTES``): events located first, then typed 8k at a time;
    - stdlib document: with a NaN token added at the top level, which msgspec refuses, so the
      whole document is read by stdlib json and every event goes through the Python checks;
    - python checks: typed decoding refuses every batch and every event, so each event is
      read alone by stdlib json and checked (the route of an event with an unexpected type).
    """
    if route == "stdlib document":
        doc = json.loads(payload)
        if isinstance(doc, list):
            doc = {"traceEvents": doc}
        return json.dumps({**doc, "note": float("nan")}).encode()
    if route in ("typed in batches", "python checks"):
        monkeypatch.setattr(decode_mod, "_ONE_PASS_MAX_BYTES", 0)
    if route == "python checks":
        monkeypatch.setattr(decode_mod, "LIST_DECODER", _RefusesEverything())
        monkeypatch.setattr(decode_mod, "TYPED_DOC_DECODER", _RefusesEverything())
        monkeypatch.setattr(records_mod, "EVENT_DECODER", _RefusesEverything())
    return payload


@pytest.mark.parametrize("route", ROUTES[1:])
@pytest.mark.parametrize("name", TRACES)
def test_python_checks_agree_with_typed_decoding(name, route, monkeypatch):
    """Events typed decoding refuses, or a document only stdlib json reads, must give the same
    frames as the typed route."""
    plain = gzip.decompress(_path(name).read_bytes())
    typed = load_trace(plain)
    _assert_same(typed, load_trace(_take_route(route, plain, monkeypatch)))


# ---- small hand-made traces ----------------------------------------------------------------


def _x_event(name, ts, dur, pid=1, tid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _doc(events) -> bytes:
    return json.dumps({"traceEvents": events}).encode()


def test_depth_on_a_hand_made_nested_trace():
    events = [
        _x_event("root", 100, 100),      # depth 0
        _x_event("a", 110, 40),          # 1
        _x_event("a.1", 110, 10),        # 2 (same start as a, shorter: inside it)
        _x_event("a.2", 130, 20),        # 2 (ends with a)
        _x_event("mark", 150, 0),        # 1 (zero length, right where a ends)
        _x_event("b", 160, 30),          # 1
        _x_event("b.1", 170, 5),         # 2
        _x_event("b.1.x", 171, 1),       # 3
        _x_event("after", 200, 10),      # 0 (starts where root ends)
        _x_event("zero_first", 300, 0),  # 0
        _x_event("other_lane", 120, 50, tid=2),  # 0: nesting is per lane
    ]
    tr = load_trace(_doc(events))
    depth = dict(zip(tr.events["name"].astype(str), tr.events["depth"]))
    assert depth == {"root": 0, "a": 1, "a.1": 2, "a.2": 2, "mark": 1, "b": 1, "b.1": 2,
                     "b.1.x": 3, "after": 0, "zero_first": 0, "other_lane": 0}
    # ties at one start: the longer event first
    assert tr.events["name"].astype(str).tolist()[:3] == ["root", "a", "a.1"]


def test_zero_length_events_at_the_same_start_nest_under_the_longer():
    # A zero-length event ends where it starts, so it contains nothing, not even its twin.
    events = [_x_event("z1", 10, 0), _x_event("p", 10, 5), _x_event("z2", 10, 0), _x_event("q", 15, 1),
              _x_event("z3", 15, 0)]
    tr = load_trace(_doc(events))
    depth = dict(zip(tr.events["name"].astype(str), tr.events["depth"]))
    assert tr.events["name"].astype(str).tolist()[0] == "p"
    assert depth == {"p": 0, "z1": 1, "z2": 1, "q": 0, "z3": 1}


def test_cpu_and_gpu_lanes_from_metadata():
    events = [
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "trainer"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 12, "args": {"name": "thread 12 (trainer)"}},
        {"ph": "M", "name": "process_labels", "pid": 1, "tid": 0, "args": {"labels": "GPU 1"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 20, "args": {"name": "stream 20 "}},
        _x_event("op", 0, 10, pid=9, tid=12),
        _x_event("op2", 1, 1, pid=9, tid=13),
        _x_event("k", 5, 2, pid=1, tid=20, cat="kernel", stream=20, device=1, correlation=5),
        _x_event("k0", 5, 2, pid=0, tid=3, cat="kernel", correlation=6),
    ]
    tr = load_trace(_doc(events))
    lanes = list(tr.events["lane"].cat.categories)
    assert lanes == ["CPU thread 12 (trainer)", "CPU thread 13 (trainer)", "GPU 0 stream 3", "GPU 1 stream 20"]
    k0 = tr.events[tr.events["name"] == "k0"].iloc[0]
    assert (k0["device"], k0["stream"], k0["lane_kind"]) == (0, 3, "gpu")


def test_flows_from_correlation_alone_and_from_ac2g_alone():
    launch = _x_event("cudaLaunchKernel", 10, 2, cat="cuda_runtime", correlation=7)
    kernel = _x_event("k", 15, 3, pid=0, tid=7, cat="kernel", correlation=7, device=0, stream=7)
    tr = load_trace(_doc([launch, kernel]))
    assert tr.flows[["correlation", "delay_us"]].values.tolist() == [[7, 5.0]]
    # ac2g only (no correlation args): matched by pid/tid/ts.
    launch2 = _x_event("cudaLaunchKernel", 10, 2, cat="cuda_runtime")
    kernel2 = _x_event("k", 16, 3, pid=0, tid=7, cat="kernel")
    s = {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 42, "pid": 1, "tid": 1, "ts": 10}
    f = {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 42, "pid": 0, "tid": 7, "ts": 16, "bp": "e"}
    tr2 = load_trace(_doc([launch2, kernel2, s, f]))
    assert len(tr2.flows) == 1
    assert tr2.events["name"].iloc[int(tr2.flows["launch_row"].iloc[0])] == "cudaLaunchKernel"
    assert tr2.events["name"].iloc[int(tr2.flows["gpu_row"].iloc[0])] == "k"
    assert tr2.flows["delay_us"].iloc[0] == 6.0
    assert tr2.flows["correlation"].iloc[0] == 42  # the flow id stands in for the missing arg
    # both sources for the same pair: one row
    tr3 = load_trace(_doc([launch, kernel, {**s, "id": 7}, {**f, "id": 7, "ts": 15}]))
    assert len(tr3.flows) == 1
    # one pair linked by correlation, another only by an ac2g flow: both found
    tr4 = load_trace(_doc([launch, kernel, {**launch2, "ts": 30}, {**kernel2, "ts": 36},
                           {**s, "ts": 30}, {**f, "ts": 36}, {**s, "id": 43, "ts": 10}]))
    pairs = sorted(zip(tr4.flows["correlation"], tr4.flows["delay_us"]))
    assert pairs == [(7, 5.0), (42, 6.0)]


@pytest.mark.parametrize("route", ROUTES)
def test_bad_events_are_skipped_and_counted(route, monkeypatch):
    good = [_x_event("a", 0, 5), _x_event("b", 1, 2)]
    bad = [
        _x_event("ts_text", "x", 1),
        _x_event("neg", 1, -3),
        _x_event("none_dur", 1, None),
        {"ph": "X", "name": "no_ts", "pid": 1, "tid": 1, "dur": 1},
        {"ph": "X", "name": 5, "pid": 1, "tid": 1, "ts": 1, "dur": 1},
        {"ph": "X", "name": "args_list", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": [1]},
        7,
        "text",
        _x_event("big_ts", 1e300, 1),
        {"ph": "X", "name": "bool_pid", "pid": True, "tid": 1, "ts": 1, "dur": 1},
    ]
    tr = load_trace(_take_route(route, _doc(good + bad), monkeypatch))
    assert tr.skipped_events == len(bad)
    assert tr.events["name"].astype(str).tolist() == ["a", "b"]
    # Unknown phases (instant events) are neither kept nor counted as malformed.
    instant = {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 3, "s": "g"}
    tr2 = load_trace(_take_route(route, _doc(good + [instant]), monkeypatch))
    assert tr2.skipped_events == 0 and len(tr2.events) == 2


def test_distributed_info_and_rank():
    doc = {"traceEvents": [_x_event("a", 0, 1)], "schemaVersion": 1,
           "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8}}
    meta = load_trace(json.dumps(doc).encode()).meta
    assert meta.distributed == {"backend": "nccl", "rank": 3, "world_size": 8}
    assert meta.rank == 3 and meta.schema_version == 1
    odd = load_trace(json.dumps({**doc, "distributedInfo": [3], "schemaVersion": "x"}).encode()).meta
    assert odd.distributed is None and odd.rank is None and odd.schema_version is None


def test_odd_but_valid_values():
    events = [
        {"ph": "X", "name": "a", "pid": "Spans", "tid": "main", "ts": 1, "dur": 2},  # no cat, str ids
        _x_event("b", 2.5, 0.25, correlation=2**40, **{"External id": 3}),
        _x_event("c", 3, 1, grid="[1, 2, 3]", **{"Input Dims": [[2, 3], []], "Input type": ["float", ""]}),
    ]
    tr = load_trace(_doc(events))
    ev = tr.events.set_index(tr.events["name"].astype(str))
    assert ev.loc["a", "cat"] == "" and ev.loc["a", "pid"] == "Spans" and ev.loc["a", "tid"] == "main"
    assert ev.loc["b", "correlation"] == 2**40 and ev.loc["b", "external_id"] == 3
    assert ev.loc["c", "grid"] == "[1, 2, 3]"
    assert ev.loc["c", "input_dims"] == "[[2, 3], []]" and ev.loc["c", "input_type"] == "['float', '']"
    assert ev.loc["b", "ts_us"] == 1.5


@pytest.mark.parametrize(
    "payload, message",
    [
        (b'{"a": 1}', "traceEvents"),
        (b"3.5", "number"),
        (b'"trace"', "string"),
        (b"", "empty"),
        (b"\x00\x01garbage", "not JSON"),
        (b'{"traceEvents": [1, 2]}', "no usable"),
        (b'{"traceEvents": []}', "no usable"),
        (b'{"traceEvents": {"ph": "X"}}', "traceEvents"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}', "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_bad_input_raises_trace_error_with_a_reason(payload, message):
    with pytest.raises(TraceError, match=message):
        load_trace(payload)


def test_truncated_gzip_and_wrong_types_raise_trace_error(tmp_path):
    gz = _path(TRACES[0]).read_bytes()
    with pytest.raises(TraceError, match="truncated"):
        load_trace(gz[: len(gz) // 2])
    with pytest.raises(TraceError, match="bytes or a path"):
        load_trace(12345)
    with pytest.raises(TraceError, match="cannot read"):
        load_trace(tmp_path / "missing.json")
    with pytest.raises(TraceError, match="not a file"):
        load_trace(tmp_path)


def test_limits_on_size_and_event_count():
    gz = _path(TRACES[0]).read_bytes()
    plain_size = len(gzip.decompress(gz))
    with pytest.raises(TraceError, match="limit"):
        load_trace(gz, max_decompressed_bytes=plain_size - 1)
    assert len(load_trace(gz, max_decompressed_bytes=plain_size).events) > 0
    n_events = len(_raw(TRACES[0])["traceEvents"])
    with pytest.raises(TraceError, match="PROFILER_LAB_MAX_TRACE_EVENTS"):
        load_trace(gz, max_events=n_events - 1)
    assert len(load_trace(gz, max_events=n_events).events) > 0
    bomb = gzip.compress(b" " * (64 << 20), compresslevel=9)  # 64 MiB of spaces, ~64 KiB on disk
    with pytest.raises(TraceError, match="gzip bomb"):
        load_trace(bomb, max_decompressed_bytes=16 << 20)


def test_limits_come_from_the_host_settings_passed_in(monkeypatch):
    # HostSettings is read once at start and passed down; load_trace itself no longer
    # reads the environment. Same host variables, same refusals, through ``settings=``.
    gz = _path(TRACES[0]).read_bytes()
    monkeypatch.setenv("PROFILER_LAB_MAX_TRACE_EVENTS", "10")
    with pytest.raises(TraceError, match="over the limit of 10"):
        load_trace(gz, settings=HostSettings.from_env())
    assert len(load_trace(gz).events) > 0  # the environment is not read here: defaults apply
    monkeypatch.delenv("PROFILER_LAB_MAX_TRACE_EVENTS")
    monkeypatch.setenv("PROFILER_LAB_MAX_TRACE_DECOMPRESSED_MB", "0")
    with pytest.raises(TraceError, match="limit"):
        load_trace(gz, settings=HostSettings.from_env())
    # An explicit limit wins over the settings'.
    assert len(load_trace(gz, settings=HostSettings.from_env(), max_decompressed_bytes=1 << 30).events) > 0


def test_default_limits_are_host_settings_defaults(tmp_path):
    n_events = len(_raw(TRACES[0])["traceEvents"])
    with pytest.raises(TraceError, match=f"over the limit of {n_events - 1:,}"):
        load_trace(_path(TRACES[0]), settings=HostSettings(max_trace_events=n_events - 1))
    # A sparse file one byte over the default cap: refused from its size, before it is read.
    cap_mb = HostSettings().max_trace_decompressed_mb
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(cap_mb * 2**20 + 1)
    with pytest.raises(TraceError, match=f"over the {cap_mb} MiB limit"):
        load_trace(big)


# ---- golden file -------------------------------------------------------------------------------


def test_golden_facts_for_the_1024_trace():
    golden = json.loads((DATA / "golden_trace_1024.json").read_text())
    tr = load_trace(DATA / golden["source"])
    ev = tr.events
    assert len(ev) == golden["complete_events"]
    assert ev["cat"].astype(str).value_counts().to_dict() == golden["per_category"]
    kernel_us = ev.loc[ev["cat"] == "kernel", "dur_us"].sum()
    assert math.isclose(round(kernel_us, 3), golden["kernel_total_us"], abs_tol=1e-9)
    lanes = set(ev["lane"].cat.categories)
    assert len(lanes) == golden["distinct_lanes"]
    assert set(golden["named_lanes"]) <= lanes
    assert sorted(tr.flows["correlation"]) == golden["ac2g_linked_correlations"]


GROUNDTRUTH = DATA / "groundtruth" / "cuda"


@pytest.mark.parametrize("stem", ["copies_mixed", "seed_flops", "seed_mem", "seed_stack"])
def test_copy_bytes_flops_and_recording_flags_match_the_json(stem):
    """Memcpy "bytes" and the top-level profile_memory / with_stack flags, read by brute force
    from the JSON of real H200 traces. (Kineto writes no per-op "flops" arg, even under
    with_flops: torch's flops column comes from shapes, as the lab's GEMM figures do.)"""
    path = GROUNDTRUTH / f"{stem}.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    raw = json.loads(gzip.decompress(path.read_bytes()))
    tr = load_trace(path)
    x = [e for e in raw["traceEvents"] if e.get("ph") == "X"]
    want = sorted(float(e["args"]["bytes"]) for e in x if e.get("cat") in ("gpu_memcpy", "gpu_memset"))
    assert sorted(tr.events["copy_bytes"].dropna().tolist()) == want
    assert len(want) or stem != "copies_mixed"
    assert tr.meta.profile_memory == (bool(raw["profile_memory"]) if "profile_memory" in raw else None)
    assert tr.meta.with_stack == (bool(raw["with_stack"]) if "with_stack" in raw else None)

"""``python -m lab replay TRACE --op NAME``: the row found, replayed in a child process on CPU and
printed beside the trace's figures; the script exported; bad input refused in one line."""

from __future__ import annotations

import ast
import gzip
import json
import math
import statistics
from pathlib import Path

import pytest

from lab.cli import EXIT_BAD_INPUT, main
from lab.core.devices import DeviceInfo
from lab.replay import ReplayRefusal, build_spec
from lab.replay.report import check_replay

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "tests/data/groundtruth/cpu/seed.json.gz"
NO_SHAPES = ROOT / "tests/data/groundtruth/cpu/llama_train.json.gz"


def _raw_ops(path: Path, op: str) -> list[dict]:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return sorted((e for e in events if e.get("name") == op and e.get("cat") == "cpu_op"), key=lambda e: e["ts"])


@pytest.mark.subprocess  # the replay runs in a fresh interpreter (lab.replay.run)
def test_replay_prints_the_median_call_beside_its_replay(capsys):
    """Without --index the call of median duration; its figures are the raw event's; the replay
    ran the same shapes on this CPU."""
    assert main(["replay", str(SEED), "--op", "aten::mm", "--device", "cpu", "--calls", "2", "--warmup", "1",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    calls = _raw_ops(SEED, "aten::mm")
    median_call = sorted(calls, key=lambda e: e["dur"])[(len(calls) - 1) // 2]
    assert data["trace"]["op_us"] == pytest.approx(median_call["dur"], abs=1e-3)
    assert data["shapes"] == str(median_call["args"]["Input Dims"])
    dims = median_call["args"]["Input Dims"]
    assert data["flops"] == 2 * dims[0][0] * dims[0][1] * dims[1][1]
    assert data["replay"]["device"] == "cpu" and data["replay"]["calls"] == 2 and data["replay"]["op_us"] > 0
    assert data["compared"] == "op CPU time" and data["ratio"] > 0


@pytest.mark.subprocess  # the replay runs in a fresh interpreter (lab.replay.run)
def test_replay_text_names_both_sides(capsys):
    assert main(["replay", str(SEED), "--op", "aten::add", "--index", "0", "--device", "cpu", "--calls", "2",
                 "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    first = _raw_ops(SEED, "aten::add")[0]
    assert out.startswith(f"aten::add {first['args']['Input Dims']}")
    assert "trace" in out and "replay" in out and "GB/s" in out


def test_export_writes_a_torch_only_script_without_running(tmp_path, capsys):
    out = tmp_path / "replay_mm.py"
    assert main(["replay", str(SEED), "--op", "aten::mm", "--export", str(out), "--no-run"]) == 0
    text = out.read_text()
    imports = {n.names[0].name if isinstance(n, ast.Import) else n.module
               for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.Import, ast.ImportFrom))}
    assert not any(m.split(".")[0] == "lab" for m in imports) and "torch" in imports
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(("argv", "match"), [
    ([str(NO_SHAPES), "--op", "aten::mm"], "record_shapes=True"),
    ([str(SEED), "--op", "aten::nope"], "no aten::nope op"),
    ([str(SEED), "--op", "aten::mm", "--index", "99"], "choose an index"),
    ([str(SEED), "--op", "aten::mm", "--shapes", "[[1, 2]]"], "no aten::mm call has input shapes"),
    ([str(SEED), "--op", "aten::mm", "--device", "cuda"], "no CUDA GPU"),
])  # fmt: skip
def test_bad_input_is_one_line_and_status_2(capsys, argv, match):
    assert main(["replay", *argv]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert match in err and err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_an_op_that_does_not_fit_is_refused_before_running():
    spec = build_spec("aten::mm", "[[65536, 65536], [65536, 65536]]", "['float', 'float']")
    small = DeviceInfo(kind="cuda", name="a small GPU", free_memory_bytes=8 * 2**30, compute_capability=(9, 0))
    with pytest.raises(ReplayRefusal, match="smaller call"):
        check_replay(spec, small)
    check_replay(spec, DeviceInfo(kind="cuda", name="big", free_memory_bytes=200 * 2**30, compute_capability=(9, 0)))


@pytest.mark.subprocess  # the replay runs in a fresh interpreter (lab.replay.run)
def test_a_replay_that_fails_in_its_process_says_why_in_one_line():
    """The child's last error line comes back: here the recorded inputs fit no overload of the op."""
    from lab.replay import ReplayFailed, run_replay

    spec = build_spec("aten::mm", "[[4, 4], []]", "['float', 'Scalar']", "", "['', '2']").to_dict()
    with pytest.raises(ReplayFailed, match="no overload of aten::mm takes the recorded inputs"):
        run_replay(spec, device="cpu", calls=1, warmup=0, timeout_s=120)


@pytest.mark.subprocess  # the replay runs in a fresh interpreter (lab.replay.run)
def test_a_variant_changes_the_inputs_and_says_so(capsys):
    """--contiguous --dtype bfloat16 on the channels_last float32 conv: the replay's inputs have the
    raw dims with contiguous strides (computed from the dims) in bfloat16."""
    path = ROOT / "tests/data/groundtruth/cpu/conv_channels_last.json.gz"
    assert main(["replay", str(path), "--op", "aten::conv2d", "--index", "0", "--device", "cpu", "--calls", "1",
                 "--warmup", "0", "--contiguous", "--dtype", "bfloat16", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    args = _raw_ops(path, "aten::conv2d")[0]["args"]
    dims = [d for d, t in zip(args["Input Dims"], args["Input type"]) if t not in ("", "Scalar", "ScalarList")]
    assert args["Input Strides"][0] != _contiguous(dims[0])  # recorded channels_last
    assert data["replay"]["input_shapes"] == dims
    assert data["replay"]["input_strides"] == [_contiguous(d) for d in dims]
    assert set(data["replay"]["input_dtypes"]) == {"bfloat16"}
    assert any("bfloat16" in n and "contiguous" in n for n in data["notes"])
    # the FLOPs per call do not depend on the dtype: the replay's rate divides the op model's count
    # by its own time; a convolution's bytes are not modelled, so no GB/s is claimed for either side
    assert data["replay"]["tflops"] * data["replay"]["us"] * 1e6 == pytest.approx(data["flops"], rel=1e-6)
    assert data["replay"]["gbs"] is None and data["trace"]["gbs"] is None


def _contiguous(dims: list[int]) -> list[int]:
    return [math.prod(dims[i + 1:]) for i in range(len(dims))]


def test_list_ranks_the_replayable_ops_by_total_time(capsys):
    """CPU trace: per (op, Input Dims, Input type) of the replayed classes, the summed and median
    durations of the raw events, largest total first."""
    from collections import defaultdict

    from lab.replay import OP_CLASSES

    path = ROOT / "tests/data/groundtruth/cpu/moe_routing.json.gz"
    assert main(["replay", str(path), "--list", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["ops"]
    replayed = {op for ops in OP_CLASSES.values() for op in ops}
    groups = defaultdict(list)
    for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e["name"] in replayed:
            a = e.get("args", {})
            groups[(e["name"], str(a.get("Input Dims", "")), str(a.get("Input type", "")))].append(e["dur"])
    want = sorted(groups.items(), key=lambda kv: -sum(kv[1]))[:len(got)]
    assert got and len(got) == min(len(groups), 15)
    assert [g["total_us"] for g in got] == pytest.approx([sum(d) for _, d in want], abs=1e-2)
    for g in got:
        durs = groups[(g["op"], g["shapes"], g["types"])]
        assert g["calls"] == len(durs) and g["median_us"] == pytest.approx(statistics.median(durs), abs=1e-3)
        assert g["basis"] == "op CPU time" and g["replayable"] == (g["refusal"] is None)

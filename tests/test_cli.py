"""``python -m lab``: a real run in a subprocess, bad input exits 2 with one line, no traceback."""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import read_trace

from lab import cli
from lab.core import RunConfig
from lab.units import fmt_us

REPO = Path(__file__).resolve().parents[1]


def _lab(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    # Host limits come only from the test, never from the shell that runs it.
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PROFILER_LAB_")}
    full_env.update({"KINETO_LOG_LEVEL": "6", **(env or {})})
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=REPO, env=full_env,
                          capture_output=True, text=True, timeout=300)


def _assert_one_line_refusal(proc: subprocess.CompletedProcess, fragment: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert fragment in lines[0]


@pytest.mark.subprocess
def test_profile_writes_trace_csv_and_summary(tmp_path):
    out = tmp_path / "run"
    proc = _lab("profile", "--device", "cpu", "--m", "256", "--k", "256", "--n", "256",
                "--dtype", "float32", "--label", "cli_step", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "cli_step" in proc.stdout and "Self CPU time total" in proc.stdout  # the classic table

    trace = read_trace((out / "trace.json.gz").read_bytes())
    labels = [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation" and e["name"] == "cli_step"]
    assert len(labels) == 3  # default schedule: 3 active steps

    with open(out / "key_averages.csv", newline="") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    for name in ("cli_step", "aten::mm", "aten::add"):
        assert rows[name]["count"] == "3"
    assert rows["cli_step"]["is_user_annotation"] == "True"

    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["m"] == 256 and summary["config"]["step_label"] == "cli_step"
    assert summary["device"]["kind"] == "cpu"
    assert len(summary["timing"]["profiled_us"]) == 3
    assert summary["timing"]["method"] == "wall clock"
    assert set(summary["stage_s"]) >= {"checking", "allocating", "profiling", "exporting", "timing"}


@pytest.mark.subprocess
@pytest.mark.parametrize("args, env, fragment", [
    (["--m", "0"], None, "M must be a whole number"),
    (["--m", str(10**6)], None, "above this host's limit"),
    (["--dtype", "float64"], None, "unknown dtype"),
    (["--dtype", "float16"], None, "float16 matmul on CPU"),
    (["--label", "x" * 200], None, "1–64 characters"),
    (["--m", "abc"], None, "invalid int value"),
    (["--bogus"], None, "unrecognized arguments"),
    ([], {"PROFILER_LAB_MAX_DIM": "lots"}, "PROFILER_LAB_MAX_DIM"),
    (["--m", "200000", "--k", "200000", "--n", "200000"], {"PROFILER_LAB_MAX_DIM": "300000"},
     "choose smaller M, K or N"),
], ids=["m0", "m-huge", "dtype", "fp16-cpu", "long-label", "not-int", "unknown-flag", "bad-setting", "no-memory"])
def test_bad_input_exits_2_with_one_line(tmp_path, args, env, fragment):
    out = tmp_path / "never"
    proc = _lab("profile", "--device", "cpu", *args, "--out", str(out), env=env)
    _assert_one_line_refusal(proc, fragment)
    assert not out.exists()  # refused before anything was written


def test_refusals_then_a_run_in_one_process(tmp_path, capsys, monkeypatch, warm_cpu):
    # In-process, as the worker would: refusals must leave nothing behind for the next run.
    monkeypatch.setenv("PROFILER_LAB_MAX_DIM", "300000")
    assert cli.main(["profile", "--device", "cpu", "--m", "200000", "--k", "200000", "--n", "200000"]) == 2
    assert cli.main(["profile", "--device", "cpu", "--dtype", "tf32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "choose smaller" in err[0] and "tf32" in err[1]
    out = tmp_path / "ok"
    assert cli.main(["profile", "--device", "cpu", "--m", "64", "--k", "64", "--n", "64",
                     "--matmul-label", "mm", "--add-label", "add", "--with-flops", "--no-record-shapes",
                     "--steps", "2", "--out", str(out)]) == 0
    with open(out / "key_averages.csv", newline="") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    assert rows["mm"]["count"] == rows["add"]["count"] == rows["aten::mm"]["count"] == "2"
    assert rows["aten::mm"]["flops"] == str(2 * 64 * 64 * 64 * 2)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["record_shapes"] is False and summary["config"]["active"] == 2


def test_config_from_args_maps_every_flag():
    args = cli.build_parser().parse_args([
        "profile", "--m", "8", "--k", "16", "--n", "32", "--dtype", "bfloat16", "--device", "cpu",
        "--label", "L", "--matmul-label", "ML", "--add-label", "AL", "--steps", "4", "--warmup-iters", "0",
        "--wait", "2", "--warmup", "3", "--repeat", "2", "--compile", "--no-record-shapes",
        "--profile-memory", "--with-stack", "--with-flops", "--ranks", "3", "--straggler", "1", "--straggler-ms", "5",
        "--straggler-cause", "compute",
    ])
    job = cli.config_from_args(args).replace(workload="ddp_gloo")  # the job's fields are in a job's dict
    assert (job.ranks, job.straggler, job.straggler_ms, job.straggler_cause) == (3, 1, 5, "compute")
    config = cli.config_from_args(args)
    assert config.to_dict() == {
        "workload": "matmul_add", "m": 8, "k": 16, "n": 32, "dtype": "bfloat16", "device": "cpu",
        "step_label": "L", "matmul_label": "ML", "add_label": "AL", "wait": 2, "warmup": 3, "active": 4,
        "repeat": 2, "warmup_iters": 0, "record_shapes": False, "profile_memory": True,
        "with_stack": True, "with_flops": True, "compile": True,
    }


# Every flag of ``profile`` with its help line, as the hand-written parser had them: the parser
# is now built from RunConfig's Options, and must say the same.
PROFILE_FLAG_HELP = {
    "--workload": "exercise to run (default %(default)s)",
    "--m": "rows of x (default %(default)s)",
    "--k": "inner dimension (default %(default)s)",
    "--n": "columns of w (default %(default)s)",
    "--dtype": "one of float32, tf32, bfloat16, float16 (default %(default)s)",
    "--device": "one of auto, cpu, cuda (default %(default)s)",
    "--label": "record_function label of the step",
    "--matmul-label": "record_function label around the matmul",
    "--add-label": "record_function label around the bias add",
    "--steps": "active (recorded) steps per cycle",
    "--warmup-iters": "un-profiled iterations before profiling; 0 = cold run",
    "--wait": "schedule: skipped steps per cycle",
    "--warmup": "schedule: traced-but-dropped steps",
    "--repeat": "schedule: cycles",
    "--compile": "run the step through torch.compile",
    "--record-shapes": None,
    "--profile-memory": None,
    "--with-stack": None,
    "--with-flops": None,
    "--ranks": "distributed workloads: processes, one rank each (2-8; default %(default)s)",
    "--straggler": "distributed workloads: the rank made slow (-1 = none; default %(default)s)",
    "--straggler-ms": "distributed workloads: the straggler's extra time per step, ms (default %(default)s)",
    "--straggler-cause": "one of input, compute: a slow input pipeline (sleep in 'load_batch') or extra compute "
                         "(default %(default)s)",
    "--replay": "the replay workload: the op row as JSON (the page's 'Replay here' and python -m lab replay write it)",
    "--out": "folder for trace.json.gz, key_averages.csv, summary.json",
}


def _profile_parser():
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    return sub.choices["profile"]


def test_profile_flags_defaults_and_help_are_as_before():
    actions = {a.option_strings[0]: a for a in _profile_parser()._actions if a.option_strings[0] != "-h"}
    assert {flag: a.help for flag, a in actions.items()} == PROFILE_FLAG_HELP
    defaults = cli.config_from_args(cli.build_parser().parse_args(["profile"]))
    assert defaults == RunConfig()
    assert actions["--record-shapes"].option_strings == ["--record-shapes", "--no-record-shapes"]
    assert actions["--matmul-label"].default is None and actions["--steps"].type is int


@pytest.mark.subprocess
@pytest.mark.parametrize("where", [[], ["--isolated"]], ids=["in-process", "isolated"])
def test_analyze_honours_the_hosts_trace_limits(where):
    # 126 events in the H200 seed trace: a host limit of 50 refuses it, the default reads it.
    trace = str(REPO / "tests" / "data" / "groundtruth" / "cuda" / "seed.json.gz")
    _assert_one_line_refusal(_lab("analyze", *where, trace, env={"PROFILER_LAB_MAX_TRACE_EVENTS": "50"}), "50")
    assert _lab("analyze", *where, trace).returncode == 0


# ---- where the traces are read: here by default, in reader processes with --isolated ---------

DATA = REPO / "tests" / "data"
RANKS = [str(DATA / "groundtruth" / "cpu" / f"gloo_ddp_rank{r}.json.gz") for r in (0, 1)]


@pytest.fixture
def readers_started(monkeypatch):
    """The reader pools the CLI starts, by reader count; the shell's PROFILER_LAB_* are not the test's."""
    from lab.read import ReaderPool

    for name in [k for k in os.environ if k.startswith("PROFILER_LAB_")]:
        monkeypatch.delenv(name)
    started: list[int] = []
    start = ReaderPool.start

    def counted(pool, **kwargs):
        started.append(pool.plan.count)
        return start(pool, **kwargs)

    monkeypatch.setattr(ReaderPool, "start", counted)
    return started


def _json_of(argv: list[str], capsys) -> dict:
    assert cli.main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.pool
def test_analyze_reads_here_and_isolated_in_a_reader_the_same(readers_started, capsys):
    path = str(DATA / "matmul_add_1024_fp32.json.gz")
    here = _json_of(["analyze", "--json", path], capsys)
    assert readers_started == []  # no reader process: the read ran in this one
    isolated = _json_of(["analyze", "--isolated", "--json", path], capsys)
    assert readers_started == [1]
    assert here == isolated
    raw = json.loads(gzip.decompress(Path(path).read_bytes()))
    assert here["events"] == sum(e.get("ph") == "X" for e in raw["traceEvents"])


@pytest.mark.pool
def test_compare_reads_here_and_isolated_the_same(readers_started, capsys):
    a, b = str(DATA / "matmul_add_4096_bf16.json.gz"), str(DATA / "matmul_add_4096_bf16_compiled.json.gz")
    here = _json_of(["compare", "--json", a, b], capsys)
    assert readers_started == []
    assert _json_of(["compare", "--isolated", "--json", a, b], capsys) == here
    assert readers_started == [1]
    assert here["label_a"] == "matmul_add_4096_bf16" and here["label_b"] == "matmul_add_4096_bf16_compiled"


@pytest.mark.pool
def test_ranks_read_here_one_after_the_other_or_isolated_at_once(readers_started, capsys):
    here = _json_of(["ranks", "--json", *RANKS], capsys)
    assert readers_started == []
    assert _json_of(["ranks", "--isolated", "--json", *RANKS], capsys) == here
    assert len(readers_started) == 1 and readers_started[0] >= 1  # the host's reader count
    assert [r["rank"] for r in here["ranks"]] == [0, 1]
    # Two files of one rank (a CPU and a CUDA job's rank 0): refused alike, in one line, either way.
    mixed = [RANKS[0], str(DATA / "groundtruth" / "cuda" / "gloo_ddp_rank0.json.gz")]
    for where in ([], ["--isolated"]):
        assert cli.main(["ranks", *where, *mixed]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "rank 0 appears 2 times" in err[0]


def test_a_failed_analysis_is_refused_in_a_readers_words(readers_started, capsys, monkeypatch):
    import lab.analysis

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(lab.analysis, "analyze", broken)
    assert cli.main(["analyze", str(DATA / "matmul_add_1024_fp32.json.gz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the lab could not analyse it (RuntimeError: boom)")
    assert cli.main(["ranks", *RANKS]) == 2  # a rank's read names its file
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gloo_ddp_rank0.json.gz: the lab could not analyse it (RuntimeError: boom)" in err[0]


# ---- python -m lab table --------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch_profile(tmp_path_factory):
    """A real CPU profile (the seed's labels under a schedule) and torch's key_averages of it."""
    import ka_programs as kp

    rec, prof = kp.record("seed", "cpu", tmp_path_factory.mktemp("table"), keep_profile=True)
    return rec, prof.key_averages()


@pytest.mark.subprocess
def test_table_prints_torchs_table(torch_profile):
    rec, averages = torch_profile
    for sort_by, limit in (("self_cpu_time_total", "3"), ("cpu_time_total", "-1")):
        proc = _lab("table", str(rec.trace_path), "--sort", sort_by, "--row-limit", limit)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == averages.table(sort_by=sort_by, row_limit=int(limit))


@pytest.mark.subprocess
def test_table_csv_has_the_cpu_rows_with_torchs_numbers(torch_profile):
    rec, averages = torch_profile
    proc = _lab("table", str(rec.trace_path), "--csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(proc.stdout.splitlines()))
    assert list(rows[0]) == ["name", "count", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us"]
    want = {e.key: e for e in averages if str(e.device_type).endswith("CPU")}
    assert sorted(r["name"] for r in rows) == sorted(want)  # one row per name
    for r in rows:
        e = want[r["name"]]
        assert int(r["count"]) == e.count
        assert float(r["self_cpu_us"]) == pytest.approx(e.self_cpu_time_total, abs=1e-3)
        assert float(r["cpu_total_us"]) == pytest.approx(e.cpu_time_total, abs=1e-3)
    totals = [float(r["cpu_total_us"]) for r in rows]
    assert totals == sorted(totals, reverse=True)  # CPU trace: sorted by CPU total


@pytest.mark.subprocess
def test_table_csv_by_shape(torch_profile):
    rec, _ = torch_profile
    proc = _lab("table", str(rec.trace_path), "--csv", "--group-by-shape", "--row-limit", "2")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(proc.stdout.splitlines()))
    assert len(rows) == 2 and list(rows[0])[:3] == ["name", "input_shapes", "count"]
    want = {(r["name"], r["input_shapes"]) for r in rec.by_shape}
    assert all((r["name"], r["input_shapes"]) in want for r in rows)


@pytest.mark.subprocess
def test_table_refuses_bad_input_with_one_line(torch_profile, tmp_path):
    rec, _ = torch_profile
    _assert_one_line_refusal(_lab("table", str(rec.trace_path), "--sort", "bogus"), "not a sort key")
    _assert_one_line_refusal(_lab("table", str(tmp_path / "missing.json")), "cannot read")
    (tmp_path / "junk.json").write_text("{not json")
    _assert_one_line_refusal(_lab("table", str(tmp_path / "junk.json")), "not valid JSON")


@pytest.mark.subprocess
def test_analyze_json_carries_the_verdict_its_cause_and_the_insights():
    # The real H200 pageable-copy trace: its copies are most of the GPU's busy time (brute force).
    path = REPO / "tests" / "data" / "groundtruth" / "cuda" / "copies_mixed.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))
    copies = [e for e in raw["traceEvents"] if e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"]]
    proc = _lab("analyze", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    verdict = report["verdict"]
    assert verdict["kind"] == "pageable_copies" and verdict["explanation"].startswith(verdict["cause"]["title"])
    # the cause's numbers: the pageable copies' time per step, as the finding's evidence quotes it
    per_step = sum(e["dur"] for e in copies) / max(report["explained"]["steps"], 1)
    assert verdict["cause"]["evidence"].startswith(f"{fmt_us(per_step)} of the ")
    assert "Copies from pageable host memory" in [i["title"] for i in report["insights"]]


@pytest.mark.subprocess
@pytest.mark.parametrize("stem", ["seed_mem", "llama_train_mem"])
def test_table_csv_has_torchs_memory_columns_on_a_memory_trace(stem):
    """profile_memory traces: the four memory columns, each CPU row's bytes exactly torch's
    (its own key_averages CSV recorded beside the trace); a trace without records has none."""
    folder = REPO / "tests" / "data" / "groundtruth" / "cuda"
    proc = _lab("table", str(folder / f"{stem}.json.gz"), "--csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(proc.stdout.splitlines()))
    memory = ["self_cpu_memory_bytes", "cpu_memory_bytes", "self_device_memory_bytes", "device_memory_bytes"]
    assert list(rows[0]) == ["name", "count", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us",
                             *memory]
    with open(folder / f"{stem}.key_averages.csv", newline="") as f:
        want = {r["name"]: r for r in csv.DictReader(f) if r["device_type"].endswith("CPU")}
    assert sorted(r["name"] for r in rows) == sorted(want)
    for r in rows:
        assert [int(r[c]) for c in memory] == [int(want[r["name"]][c]) for c in memory], r["name"]
        assert int(r["count"]) == int(want[r["name"]]["count"])
    assert any(int(r["device_memory_bytes"]) for r in rows)
    plain = _lab("table", str(folder / "seed.json.gz"), "--csv")
    assert "memory" not in plain.stdout.splitlines()[0]


@pytest.mark.subprocess
def test_reading_commands_never_import_the_charts_library():
    # altair (~0.2 s of imports, a quarter of the lab's) is the page's: analyze, compare, table and
    # memory print text, so they must not pay for it.
    code = ("import sys, contextlib, io; from lab import cli\n"
            "for argv in sys.argv[1:]:\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        assert cli.main(argv.split()) == 0, argv\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'altair'))")
    trace, memory = str(DATA / "matmul_add_1024_fp32.json.gz"), str(DATA / "groundtruth" / "cuda" / "seed_mem.json.gz")
    proc = subprocess.run([sys.executable, "-c", code, f"analyze {trace}", f"compare {trace} {trace}",
                           f"table {trace}", f"memory {memory}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"

"""Trace directories (lab.tracedir): torch's own file names, runs/workers/spans, refusals.

The names come from torch's ``tensorboard_trace_handler`` itself (its handler called with a
stand-in profiler that records the path it is told to export to), so a change of torch's
format fails here. Every refusal of ``resolve`` is tried: traversal, absolute paths, symlinks
out of the directory (file and folder), non-trace files, folders.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.tracedir import MetaCache, TraceDirError, job_paths, list_runs, parse_trace_name, read_meta, resolve

ROOT = Path(__file__).resolve().parents[1]
GLOO = ROOT / "tests" / "data" / "groundtruth" / "cpu"


class _Prof:
    """What tensorboard_trace_handler calls: export_chrome_trace(path); we copy a real trace there."""

    def __init__(self, source: Path):
        self.source, self.paths = source, []

    def export_chrome_trace(self, path, **_):
        self.paths.append(Path(path))
        shutil.copy(self.source, path)


def torch_exports(directory: Path, rank: int, count: int = 1, worker: str | None = None) -> list[Path]:
    from torch.profiler import tensorboard_trace_handler

    prof = _Prof(GLOO / f"gloo_ddp_rank{rank}.json.gz")
    handler = tensorboard_trace_handler(str(directory), worker_name=worker, use_gzip=True)
    for _ in range(count):
        handler(prof)
    return prof.paths


def test_torchs_handler_names_parse_to_worker_and_time(tmp_path):
    (path,) = torch_exports(tmp_path, 0)
    name = parse_trace_name(path.name, mtime_ns=0)
    import socket

    assert name is not None and name.from_handler
    assert name.worker == f"{socket.gethostname()}_{os.getpid()}"  # torch's default worker name
    assert abs(name.time_ns - path.stat().st_mtime_ns) < 60e9
    assert parse_trace_name("host.a.b_12.1790000000000000000.pt.trace.json", 0).worker == "host.a.b_12"
    assert parse_trace_name("rank0.json.gz", 5).worker == "rank0" and parse_trace_name("rank0.json.gz", 5).time_ns == 5
    for other in ("notes.txt", "trace.json.gz.tmp", ".hidden.json", "events.out.tfevents.1"):
        assert parse_trace_name(other, 0) is None


def test_two_ranks_two_cycles_are_one_run_of_two_workers_and_two_spans(tmp_path):
    run = tmp_path / "job"
    first = [torch_exports(run, r, count=2, worker=f"node_{r}") for r in (0, 1)]
    (tmp_path / "notes.txt").write_text("not a trace")
    cache = MetaCache()
    (found,) = list_runs([str(tmp_path)], cache)
    assert found.name == "job" and found.workers == ("node_0", "node_1")
    assert [s.index for s in found.spans] == [1, 0]  # newest first
    for span in found.spans:
        assert [f.meta.rank for f in span.files] == [0, 1] and span.world_size == 2 and span.is_job
        assert {f.relative for f in span.files} == {f"job/{first[r][span.index].name}" for r in (0, 1)}
    assert all(f.meta.steps == 2 for f in found.files)  # distinct ProfilerStep#N in the JSON
    reads = cache.reads
    list_runs([str(tmp_path)], cache)
    assert cache.reads == reads == 4  # listed again: nothing reopened
    os.utime(first[0][0], ns=(1, 1))  # a changed file is read again
    list_runs([str(tmp_path)], cache)
    assert cache.reads == 5


def test_meta_reads_distributed_info_and_steps_from_the_json():
    import gzip
    import json

    raw = json.loads(gzip.decompress((GLOO / "gloo_ddp_rank1.json.gz").read_bytes()))
    steps = {e["name"] for e in raw["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")}
    meta = read_meta(str(GLOO / "gloo_ddp_rank1.json.gz"), size=1)
    assert (meta.rank, meta.world_size, meta.backend) == (raw["distributedInfo"]["rank"],
                                                          raw["distributedInfo"]["world_size"], "gloo")
    assert meta.steps == len(steps)
    seed = read_meta(str(GLOO / "seed.json.gz"), size=1)
    assert seed.rank is None and seed.world_size is None


@pytest.fixture
def tree(tmp_path):
    """root/run/a.json.gz (a trace), root/run/notes.txt, outside/secret.json.gz, and symlinks."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "run").mkdir(parents=True)
    outside.mkdir()
    shutil.copy(GLOO / "seed.json.gz", root / "run" / "a.json.gz")
    (root / "run" / "notes.txt").write_text("x")
    shutil.copy(GLOO / "seed.json.gz", outside / "secret.json.gz")
    (root / "run" / "out.json.gz").symlink_to(outside / "secret.json.gz")
    (root / "run" / "in.json.gz").symlink_to(root / "run" / "a.json.gz")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "run" / "dir.json").mkdir()
    return root, outside


def test_resolve_accepts_a_listed_trace_and_a_symlink_inside(tree):
    root, _ = tree
    assert resolve([str(root)], 0, "run/a.json.gz") == (root / "run" / "a.json.gz").resolve()
    assert resolve([str(root)], 0, "run/in.json.gz") == (root / "run" / "a.json.gz").resolve()


@pytest.mark.parametrize("relative, fragment", [
    ("../outside/secret.json.gz", "paths are not accepted"),
    ("run/../../outside/secret.json.gz", "paths are not accepted"),
    ("/etc/passwd.json", "paths are not accepted"),
    ("run/./a.json.gz", "paths are not accepted"),
    ("run\\..\\a.json.gz", "paths are not accepted"),
    ("run/out.json.gz", "leads out of the trace directory"),
    ("linked/secret.json.gz", "leads out of the trace directory"),
    ("run/notes.txt", "is not a trace"),
    ("run/dir.json", "is not a file"),
    ("run/missing.json.gz", "is gone"),
], ids=["dotdot", "dotdot-inner", "absolute", "dot", "backslash", "symlink-file-out", "symlink-dir-out",
        "not-trace", "folder", "missing"])
def test_resolve_refuses_what_is_not_a_listed_trace(tree, relative, fragment):
    root, _ = tree
    with pytest.raises(TraceDirError, match=fragment):
        resolve([str(root)], 0, relative)


def test_resolve_refuses_an_unknown_root(tree):
    root, _ = tree
    with pytest.raises(TraceDirError, match="no trace directory number"):
        resolve([str(root)], 1, "run/a.json.gz")


def test_listing_skips_symlinks_out_and_non_traces(tree):
    root, _ = tree
    (run,) = list_runs([str(root)], MetaCache())
    assert sorted(f.relative for f in run.files) == ["run/a.json.gz", "run/in.json.gz"]


@pytest.mark.subprocess
def test_cli_ranks_reads_a_directorys_newest_span(tmp_path):
    job = tmp_path / "job"
    for r in (0, 1):
        torch_exports(job, r, worker=f"node_{r}")
    assert len(job_paths(str(job))) == 2
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFILER_LAB_")} | {"KINETO_LOG_LEVEL": "6"}
    proc = subprocess.run([sys.executable, "-m", "lab", "ranks", str(job)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("2 ranks of a world of 2, gloo") and "straggler: rank 1" in proc.stdout
    up = subprocess.run([sys.executable, "-m", "lab", "ranks", str(tmp_path)], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=300)
    assert up.returncode == 2 and "its runs: job" in up.stderr


@pytest.mark.subprocess
def test_a_64_rank_synthetic_job_read_from_its_directory_finds_the_planted_straggler(tmp_path):
    import json

    sys.path.insert(0, str(ROOT / "scripts"))
    from make_synthetic_job import make_job

    make_job(tmp_path / "job", ranks=64, straggler=37, seed=3)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFILER_LAB_")} | {"KINETO_LOG_LEVEL": "6"}
    proc = subprocess.run([sys.executable, "-m", "lab", "ranks", str(tmp_path / "job"), "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)
    assert job["world_size"] == 64 and [r["rank"] for r in job["ranks"]] == list(range(64))
    assert job["straggler"]["rank"] == 37 and job["straggler"]["late_median_us"] > 0
    # The planted stretch (1.25) against the others' (≤ 1.02): its window is the longest by far.
    windows = {r["rank"]: r["window_us"] for r in job["ranks"]}
    assert max(windows, key=windows.get) == 37 and windows[37] > 1.2 * sorted(windows.values())[-2]
    # Readable at 64 ranks: the findings name the ranks as ranges, not in 64 clauses.
    insights = {f["title"]: f["evidence"] for f in job["findings"]}
    assert all(len(e) < 600 for e in insights.values()), insights
    assert "64 of 64 ranks (ranks 0–63)" in insights["Communication barely overlaps compute"]
    # Every rank is the same trace stretched: the same work, run slower: the host's scheduling, no imbalance.
    assert "Compute is imbalanced across ranks" not in insights
    assert "across ranks 0–63" in insights["The ranks run the same work at different speeds: host scheduling"]
    assert "rank 37" in insights["A straggler rank: the others wait for it"]


@pytest.mark.subprocess
def test_cli_ranks_skips_what_is_not_a_trace_and_says_so(tmp_path):
    """A run's folder as users have it: the ranks' traces beside a facts.json, a log and a config."""
    job = tmp_path / "job"
    for r in (0, 1):
        torch_exports(job, r, worker=f"node_{r}")
    (job / "facts.json").write_text('{"ranks": 2, "lr": 0.1}')  # JSON, but no traceEvents
    (job / "train.log").write_text("step 1 loss 0.5\n")
    (job / "config.json.gz").write_bytes(__import__("gzip").compress(b'{"model": "mlp"}'))
    (job / ".hidden.json").write_text("{}")
    (run,) = list_runs([str(tmp_path)], MetaCache())
    assert run.skipped == ("job/config.json.gz", "job/facts.json", "job/train.log")
    assert all(len(s.files) == 2 for s in run.spans) and set(run.workers) == {"node_0", "node_1"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFILER_LAB_")} | {"KINETO_LOG_LEVEL": "6"}
    proc = subprocess.run([sys.executable, "-m", "lab", "ranks", str(job)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("2 ranks of a world of 2, gloo")
    assert "skipped 3 files that are not traces: config.json.gz, facts.json, train.log" in proc.stderr
    assert ".hidden" not in proc.stderr

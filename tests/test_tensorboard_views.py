"""The TensorBoard plugin's views against expectations brute-forced from the
raw JSON of the corpus traces: the step-time breakdown (the plugin's categories, precedence and
step rules, written out again here as plain Python over the events), the Kernel view (sums and
duration-weighted means of the kernel args), Tensor Cores on the recorded GEMM dtypes, and the
Module view (the hierarchy from the Python ids, the times from time containment)."""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
from collections import defaultdict
from pathlib import Path

import corpus
import numpy as np
import pandas as pd
import pytest
from test_app import assert_healthy, at, charts, errors, open_view, plain, upload  # noqa: F401 (fixture)
from test_script_thread import script_thread_calls  # noqa: F401 (fixture)

from lab.analysis import STEP_TIME_CATEGORIES, Analysis, TensorBoardViews, kernel_view, module_view, step_time
from lab.analysis.modules import NO_MODULES
from lab.analysis.step_time import column_of
from lab.core import HostSettings
from lab.read import Job, JobInput, JobKind, ReaderPool

DATA = Path(__file__).parent / "data"
SAMPLES = sorted((Path(__file__).parents[1] / "lab" / "samples").glob("*.json.gz"))  # the H200 recordings
CORPUS = sorted((DATA / "groundtruth").glob("*/*.json.gz")) + sorted(DATA.glob("*.json.gz")) + SAMPLES
CUDA = sorted((DATA / "groundtruth" / "cuda").glob("*.json.gz")) + SAMPLES
TOL_US = 0.1  # the lab's clock is µs since the first event: float64 rounding of ~5e12 µs stamps
COMM = {f"{lib}:{op}" for lib in ("nccl", "gloo") for op in ("broadcast", "reduce", "all_reduce", "all_gather",
                                                              "reduce_scatter")}


@functools.cache
def _events(path: Path) -> tuple[dict, ...]:
    """The complete events of the raw JSON, read once a process (several tests read a path)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return tuple(e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("dur") is not None)


def _trace(path: Path):
    return corpus.trace(path)


# --------------------------------------------------------------------------- step time, by hand


def _role(e: dict, comm_ids: set) -> int | None:
    """The plugin's category index of one event (event_parser.py L293-320), None for none."""
    cat, name = e.get("cat", ""), e.get("name", "")
    ext = e.get("args", {}).get("External id")
    if cat == "kernel":
        return 3 if ext in comm_ids else 0
    if cat == "gpu_memcpy":
        return 1
    if cat == "gpu_memset":
        return 2
    if cat == "cuda_runtime":
        return 4
    if cat in ("cpu_op", "user_annotation", "python"):
        if cat != "python" and ((name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__"))
                                or name.startswith("enumerate(DataPipe)#")):
            return 5
        if name.startswith("ProfilerStep#") and cat != "python":
            return None
        return 3 if name in COMM else 6
    return None


def _union(spans: list[tuple[float, float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _intersect(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    """Two sorted lists of disjoint spans: their common time."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append([lo, hi])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _minus(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    """Two sorted lists of disjoint spans: the time of ``a`` outside ``b``."""
    out, j = [], 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append([cur, b[k][0]])
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append([cur, e])
    return out


def _steps_by_hand(ev: list[dict]) -> tuple[list[tuple[float, float]], list[str]]:
    """The plugin's steps (event_parser.py L312-315, L330-443), host ProfilerStep# only."""
    host = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")
                   and e.get("cat") in ("cpu_op", "user_annotation")), key=lambda e: e["ts"])
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in host]
    names = [e["name"].split("#")[1] for e in host]
    if not host:  # the whole CPU activity is step "0" (L267-269), then stretched like any step
        cpu = [e for e in ev if e.get("cat") in ("cpu_op", "python")]
        if not cpu:
            return [], []
        steps, names = [(min(e["ts"] for e in cpu), max(e["ts"] + e["dur"] for e in cpu))], ["0"]
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    by_corr = defaultdict(list)
    for g in gpu:
        by_corr[g.get("args", {}).get("correlation")].append(g)
    matched, dev_end, counts = set(), [None] * len(steps), [0] * len(steps)
    first_dev = [None] * len(steps)
    for r in (e for e in ev if e.get("cat") == "cuda_runtime"):
        for i, (s, t) in enumerate(steps):
            if r["ts"] >= s and r["ts"] + r["dur"] <= t:
                for g in by_corr.get(r.get("args", {}).get("correlation"), []):
                    matched.add(id(g))
                    counts[i] += 1
                    end = g["ts"] + g["dur"]
                    dev_end[i] = end if dev_end[i] is None else max(dev_end[i], end)
                    first_dev[i] = g["ts"] if first_dev[i] is None else min(first_dev[i], g["ts"])
                break
    if not matched:
        return steps, names
    prev = steps[0][0]
    if first_dev[0] is not None:
        loose = [g["ts"] + g["dur"] for g in gpu if id(g) not in matched]
        prev = max([prev] + [end for end in loose if end < first_dev[0]])
    out = []
    for i, (s, t) in enumerate(steps):
        start = max(prev, s)
        stop = max(t, start, dev_end[i] if dev_end[i] is not None else start)
        out.append((start, stop))
        prev = stop
    keep = len(out)
    if len(out) > 1:
        last = max(i for i, c in enumerate(counts) if c > 0)
        keep = last if last > 0 and counts[last - 1] * 0.8 > counts[last] else last + 1
    return out[:keep], names[:keep]


def _breakdown_by_hand(ev: list[dict]) -> tuple[list[str], list[float], list[list[float]]]:
    ev = [e for e in ev if e.get("cat") != "gpu_user_annotation"]
    comm_ids = {e.get("args", {}).get("External id") for e in ev if e["name"] in COMM
                and e.get("cat") in ("cpu_op", "user_annotation", "python")} - {None}
    spans: list[list[tuple[float, float]]] = [[] for _ in range(7)]
    for e in ev:
        role = _role(e, comm_ids)
        if role is not None:
            spans[role].append((e["ts"], e["ts"] + e["dur"]))
    steps, names = _steps_by_hand(ev)
    rows = []
    for lo, hi in steps:
        left = [[lo, hi]]
        costs = []
        for role in range(7):  # the first category that covers an instant takes it
            mine = _union(spans[role])
            costs.append(sum(b - a for a, b in _intersect(left, mine)))
            left = _minus(left, mine)
        costs.append(sum(b - a for a, b in left))  # Other
        rows.append(costs)
    return names, [hi - lo for lo, hi in steps], rows


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_step_time_categories_sum_to_the_step_and_match_the_plugin_rules(path):
    names, durations, rows = _breakdown_by_hand(_events(path))
    st = step_time(_trace(path))
    got = st.steps
    assert list(got["step"]) == names
    assert np.allclose(got["step_us"], durations, atol=TOL_US)
    cols = [f"{column_of(c)}_us" for c in STEP_TIME_CATEGORIES]
    # The categories partition each step: they sum to its time.
    assert np.allclose(got[cols].sum(axis=1), got["step_us"], rtol=1e-9, atol=1e-6)
    assert np.allclose(got[cols].to_numpy(), np.array(rows).reshape(len(names), 8), atol=TOL_US)
    pct = [f"{column_of(c)}_pct" for c in STEP_TIME_CATEGORIES]
    assert np.allclose(got[pct].sum(axis=1), 100.0) or not len(got)
    if len(got):
        assert np.allclose(st.average["us"], np.mean(rows, axis=0), atol=TOL_US)


def test_the_corpus_exercises_every_category_but_communication_kernels():
    """The brute force above is not vacuous: across the corpus each category is > 0 somewhere."""
    seen = defaultdict(float)
    for path in CORPUS:
        steps = step_time(_trace(path)).steps
        for c in STEP_TIME_CATEGORIES:
            seen[c] += float(steps[f"{column_of(c)}_us"].sum())
    assert all(seen[c] > 0 for c in STEP_TIME_CATEGORIES), dict(seen)


# --------------------------------------------------------------------------- kernels


@pytest.mark.parametrize("path", CUDA, ids=lambda p: p.name)
def test_kernel_view_figures_are_the_kernel_args(path):
    groups: dict[str, list[dict]] = defaultdict(list)
    for e in _events(path):
        if e.get("cat") == "kernel":
            groups[e["name"]].append(e)
    kv = kernel_view(_trace(path))
    if not groups:
        assert not kv.has_kernels
        return
    got = kv.by_name.set_index("name")
    assert set(got.index) == set(groups)
    for name, ks in groups.items():
        d = [k["dur"] for k in ks]
        row = got.loc[name]
        assert row["calls"] == len(ks)
        assert row["total_us"] == pytest.approx(sum(d), abs=TOL_US)
        assert row["max_us"] == pytest.approx(max(d), abs=TOL_US)
        assert row["mean_us"] == pytest.approx(sum(d) / len(d), abs=TOL_US)
        for col, arg in (("occupancy_pct", "est. achieved occupancy %"), ("blocks_per_sm", "blocks per SM")):
            weighted = sum(float(k["args"].get(arg) or 0) * k["dur"] for k in ks)
            assert row[col] == pytest.approx(weighted / sum(d) if sum(d) else 0.0, abs=1e-6)
        regs = [k["args"].get("registers per thread", 0) for k in ks]
        assert row["registers_per_thread"] == max(set(regs), key=lambda r: (regs.count(r), -r))
    by_op = kv.by_op
    assert by_op["calls"].sum() == sum(len(v) for v in groups.values())
    assert by_op["total_us"].sum() == pytest.approx(sum(k["dur"] for v in groups.values() for k in v), abs=TOL_US)


def _gemm_kernel(path: Path) -> str:
    """The kernel of the longest total time: the GEMM, in these one-GEMM programs."""
    total: dict[str, float] = defaultdict(float)
    for e in _events(path):
        if e.get("cat") == "kernel":
            total[e["name"]] += e["dur"]
    return max(total, key=total.__getitem__)


def _recorded(stem: str) -> dict:
    manifest = json.loads((DATA / "groundtruth" / "cuda" / "manifest.json").read_text())
    return next(e["program"] for e in manifest["entries"] if e["stem"] == stem)


@pytest.mark.parametrize("stem", ["seed", "gemm_fp32", "gemm_tf32", "fp8_scaled_mm", "int8_int_mm", "compiled_gemm"])
def test_tensor_cores_follow_the_recorded_gemm_dtype(stem):
    """Tensor Cores for 16- and 8-bit GEMMs and TF32; not for float32 without TF32 (FFMA)."""
    path = DATA / "groundtruth" / "cuda" / f"{stem}.json.gz"
    program = _recorded(stem)
    expected = program["dtype"] != "float32" or bool(program.get("allow_tf32"))
    row = kernel_view(_trace(path)).by_name.set_index("name").loc[_gemm_kernel(path)]
    assert bool(row["tensor_cores"]) is expected, (stem, row.name)


def test_the_plugins_list_is_kept_as_is_and_wrong_on_fp32_ffma_and_hopper():
    plugin = {stem: bool(kernel_view(_trace(DATA / "groundtruth" / "cuda" / f"{stem}.json.gz"))
                         .by_name.set_index("name").loc[_gemm_kernel(DATA / "groundtruth" / "cuda" / f"{stem}.json.gz"),
                                                        "tensor_cores_plugin"])
              for stem in ("gemm_fp32", "seed", "fp8_scaled_mm")}
    # "xmma_gemm" matches cuBLAS's FP32 FFMA kernel; nvjet (bf16, FP8) matches nothing in its list.
    assert plugin == {"gemm_fp32": True, "seed": False, "fp8_scaled_mm": False}


def test_a_cpu_trace_has_no_kernel_view():
    kv = kernel_view(_trace(DATA / "groundtruth" / "cpu" / "seed.json.gz"))
    assert not kv.has_kernels and np.isnan(kv.tensor_core_pct)


# --------------------------------------------------------------------------- modules

MODULE_TRACES = [DATA / "groundtruth" / "cpu" / "module_dataloader.json.gz",
                 DATA / "groundtruth" / "cpu" / "llama_train_stack.json.gz",
                 DATA / "groundtruth" / "cuda" / "llama_train_stack.json.gz"]


def _is_node(e: dict) -> bool:
    """A node of the plugin's op tree (node.py create_operator_node, event_parser.py L185-221)."""
    cat, name = e.get("cat"), e["name"]
    if cat == "python_function":
        return "Python module id" in e.get("args", {})
    if cat in ("cpu_op", "python"):
        return True
    return cat == "user_annotation" and (name in COMM or name.startswith(("ProfilerStep#", "Optimizer.step",
                                                                          "enumerate(DataPipe)#"))
                                         or name.startswith("enumerate(DataLoader)#"))


def _plain_op(e: dict) -> bool:
    name = e["name"]
    return (e.get("cat") == "cpu_op" and not name.startswith(("ProfilerStep#", "Optimizer.", "enumerate(DataLoader)#",
                                                              "enumerate(DataPipe)#"))
            and name not in COMM and name not in ("DataParallel.forward", "DistributedDataParallel.forward"))


def _modules_by_hand(ev: list[dict]) -> dict[str, dict]:
    """Per module path (from the Python ids): occurrences and its times, each from the events
    inside its span on its thread."""
    nodes = [e for e in ev if _is_node(e)]
    by_tid = defaultdict(list)
    for e in nodes:
        by_tid[e["tid"]].append(e)
    gpu_by_corr: dict = defaultdict(float)
    for e in ev:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu_by_corr[e["args"].get("correlation")] += e["dur"]
    op_ext = {e["args"].get("External id") for e in nodes if e["args"].get("External id") is not None}
    runtimes = defaultdict(list)
    for e in ev:
        if e.get("cat") == "cuda_runtime" and e["args"].get("External id") in op_ext:
            runtimes[e["tid"]].append((e["ts"], e["ts"] + e["dur"], gpu_by_corr.get(e["args"].get("correlation"), 0.0)))

    def device_in(e: dict) -> float:  # the GPU time of the runtime calls inside e's span
        lo, hi = e["ts"], e["ts"] + e["dur"]
        return sum(g for s, t, g in runtimes[e["tid"]] if s >= lo and t <= hi)

    def direct_children(m: dict) -> list[dict]:
        lo, hi = m["ts"], m["ts"] + m["dur"]
        inside = sorted((e for e in by_tid[m["tid"]] if e is not m and lo <= e["ts"] and e["ts"] + e["dur"] <= hi
                         and (e["ts"], -e["dur"]) > (lo, -m["dur"])), key=lambda e: (e["ts"], -e["dur"]))
        out, end = [], -np.inf
        for e in inside:  # the outermost ones: not inside an earlier one
            if e["ts"] >= end:
                out.append(e)
                end = e["ts"] + e["dur"]
        return out

    by_id = {e["args"]["Python id"]: e for e in ev if e.get("cat") == "python_function"}

    def path(m: dict) -> str:
        names, e = [], m
        while e is not None:
            if "Python module id" in e["args"]:
                names.append(e["name"].removeprefix("nn.Module: "))
            e = by_id.get(e["args"].get("Python parent id"))
        return " › ".join(reversed(names))

    stats: dict[str, dict] = {}
    for m in (e for e in nodes if e.get("cat") == "python_function"):
        kids = direct_children(m)
        plain = [k for k in kids if _plain_op(k)]
        row = stats.setdefault(path(m), defaultdict(float))
        row["occurrences"] += 1
        row["operators"] += len(plain)
        row["host_total_us"] += m["dur"]
        row["host_self_us"] += m["dur"] - sum(k["dur"] for k in kids)
        row["device_total_us"] += device_in(m)
        row["device_self_us"] += sum(device_in(k) for k in plain)
    return stats


@pytest.mark.parametrize("path", MODULE_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_module_view_matches_the_events_inside_each_module(path):
    expected = _modules_by_hand(_events(path))
    mv = module_view(_trace(path))
    assert mv.available and mv.reason == ""
    got = mv.rows.set_index("path")
    # Each module occurrence has one path: the view's hierarchy is the Python ids' one.
    assert set(got.index) == set(expected)
    assert got["depth"].max() >= 2
    for p, row in expected.items():
        for col, value in row.items():
            assert got.loc[p, col] == pytest.approx(value, abs=TOL_US), (p, col)
    if path.parent.name == "cuda":  # on the GPU, modules launch work: the device columns are real
        assert got["device_total_us"].max() > 0 and got["device_self_us"].sum() > 0


def test_without_with_stack_the_module_view_says_what_to_record():
    mv = module_view(_trace(DATA / "groundtruth" / "cuda" / "llama_train.json.gz"))
    assert not mv.available and mv.reason == NO_MODULES and "with_stack=True" in mv.reason


def test_the_dataloader_recording_fills_the_dataloader_category():
    st = step_time(_trace(DATA / "groundtruth" / "cpu" / "module_dataloader.json.gz"))
    assert len(st.steps) == 2 and (st.steps["dataloader_us"] > 0).all()


# --------------------------------------------------------------------------- on demand, in a reader


def test_analyze_leaves_the_three_views_to_the_tab():
    """They cost the transformer trace's analysis 108 ms → ~0.5 s inside every analyze()."""
    assert {"step_time", "kernel_view", "modules"}.isdisjoint(f.name for f in dataclasses.fields(Analysis))


@pytest.mark.pool
def test_the_tabs_reader_job_returns_the_three_views_of_the_trace():
    """``JobKind.TENSORBOARD`` in a reader process on a read trace: the same three views as the
    functions checked above by hand, computed here from the same bytes."""
    data = (DATA / "groundtruth" / "cuda" / "llama_train_stack.json.gz").read_bytes()
    with ReaderPool(settings=HostSettings(reader_count=1)).start(wait=True) as pool:
        parsed = pool.read(data, label="llama_train_stack.json.gz")
        got = pool.run_job(Job(kind=JobKind.TENSORBOARD), JobInput(traces=(parsed.trace,),
                                                                    analyses=(parsed.analysis,)))
    here = _trace(DATA / "groundtruth" / "cuda" / "llama_train_stack.json.gz")
    st, kv, mv = step_time(here), kernel_view(here), module_view(here)
    assert isinstance(got, TensorBoardViews)
    # DataFrames do not compare with ==: field by field.
    pd.testing.assert_frame_equal(got.step_time.steps, st.steps)
    pd.testing.assert_frame_equal(got.step_time.average, st.average)
    assert (got.step_time.source, got.step_time.dropped_steps) == (st.source, st.dropped_steps)
    pd.testing.assert_frame_equal(got.kernel_view.by_name, kv.by_name)
    pd.testing.assert_frame_equal(got.kernel_view.by_op, kv.by_op)
    assert got.kernel_view.tensor_core_pct == pytest.approx(kv.tensor_core_pct)
    pd.testing.assert_frame_equal(got.modules.rows, mv.rows)
    assert len(got.modules.rows) == 32 and len(got.kernel_view.by_name) > 0 and len(got.step_time.steps) > 0


# --------------------------------------------------------------------------- the page


@pytest.mark.apptest
def test_the_tensorboard_tab_lays_out_what_the_reader_computed(at, script_thread_calls):  # noqa: F811
    """Its three parts on the first visit's H200 sample and on an uploaded with_stack H200 trace;
    no analysis on the script thread."""
    open_view(at, "TensorBoard")
    assert errors(at) == [] and len(charts(at)) == 1  # the stacked steps
    steps = at.dataframe[0].value
    assert steps["step"].iloc[-1] == "average" and "kernel_us" in steps.columns
    at.radio(key="tb_part").set_value("Kernels")
    at.run()
    assert_healthy(at)
    by_name, by_op = (df.value for df in at.dataframe)
    assert set(by_name["tensor_cores"]) <= {"yes", "no"} and "op" in by_op.columns
    at.radio(key="tb_part").set_value("Modules")
    at.run()
    assert any("with_stack=True" in plain(i.value) for i in at.info)
    upload(at, "llama_train_stack.json.gz", (DATA / "groundtruth" / "cuda" / "llama_train_stack.json.gz").read_bytes())
    assert_healthy(at)
    modules = at.dataframe[0].value
    assert len(modules) == 32 and modules["device_total_us"].max() > 0
    assert script_thread_calls == []

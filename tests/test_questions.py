"""Every lesson's revealed answers equal what the raw trace JSON says, computed here by brute force.

The questions (``lab.lessons``) answer from the lab's Trace and Analysis; these tests
read the same trace's JSON events directly (nesting, correlations, step windows by hand) and
compare the right choice and the number behind it: on the lessons' CPU runs (run here, small,
as tests/test_lessons.py runs them) and on the H200 recordings in lab/samples/.
"""

from __future__ import annotations

import gzip
import json
import statistics

import pytest
from lessonruns import cpu_lesson_param, raw_events

from lab.analysis import Run, analyze
from lab.analysis.gemm.kinds import is_gemm_kernel
from lab.lessons import LESSONS, QUESTIONS, band_of, questions_for, skipped_for
from lab.samples import lesson_samples
from lab.trace.load import load_trace
from tests import recording_brute

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
CPU_LESSONS = [k for k, lesson in LESSONS.items() if lesson.cpu_refusal is None]
BRUTE_LESSONS = set(recording_brute.LESSON_KEYS)  # their twins are in tests/recording_brute.py


# --------------------------------------------------------------------------- the raw JSON, by hand


def steps(ev: list[dict]) -> list[tuple[float, float]]:
    rows = [e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in rows)


def in_a_step(ts: float, windows) -> bool:
    return any(a <= ts <= b for a, b in windows)


def named_ops(ev, name):
    return [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == name]


def _cpu_events(ev) -> list[dict]:
    return [e for e in ev if e.get("cat") in ("cpu_op", "user_annotation")]


def _inside(inner: dict, outer: dict) -> bool:
    return (inner is not outer and inner["tid"] == outer["tid"] and outer["ts"] <= inner["ts"]
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"])


def self_time(ev, event: dict) -> float:
    """An event's duration less its direct children's (the events inside it and inside no other child)."""
    inside = [e for e in _cpu_events(ev) if _inside(e, event)]
    direct = [e for e in inside if not any(_inside(e, o) for o in inside)]
    return event["dur"] - sum(e["dur"] for e in direct)


def self_time_total(ev) -> float:
    """Every CPU event's self time summed: the outermost events' durations."""
    events = _cpu_events(ev)
    return sum(e["dur"] for e in events if not any(_inside(e, o) for o in events))


def launches(ev) -> dict:
    return {e["args"]["correlation"]: e for e in ev
            if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}


def kernels_launched_in_steps(ev) -> list[dict]:
    by_corr, windows = launches(ev), steps(ev)
    out = []
    for k in (e for e in ev if e.get("cat") == "kernel"):
        launch = by_corr.get(k.get("args", {}).get("correlation"))
        if launch is not None and in_a_step(launch["ts"] - 0.0, windows):
            out.append(k)
    return out


def work_per_step(ev) -> float:
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    if kernels:
        return len(kernels_launched_in_steps(ev)) / len(steps(ev))
    windows = steps(ev)
    return sum(in_a_step(e["ts"], windows) for e in ev if e.get("cat") == "cpu_op") / len(windows)


def contains(outer, inner) -> bool:
    return (outer is not inner and outer["pid"] == inner["pid"] and outer["tid"] == inner["tid"]
            and outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"])


def self_cpu_us(ev, op: dict) -> float:
    inside = [e for e in ev if contains(op, e)]
    direct = [e for e in inside if not any(contains(o, e) for o in inside)]
    return op["dur"] - sum(e["dur"] for e in direct)


def device_us_launched_inside(ev, ops) -> float:
    corrs = {e["args"]["correlation"] for e in ev if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})
             and any(contains(op, e) for op in ops)}
    return sum(k["dur"] for k in ev if k.get("cat") in GPU_CATS and k.get("args", {}).get("correlation") in corrs)


def busy_pct(ev) -> float:
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") in GPU_CATS)
    busy, cur_a, cur_b = 0.0, *spans[0]
    for a, b in spans[1:]:
        if a > cur_b:
            busy, cur_a, cur_b = busy + cur_b - cur_a, a, b
        else:
            cur_b = max(cur_b, b)
    busy += cur_b - cur_a
    return 100.0 * busy / (max(b for _, b in spans) - spans[0][0])


def gemm_kernel_median_us(ev) -> float:
    """The active steps' GEMM kernels only (a warm-up step's last kernel can land in the trace)."""
    return statistics.median(e["dur"] for e in kernels_launched_in_steps(ev) if is_gemm_kernel(e["name"]))


def first_step_extra_profiler_pct(ev) -> float:
    """The profiler's own events (cat "overhead") overlapping the first step, over the first
    step's excess over the median later step, in %."""
    windows = steps(ev)
    a, b = windows[0]
    durs = [y - x for x, y in windows]
    excess = durs[0] - statistics.median(durs[1:])
    overlap = sum(max(0.0, min(e["ts"] + e["dur"], b) - max(e["ts"], a)) for e in ev if e.get("cat") == "overhead")
    return 100.0 * overlap / excess


def launch_share_pct(ev) -> float:
    """Per step: first launch call (by start) inside it → that kernel's start, over the step."""
    by_corr = launches(ev)
    kernels = [(by_corr[k["args"]["correlation"]], k) for k in ev if k.get("cat") == "kernel"
               and k.get("args", {}).get("correlation") in by_corr]
    shares = []
    for a, b in steps(ev):
        inside = [(launch, k) for launch, k in kernels if a <= launch["ts"] <= b]
        launch, k = min(inside, key=lambda pair: pair[0]["ts"])
        shares.append(100.0 * (k["ts"] - launch["ts"]) / (b - a))
    return statistics.median(shares)


def top_self_cpu(ev) -> str:
    """The op name with the largest summed self time among CPU ops and runtime calls (the
    key_averages default sort), by brute-force nesting."""
    cpu = [e for e in ev if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")]
    totals: dict[str, float] = {}
    for e in cpu:
        name = "ProfilerStep*" if e["name"].startswith("ProfilerStep#") else e["name"]
        totals[name] = totals.get(name, 0.0) + self_cpu_us(cpu, e)
    return max(totals, key=totals.get)


def gpu_busy_spans(ev) -> list[tuple[float, float]]:
    """The GPU activities' union, merged, by hand."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") in GPU_CATS)
    merged: list[list[float]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def input_idle_pct(ev) -> float:
    """Per step, the DataLoader's ``__next__`` time while the GPU sits idle; its median over the
    median step, in % (the verdict's per-step figures)."""
    windows, busy = steps(ev), gpu_busy_spans(ev)
    nexts = [e for e in ev if e["name"].startswith("enumerate(DataLoader)#") and e["name"].endswith("__next__")]
    idle = []
    for x0, x1 in windows:
        total = 0.0
        for e in nexts:
            a, b = max(e["ts"], x0), min(e["ts"] + e["dur"], x1)
            if b > a:
                total += (b - a) - sum(max(0.0, min(b, y) - max(a, x)) for x, y in busy)
        idle.append(total)
    return 100.0 * statistics.median(idle) / statistics.median(b - a for a, b in windows)


# Bytes each op of the memory_roofs lesson reads and writes, in tensor-sized passes, by hand.
ROOF_PASSES = {"aten::native_layer_norm": 2, "aten::_softmax": 2, "aten::gelu": 2, "aten::add": 3, "aten::sum": 1}
H200_HBM_GBS = 4800.0  # the datasheet's HBM3e rate, the roof the lesson measures against


def op_gbs(ev, op: str, tensor_bytes: float) -> float:
    ops = [e for e in named_ops(ev, op) if in_a_step(e["ts"], steps(ev))]
    return ROOF_PASSES[op] * tensor_bytes * len(ops) / device_us_launched_inside(ev, ops) / 1e3


def choice(key: str, value: float) -> str:
    """The question's choice for ``value``, from the bands its text lists."""
    q = next(q for q in QUESTIONS if q.key == key)
    bands = {
        "tiny_vs_large.gpu_busy": [(50.0, 0), (float("inf"), 1)],
        "tiny_vs_large.gemm_share": [(50.0, 0), (float("inf"), 1)],
        "tiny_vs_large.self_cpu_vs_cuda": [(1.0, 0), (float("inf"), 1)],
        "cold_vs_warm.first_step": [(1.5, 0), (5.0, 1), (float("inf"), 2)],
        "cold_vs_warm.profiler_share": [(10.0, 0), (50.0, 1), (float("inf"), 2)],
        "tiny_vs_large.launch_share": [(10.0, 0), (50.0, 1), (float("inf"), 2)],
        "fp32_vs_tf32.speedup": [(2.0, 0), (6.0, 1), (float("inf"), 2)],
        "eager_vs_compile.kernels": [(1.5, 0), (2.5, 1), (float("inf"), 2)],
        "geglu.kernels": [(2.5, 0), (3.5, 1), (float("inf"), 2)],
        "slow_rank.step": [(10_000.0, 0), (50_000.0, 1), (float("inf"), 2)],
        "slow_rank.load": [(1_000.0, 0), (30_000.0, 1), (float("inf"), 2)],
        "sdpa_backends.flash_kernels": [(1.5, 0), (3.5, 1), (float("inf"), 2)],
        "input_pipeline.starved_share": [(25.0, 0), (60.0, 1), (float("inf"), 2)],
        "input_pipeline.speedup": [(1.5, 0), (4.0, 1), (float("inf"), 2)],
        "compile_first_call.window_share": [(10.0, 0), (90.0, 1), (float("inf"), 2)],
        "compile_first_call.first_step": [(10.0, 0), (100.0, 1), (1000.0, 2), (float("inf"), 3)],
        "memory_roofs.softmax": [(40.0, 0), (70.0, 1), (float("inf"), 2)],
        "memory_roofs.cpu_row_sum": [(5.0, 0), (20.0, 1), (float("inf"), 2)],
    }[key]
    return q.choices[next(i for edge, i in bands if value < edge or edge == float("inf"))]


def fewer(a: float, b: float) -> str:
    return "about the same" if abs(b - a) <= 0.5 else "fewer" if b < a else "more"


def expected(key: str, evs: list[list[dict]], datas: list[dict] = (), timings: list = ()) -> tuple[str, float]:
    """(right choice, measured number) of question ``key``, from the runs' raw events (``datas``: the
    whole JSON, for [memory] records; ``timings``: per run (profiled µs, unprofiled µs) lists)."""
    if key.split(".", 1)[0] in BRUTE_LESSONS:
        return recording_brute.expected(key, list(datas), list(timings))
    first, last = evs[0], evs[-1]
    if key == "tiny_vs_large.self_cpu_vs_cuda":
        mm = named_ops(first, "aten::mm")
        ratio = device_us_launched_inside(first, mm) / sum(self_cpu_us(first, op) for op in mm)
        return choice(key, ratio), ratio
    if key == "tiny_vs_large.gpu_busy":
        pct = busy_pct(first)
        return choice(key, pct), pct
    if key == "tiny_vs_large.gemm_share":
        # The Table's Self CPU %: aten::mm's self time over every CPU event's (torch's "Self CPU time total").
        pct = 100.0 * sum(self_time(first, e) for e in named_ops(first, "aten::mm")) / self_time_total(first)
        return choice(key, pct), pct
    if key == "input_pipeline.starved_share":
        pct = input_idle_pct(first)
        return choice(key, pct), None  # the attribution's own figure differs by the steps' edges
    if key == "input_pipeline.speedup":
        if timings and timings[0] and timings[-1]:  # the Summary cards' "Per iteration, profiled"
            ratio = statistics.median(timings[0][0]) / statistics.median(timings[-1][0])
            return choice(key, ratio), ratio
        ratio = statistics.median(b - a for a, b in steps(first)) / statistics.median(b - a for a, b in steps(last))
        return choice(key, ratio), None  # the lab's step time is the attribution's, edges included
    if key == "compile_first_call.window_share":
        durs = [b - a for a, b in steps(first)]
        pct = 100.0 * (durs[0] - statistics.median(durs[1:])) / sum(durs)
        return choice(key, pct), None
    if key in ("memory_roofs.closest", "memory_roofs.softmax"):
        x = next(e for e in named_ops(first, "aten::gelu"))
        rows, columns = x["args"]["Input Dims"][0]
        tensor_bytes = rows * columns * 2  # bf16 on the H200
        gbs = {op: op_gbs(first, op, tensor_bytes) for op in ROOF_PASSES}
        if key.endswith("softmax"):
            return choice(key, 100.0 * gbs["aten::_softmax"] / H200_HBM_GBS), None
        q = next(q for q in QUESTIONS if q.key == key)
        return q.choices[list(ROOF_PASSES).index(max(gbs, key=gbs.get))], None
    if key == "memory_roofs.cpu_row_sum":
        windows = steps(first)
        sums = [e for e in named_ops(first, "aten::sum") if in_a_step(e["ts"], windows)]
        pct = 100.0 * sum(e["dur"] for e in sums) / sum(b - a for a, b in windows)
        return choice(key, pct), pct
    if key in ("cold_vs_warm.first_step", "compile_first_call.first_step"):
        durs = [b - a for a, b in steps(first)]
        ratio = durs[0] / statistics.median(durs[1:])
        return choice(key, ratio), ratio
    if key in ("cold_vs_warm.profiler_share", "tiny_vs_large.launch_share"):
        pct = first_step_extra_profiler_pct(first) if key.startswith("cold") else launch_share_pct(first)
        return choice(key, pct), pct
    if key == "fp32_vs_tf32.sync_row":
        top = top_self_cpu(first)
        q = next(q for q in QUESTIONS if q.key == key)
        return (top if top in q.choices else q.choices[-1]), None
    if key == "fp32_vs_tf32.speedup":
        ratio = gemm_kernel_median_us(first) / gemm_kernel_median_us(last)
        return choice(key, ratio), ratio
    if key in ("eager_vs_compile.kernels", "geglu.kernels", "sdpa_backends.flash_kernels"):
        per_step = len(kernels_launched_in_steps(last)) / len(steps(last))
        return choice(key, per_step), per_step
    if key in ("eager_vs_compile.add_op", "geglu.gelu_op"):
        calls = len(named_ops(last, "aten::add" if key.startswith("eager") else "aten::gelu"))
        return ("yes" if calls else "no"), float(calls)
    if key == "linear.bias":
        adds = len(named_ops(first, "aten::add"))
        return ("a separate aten::add" if adds else "aten::addmm, inside the GEMM"), float(adds)
    if key == "linear.t_kernel":
        us = device_us_launched_inside(first, named_ops(first, "aten::t"))
        return ("yes" if us > 0 else "no"), us
    if key == "slow_rank.step":  # rank 0 of the gloo job: its median step, from one step's start to the next
        us = recording_brute.step_us(first)
        return choice(key, us), us
    if key == "slow_rank.load":  # rank 0's own load_batch, per step
        loads = [e for e in first if e.get("cat") == "user_annotation" and e["name"] == "load_batch"]
        us = sum(e["dur"] for e in loads) / len(steps(first))
        return choice(key, us), us
    if key in ("attention.fewer", "sdpa_backends.fewer"):
        a, b = work_per_step(first), work_per_step(last)
        return fewer(a, b), b - a
    raise AssertionError(f"no brute force for {key}: add one")


def check_answers(key: str, kind: str, runs: list[Run], raw: list[list[dict]], datas=(), timings=()) -> int:
    asked = questions_for(key, kind)
    assert 1 <= len(asked) <= 3, f"{key} on {kind}: {len(asked)} questions"
    for q in asked:
        answer = q.answer(runs)
        want, measured = expected(q.key, raw, datas, timings)
        assert answer.choice in q.choices
        assert answer.choice == want, f"{q.key}: revealed {answer.choice!r}, the raw trace says {want!r}"
        if measured is not None:
            assert answer.measured == pytest.approx(measured, rel=1e-3, abs=1e-3), q.key
        where = answer.where
        assert where.row or where.window_us or where.view, f"{q.key}: nowhere to look"
        if where.row:
            ka = runs[where.run].analysis.key_averages
            assert where.row in set(ka["name"].astype(str)) or answer.measured == 0, f"{q.key}: no row {where.row}"
        if where.window_us:
            ev = runs[where.run].trace.events
            a, b = where.window_us
            assert all(a <= ev["ts_us"].iloc[i] <= b for i in where.event_ids), f"{q.key}: event outside its window"
            assert set(where.event_names) == {str(ev["name"].iloc[i]) for i in where.event_ids}
    return len(asked)


# --------------------------------------------------------------------------- the H200 recordings


@pytest.mark.parametrize("key", [k for k, lesson in LESSONS.items() if not lesson.host_only])
def test_answers_on_the_h200_recordings_equal_the_raw_trace(key):
    lesson = LESSONS[key]
    samples = lesson_samples(lesson.runs)
    assert samples, f"{key} has no H200 recording"
    runs, raw, datas, timings = [], [], [], []
    for run, sample in zip(lesson.runs, samples):
        data = sample.read_bytes()
        trace = load_trace(data)
        t = sample.timing
        timing = (t["profiled_median_us"], t["unprofiled_median_us"]) if t else None
        runs.append(Run(run.name, trace, analyze(trace), timing=timing))
        raw.append(raw_events(data))
        datas.append(json.loads(gzip.decompress(data)))
        timings.append(([timing[0]], [timing[1]]) if timing else None)
    check_answers(key, "cuda", runs, raw, datas, timings)


# --------------------------------------------------------------------------- CPU runs


@pytest.mark.parametrize("key", [cpu_lesson_param(k) for k in CPU_LESSONS])
def test_answers_on_cpu_runs_equal_the_raw_trace(key, cpu_lesson_runs):
    runs, raw, datas, timings = cpu_lesson_runs(key)
    check_answers(key, "cpu", runs, raw, datas, timings)


def test_gpu_questions_are_skipped_on_a_cpu_with_the_reason():
    skipped = skipped_for("tiny_vs_large", "cpu")
    assert {q.key for q, _ in skipped} == {"tiny_vs_large.self_cpu_vs_cuda", "tiny_vs_large.gpu_busy",
                                           "tiny_vs_large.launch_share"}
    assert all(reason.startswith("needs a GPU run: ") and len(reason) > 20 for _, reason in skipped)
    # The TF32 lesson refuses on a CPU as a whole; its one question is GPU-only, with the reason.
    assert not questions_for("fp32_vs_tf32", "cpu") and skipped_for("fp32_vs_tf32", "cpu")


def test_band_edges():
    q = next(q for q in QUESTIONS if q.key == "fp32_vs_tf32.speedup")
    from lab.lessons.fp32_vs_tf32 import _SPEEDUP

    assert [band_of(v, _SPEEDUP) for v in (1.99, 2.0, 5.99, 6.0, 80.0)] == [
        q.choices[0], q.choices[1], q.choices[1], q.choices[2], q.choices[2]]


@pytest.mark.parametrize("q", [q for q in QUESTIONS if "cuda" in q.devices], ids=lambda q: q.key)
def test_a_reveal_window_outlines_the_events_it_names(q):
    """A reveal that points at a timeline window outlines at least one event there: the no-sync
    run's last step ends ~800 µs before its kernels run, and its window once outlined none."""
    from lessonruns import h200_runs

    where = q.answer(list(h200_runs(q.lesson))).where
    assert not where.window_us or where.event_ids, f"{q.key}: {where.text} outlines no event"

"""Your own trace as a lesson (lab/teach/own_trace.py): on corpus traces no lesson was written
for, each question's answer equals what the raw trace JSON says, computed here by brute force
(nesting per thread by a stack, intervals merged by hand, the [memory] records walked)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from lab.analysis import Run, analyze
from lab.teach.own_trace import OWN_QUESTION_TEXTS, own_questions
from lab.trace.load import load_trace

GT = Path(__file__).resolve().parent / "data" / "groundtruth"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# What torch counts as an op's children on its thread (python frames are call stacks, not events).
CHILD_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
# Three corpus programs no lesson is about: a Llama step with profile_memory on an H200, a ResNet
# AMP step there, and a Llama training step on a CPU (tests/data/groundtruth/README.md).
TRACES = ("cuda/llama_train_mem", "cuda/resnet_amp", "cpu/llama_train", "cuda/seed_mem")


def raw(name: str) -> list[dict]:
    return json.loads(gzip.decompress((GT / f"{name}.json.gz").read_bytes()))["traceEvents"]


def self_cpu_by_op(events: list[dict]) -> dict[str, float]:
    """Self time per cpu_op name: each event's duration minus its direct children's, per thread."""
    by_thread = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in CHILD_CATS:
            by_thread[(e["pid"], e["tid"])].append(e)
    self_us: dict[str, float] = defaultdict(float)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[list] = []  # [event, children's time]
        def close(item):
            e, inner = item
            if e["cat"] == "cpu_op" and not e["name"].startswith("ProfilerStep#"):
                self_us[e["name"]] += e["dur"] - inner
        for e in evs:
            while stack and e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
                close(stack.pop())
            if stack:
                stack[-1][1] += e["dur"]
            stack.append([e, 0.0])
        while stack:
            close(stack.pop())
    return dict(self_us)


def busy_pct(events: list[dict]) -> float:
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS)
    busy, (a0, b0) = 0.0, spans[0]
    for a, b in spans[1:]:
        if a > b0:
            busy, a0, b0 = busy + b0 - a0, a, b
        else:
            b0 = max(b0, b)
    busy += b0 - a0
    return 100.0 * busy / (max(b for _, b in spans) - spans[0][0])


def top_kernel_share_pct(events: list[dict]) -> float:
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    by_name: dict[str, float] = defaultdict(float)
    for e in gpu:
        if e["cat"] == "kernel":
            by_name[e["name"]] += e["dur"]
    return 100.0 * max(by_name.values()) / sum(e["dur"] for e in gpu)


def memory_peak(events: list[dict]) -> tuple[str, float]:
    """(innermost op on the allocating thread at the main device's first highest record, its bytes)."""
    records = [e for e in events if e.get("name") == "[memory]"]
    by_device: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        by_device[(r["args"]["Device Type"], r["args"]["Device Id"])].append(r)
    gpus = {d: rs for d, rs in by_device.items() if d[0] != 0}
    pool = gpus or by_device
    device = max(pool, key=lambda d: max(r["args"]["Total Allocated"] for r in pool[d]))
    rs = sorted(pool[device], key=lambda r: r["ts"])
    top = max(r["args"]["Total Allocated"] for r in rs)
    peak = next(r for r in rs if r["args"]["Total Allocated"] == top)
    holding = [e for e in events if e.get("ph") == "X" and e.get("cat") in CHILD_CATS and e["pid"] == peak["pid"]
               and e["tid"] == peak["tid"] and e["ts"] <= peak["ts"] <= e["ts"] + e["dur"]]
    inner = max(holding, key=lambda e: (e["ts"], -e["dur"]))  # the last to start holds it innermost
    return inner["name"], float(top)


def expected(key: str, events: list[dict]) -> tuple[str | None, float]:
    """(right choice, or None for a band the test reads below; the number behind it)."""
    if key == "own.top_self_cpu":
        by_op = self_cpu_by_op(events)
        name = max(by_op, key=by_op.get)
        return name, by_op[name]
    if key in ("own.gpu_busy", "own.bound"):
        pct = busy_pct(events)
        if key == "own.gpu_busy":
            return ("less than half" if pct < 50 else "half or more"), pct
        return ("launch-bound: the GPU waits for the host" if pct < 80 else "GPU-bound: the GPU is kept busy"), pct
    if key == "own.top_kernel_share":
        pct = top_kernel_share_pct(events)
        bands = ((25, "under 25 %"), (50, "25–50 %"), (75, "50–75 %"), (float("inf"), "75 % or more"))
        return next(label for edge, label in bands if pct < edge), pct
    if key == "own.memory_peak_owner":
        return memory_peak(events)
    raise AssertionError(f"no brute force for {key}: add one")


@pytest.mark.parametrize("name", TRACES)
def test_own_trace_answers_equal_the_raw_json(name):
    data = (GT / f"{name}.json.gz").read_bytes()
    trace = load_trace(data)
    run = Run("your trace", trace, analyze(trace))
    asked = own_questions(run)
    events = raw(name)
    has_gpu = any(e.get("cat") in GPU_CATS for e in events)
    has_memory = any(e.get("name") == "[memory]" for e in events)
    want = {"own.top_self_cpu"} | ({"own.gpu_busy", "own.top_kernel_share", "own.bound"} if has_gpu else set()) | (
        {"own.memory_peak_owner"} if has_memory else set())
    assert {q.key for q in asked} == want  # asked exactly what the data can answer
    for q in asked:
        answer = q.answer([run])
        choice, measured = expected(q.key, events)
        assert answer.choice in q.choices, (q.key, answer.choice, q.choices)
        assert answer.choice == choice, (q.key, answer.choice, choice)
        assert answer.measured == pytest.approx(measured, rel=1e-3), (q.key, answer.measured, measured)
        assert q.text == OWN_QUESTION_TEXTS[q.key]
        if q.key in ("own.top_self_cpu", "own.memory_peak_owner"):  # the choices' order gives nothing away
            assert list(q.choices) == sorted(q.choices) and len(q.choices) >= 2
        where = answer.where
        assert where.row or where.window_us, q.key
        if where.row:
            assert where.row in set(run.analysis.key_averages["name"].astype(str)), (q.key, where.row)
        if where.window_us:
            a, b = where.window_us
            ev = trace.events
            assert where.event_ids and all(a <= ev["ts_us"].iloc[i] <= b for i in where.event_ids), q.key

"""Lesson figures and answers computed by brute force from the raw trace JSON of the lessons' H200
recordings: events, correlations, nesting and [memory] records read by hand, no lab code. Used by
tests/test_questions.py (each question's twin) and tests/test_lesson_recordings.py (each claim),
for the lessons of ``LESSON_KEYS`` (tests/test_questions.py computes the others' twins itself);
``union`` also by tests/test_heldout_programs.py.
"""

from __future__ import annotations

import gzip
import json
import math
import statistics

from lab.analysis.gemm.kinds import GEMM_LEAF_OPS, is_gemm_kernel

# The lessons whose questions ``expected`` answers from the raw JSON.
LESSON_KEYS = ("launch_overlap", "calls", "host_sync", "cuda_graphs", "training_step", "pinned_copies", "memory_peak",
               "profiler_overhead", "self_total_shapes")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def raw(trace_gz: bytes) -> dict:
    return json.loads(gzip.decompress(trace_gz))


def xs(data: dict) -> list[dict]:
    return [e for e in data["traceEvents"] if e.get("ph") == "X"]


def step_windows(ev: list[dict]) -> list[tuple[float, float]]:
    rows = [e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in rows)


def union(spans) -> list[tuple[float, float]]:
    """(start, end) spans merged where they overlap or touch, by a plain loop over them sorted."""
    merged: list[list[float]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def step_of(ts: float, windows) -> int:
    return next((i for i, (a, b) in enumerate(windows) if a <= ts <= b), -1)


def launched(ev: list[dict], cats=("kernel",)) -> list[tuple[dict, dict, int]]:
    """(GPU event, its launch call, the step the call is in) for the GPU events launched in a step."""
    calls = {e["args"]["correlation"]: e for e in ev
             if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    windows, out = step_windows(ev), []
    for g in (e for e in ev if e.get("cat") in cats):
        call = calls.get(g.get("args", {}).get("correlation"))
        if call is not None and step_of(call["ts"], windows) >= 0:
            out.append((g, call, step_of(call["ts"], windows)))
    return out


def per_step(ev, cats, names=None) -> float:
    """Events of ``cats`` (named one of ``names``) that start inside a step, per step."""
    windows = step_windows(ev)
    hits = [e for e in ev if e.get("cat") in cats and (names is None or e["name"] in names)
            and step_of(e["ts"], windows) >= 0]
    return len(hits) / len(windows)


def calls_per_step(ev, name: str) -> float:
    return per_step(ev, ("cpu_op", *LAUNCH_CATS), (name,))


def share_pct(ev, name: str, cats=("cpu_op",)) -> float:
    windows = step_windows(ev)
    inside = sum(e["dur"] for e in ev if e.get("cat") in cats and e["name"] == name and step_of(e["ts"], windows) >= 0)
    return 100.0 * inside / sum(b - a for a, b in windows)


def profiled_step_us(ev, timing) -> float:
    """The Summary card "Per iteration, profiled": the median of the profiled times recorded beside
    the trace (``timing``: (profiled µs list, unprofiled µs list)) where there are any, else ``step_us``."""
    return statistics.median(timing[0]) if timing and timing[0] else step_us(ev)


def step_us(ev) -> float:
    """The median step: from one step's completion to the next, a step completing when the next
    step has begun and the GPU work launched from inside its host period has ended."""
    windows = step_windows(ev)
    starts = [a for a, _ in windows]
    period_end = starts[1:] + [windows[-1][1]]
    calls = {e["args"]["correlation"]: e for e in ev
             if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    done = list(period_end)
    for g in (e for e in ev if e.get("cat") in GPU_CATS):
        call = calls.get(g.get("args", {}).get("correlation"))
        if call is None:
            continue
        for i, (a, b) in enumerate(zip(starts, period_end)):
            if a <= call["ts"] < b:
                done[i] = max(done[i], g["ts"] + g["dur"])
    for i in range(1, len(done)):
        done[i] = max(done[i], done[i - 1])
    return statistics.median(b - a for a, b in zip([starts[0]] + done[:-1], done))


def first_kernel_delays(ev) -> list[float]:
    first: dict[int, tuple[dict, dict]] = {}
    for k, call, i in launched(ev):
        if i not in first or call["ts"] < first[i][1]["ts"]:
            first[i] = (k, call)
    return [first[i][0]["ts"] - first[i][1]["ts"] for i in sorted(first)]


def contains(outer, inner) -> bool:
    return (outer is not inner and outer["pid"] == inner["pid"] and outer["tid"] == inner["tid"]
            and outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"])


def direct_children(ev, op) -> list[dict]:
    inside = [e for e in ev if contains(op, e)]
    return [e for e in inside if not any(contains(o, e) for o in inside)]


def self_cpu(ev, op) -> float:
    return op["dur"] - sum(e["dur"] for e in direct_children(ev, op))


def child_op(ev, name: str) -> str:
    kids = [c["name"] for op in ev if op.get("cat") == "cpu_op" and op["name"] == name
            for c in direct_children(ev, op) if c.get("cat") == "cpu_op"]
    return max(set(kids), key=kids.count) if kids else ""


def gemms_per_step(ev) -> float:
    if any(e.get("cat") == "kernel" for e in ev):
        return sum(is_gemm_kernel(k["name"]) for k, _, _ in launched(ev)) / len(step_windows(ev))
    return sum(per_step(ev, ("cpu_op",), (op,)) for op in GEMM_LEAF_OPS)


def phase_us(ev, label: str) -> float:
    windows = step_windows(ev)
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "user_annotation" and e["name"] == label
             and step_of(e["ts"], windows) >= 0]
    if not any(e.get("cat") == "kernel" for e in ev):
        return sum(b - a for a, b in spans) / len(windows)
    work = [g["dur"] for g, call, _ in launched(ev, GPU_CATS) if any(a <= call["ts"] <= b for a, b in spans)]
    return sum(work) / len(windows)


def copy_gb_per_s(ev) -> float:
    copies = [g for g, _, _ in launched(ev, ("gpu_memcpy",))]
    return sum(g["args"]["bytes"] for g in copies) / sum(g["dur"] for g in copies) / 1e3


def copy_call_ratio(ev) -> float:
    return statistics.median(call["dur"] / g["dur"] for g, call, _ in launched(ev, ("gpu_memcpy",)))


def _memory(data: dict) -> list[dict]:
    return sorted((e for e in data["traceEvents"] if e.get("name") == "[memory]"), key=lambda e: e["ts"])


def memory_peak(data: dict) -> tuple[dict, list[dict]]:
    """The first record at the highest Total Allocated of the main device (the GPU with the highest
    peak, else the CPU) and that device's records."""
    by_device: dict[tuple, list[dict]] = {}
    for m in _memory(data):
        by_device.setdefault((m["args"]["Device Type"], m["args"]["Device Id"]), []).append(m)
    gpus = {d: r for d, r in by_device.items() if d[0] != 0}
    pool = gpus or by_device
    records = max(pool.values(), key=lambda r: max(m["args"]["Total Allocated"] for m in r))
    top = max(m["args"]["Total Allocated"] for m in records)
    return next(m for m in records if m["args"]["Total Allocated"] == top), records


def memory_peak_label(data: dict) -> str:
    peak, _ = memory_peak(data)
    labels = [e for e in xs(data) if e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#")
              and e["ts"] <= peak["ts"] <= e["ts"] + e["dur"]]
    mine = [e for e in labels if e["tid"] == peak["tid"]] or labels
    return max(mine, key=lambda e: e["ts"])["name"] if mine else ""


def memory_rise_units(data: dict) -> float:
    peak, records = memory_peak(data)
    windows = step_windows(xs(data))
    a, b = windows[step_of(peak["ts"], windows)]
    before = [m for m in records if m["ts"] < a]
    inside = [m for m in records if a <= m["ts"] <= b]
    first = inside[0]["args"]
    base = before[-1]["args"]["Total Allocated"] if before else first["Total Allocated"] - first["Bytes"]
    top = max(m["args"]["Total Allocated"] for m in inside)
    return (top - base) / max(m["args"]["Bytes"] for m in inside)


def self_share_pct(ev, name: str) -> float:
    ops = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == name]
    return 100.0 * sum(self_cpu(ev, op) for op in ops) / sum(op["dur"] for op in ops)


def shape_times(ev, name: str) -> dict[str, float]:
    """Input Dims → Self CUDA µs (GPU work launched inside the op) on a GPU trace, else Self CPU µs."""
    ops = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == name]
    gpu = any(e.get("cat") == "kernel" for e in ev)
    by_corr = {g["args"]["correlation"]: g for g in ev
               if g.get("cat") in GPU_CATS and "correlation" in g.get("args", {})}
    out: dict[str, float] = {}
    for op in ops:
        dims = json.dumps(op["args"]["Input Dims"])
        if gpu:
            calls = [c for c in ev if c.get("cat") in LAUNCH_CATS and contains(op, c)]
            t = sum(by_corr[c["args"]["correlation"]]["dur"] for c in calls if c["args"].get("correlation") in by_corr)
        else:
            t = self_cpu(ev, op)
        out[dims] = out.get(dims, 0.0) + t
    return out


def choice_of(value: float, edges: list[float], labels) -> str:
    """The label of the first edge ``value`` is below (the last label past every edge)."""
    return next((label for edge, label in zip(edges, labels) if value < edge), labels[-1])


def expected(key: str, datas: list[dict], timings: list) -> tuple[str, float]:
    """(right choice, measured number) of question ``key`` (a lesson of ``LESSON_KEYS``) from the runs' raw JSON."""
    evs = [xs(d) for d in datas]
    first, last = evs[0], evs[-1]
    if key == "launch_overlap.delay_trend":
        d = first_kernel_delays(first)
        r = d[-1] / max(d[0], 1e-3)
        return choice_of(r, [1 / 3, 3.0], ["it shrinks", "it stays about the same", "it grows"]), r
    share = ["under 25 %", "25–75 %", "over 75 %"]
    half = ["under 50 %", "50 % or more"]
    if key == "launch_overlap.sync_share":
        p = share_pct(last, "cudaDeviceSynchronize", LAUNCH_CATS)
        return choice_of(p, [25.0, 75.0], share), p
    if key in ("launch_overlap.mm_share", "pinned_copies.copy_share"):
        p = share_pct(first, "aten::mm" if key.startswith("launch") else "aten::copy_")
        return choice_of(p, [50.0], half), p
    if key == "calls.most_calls":
        counts = {op: calls_per_step(first, op) for op in ("aten::mul", "aten::select", "aten::copy_")}
        top = max(counts, key=counts.get)
        return top, counts[top]
    if key in ("calls.slowdown", "host_sync.item_vs_once", "cuda_graphs.speedup"):
        # The Summary cards' "Per iteration, profiled": the profiled steps timed apart from the trace
        # where the run has that timing, else the trace's own median step.
        t_first, t_last = (timings[0], timings[-1]) if timings else (None, None)
        r = profiled_step_us(first, t_first) / profiled_step_us(last, t_last)
        edges, labels = {"calls.slowdown": ([4.0, 20.0], ["under 4×", "4–20×", "over 20×"]),
                         "host_sync.item_vs_once": ([0.8, 1.2], ["shorter", "about the same (within 20 %)", "longer"]),
                         "cuda_graphs.speedup": ([1.5, 5.0], ["under 1.5×", "1.5–5×", "over 5×"])}[key]
        return choice_of(r, edges, labels), r
    if key == "host_sync.once_syncs":
        n = calls_per_step(last, "cudaStreamSynchronize")
        return choice_of(n, [0.5, 2.5], ["zero", "one or two", "about eight"]), n
    if key == "host_sync.item_child":
        child = child_op(first, "aten::item")
        return (child or "no child op"), float(bool(child))
    if key == "cuda_graphs.graph_kernels":
        a, b = (len(launched(e)) / len(step_windows(e)) for e in (first, last))
        one = "1: the graph runs as one kernel"
        c = "as many as eager" if abs(b - a) <= 0.5 else one if b <= 1.5 else "fewer than eager"
        return c, b
    if key == "cuda_graphs.eager_ops":
        n = per_step(first, ("cpu_op",))
        return choice_of(n, [24.0, 40.0], ["about 16", "about 32", "48 or more"]), n
    if key == "training_step.gemms":
        n = gemms_per_step(first)
        return choice_of(n, [2.5, 4.5, 6.5], ["2", "3–4", "5–6", "7 or more"]), n
    if key == "training_step.longest_phase":
        times = {c: phase_us(first, label) for c, label in
                 (("forward", "forward"), ("backward", "backward"), ("optimizer step", "Optimizer.step#AdamW.step"))}
        top = max(times, key=times.get)
        return top, times[top]
    if key == "pinned_copies.bandwidth":
        r = copy_gb_per_s(last) / copy_gb_per_s(first)
        return choice_of(r, [1.5, 4.0], ["under 1.5×", "1.5–4×", "over 4×"]), r
    if key == "pinned_copies.blocking":
        r = copy_call_ratio(first)
        return choice_of(r, [0.5], ["a few µs: it returns at once", "about as long as the copy"]), r
    if key == "memory_peak.peak_label":
        label = memory_peak_label(datas[0])
        return label, float(["up", "act", "down"].index(label))
    if key == "memory_peak.alive":
        u = memory_rise_units(datas[0])
        return choice_of(u, [1.5, 2.5], ["1", "2", "3 or more"]), u
    if key in ("profiler_overhead.loop", "profiler_overhead.gemm"):
        prof, plain = timings[0 if key.endswith("loop") else 1]
        r = statistics.median(prof) / statistics.median(plain)
        return choice_of(r, [1.2, 2.0], ["under 1.2×", "1.2–2×", "over 2×"]), r
    if key == "self_total_shapes.matmul_self":
        p = self_share_pct(first, "aten::matmul")
        return choice_of(p, [25.0, 75.0], share), p
    if key == "self_total_shapes.top_shape":
        times = shape_times(first, "aten::mm")
        top = max(times, key=times.get)
        firsts = {d: json.loads(d)[0][0] for d in times}
        index = round(math.log2(firsts[top] / min(firsts.values())))
        return ["(M, K, N)", "(2M, K/4, 2N)", "(4M, K/16, 4N)"][index], times[top]
    raise KeyError(key)

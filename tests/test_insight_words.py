"""A finding's words match what the trace has: a host-sync finding on a trace without
steps does not speak of steps; a CPU run's memory advice does not send the reader to a CUDA tool."""

from __future__ import annotations

import json

import diagbuild as b
import tracebuild as tb

from lab.analysis import analyze
from lab.judge import judge_trace
from lab.trace.load import load_trace


def test_sync_waits_on_a_trace_without_steps_do_not_speak_of_steps():
    doc = b.item_sync(n_steps=4)
    doc["traceEvents"] = [e for e in doc["traceEvents"]  # no ProfilerStep, no repeated label: no steps
                          if not str(e.get("name", "")).startswith("ProfilerStep#") and e.get("name") != "forward"]
    trace = b.load(doc)
    found = {f.rule: f for f in judge_trace(trace, analyze(trace)).findings}
    assert "sync_waits" in found
    for f in found.values():
        assert "step" not in f.title.lower()
        assert " step" not in f.evidence.replace("step's thread", ""), f.evidence
    assert "window" in found["sync_waits"].evidence
    stepped_trace = b.load(b.item_sync(n_steps=4))
    stepped = {f.rule: f for f in judge_trace(stepped_trace, analyze(stepped_trace)).findings}
    assert stepped["sync_waits"].title == found["sync_waits"].title  # one title per rule
    assert "step" in stepped["sync_waits"].evidence


def _memory_findings(device_type: int) -> dict:
    events, level, t = [], 0, 1000.0
    for k in range(4):  # every step keeps 4 KiB: a leak candidate, and a peak
        events.append(tb.annotation(f"ProfilerStep#{k + 1}", t, 1000.0))
        events.append(tb.op("aten::work", t + 10, 900.0))
        for i, nbytes in enumerate((1 << 20, 4096, -(1 << 20))):
            level += nbytes
            events.append(tb.memory(t + 20 + i * 200.0, nbytes, level, device_type=device_type,
                                    device_id=0 if device_type else -1))
        t += 1000.0
    trace = load_trace(json.dumps(tb.document(events)).encode())
    return {f.title: f for f in judge_trace(trace, analyze(trace)).findings}


def test_cpu_memory_advice_names_no_cuda_tool_and_gpu_advice_keeps_the_snapshot():
    cpu, gpu = _memory_findings(0), _memory_findings(1)
    advice = [i for i in cpu.values() if "Memory" in i.title]
    assert len(advice) >= 2, list(cpu)
    for insight in advice:
        assert "torch.cuda" not in insight.suggestion and "PYTORCH_CUDA_ALLOC_CONF" not in insight.suggestion
        assert "export_memory_timeline" in insight.suggestion
    assert any("_record_memory_history" in i.suggestion for i in gpu.values())


def test_the_straggler_s_extra_ops_are_never_the_profiler_s_own():
    import gzip
    from pathlib import Path

    from lab.analysis import analyze_ranks

    gt = Path(__file__).parent / "data" / "groundtruth" / "cpu"
    docs = [json.loads(gzip.decompress((gt / f"gloo_ddp_rank{r}.json.gz").read_bytes())) for r in (0, 1)]
    before = analyze_ranks([load_trace(json.dumps(d).encode()) for d in docs], ["r0.json", "r1.json"],
                           analyses=[analyze(load_trace(json.dumps(d).encode())) for d in docs])
    late = before.straggler.rank
    ops = [e for e in docs[late]["traceEvents"] if e.get("cat") == "cpu_op"]
    end = max(e["ts"] + e["dur"] for e in ops)
    # The profiler flushing its buffers on that rank after its last op: 500 ms of its own work,
    # more than any op's extra time (the largest is ~108 ms).
    docs[late]["traceEvents"].append({"ph": "X", "cat": "overhead", "name": "Activity Buffer Request",
                                      "pid": ops[0]["pid"], "tid": ops[0]["tid"], "ts": end + 10, "dur": 500000})
    traces = [load_trace(json.dumps(d).encode()) for d in docs]
    after = analyze_ranks(traces, ["r0.json", "r1.json"], analyses=[analyze(t) for t in traces])
    names = [n for n, _ in after.straggler.op_deltas_us]
    assert "Activity Buffer Request" not in names and names, after.straggler.op_deltas_us

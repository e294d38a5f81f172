"""Lanes (readable, ordered rows: CPU threads, then GPU streams) and the trace's metadata, from
process / thread metadata events and the top-level keys of the document."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lab.trace.model import TraceMeta
from lab.trace.records import Event
from lab.trace.values import as_int, first_int, id_str, opt_bool, opt_int

__all__ = ["Lane", "lanes_for", "metadata_names", "trace_meta"]

_STREAM_RE = re.compile(r"stream\s+(-?\d+)")
_GPU_LABEL_RE = re.compile(r"GPU\s+(-?\d+)")
_THREAD_RE = re.compile(r"^thread\s+\d+\s*\((.*)\)\s*$")


@dataclass(frozen=True)
class Lane:
    pid: str
    tid: str
    name: str
    kind: str  # "cpu" | "gpu"
    order: int
    device: int
    stream: int


def lanes_for(keys: list[tuple[str, str]], gpu_hint: dict, meta_names: dict) -> list[Lane]:
    """Name and order lanes. ``gpu_hint[(pid, tid)]`` is (device, stream) from a GPU event's
    args, or None when the lane holds no GPU-only categories."""
    drafts = []
    for pid, tid in keys:
        label = meta_names["labels"].get(pid, "")
        gpu_label = _GPU_LABEL_RE.search(label) if isinstance(label, str) else None
        hint = gpu_hint.get((pid, tid))
        tname = meta_names["thread"].get((pid, tid), "")
        if gpu_label or hint is not None:
            device = first_int(gpu_label and gpu_label.group(1), hint and hint[0], pid)
            m = _STREAM_RE.search(tname)
            stream = first_int(m and m.group(1), tid, hint and hint[1])
            name = f"GPU {device} stream {stream}"
            drafts.append(((1, device, stream, pid, tid), pid, tid, name, "gpu", device, stream))
        else:
            drafts.append(_cpu_draft(pid, tid, tname, meta_names["process"]))
    drafts.sort(key=lambda d: d[0])
    lanes, seen = [], {}
    for order, (_, pid, tid, name, kind, device, stream) in enumerate(drafts):
        if name in seen:  # two lanes would look alike: say which process each belongs to
            name = f"{name} [pid {pid} tid {tid}]"
        seen[name] = True
        lanes.append(Lane(pid, tid, name, kind, order, device, stream))
    return lanes


def _cpu_draft(pid: str, tid: str, tname: str, process_names: dict) -> tuple:
    numeric_pid, numeric_tid = as_int(pid), as_int(tid)
    m = _THREAD_RE.match(tname) if tname else None
    if m:
        detail = m.group(1)
    elif tname:
        detail = tname.strip()
    else:
        detail = process_names.get(pid, "")
        if not detail and numeric_pid is not None:
            detail = f"pid {pid}"
    if numeric_tid is None and numeric_pid is None:
        name = f"{pid} {tid}"  # e.g. Kineto's "Spans" / "PyTorch Profiler" pseudo-process
    else:
        name = f"CPU thread {tid}" + (f" ({detail})" if detail else "")
    pid_key = (0, numeric_pid, "") if numeric_pid is not None else (1, 0, pid)
    tid_key = (0, numeric_tid, "") if numeric_tid is not None else (1, 0, tid)
    return ((0, pid_key, tid_key), pid, tid, name, "cpu", -1, -1)


def metadata_names(meta_events: list[Event]) -> dict:
    process, labels, thread = {}, {}, {}
    for e in meta_events:
        if e.args is None or e.pid is None:
            continue
        pid = id_str(e.pid)
        if e.name == "process_name" and isinstance(e.args.name, str):
            process[pid] = e.args.name
        elif e.name == "process_labels" and isinstance(e.args.labels, str):
            labels[pid] = e.args.labels
        elif e.name == "thread_name" and isinstance(e.args.name, str) and e.tid is not None:
            thread[(pid, id_str(e.tid))] = e.args.name
    return {"process": process, "labels": labels, "thread": thread}


def trace_meta(top: dict, names: dict, start_ts: float, span_us: float) -> TraceMeta:
    props = top.get("deviceProperties")
    props = tuple(p for p in props if isinstance(p, dict)) if isinstance(props, list) else ()
    dist = top.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else None
    trace_name = top.get("traceName")
    return TraceMeta(
        device_properties=props,
        base_time_ns=opt_int(top.get("baseTimeNanoseconds")),
        schema_version=opt_int(top.get("schemaVersion")),
        trace_name=trace_name if isinstance(trace_name, str) else "",
        cuda_driver_version=opt_int(top.get("cuda_driver_version")),
        cuda_runtime_version=opt_int(top.get("cuda_runtime_version")),
        cupti_version=opt_int(top.get("cupti_version")),
        record_shapes=opt_bool(top.get("record_shapes")),
        with_flops=opt_bool(top.get("with_flops")),
        profile_memory=opt_bool(top.get("profile_memory")),
        with_stack=opt_bool(top.get("with_stack")),
        distributed=dist,
        rank=opt_int(dist.get("rank")) if dist else None,
        start_ts_us=start_ts,
        span_us=span_us,
        process_names=dict(names["process"]),
        thread_names=dict(names["thread"]),
    )

"""Small real programs profiled to get torch's own key_averages next to the trace it exported.

Used by ``tests/test_key_averages.py`` (on the CPU, in the test itself) and by
``tests/ka_record.py`` (any device, writes the files ``scripts/check_groundtruth.py`` reads).
Each program is ``setup(device) -> step`` where ``step()`` runs one training/inference step;
``record`` profiles a few steps under a schedule, so ``ProfilerStep#N`` rows appear.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "6")

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402

# torch's answer, one row per FunctionEventAvg: the columns the lab's table must equal.
CSV_COLUMNS = ("name", "input_shapes", "device_type", "count", "self_cpu_us", "cpu_total_us",
               "self_device_us", "device_total_us", "self_cpu_memory_bytes", "cpu_memory_bytes",
               "self_device_memory_bytes", "device_memory_bytes", "flops", "is_user_annotation")


def seed(device: str):
    """The lab's seed exercise: matmul + bias add inside record_function labels."""
    x = torch.randn(128, 96, device=device)
    w = torch.randn(96, 64, device=device)
    b = torch.randn(64, device=device)

    def step():
        with record_function("seed_step"):
            with record_function("mm_part"):
                y = x @ w
            with record_function("add_part"):
                y = y + b
        return y

    return step


def mlp_adamw_autocast(device: str):
    """An nn.Module MLP trained with AdamW under bf16 autocast: nested same-name ops
    (``aten::cross_entropy_loss`` in itself on a CPU, ``aten::log_softmax`` on a GPU), backward
    ops, the optimizer's ops."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64, device=device)
    target = torch.randint(0, 10, (32,), device=device)

    def step():
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            # Concatenating the bf16 logits with float32 columns promotes them to float32; the
            # loss then runs through autocast's cast wrapper, which calls aten::cross_entropy_loss
            # inside aten::cross_entropy_loss (one child only: torch counts the pair once).
            logits = torch.cat([model(x), x[:, :2]], dim=1)[:, :10]
            loss = nn.functional.cross_entropy(logits, target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def item_sync(device: str):
    """A loop that reads a scalar back every step (a host sync on a GPU)."""
    x = torch.randn(256, 256, device=device)

    def step():
        with record_function("sync_step"):
            y = torch.tanh(x @ x)
            return float(y.sum().item())

    return step


def copies(device: str):
    """Pageable and pinned host→device copies, one on a side stream, and a copy back."""
    host = torch.randn(1 << 18)
    pinned = host.pin_memory()
    side = torch.cuda.Stream()

    def step():
        with record_function("h2d_pageable"):
            a = host.to(device)
        with record_function("h2d_pinned_side"), torch.cuda.stream(side):
            b = pinned.to(device, non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)
        return (a + b).cpu()

    return step


def cuda_graph(device: str):
    """A captured CUDA graph replayed each step (one cudaGraphLaunch, several kernels)."""
    x = torch.randn(512, 512, device=device)
    w = torch.randn(512, 512, device=device)
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        y = torch.relu(x @ w) + 1.0

    def step():
        with record_function("replay"):
            graph.replay()
        return y

    return step


def compiled_mlp(device: str):
    """torch.compile of a small MLP: Triton kernels launched from generated code, no aten op."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.SiLU(), nn.Linear(512, 256)).to(device)
    fn = torch.compile(model)
    x = torch.randn(64, 256, device=device)

    def step():
        return fn(x)

    return step


def flops_ops(device: str):
    """Every op torch's computeFlops counts: conv2d (strided, padded, grouped), addmm, mm, bmm,
    baddbmm, mul, add."""
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2).to(device)
    x = torch.randn(2, 4, 17, 15, device=device)
    a, b = torch.randn(3, 5, 7, device=device), torch.randn(3, 7, 4, device=device)
    m, w, bias = torch.randn(6, 7, device=device), torch.randn(7, 9, device=device), torch.randn(9, device=device)

    def step():
        y = conv(x)
        z = torch.baddbmm(torch.zeros(3, 5, 4, device=device), a, b) + torch.bmm(a, b)
        return y.mul(2.0).sum() + z.sum() + torch.addmm(bias, m, w).sum() + (m @ w).sum()

    return step


PROGRAMS = {"seed": seed, "mlp_adamw_autocast": mlp_adamw_autocast, "item_sync": item_sync,
            "flops_ops": flops_ops}
GPU_PROGRAMS = {**PROGRAMS, "copies": copies, "cuda_graph": cuda_graph, "compiled_mlp": compiled_mlp}


@dataclass(frozen=True)
class Recording:
    trace_path: Path
    key_averages: list[dict]  # CSV_COLUMNS rows, grouped by name
    by_shape: list[dict]  # grouped by (name, input shapes)
    tables: dict  # sort key -> key_averages().table(sort_by=key, row_limit=-1)


# The tables scripts/record_groundtruth.py saves: <stem>.table.txt and <stem>.table_device.txt.
TABLE_SORTS = {"self_cpu_time_total": "table.txt", "self_device_time_total": "table_device.txt"}


def record(program: str, device: str, out_dir: Path, *, with_stack: bool = False,
           record_shapes: bool = True, with_flops: bool = False, profile_memory: bool = False,
           steps: int = 3, keep_profile: bool = False):
    """Profile ``steps`` active steps of ``program`` (after one wait and one warm-up step).

    Returns the ``Recording`` (and the profile too with ``keep_profile``)."""
    step = GPU_PROGRAMS[program](device)
    step()  # first call outside the profile: lazy init, cuBLAS handles
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=steps),
                 record_shapes=record_shapes, with_stack=with_stack, with_flops=with_flops,
                 profile_memory=profile_memory) as prof:
        for _ in range(2 + steps):
            step()
            prof.step()
    if device == "cuda":
        torch.cuda.synchronize()
    stem = f"{program}_{device}{'_stack' if with_stack else ''}{'_mem' if profile_memory else ''}"
    out_dir.mkdir(parents=True, exist_ok=True)
    trace_path = out_dir / f"{stem}.json.gz"
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        trace_path.write_bytes(gzip.compress(raw.read_bytes()))
    averages = prof.key_averages()
    tables = {key: averages.table(sort_by=key, row_limit=-1) for key in TABLE_SORTS}  # profile_memory: its own
    rec = Recording(trace_path, averages_rows(averages),
                    averages_rows(prof.key_averages(group_by_input_shape=True), shapes=True), tables)
    return (rec, prof) if keep_profile else rec


def save(rec: Recording) -> None:
    """The CSVs and tables beside the trace, named as scripts/check_groundtruth.py reads them."""
    stem = rec.trace_path.name.removesuffix(".json.gz")
    folder = rec.trace_path.parent
    (folder / f"{stem}.key_averages.csv").write_text(rows_csv(rec.key_averages))
    (folder / f"{stem}.key_averages_by_shape.csv").write_text(rows_csv(rec.by_shape))
    for key, suffix in TABLE_SORTS.items():
        (folder / f"{stem}.{suffix}").write_text(rec.tables[key])


def averages_rows(averages, *, shapes: bool = False) -> list[dict]:
    rows = []
    for e in averages:
        rows.append({
            "name": e.key,
            "input_shapes": str(e.input_shapes) if shapes else "",
            "device_type": str(e.device_type).rsplit(".", 1)[-1],
            "count": int(e.count),
            "self_cpu_us": float(e.self_cpu_time_total),
            "cpu_total_us": float(e.cpu_time_total),
            "self_device_us": float(e.self_device_time_total),
            "device_total_us": float(e.device_time_total),
            "self_cpu_memory_bytes": int(e.self_cpu_memory_usage),
            "cpu_memory_bytes": int(e.cpu_memory_usage),
            "self_device_memory_bytes": int(e.self_device_memory_usage),
            "device_memory_bytes": int(e.device_memory_usage),
            "flops": int(e.flops or 0),
            "is_user_annotation": bool(e.is_user_annotation),
        })
    return rows


def rows_csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(CSV_COLUMNS))
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()

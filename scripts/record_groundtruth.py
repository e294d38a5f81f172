#!/usr/bin/env python3
"""Record the ground-truth corpus: real programs under ``torch.profiler.profile``, each trace
saved beside torch's own answer for it.

Standalone on purpose: it imports torch, and transformers / torchvision when they are
installed, never the ``lab`` package. Run on a GPU host, or on a CPU with ``--quick``::

    python scripts/record_groundtruth.py --device cuda --out /tmp/gt --tar /tmp/gt.tar.gz
    python scripts/record_groundtruth.py --device cpu --quick --out /tmp/gt_cpu
    python scripts/record_groundtruth.py --list

For every variant (one workload × one set of profiler options) it writes into ``--out``:

- ``<stem>.json.gz``: the Chrome trace as ``export_chrome_trace`` wrote it (gzip);
- ``<stem>.key_averages.csv``: one row per ``prof.key_averages()`` entry (columns below);
- ``<stem>.key_averages_by_shape.csv``: the same grouped by input shape (record_shapes runs);
- ``<stem>.table.txt``: ``key_averages().table(sort_by="self_cpu_time_total", row_limit=-1)``,
  and on a GPU ``<stem>.table_device.txt`` sorted by self device time;
- an entry in ``manifest.json`` (rewritten after every variant): the program, the options,
  device, versions, event count, trace bytes and the "problem" the trace is expected to show.

A variant that fails is listed under ``"failed"`` and never stops the rest. One profile runs
at a time: two ``torch.profiler.profile`` sessions must never overlap in one process, so the
2-rank gloo job runs in two child processes while this one waits.
"""

from __future__ import annotations

import os

# Before torch is imported / any profile starts.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
# This host's rule for anything that could touch NCCL / NVSHMEM (the recorder uses gloo only).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
# Models are built from configs; nothing is ever downloaded.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import csv  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from collections import Counter  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402
from torch.profiler import schedule as make_schedule  # noqa: E402

warnings.filterwarnings("ignore", message=".*Profiler won't be using warmup.*")
warnings.filterwarnings("ignore", category=FutureWarning)

KA_COLUMNS = [
    "name", "device_type", "count", "self_cpu_us", "cpu_total_us", "self_device_us",
    "device_total_us", "self_cpu_memory_bytes", "cpu_memory_bytes", "self_device_memory_bytes",
    "device_memory_bytes", "flops", "is_user_annotation",
]
KA_SHAPE_COLUMNS = KA_COLUMNS + ["input_shapes"]
# The device tool returns files of at most 16 MiB: a larger tar is split into parts.
TAR_PART_BYTES = 15 * 2**20
# Problems that only a GPU trace shows (a CPU .item() is no sync, a CPU has no copies to pin).
GPU_ONLY_PROBLEMS = {"host_sync_item", "host_sync_device", "pageable_copies", "pinned_copies",
                     "side_stream", "cuda_graphs", "tf32_gemm", "amp_grad_scaler",
                     "multi_stream", "launch_bound", "gemm_template"}
SCHED_3 = dict(wait=1, warmup=1, active=3, repeat=1)  # 5 steps
SCHED_2 = dict(wait=1, warmup=1, active=2, repeat=1)  # 4 steps


# --------------------------------------------------------------------------------------------
# Context, programs, variants
# --------------------------------------------------------------------------------------------

@dataclass
class Ctx:
    device: str  # "cpu" | "cuda"
    quick: bool
    out: Path

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    @property
    def dev(self) -> torch.device:
        return torch.device("cuda:0" if self.cuda else "cpu")

    def pick(self, gpu, cpu, quick=None):
        """A size for this host: the GPU's, the CPU's, or the CPU --quick one."""
        if self.cuda:
            return gpu
        return quick if (self.quick and quick is not None) else cpu

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


@dataclass
class Program:
    step: Callable[[int], Any]  # one iteration; the profiler step ends after it
    warm: int = 2  # iterations run before the profile starts
    extra: dict = field(default_factory=dict)  # facts for the manifest (sizes, dtypes, ...)
    cleanup: Callable[[], None] | None = None


@dataclass
class Variant:
    stem: str
    workload: str
    description: str
    problems: list[str]
    build: Callable[[Ctx], Program]
    steps: int = 3
    schedule: dict | None = None
    export: str = "on_trace_ready"  # with a schedule: "on_trace_ready" | "end"
    with_stack: bool = False
    profile_memory: bool = False
    record_shapes: bool = False
    with_flops: bool = False
    devices: tuple[str, ...] = ("cpu", "cuda")
    runner: str = "profile"  # "profile" | "gloo" (child processes) | "cycles" (repeat > 1)

    def options(self) -> dict:
        return dict(with_stack=self.with_stack, profile_memory=self.profile_memory,
                    record_shapes=self.record_shapes, with_flops=self.with_flops,
                    schedule=self.schedule, steps=self.steps,
                    export=self.export if self.schedule else "end")


# --------------------------------------------------------------------------------------------
# Profiling one program and saving torch's answer
# --------------------------------------------------------------------------------------------

def _first_attr(obj, names, default=0):
    for name in names:
        if hasattr(obj, name):
            value = getattr(obj, name)
            if value is not None:
                return value
    return default


def _device_type_name(evt) -> str:
    dt = getattr(evt, "device_type", None)
    name = getattr(dt, "name", None) or str(dt)
    return name.split(".")[-1]


def _ka_row(evt) -> list:
    return [
        evt.key,
        _device_type_name(evt),
        evt.count,
        evt.self_cpu_time_total,
        evt.cpu_time_total,
        _first_attr(evt, ("self_device_time_total", "self_cuda_time_total")),
        _first_attr(evt, ("device_time_total", "cuda_time_total")),
        evt.self_cpu_memory_usage,
        evt.cpu_memory_usage,
        _first_attr(evt, ("self_device_memory_usage", "self_cuda_memory_usage")),
        _first_attr(evt, ("device_memory_usage", "cuda_memory_usage")),
        getattr(evt, "flops", 0) or 0,
        bool(getattr(evt, "is_user_annotation", False)),
    ]


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for row in rows:
            # csv writes floats with repr(): full precision.
            w.writerow(row)


def _table(ka, sort_keys) -> str:
    last = None
    for key in sort_keys:
        try:
            return ka.table(sort_by=key, row_limit=-1)
        except Exception as exc:  # an older torch spells the key differently
            last = exc
    return f"(table failed: {last!r})\n"


def save_answers(p, out: Path, stem: str, *, record_shapes: bool, cuda: bool) -> dict:
    """torch's key_averages (CSV), by shape, and the table text for profile ``p``."""
    files = {}
    ka = p.key_averages()
    _write_csv(out / f"{stem}.key_averages.csv", KA_COLUMNS, [_ka_row(e) for e in ka])
    files["key_averages"] = f"{stem}.key_averages.csv"
    n_shape_rows = None
    if record_shapes:
        kas = p.key_averages(group_by_input_shape=True)
        rows = [_ka_row(e) + [str(e.input_shapes)] for e in kas]
        _write_csv(out / f"{stem}.key_averages_by_shape.csv", KA_SHAPE_COLUMNS, rows)
        files["key_averages_by_shape"] = f"{stem}.key_averages_by_shape.csv"
        n_shape_rows = len(rows)
    (out / f"{stem}.table.txt").write_text(_table(ka, ["self_cpu_time_total"]))
    files["table"] = f"{stem}.table.txt"
    if cuda:
        (out / f"{stem}.table_device.txt").write_text(
            _table(ka, ["self_device_time_total", "self_cuda_time_total"]))
        files["table_device"] = f"{stem}.table_device.txt"
    return dict(files=files, key_averages_rows=len(ka), key_averages_by_shape_rows=n_shape_rows)


def trace_facts(path: Path) -> dict:
    """Event count and what kinds of events the exported trace holds."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw))
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    cats = Counter(str(e.get("cat", e.get("ph", "?"))) for e in events)
    facts = dict(events=len(events), trace_bytes=len(raw),
                 trace_json_bytes=len(gzip.decompress(raw)),
                 categories=dict(sorted(cats.items())),
                 has_distributed_info="distributedInfo" in doc if isinstance(doc, dict) else False)
    if isinstance(doc, dict) and "distributedInfo" in doc:
        facts["distributed_info"] = doc["distributedInfo"]
    return facts


def profile_program(ctx: Ctx, v: Variant, step: Callable[[int], Any],
                    stem: str | None = None) -> dict:
    """Run ``step`` v.steps times under one profile; export the trace and torch's answer."""
    stem = stem or v.stem
    path = ctx.out / f"{stem}.json.gz"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.cuda else [])
    saved: dict = {}

    def on_ready(p) -> None:
        p.export_chrome_trace(str(path))
        saved.update(save_answers(p, ctx.out, stem, record_shapes=v.record_shapes, cuda=ctx.cuda))
        saved["trace_ready_calls"] = saved.get("trace_ready_calls", 0) + 1

    kw: dict = dict(activities=activities, record_shapes=v.record_shapes,
                    profile_memory=v.profile_memory, with_stack=v.with_stack,
                    with_flops=v.with_flops)
    if v.schedule:
        kw["schedule"] = make_schedule(**v.schedule)
        if v.export == "on_trace_ready":
            kw["on_trace_ready"] = on_ready
    t0 = time.perf_counter()
    step_ms = []
    with profile(**kw) as prof:
        for i in range(v.steps):
            ts = time.perf_counter()
            step(i)
            step_ms.append(round((time.perf_counter() - ts) * 1e3, 3))
            if v.schedule:
                prof.step()
    profiled_s = time.perf_counter() - t0
    if not saved:  # plain profile, or a schedule exported at the end
        prof.export_chrome_trace(str(path))
        saved.update(save_answers(prof, ctx.out, stem, record_shapes=v.record_shapes,
                                  cuda=ctx.cuda))
    saved["files"] = {"trace": path.name, **saved["files"]}
    saved.update(trace_facts(path))
    saved["host_step_ms"] = step_ms
    saved["profiled_s"] = round(profiled_s, 3)
    return saved


def warm_up_profiler(ctx: Ctx) -> float:
    """A tiny throw-away profile: the first one in a process pays CUPTI's start (~7 s)."""
    t0 = time.perf_counter()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.cuda else [])
    a = torch.randn(64, 64, device=ctx.dev)
    with profile(activities=acts) as prof:
        (a @ a).sum()
        ctx.sync()
    prof.key_averages()
    return time.perf_counter() - t0


# --------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------

def _optional(name: str):
    try:
        return __import__(name)
    except Exception:
        return None


def build_seed(ctx: Ctx) -> Program:
    n = ctx.pick(4096, 512, 128)
    dt = torch.bfloat16
    g = torch.Generator(device=ctx.dev).manual_seed(0)
    x = torch.randn(n, n, device=ctx.dev, dtype=dt, generator=g)
    w = torch.randn(n, n, device=ctx.dev, dtype=dt, generator=g)
    b = torch.randn(n, device=ctx.dev, dtype=dt, generator=g)

    def step(i):
        with record_function("matmul_add"):
            with record_function("matmul"):
                y = x @ w
            with record_function("bias_add"):
                z = y + b
        return z

    return Program(step, warm=3, extra=dict(n=n, dtype="bfloat16",
                                            flops_per_step=2 * n ** 3 + n * n))


def build_gemm(allow_tf32: bool):
    def build(ctx: Ctx) -> Program:
        n = ctx.pick(4096, 512, 192)
        a = torch.randn(n, n, device=ctx.dev)
        b = torch.randn(n, n, device=ctx.dev)
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32

        def step(i):
            with record_function("gemm_fp32"):
                for _ in range(3):
                    c = a @ b
            return c

        def cleanup():
            torch.backends.cuda.matmul.allow_tf32 = before

        return Program(step, warm=3, cleanup=cleanup,
                       extra=dict(n=n, dtype="float32", gemms_per_step=3,
                                  allow_tf32=torch.backends.cuda.matmul.allow_tf32,
                                  flops_per_gemm=2 * n ** 3))
    return build


def build_item_sync(ctx: Ctx) -> Program:
    n = ctx.pick(4096, 256, 128)
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    x = torch.randn(n, n, device=ctx.dev, dtype=dt)
    w = torch.randn(n, n, device=ctx.dev, dtype=dt) / n ** 0.5
    host_ms = 2.0
    state = {"acc": 0.0}

    def host_work(ms: float) -> int:
        # Pure-Python work (no torch op): a gap between steps the trace shows as no op at all.
        end = time.perf_counter() + ms / 1e3
        k = 0
        while time.perf_counter() < end:
            k += 1
        return k

    def step(i):
        with record_function("forward"):
            y = x
            for _ in range(6):
                y = torch.relu(y @ w)
            loss = y.float().mean()
        state["acc"] += loss.item()  # host sync every step
        host_work(host_ms)

    return Program(step, warm=2, extra=dict(n=n, dtype=str(dt).split(".")[-1],
                                            gemms_per_step=6, host_work_ms=host_ms))


def build_device_sync(ctx: Ctx) -> Program:
    n = 4096
    dt = torch.bfloat16
    x = torch.randn(n, n, device=ctx.dev, dtype=dt)
    w = torch.randn(n, n, device=ctx.dev, dtype=dt) / n ** 0.5

    def step(i):
        with record_function("first_half"):
            y = x
            for _ in range(4):
                y = torch.relu(y @ w)
        torch.cuda.synchronize()  # cudaDeviceSynchronize: the GPU idles while the host resumes
        with record_function("second_half"):
            for _ in range(4):
                y = torch.relu(y @ w)
        host = y[:4, :4].float().cpu()  # a device-to-host copy that waits (cudaStreamSynchronize)
        return host

    return Program(step, warm=2, extra=dict(n=n, dtype="bfloat16", gemms_per_step=8,
                                            syncs=["torch.cuda.synchronize()", ".cpu()"]))


def build_copies(mode: str):
    def build(ctx: Ctx) -> Program:
        mb = 256 if mode == "pageable" else 128
        n = mb * 2 ** 20 // 4
        pageable = torch.ones(n, dtype=torch.float32)
        pinned = torch.ones(n, dtype=torch.float32).pin_memory() if mode == "mixed" else None
        d1 = torch.empty(n, device=ctx.dev)
        d2 = torch.empty(n, device=ctx.dev)
        side = torch.cuda.Stream()
        m = torch.randn(2048, 2048, device=ctx.dev, dtype=torch.bfloat16)
        cur = torch.cuda.current_stream()

        def step(i):
            side.wait_stream(cur)
            if mode == "pageable":
                with record_function("h2d_pageable"):
                    with torch.cuda.stream(side):
                        d = pageable.to(ctx.dev, non_blocking=True)  # pageable: not async
            else:
                with record_function("h2d_pageable"):
                    with torch.cuda.stream(side):
                        d1.copy_(pageable, non_blocking=True)
                with record_function("h2d_pinned"):
                    with torch.cuda.stream(side):
                        d2.copy_(pinned, non_blocking=True)
            with record_function("compute"):
                y = m
                for _ in range(4):
                    y = y @ m
            cur.wait_stream(side)
            if mode == "pageable":
                d.record_stream(cur)
                return d.sum() + y.float().sum()
            return d1.sum() + d2.sum() + y.float().sum()

        return Program(step, warm=2, extra=dict(copy_mb=mb, copies=mode, side_stream=True))
    return build


def build_multistream(ctx: Ctx) -> Program:
    n = 4096
    dt = torch.bfloat16
    a1, b1, a2, b2 = (torch.randn(n, n, device=ctx.dev, dtype=dt) for _ in range(4))
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    cur = torch.cuda.current_stream()

    def step(i):
        s1.wait_stream(cur)
        s2.wait_stream(cur)
        with record_function("stream1_gemms"):
            with torch.cuda.stream(s1):
                for _ in range(4):
                    c1 = a1 @ b1
        with record_function("stream2_gemms"):
            with torch.cuda.stream(s2):
                for _ in range(4):
                    c2 = a2 @ b2
        cur.wait_stream(s1)
        cur.wait_stream(s2)
        c1.record_stream(cur)
        c2.record_stream(cur)
        return c1, c2

    return Program(step, warm=2, extra=dict(n=n, dtype="bfloat16", streams=2, gemms_per_stream=4))


def build_sdpa(ctx: Ctx) -> Program:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, H, S, D = ctx.pick((4, 16, 1024, 64), (2, 4, 256, 64), (1, 4, 128, 32))
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    q, k, v = (torch.randn(B, H, S, D, device=ctx.dev, dtype=dt) for _ in range(3))
    wanted = ["MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION"] + (
        ["CUDNN_ATTENTION"] if ctx.cuda else [])
    backends, refused = [], {}
    for name in wanted:
        be = getattr(SDPBackend, name, None)
        if be is None:
            refused[name] = "not in this torch"
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with sdpa_kernel(be):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)
            backends.append((name, be))
        except Exception as exc:
            refused[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    ctx.sync()

    def step(i):
        for name, be in backends:
            with record_function(f"sdpa_{name.lower()}"):
                with sdpa_kernel(be):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return Program(step, warm=2, extra=dict(shape=[B, H, S, D], dtype=str(dt).split(".")[-1],
                                            backends=[n for n, _ in backends],
                                            refused=refused, is_causal=True))


def build_llama_train(ctx: Ctx) -> Program:
    tf = _optional("transformers")
    if tf is None:
        raise RuntimeError("transformers is not installed")
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, inter, heads, kv, vocab = ctx.pick((512, 1376, 8, 4, 4000), (256, 688, 4, 2, 1000),
                                              (128, 344, 4, 2, 1000))
    batch, seq = ctx.pick((4, 128), (2, 128), (2, 64))
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                      num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=kv,
                      max_position_embeddings=256, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(ctx.dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    ids = torch.randint(0, vocab, (batch, seq), device=ctx.dev)

    def step(i):
        with torch.autocast(device_type=ctx.dev.type, dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)  # loss (cross_entropy) inside autocast
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    n_params = sum(p.numel() for p in model.parameters())
    return Program(step, warm=2, extra=dict(
        model="LlamaForCausalLM (from LlamaConfig, random weights)", layers=2, hidden=hidden,
        intermediate=inter, heads=heads, kv_heads=kv, vocab=vocab, batch=batch, seq=seq,
        params=n_params, autocast="bfloat16", optimizer="AdamW(foreach=True)",
        attn_implementation=getattr(model.config, "_attn_implementation", None),
        transformers=tf.__version__))


def build_gpt2_infer(ctx: Ctx) -> Program:
    tf = _optional("transformers")
    if tf is None:
        raise RuntimeError("transformers is not installed")
    from transformers import GPT2Config, GPT2LMHeadModel

    emb, vocab = ctx.pick((512, 4000), (256, 1000), (128, 1000))
    batch, seq = ctx.pick((8, 128), (2, 128), (2, 64))
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=vocab, n_embd=emb, n_layer=2, n_head=8 if emb >= 256 else 4,
                     n_positions=256, bos_token_id=vocab - 1, eos_token_id=vocab - 1)
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    model = GPT2LMHeadModel(cfg).to(ctx.dev, dtype=dt).eval()
    ids = torch.randint(0, vocab, (batch, seq), device=ctx.dev)

    def step(i):
        with torch.no_grad():
            return model(input_ids=ids).logits

    return Program(step, warm=2, extra=dict(
        model="GPT2LMHeadModel (from GPT2Config, random weights)", layers=2, n_embd=emb,
        vocab=vocab, batch=batch, seq=seq, dtype=str(dt).split(".")[-1], mode="no_grad",
        attn_implementation=getattr(model.config, "_attn_implementation", None),
        transformers=tf.__version__))


def build_bert_infer(ctx: Ctx) -> Program:
    tf = _optional("transformers")
    if tf is None:
        raise RuntimeError("transformers is not installed")
    from transformers import BertConfig, BertModel

    hidden, vocab = ctx.pick((512, 4000), (256, 1000), (128, 1000))
    batch, seq = ctx.pick((8, 128), (2, 128), (2, 64))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=2,
                     num_attention_heads=8 if hidden >= 256 else 4, intermediate_size=4 * hidden,
                     max_position_embeddings=256)
    model = BertModel(cfg).to(ctx.dev).eval()
    ids = torch.randint(0, vocab, (batch, seq), device=ctx.dev)
    mask = torch.ones_like(ids)

    def step(i):
        with torch.no_grad():
            return model(input_ids=ids, attention_mask=mask).last_hidden_state

    return Program(step, warm=2, extra=dict(
        model="BertModel (from BertConfig, random weights)", layers=2, hidden=hidden,
        vocab=vocab, batch=batch, seq=seq, dtype="float32", mode="no_grad",
        transformers=tf.__version__))


class _Block(nn.Module):
    """A ResNet basic block: the CPU fallback when torchvision is absent."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


def _resnet18_plain(num_classes=1000) -> nn.Module:
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        layers += [_Block(cin, cout, stride), _Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes)]
    return nn.Sequential(*layers)


def build_resnet_amp(ctx: Ctx) -> Program:
    tv = None
    try:
        import torchvision  # noqa: F401
        import torchvision.models as tvm
        tv = torchvision
    except Exception:
        tvm = None
    torch.manual_seed(0)
    if ctx.cuda:
        if tvm is None:
            raise RuntimeError("torchvision is not importable")
        model, name = tvm.resnet50(weights=None), "torchvision resnet50(weights=None)"
    elif tvm is not None:
        model, name = tvm.resnet18(weights=None), "torchvision resnet18(weights=None)"
    else:
        model, name = _resnet18_plain(), "ResNet-18 in plain torch (torchvision not importable)"
    model = model.to(ctx.dev).train()
    batch, px = ctx.pick((16, 96), (4, 64), (2, 64))
    x = torch.randn(batch, 3, px, px, device=ctx.dev)
    y = torch.randint(0, 1000, (batch,), device=ctx.dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    amp_dtype = torch.float16 if ctx.cuda else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda") if ctx.cuda else None

    def step(i):
        with torch.autocast(device_type=ctx.dev.type, dtype=amp_dtype):
            loss = F.cross_entropy(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)

    return Program(step, warm=2, extra=dict(
        model=name, batch=batch, image_px=px, autocast=str(amp_dtype).split(".")[-1],
        grad_scaler=scaler is not None, optimizer="SGD(momentum=0.9)",
        torchvision=getattr(tv, "__version__", None)))


class SwiGLU(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.w1 = nn.Linear(d, h, bias=False)
        self.w3 = nn.Linear(d, h, bias=False)
        self.w2 = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def build_swiglu_compile(ctx: Ctx) -> Program:
    d, h, tokens = ctx.pick((1024, 2816, 4096), (256, 704, 512), (128, 352, 256))
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    torch.manual_seed(0)
    model = SwiGLU(d, h).to(ctx.dev, dtype=dt)
    cmodel = torch.compile(model)  # default mode
    x = torch.randn(tokens, d, device=ctx.dev, dtype=dt, requires_grad=True)
    t0 = time.perf_counter()
    cmodel(x).float().square().mean().backward()
    ctx.sync()
    compile_s = time.perf_counter() - t0

    def step(i):
        loss = cmodel(x).float().square().mean()
        loss.backward()
        x.grad = None
        model.zero_grad(set_to_none=True)

    return Program(step, warm=2, cleanup=torch._dynamo.reset, extra=dict(
        d=d, hidden=h, tokens=tokens, dtype=str(dt).split(".")[-1], compile_mode="default",
        compile_s=round(compile_s, 2), backward=True))


class _TinyDecoder(nn.Module):
    """A 2-layer decoder stepping one token at a time over a fixed-size context."""

    def __init__(self, vocab, d, ctx_len, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList()
        for _ in range(layers):
            self.layers.append(nn.ModuleDict(dict(
                ln1=nn.LayerNorm(d), q=nn.Linear(d, d), kv=nn.Linear(d, 2 * d),
                o=nn.Linear(d, d), ln2=nn.LayerNorm(d), up=nn.Linear(d, 4 * d),
                down=nn.Linear(4 * d, d))))
        self.register_buffer("memory", torch.randn(1, ctx_len, d))
        self.head = nn.Linear(d, vocab)
        self.heads = 8

    def forward(self, tok):  # tok: (B, 1) int64
        x = self.emb(tok)
        B, _, d = x.shape
        hd = d // self.heads
        for L in self.layers:
            h = L["ln1"](x)
            mem = torch.cat([self.memory.expand(B, -1, -1), h], dim=1)
            q = L["q"](h).view(B, 1, self.heads, hd).transpose(1, 2)
            k, v = L["kv"](mem).view(B, -1, 2, self.heads, hd).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v)
            x = x + L["o"](a.transpose(1, 2).reshape(B, 1, d))
            x = x + L["down"](F.gelu(L["up"](L["ln2"](x))))
        return self.head(x[:, -1]).argmax(-1, keepdim=True)


def build_decode_cudagraphs(ctx: Ctx) -> Program:
    vocab, d, ctx_len, batch = 2048, 512, 256, 4
    torch.manual_seed(0)
    model = _TinyDecoder(vocab, d, ctx_len).to(ctx.dev, dtype=torch.bfloat16).eval()
    fn = torch.compile(model, mode="reduce-overhead")
    tokens_per_step = 4
    state = {"tok": torch.zeros(batch, 1, dtype=torch.long, device=ctx.dev)}

    def decode_one():
        torch.compiler.cudagraph_mark_step_begin()
        with torch.no_grad():
            nxt = fn(state["tok"])
        state["tok"] = nxt.clone()  # the graph's output buffer is reused by the next replay

    t0 = time.perf_counter()
    for _ in range(6):  # compile, warm-up run, graph record, replays
        decode_one()
    ctx.sync()
    compile_s = time.perf_counter() - t0

    def step(i):
        with record_function("decode_step"):
            for _ in range(tokens_per_step):
                decode_one()

    return Program(step, warm=1, cleanup=torch._dynamo.reset, extra=dict(
        vocab=vocab, d=d, context=ctx_len, batch=batch, layers=2, dtype="bfloat16",
        compile_mode="reduce-overhead", tokens_per_step=tokens_per_step,
        compile_s=round(compile_s, 2)))


class _MLP(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                                 nn.Linear(h, d))

    def forward(self, x):
        return self.net(x)


def build_ddp(ctx: Ctx) -> Program:
    """One rank's DDP step (called inside a gloo child process)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    d, h, batch = ctx.pick((1024, 4096, 256), (256, 1024, 64), (128, 512, 32))
    torch.manual_seed(0)
    model = _MLP(d, h).to(ctx.dev)
    ddp = DDP(model, device_ids=[0] if ctx.cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    torch.manual_seed(1 + dist.get_rank())
    x = torch.randn(batch, d, device=ctx.dev)

    def step(i):
        loss = ddp(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    n_params = sum(p.numel() for p in model.parameters())
    return Program(step, warm=2, extra=dict(
        model="MLP 3 Linear", d=d, hidden=h, batch=batch, params=n_params,
        param_mb=round(n_params * 4 / 2 ** 20, 1), backend="gloo",
        rank=dist.get_rank(), world_size=dist.get_world_size(),
        tensors="cuda" if ctx.cuda else "cpu"))


# --------------------------------------------------------------------------------------------
# More kinds: GEMMs through other entry points, and programs of other shapes
# --------------------------------------------------------------------------------------------

def event_timing(ctx: Ctx, fn: Callable[[Any], Any], fresh: Callable[[], Any], *, samples: int = 25,
                 warm: int = 5) -> dict:
    """CUDA-event time of ``fn(inputs)``: median of ``samples`` calls after ``warm``, each on
    fresh random inputs. A ``torch.cuda._sleep`` before the start event keeps the GPU busy
    while the host enqueues the call, so the host's launch time is not counted."""
    if not ctx.cuda:
        return dict(skipped="no CUDA")
    times = []
    for i in range(warm + samples):
        inputs = fresh()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(2_000_000)
        start.record()
        fn(inputs)
        end.record()
        torch.cuda.synchronize()
        if i >= warm:
            times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    return dict(median_us=round(times[len(times) // 2], 3), min_us=round(times[0], 3),
                max_us=round(times[-1], 3), samples=samples, warm_up=warm,
                method="torch.cuda.Event around one call, fresh random inputs each call, "
                       "torch.cuda._sleep before the start event")


def _fp8(t: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A tensor-wise scaled float8 copy of ``t`` and its inverse scale (float32 scalar)."""
    amax = t.abs().max().float().clamp(min=1e-12)
    scale = torch.finfo(dtype).max / amax
    return (t.float() * scale).to(dtype), (1.0 / scale).reshape(())


def build_fp8_scaled_mm(ctx: Ctx) -> Program:
    n = ctx.pick(8192, 256, 128)
    fp8 = torch.float8_e4m3fn

    def fresh():
        a, sa = _fp8(torch.randn(n, n, device=ctx.dev), fp8)
        w, sw = _fp8(torch.randn(n, n, device=ctx.dev), fp8)  # (N, K) row-major: w.t() is K×N col-major
        return a, w.t(), sa, sw

    def call(inp):
        a, b, sa, sb = inp
        return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    timing = event_timing(ctx, call, fresh)
    pool = [fresh() for _ in range(3)]

    def step(i):
        with record_function("fp8_gemm"):
            for j in range(2):
                y = call(pool[(2 * i + j) % len(pool)])
        return y

    return Program(step, warm=3, extra=dict(
        n=n, m=n, k=n, op="torch._scaled_mm", dtype="float8_e4m3fn", out_dtype="bfloat16",
        scales="tensor-wise float32", gemms_per_step=2, flops_per_gemm=2 * n ** 3,
        event_timing=timing))


def build_int8_int_mm(ctx: Ctx) -> Program:
    n = ctx.pick(8192, 256, 128)

    def fresh():
        a = torch.randint(-128, 128, (n, n), device=ctx.dev, dtype=torch.int8)
        b = torch.randint(-128, 128, (n, n), device=ctx.dev, dtype=torch.int8)
        return a, b

    def call(inp):
        return torch._int_mm(*inp)

    timing = event_timing(ctx, call, fresh)
    pool = [fresh() for _ in range(3)]

    def step(i):
        with record_function("int8_gemm"):
            for j in range(2):
                y = call(pool[(2 * i + j) % len(pool)])
        return y

    return Program(step, warm=3, extra=dict(
        n=n, m=n, k=n, op="torch._int_mm", dtype="int8", out_dtype="int32", gemms_per_step=2,
        ops_per_gemm=2 * n ** 3, event_timing=timing))


def build_compiled_gemm(ctx: Ctx) -> Program:
    n = ctx.pick(4096, 256, 128)
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    mode = "max-autotune-no-cudagraphs" if ctx.cuda else "default"
    import torch._inductor.config as icfg

    # Triton templates only (cuBLAS would win and leave no template), a bounded search.
    saved = {k: getattr(icfg, k) for k in ("max_autotune_gemm_backends",
                                           "max_autotune_gemm_search_space")}
    icfg.max_autotune_gemm_backends = "TRITON"
    icfg.max_autotune_gemm_search_space = "DEFAULT"

    def f(x, w, b):
        return torch.relu(x @ w + b)

    cf = torch.compile(f, mode=mode)

    def fresh():
        return (torch.randn(n, n, device=ctx.dev, dtype=dt),
                torch.randn(n, n, device=ctx.dev, dtype=dt) / n ** 0.5,
                torch.randn(n, device=ctx.dev, dtype=dt))

    t0 = time.perf_counter()
    cf(*fresh())
    ctx.sync()
    compile_s = time.perf_counter() - t0
    timing = event_timing(ctx, lambda inp: cf(*inp), fresh)
    pool = [fresh() for _ in range(3)]

    def step(i):
        with record_function("compiled_gemm"):
            for j in range(2):
                y = cf(*pool[(2 * i + j) % len(pool)])
        return y

    def cleanup():
        for k, v in saved.items():
            setattr(icfg, k, v)
        torch._dynamo.reset()

    return Program(step, warm=2, cleanup=cleanup, extra=dict(
        n=n, m=n, k=n, dtype=str(dt).split(".")[-1], function="relu(x @ w + b)",
        compile_mode=mode, max_autotune_gemm_backends="TRITON", compile_s=round(compile_s, 2),
        gemms_per_step=2, flops_per_gemm=2 * n ** 3, event_timing=timing))


class _MoE(nn.Module):
    """Top-2 routing over 8 expert MLPs: which tokens reach which expert depends on the data."""

    def __init__(self, d, h, experts=8, top_k=2):
        super().__init__()
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d))
                                     for _ in range(experts))
        self.top_k = top_k

    def forward(self, x):
        weights, chosen = torch.topk(self.router(x).softmax(-1), self.top_k, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            tok, slot = torch.nonzero(chosen == e, as_tuple=True)  # a host sync: sizes vary
            if tok.numel():
                y = expert(x.index_select(0, tok)) * weights[tok, slot, None].to(x.dtype)
                out.index_add_(0, tok, y)
        return out


def build_moe(ctx: Ctx) -> Program:
    d, h, tokens = ctx.pick((1024, 2048, 4096), (128, 256, 256), (64, 128, 128))
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    torch.manual_seed(0)
    model = _MoE(d, h).to(ctx.dev, dtype=dt).eval()
    xs = [torch.randn(tokens, d, device=ctx.dev, dtype=dt) for _ in range(3)]

    def step(i):
        with torch.no_grad():
            return model(xs[i % len(xs)])

    return Program(step, warm=2, extra=dict(d=d, hidden=h, tokens=tokens, experts=8, top_k=2,
                                            dtype=str(dt).split(".")[-1], mode="no_grad"))


def build_generate(ctx: Ctx) -> Program:
    """A greedy decode loop written out: one forward per token, argmax, an end-of-sequence check
    on the host (``.item()``) after every token, as hand-written generation loops do."""
    vocab, d, ctx_len, batch = ctx.pick((4096, 512, 128, 4), (512, 128, 32, 2), (512, 64, 16, 2))
    new = ctx.pick(16, 8, 6)
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    torch.manual_seed(0)
    model = _TinyDecoder(vocab, d, ctx_len).to(ctx.dev, dtype=dt).eval()
    eos = vocab - 1
    prompt = torch.randint(0, vocab - 1, (batch, 1), device=ctx.dev)

    def step(i):
        with record_function("generate"), torch.no_grad():
            tok, out = prompt, []
            for _ in range(new):
                tok = model(tok)
                out.append(tok)
                if bool((tok == eos).all().item()):  # host sync per token
                    break
            return torch.cat(out, dim=1)

    return Program(step, warm=1, extra=dict(
        model="_TinyDecoder (2 layers, random weights)", vocab=vocab, d=d, context=ctx_len,
        batch=batch, new_tokens=new, decoding="greedy, eager, .item() EOS check per token",
        dtype=str(dt).split(".")[-1]))


def build_alloc_only(ctx: Ctx) -> Program:
    mib = [64, 256, 512, 1024] if ctx.cuda else [4, 16, 32]
    kept: list[torch.Tensor] = []

    def step(i):
        with record_function("allocate"):
            blocks = [torch.empty(m * 2 ** 20, dtype=torch.uint8, device=ctx.dev) for m in mib]
        with record_function("free"):
            kept.append(blocks.pop())  # the largest survives the step
            del blocks
            if ctx.cuda:
                torch.cuda.empty_cache()  # cudaFree: the next step's cudaMalloc is real
        ctx.sync()

    def cleanup():
        kept.clear()

    return Program(step, warm=0, cleanup=cleanup, extra=dict(
        block_mib=mib, kept_per_step=mib[-1], kernels="none (torch.empty only)",
        empty_cache=ctx.cuda))


def build_checkpoint(ctx: Ctx) -> Program:
    from torch.utils.checkpoint import checkpoint

    d, batch, blocks = ctx.pick((2048, 1024, 4), (256, 64, 3), (128, 32, 3))
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
                           for _ in range(blocks)).to(ctx.dev)
    opt = torch.optim.SGD(layers.parameters(), lr=0.01)
    x = torch.randn(batch, d, device=ctx.dev)

    def step(i):
        with torch.autocast(device_type=ctx.dev.type, dtype=torch.bfloat16, enabled=ctx.cuda):
            y = x
            for block in layers:
                y = y + checkpoint(block, y, use_reentrant=False)  # recomputed in backward
            loss = y.float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Program(step, warm=2, extra=dict(d=d, batch=batch, blocks=blocks,
                                            checkpoint="torch.utils.checkpoint, use_reentrant=False",
                                            autocast="bfloat16" if ctx.cuda else None))


def build_module_dataloader(ctx: Ctx) -> Program:
    """A small nn.Module tree (embedding → 2 residual blocks of LayerNorm + MLP → head) trained
    with SGD on batches from a torch DataLoader (for the TensorBoard plugin's DataLoader
    category and its Module view, which needs with_stack's nn.Module events)."""
    from torch.utils.data import DataLoader, TensorDataset

    d, batch, vocab = ctx.pick((1024, 512, 4096), (128, 64, 512), (64, 32, 256))
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            return x + self.mlp(self.norm(x))

    class TinyNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.blocks = nn.Sequential(Block(), Block())
            self.head = nn.Linear(d, vocab)

        def forward(self, tokens):
            return self.head(self.blocks(self.embed(tokens)))

    model = TinyNet().to(ctx.dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randint(0, vocab, (batch * 16,)), torch.randint(0, vocab, (batch * 16,)))
    batches = iter(DataLoader(data, batch_size=batch, shuffle=True, num_workers=0))

    def step(i):
        tokens, target = next(batches)  # "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
        tokens, target = tokens.to(ctx.dev), target.to(ctx.dev)
        loss = nn.functional.cross_entropy(model(tokens), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Program(step, warm=2, extra=dict(d=d, batch=batch, vocab=vocab, blocks=2,
                                            dataloader="TensorDataset, batch_size=batch, num_workers=0"))


def build_two_threads(ctx: Ctx) -> Program:
    import concurrent.futures as cf

    n = ctx.pick(2048, 256, 128)
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    pool = cf.ThreadPoolExecutor(2, thread_name_prefix="worker")  # threads live before the profile
    mats = [torch.randn(n, n, device=ctx.dev, dtype=dt) / n ** 0.5 for _ in range(2)]

    def work(k):
        stream = torch.cuda.Stream() if ctx.cuda else None
        with contextlib.ExitStack() as stack:
            if stream is not None:
                stack.enter_context(torch.cuda.stream(stream))
            with record_function(f"thread{k}_work"):
                y = mats[k]
                for _ in range(4):
                    y = torch.tanh(y @ mats[k])
            if stream is not None:
                stream.synchronize()
        return y

    def step(i):
        with record_function("both_threads"):  # the main thread's label spans the workers' ops
            futs = [pool.submit(work, k) for k in range(2)]
            return [f.result() for f in futs]

    return Program(step, warm=2, cleanup=lambda: pool.shutdown(wait=True), extra=dict(
        n=n, dtype=str(dt).split(".")[-1], threads=2, gemms_per_thread=4,
        streams="one side stream per thread" if ctx.cuda else None,
        nesting="record_function on the main thread around the workers' record_functions"))


def build_conv_channels_last(ctx: Ctx) -> Program:
    batch, c, px = ctx.pick((32, 128, 56), (4, 32, 32), (2, 16, 16))
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                        nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.ReLU(),
                        nn.Conv2d(2 * c, 2 * c, 1)).to(ctx.dev, dtype=dt,
                                                       memory_format=torch.channels_last)
    net.eval()
    x = torch.randn(batch, c, px, px, device=ctx.dev, dtype=dt).to(
        memory_format=torch.channels_last)

    def step(i):
        with torch.no_grad():
            return net(x)

    return Program(step, warm=2, extra=dict(batch=batch, channels=c, image_px=px,
                                            dtype=str(dt).split(".")[-1],
                                            memory_format="channels_last", convs=3))


def build_flex_attention(ctx: Ctx) -> Program:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    B, H, S, D = ctx.pick((4, 16, 1024, 64), (1, 2, 128, 32), (1, 2, 128, 32))
    dt = torch.bfloat16 if ctx.cuda else torch.float32

    def causal(b, h, q, kv):
        return q >= kv

    mask = create_block_mask(causal, B=None, H=None, Q_LEN=S, KV_LEN=S, device=ctx.dev)
    fa = torch.compile(flex_attention)
    q, k, v = (torch.randn(B, H, S, D, device=ctx.dev, dtype=dt) for _ in range(3))
    t0 = time.perf_counter()
    fa(q, k, v, block_mask=mask)
    ctx.sync()
    compile_s = time.perf_counter() - t0

    def step(i):
        with record_function("flex_attention"):
            return fa(q, k, v, block_mask=mask)

    return Program(step, warm=2, cleanup=torch._dynamo.reset, extra=dict(
        shape=[B, H, S, D], dtype=str(dt).split(".")[-1], mask="causal block mask",
        compile_s=round(compile_s, 2)))


# --------------------------------------------------------------------------------------------
# Kinds the section above does not name (recorded on the H200 only): GEMM entry points added
# later (grouped GEMM for MoE, FP8 row-wise scaling), cuBLASLt epilogues, batched GEMMs through
# baddbmm / einsum, a backward pass's transposed GEMMs, GEMMs replayed from CUDA graphs, nested
# (jagged) tensors, a sparse CSR matmul and a convolution's backward.
# --------------------------------------------------------------------------------------------

def steady_event_timing(ctx: Ctx, fn: Callable[[Any], Any], pool: list, *, calls: int = 20,
                        warm: int = 5) -> dict:
    """CUDA-event time per call of ``calls`` back-to-back calls over ``pool`` (rotated as the
    profiled steps rotate it): one event between consecutive calls, all queued behind a
    ``torch.cuda._sleep`` so the GPU runs them as it does in the profile, without an idle GPU
    (and lower clocks) before each call. Median of the per-call times."""
    if not ctx.cuda:
        return dict(skipped="no CUDA")
    for i in range(warm):
        fn(pool[i % len(pool)])
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(calls + 1)]
    torch.cuda._sleep(20_000_000)
    events[0].record()
    for i in range(calls):
        fn(pool[i % len(pool)])
        events[i + 1].record()
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) * 1e3 for a, b in zip(events, events[1:]))
    return dict(median_us=round(times[len(times) // 2], 3), min_us=round(times[0], 3),
                max_us=round(times[-1], 3), samples=calls, warm_up=warm,
                method="torch.cuda.Event between consecutive calls, queued behind "
                       "torch.cuda._sleep, inputs rotated over a pool of 3 as in the profile")


def _gemm_calls(ctx: Ctx, calls: list[dict]) -> list[dict]:
    """Each call's CUDA-event timings beside its op, shape and FLOPs: ``event_timing`` (one call
    at a time on fresh inputs) and ``steady_event_timing`` (back to back, as profiled); the
    ``fn`` / ``fresh`` entries are left out of the manifest."""
    out = []
    for c in calls:
        timing = event_timing(ctx, c["fn"], c["fresh"])
        steady = steady_event_timing(ctx, c["fn"], [c["fresh"]() for _ in range(3)])
        out.append({**{k: v for k, v in c.items() if k not in ("fn", "fresh")},
                    "event_timing": timing, "steady_event_timing": steady})
    return out


def _two_per_step(label: str, fn, pool) -> Callable[[int], Any]:
    def step(i):
        with record_function(label):
            for j in range(2):
                y = fn(pool[(2 * i + j) % len(pool)])
        return y
    return step


def build_grouped_mm(ctx: Ctx) -> Program:
    """MoE experts as one grouped GEMM: tokens (T×K) against G expert weights (G×K×N), the
    tokens of expert g the rows offs[g-1]:offs[g]."""
    g, k, n = 8, 4096, 4096
    rows = [512, 1536, 768, 1280, 1024, 896, 1152, 1024]  # per expert, 8192 tokens in all
    tokens = sum(rows)
    offs = torch.tensor(rows, device=ctx.dev, dtype=torch.int32).cumsum(0, dtype=torch.int32)

    def fresh():
        a = torch.randn(tokens, k, device=ctx.dev, dtype=torch.bfloat16)
        w = torch.randn(g, n, k, device=ctx.dev, dtype=torch.bfloat16) / k ** 0.5
        return a, w.transpose(-2, -1)  # (G, K, N), column-major per expert

    def call(inp):
        return torch._grouped_mm(inp[0], inp[1], offs=offs)

    calls = _gemm_calls(ctx, [dict(label="grouped_mm", op="aten::_grouped_mm", fn=call, fresh=fresh,
                                   m=tokens, k=k, n=n, groups=g, rows_per_group=rows,
                                   flops=2 * tokens * k * n)])
    pool = [fresh() for _ in range(3)]
    return Program(_two_per_step("grouped_mm", call, pool), warm=3, extra=dict(
        op="torch._grouped_mm", dtype="bfloat16", gemms_per_step=2, gemm_calls=calls))


def build_fp8_grouped_mm(ctx: Ctx) -> Program:
    """The FP8 MoE grouped GEMM: float8_e4m3fn tokens against 8 experts, row-wise scales."""
    g, k, n = 8, 4096, 4096
    rows = [512, 1536, 768, 1280, 1024, 896, 1152, 1024]
    tokens = sum(rows)
    offs = torch.tensor(rows, device=ctx.dev, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    fp8 = torch.float8_e4m3fn

    def fresh():
        a = torch.randn(tokens, k, device=ctx.dev)
        sa = torch.finfo(fp8).max / a.abs().amax(dim=1).clamp(min=1e-12)
        w = torch.randn(g, n, k, device=ctx.dev) / k ** 0.5
        sw = torch.finfo(fp8).max / w.abs().amax(dim=2).clamp(min=1e-12)
        return ((a * sa[:, None]).to(fp8), (w * sw[:, :, None]).to(fp8).transpose(-2, -1),
                (1.0 / sa).float(), (1.0 / sw).float())

    def call(inp):
        a, b, sa, sb = inp
        return torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16)

    calls = _gemm_calls(ctx, [dict(label="fp8_grouped_mm", op="aten::_scaled_grouped_mm", fn=call,
                                   fresh=fresh, m=tokens, k=k, n=n, groups=g, rows_per_group=rows,
                                   flops=2 * tokens * k * n)])
    pool = [fresh() for _ in range(3)]
    return Program(_two_per_step("fp8_grouped_mm", call, pool), warm=3, extra=dict(
        op="torch._scaled_grouped_mm", dtype="float8_e4m3fn", gemms_per_step=2, gemm_calls=calls))


def build_fp8_rowwise(ctx: Ctx) -> Program:
    n = 8192
    fp8 = torch.float8_e4m3fn

    def rowwise(t):
        scale = torch.finfo(fp8).max / t.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12)
        return (t.float() * scale).to(fp8), (1.0 / scale)

    def fresh():
        a, sa = rowwise(torch.randn(n, n, device=ctx.dev))
        w, sw = rowwise(torch.randn(n, n, device=ctx.dev))  # (N, K): w.t() is K×N column-major
        return a, w.t(), sa, sw.t()  # scales (M, 1) and (1, N)

    def call(inp):
        a, b, sa, sb = inp
        return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    calls = _gemm_calls(ctx, [dict(label="fp8_rowwise", op="aten::_scaled_mm", fn=call, fresh=fresh,
                                   m=n, k=n, n=n, flops=2 * n ** 3, scales="row-wise float32")])
    pool = [fresh() for _ in range(3)]
    return Program(_two_per_step("fp8_rowwise", call, pool), warm=3, extra=dict(
        op="torch._scaled_mm", dtype="float8_e4m3fn", out_dtype="bfloat16", gemms_per_step=2,
        gemm_calls=calls))


def build_addmm_activation(ctx: Ctx) -> Program:
    n = 4096

    def fresh():
        return (torch.randn(n, device=ctx.dev, dtype=torch.bfloat16),
                torch.randn(n, n, device=ctx.dev, dtype=torch.bfloat16),
                torch.randn(n, n, device=ctx.dev, dtype=torch.bfloat16) / n ** 0.5)

    def call(inp):
        bias, x, w = inp
        return torch._addmm_activation(bias, x, w.t(), use_gelu=True)  # cuBLASLt GELU_BIAS epilogue

    calls = _gemm_calls(ctx, [dict(label="addmm_gelu", op="aten::_addmm_activation", fn=call,
                                   fresh=fresh, m=n, k=n, n=n, flops=2 * n ** 3)])
    pool = [fresh() for _ in range(3)]
    return Program(_two_per_step("addmm_gelu", call, pool), warm=3, extra=dict(
        op="torch._addmm_activation(use_gelu=True)", dtype="bfloat16", gemms_per_step=2,
        gemm_calls=calls))


def build_batched_gemms(ctx: Ctx) -> Program:
    """torch.baddbmm (C + A·B per batch) and an einsum that lowers to aten::bmm."""
    b, m = 32, 1024
    eb, eh, es, ed = 8, 16, 2048, 128
    bf = torch.bfloat16

    def fresh_baddbmm():
        return tuple(torch.randn(b, m, m, device=ctx.dev, dtype=bf) for _ in range(3))

    def baddbmm(inp):
        return torch.baddbmm(*inp)

    def fresh_einsum():
        return tuple(torch.randn(eb, eh, es, ed, device=ctx.dev, dtype=bf) for _ in range(2))

    def einsum(inp):
        return torch.einsum("bhqd,bhkd->bhqk", *inp)

    calls = _gemm_calls(ctx, [
        dict(label="baddbmm", op="aten::baddbmm", fn=baddbmm, fresh=fresh_baddbmm, batch=b, m=m, k=m, n=m,
             flops=2 * b * m ** 3),
        dict(label="einsum", op="aten::einsum", fn=einsum, fresh=fresh_einsum, batch=eb * eh, m=es, k=ed,
             n=es, flops=2 * eb * eh * es * ed * es, lowers_to="aten::bmm"),
    ])
    pb, pe = [fresh_baddbmm() for _ in range(2)], [fresh_einsum() for _ in range(2)]

    def step(i):
        with record_function("baddbmm"):
            y = baddbmm(pb[i % 2])
        with record_function("einsum"):
            z = einsum(pe[i % 2])
        return y, z

    return Program(step, warm=3, extra=dict(dtype="bfloat16", gemms_per_step=2, gemm_calls=calls))


def build_linear_backward(ctx: Ctx) -> Program:
    """One bf16 Linear forward and backward: addmm, then mm(grad, W) and mm(grad.t(), x)."""
    t, k, n = 8192, 4096, 4096
    bf = torch.bfloat16
    torch.manual_seed(0)
    lin = nn.Linear(k, n).to(ctx.dev, dtype=bf)
    w = lin.weight.detach()
    xs = [torch.randn(t, k, device=ctx.dev, dtype=bf, requires_grad=True) for _ in range(2)]
    gys = [torch.randn(t, n, device=ctx.dev, dtype=bf) for _ in range(2)]
    calls = _gemm_calls(ctx, [
        dict(label="forward", op="aten::addmm", fn=lambda inp: torch.addmm(lin.bias.detach(), inp[0], w.t()),
             fresh=lambda: (torch.randn(t, k, device=ctx.dev, dtype=bf),), m=t, k=k, n=n, flops=2 * t * k * n),
        dict(label="grad_input", op="aten::mm", fn=lambda inp: inp[0].mm(w),
             fresh=lambda: (torch.randn(t, n, device=ctx.dev, dtype=bf),), m=t, k=n, n=k, flops=2 * t * k * n),
        dict(label="grad_weight", op="aten::mm", fn=lambda inp: inp[0].t().mm(inp[1]),
             fresh=lambda: (torch.randn(t, n, device=ctx.dev, dtype=bf), torch.randn(t, k, device=ctx.dev, dtype=bf)),
             m=n, k=t, n=k, flops=2 * t * k * n, note="grad.t() (a transposed view) @ x"),
    ])

    def step(i):
        with record_function("linear_fwd_bwd"):
            x = xs[i % 2]
            lin(x).backward(gys[i % 2])
            x.grad = None
            lin.zero_grad(set_to_none=True)

    return Program(step, warm=3, extra=dict(dtype="bfloat16", tokens=t, k=k, n=n, gemms_per_step=3,
                                            gemm_calls=calls))


def build_cudagraph_gemm(ctx: Ctx) -> Program:
    n = 4096
    bf = torch.bfloat16

    def f(x, w, b):
        return torch.relu(x @ w + b)

    cf = torch.compile(f, mode="reduce-overhead")

    def fresh():
        return (torch.randn(n, n, device=ctx.dev, dtype=bf), torch.randn(n, n, device=ctx.dev, dtype=bf) / n ** 0.5,
                torch.randn(n, device=ctx.dev, dtype=bf))

    def call(inp):
        torch.compiler.cudagraph_mark_step_begin()
        return cf(*inp).clone()

    t0 = time.perf_counter()
    for _ in range(3):  # warm-up runs, then the capture
        call(fresh())
    ctx.sync()
    compile_s = time.perf_counter() - t0
    calls = _gemm_calls(ctx, [dict(label="cudagraph_gemm", op="aten::mm (in a CUDA graph)", fn=call,
                                   fresh=fresh, m=n, k=n, n=n, flops=2 * n ** 3,
                                   note="the whole compiled call: graph replay + input copies + clone")])
    pool = [fresh() for _ in range(3)]
    return Program(_two_per_step("cudagraph_gemm", call, pool), warm=2, cleanup=torch._dynamo.reset,
                   extra=dict(dtype="bfloat16", function="relu(x @ w + b)", compile_mode="reduce-overhead",
                              compile_s=round(compile_s, 2), gemms_per_step=2, gemm_calls=calls))


def build_njt_linear(ctx: Ctx) -> Program:
    lengths = [1024, 3072, 512, 2048, 1536]  # 8192 tokens in 5 sequences
    d, h = 4096, 4096
    bf = torch.bfloat16
    torch.manual_seed(0)
    lin = nn.Linear(d, h).to(ctx.dev, dtype=bf)

    def fresh():
        return (torch.nested.nested_tensor([torch.randn(L, d, dtype=bf) for L in lengths],
                                           layout=torch.jagged, device=ctx.dev),)

    def call(inp):
        with torch.no_grad():
            return lin(inp[0])

    calls = _gemm_calls(ctx, [dict(label="njt_linear", op="aten::linear (nested jagged)", fn=call, fresh=fresh,
                                   m=sum(lengths), k=d, n=h, flops=2 * sum(lengths) * d * h,
                                   lengths=lengths)])
    pool = [fresh() for _ in range(3)]
    return Program(_two_per_step("njt_linear", call, pool), warm=3, extra=dict(
        dtype="bfloat16", layout="torch.jagged", gemms_per_step=2, gemm_calls=calls))


def build_sparse_csr_mm(ctx: Ctx) -> Program:
    """A 1 %-dense CSR matrix times a dense one (cuSPARSE): no dense GEMM's FLOPs."""
    m, k, n, density = 8192, 8192, 1024, 0.01
    torch.manual_seed(0)
    dense = torch.randn(m, k, device=ctx.dev)
    dense = dense * (torch.rand(m, k, device=ctx.dev) < density)
    a = dense.to_sparse_csr()
    nnz = int(a.values().numel())
    del dense

    def fresh():
        return (a, torch.randn(k, n, device=ctx.dev))

    def call(inp):
        return torch.sparse.mm(inp[0], inp[1])

    calls = _gemm_calls(ctx, [dict(label="sparse_csr_mm", op="aten::mm (sparse CSR)", fn=call, fresh=fresh,
                                   m=m, k=k, n=n, nnz=nnz, flops=2 * nnz * n,
                                   dense_flops=2 * m * k * n)])
    pool = [fresh() for _ in range(2)]
    return Program(_two_per_step("sparse_csr_mm", call, pool), warm=3, extra=dict(
        dtype="float32", density=density, nnz=nnz, gemms_per_step=2, gemm_calls=calls))


def build_conv_backward(ctx: Ctx) -> Program:
    batch, c, px = 32, 128, 56
    bf = torch.bfloat16
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, 2 * c, 1)).to(
        ctx.dev, dtype=bf, memory_format=torch.channels_last)
    x = torch.randn(batch, c, px, px, device=ctx.dev, dtype=bf).to(memory_format=torch.channels_last)

    def step(i):
        with record_function("conv_fwd_bwd"):
            net(x).float().square().mean().backward()
            net.zero_grad(set_to_none=True)

    return Program(step, warm=2, extra=dict(batch=batch, channels=c, image_px=px, dtype="bfloat16",
                                            memory_format="channels_last", convs="3x3, 1x1",
                                            backward="dgrad + wgrad"))


NEW_KINDS = (
    ("grouped_mm", "torch._grouped_mm (the MoE grouped GEMM): 8192 bf16 tokens over 8 experts of "
     "4096x4096, uneven rows per expert (offs)", ["grouped_gemm"], build_grouped_mm),
    ("fp8_grouped_mm", "torch._scaled_grouped_mm (an FP8 MoE grouped GEMM): 8192 float8_e4m3fn "
     "tokens over 8 experts of 4096x4096, row-wise float32 scales, bf16 out", ["grouped_gemm", "fp8_gemm"],
     build_fp8_grouped_mm),
    ("fp8_rowwise", "torch._scaled_mm 8192^3 float8_e4m3fn with row-wise float32 scales (M,1)/(1,N), "
     "bf16 out", ["fp8_gemm"], build_fp8_rowwise),
    ("addmm_activation", "torch._addmm_activation(bias, x, w.t(), use_gelu=True) 4096^3 bf16: a "
     "cuBLASLt GELU+bias epilogue", ["gemm_epilogue"], build_addmm_activation),
    ("batched_gemms", "torch.baddbmm 32x1024^3 bf16 and einsum('bhqd,bhkd->bhqk') 8x16x2048x128 bf16 "
     "(lowers to aten::bmm), each in its record_function", ["batched_gemm"], build_batched_gemms),
    ("linear_backward", "one bf16 nn.Linear(4096, 4096) on 8192 tokens, forward + backward with a "
     "given grad: addmm, mm(grad, W), mm(grad.t(), x)", ["backward_gemm"], build_linear_backward),
    ("cudagraph_gemm", "relu(x @ w + b) 4096^3 bf16 under torch.compile(mode='reduce-overhead'): the "
     "GEMM replayed from a CUDA graph", ["cuda_graphs", "torch_compile"], build_cudagraph_gemm),
    ("njt_linear", "nn.Linear(4096, 4096) bf16 on a nested jagged tensor of 5 sequences (8192 tokens), "
     "no_grad", ["nested_tensor"], build_njt_linear),
    ("sparse_csr_mm", "torch.sparse.mm of a 1 %-dense 8192x8192 float32 CSR matrix and a dense "
     "8192x1024 one (cuSPARSE)", ["sparse"], build_sparse_csr_mm),
    ("conv_backward", "3x3 and 1x1 Conv2d + ReLU, channels_last bf16, forward + backward (cuDNN "
     "dgrad / wgrad kernels: convolutions, not GEMMs)", ["convolution"], build_conv_backward),
)


def new_kind_variants() -> list[Variant]:
    """Plain profile of 3 iterations with record_shapes and with_flops, H200 only."""
    return [Variant(stem, stem, desc + "; plain profile of 3 iterations, record_shapes, with_flops; "
                    "CUDA-event timings in the manifest (gemm_calls)", problems + ["no_profiler_step"],
                    build, steps=3, record_shapes=True, with_flops=True, devices=("cuda",))
            for stem, desc, problems, build in NEW_KINDS]


def profile_cycles(ctx: Ctx, v: Variant, step: Callable[[int], Any]) -> list[dict]:
    """A schedule with repeat > 1: every on_trace_ready export saved under its own name
    (``<stem>_cycle<k>``), each beside torch's answer for that cycle."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.cuda else [])
    cycles: list[dict] = []

    def on_ready(p) -> None:
        stem = f"{v.stem}_cycle{len(cycles)}"
        path = ctx.out / f"{stem}.json.gz"
        p.export_chrome_trace(str(path))
        saved = save_answers(p, ctx.out, stem, record_shapes=v.record_shapes, cuda=ctx.cuda)
        saved["files"] = {"trace": path.name, **saved["files"]}
        saved.update(trace_facts(path))
        saved.update(stem=stem, cycle=len(cycles), step_num=getattr(p, "step_num", None))
        cycles.append(saved)

    t0 = time.perf_counter()
    with profile(activities=activities, record_shapes=v.record_shapes, with_stack=v.with_stack,
                 profile_memory=v.profile_memory, with_flops=v.with_flops,
                 schedule=make_schedule(**v.schedule), on_trace_ready=on_ready) as prof:
        for i in range(v.steps):
            step(i)
            prof.step()
    for c in cycles:
        c["profiled_s"] = round(time.perf_counter() - t0, 3)
        c["cycles_exported"] = len(cycles)
    return cycles


# --------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------

SEED_DESC = ("x @ w then + b inside record_function labels: 'matmul_add' around 'matmul' and "
             "'bias_add' (the lab's seed exercise), bfloat16")


def variants() -> list[Variant]:
    V = Variant
    llama = ("small Llama (LlamaConfig, 2 layers, random weights) trained with AdamW(foreach) "
             "under bf16 autocast: forward + loss, backward, optimizer.step, zero_grad")
    resnet = ("ResNet training step (ResNet-50 on GPU with fp16 autocast + GradScaler; "
              "ResNet-18 on CPU with bf16 autocast, no scaler), SGD momentum")
    return [
        V("seed", "seed", SEED_DESC + "; schedule wait=1 warmup=1 active=3",
          ["baseline"], build_seed, steps=5, schedule=SCHED_3, record_shapes=True),
        V("seed_stack", "seed", SEED_DESC + "; same with with_stack=True",
          ["with_stack_inflation"], build_seed, steps=5, schedule=SCHED_3,
          record_shapes=True, with_stack=True),
        V("seed_flops", "seed", SEED_DESC + "; plain profile, 3 iterations, with_flops",
          ["gemm_flops", "no_profiler_step"], build_seed, steps=3, record_shapes=True,
          with_flops=True),
        V("seed_mem", "seed", SEED_DESC + "; schedule wait=1 warmup=1 active=3 with "
          "profile_memory + record_shapes + with_flops (every box of the lab's form ticked)",
          ["profile_memory", "gemm_flops"], build_seed, steps=5, schedule=SCHED_3,
          record_shapes=True, profile_memory=True, with_flops=True),
        V("empty_window", "empty_window",
          SEED_DESC + "; schedule wait=1 warmup=1 active=3 but only 2 steps run, no "
          "on_trace_ready, export_chrome_trace after the with block: the active window opened "
          "at the last prof.step() and recorded no op", ["empty_window"], build_seed, steps=2,
          schedule=SCHED_3, export="end"),
        V("empty_window_warmup", "empty_window",
          SEED_DESC + "; schedule wait=1 warmup=1 active=3 but only 1 step run: the profile "
          "exits in WARMUP (torch starts and stops the trace at once), export at the end",
          ["empty_window"], build_seed, steps=1, schedule=SCHED_3, export="end"),
        V("item_sync", "item_sync",
          "6 chained GEMM+ReLU, loss.item() every step (host sync) and ~2 ms of pure-Python "
          "host work between steps; schedule wait=1 warmup=1 active=3",
          ["host_sync_item", "host_gap"], build_item_sync, steps=5, schedule=SCHED_3),
        V("item_sync_plain", "item_sync",
          "the same .item() + host-work loop under a plain profile (no schedule, no "
          "ProfilerStep): 3 iterations, each inside record_function 'forward'",
          ["host_sync_item", "host_gap", "no_profiler_step"], build_item_sync, steps=3),
        V("device_sync", "device_sync",
          "8 chained bf16 4096^3 GEMM+ReLU per step with torch.cuda.synchronize() between the "
          "two halves and a small .cpu() copy at the end; schedule wait=1 warmup=1 active=3",
          ["host_sync_device"], build_device_sync, steps=5, schedule=SCHED_3,
          devices=("cuda",)),
        V("copies_mixed", "copies",
          "128 MB host->device copies on a side torch.cuda.Stream, one from pageable and one "
          "from pinned memory (non_blocking=True), 4 bf16 GEMMs on the default stream; plain "
          "profile, 3 iterations", ["pageable_copies", "pinned_copies", "side_stream"],
          build_copies("mixed"), steps=3, devices=("cuda",)),
        V("copies_pageable", "copies",
          "256 MB pageable host tensor .to('cuda', non_blocking=True) on a side stream each "
          "step (pageable: the copy is synchronous), 4 bf16 GEMMs on the default stream; "
          "schedule wait=1 warmup=1 active=2", ["pageable_copies", "side_stream"],
          build_copies("pageable"), steps=4, schedule=SCHED_2, devices=("cuda",)),
        V("gemm_fp32", "gemm",
          "3 float32 GEMMs per iteration with torch.backends.cuda.matmul.allow_tf32=False "
          "(true FP32 kernels); plain profile, with_flops", ["fp32_gemm", "gemm_flops"],
          build_gemm(False), steps=3, record_shapes=True, with_flops=True),
        V("gemm_tf32", "gemm",
          "the same float32 GEMMs with allow_tf32=True (TF32 tensor-op kernels); with_flops",
          ["tf32_gemm", "gemm_flops"], build_gemm(True), steps=3, record_shapes=True,
          with_flops=True, devices=("cuda",)),
        V("multistream", "multistream",
          "two torch.cuda.Streams of 4 independent bf16 4096^3 GEMMs each, joined by "
          "wait_stream; schedule wait=1 warmup=1 active=2", ["multi_stream"],
          build_multistream, steps=4, schedule=SCHED_2, devices=("cuda",)),
        V("sdpa_backends", "sdpa",
          "scaled_dot_product_attention (causal) once per backend forced with "
          "torch.nn.attention.sdpa_kernel (math / flash / efficient / cudnn where they run), "
          "each in a record_function 'sdpa_<backend>'; plain profile, record_shapes",
          ["sdpa_backends"], build_sdpa, steps=2, record_shapes=True),
        V("llama_train", "llama_train", llama + "; schedule wait=1 warmup=1 active=2",
          ["autocast_nesting", "optimizer_foreach"], build_llama_train, steps=4,
          schedule=SCHED_2),
        V("llama_train_stack", "llama_train", llama + "; same with with_stack=True",
          ["with_stack_inflation", "autocast_nesting", "optimizer_foreach"], build_llama_train,
          steps=4, schedule=SCHED_2, with_stack=True),
        V("llama_train_mem", "llama_train",
          llama + "; plain profile of 2 iterations, profile_memory + record_shapes",
          ["profile_memory", "autocast_nesting", "no_profiler_step"], build_llama_train,
          steps=2, profile_memory=True, record_shapes=True),
        V("llama_train_all", "llama_train",
          llama + "; schedule wait=1 warmup=1 active=2 with with_stack + profile_memory + "
          "record_shapes all on", ["with_stack_inflation", "profile_memory", "autocast_nesting"],
          build_llama_train, steps=4, schedule=SCHED_2, with_stack=True, profile_memory=True,
          record_shapes=True),
        V("gpt2_infer", "gpt2_infer",
          "GPT-2 (GPT2Config, 2 layers, random weights) inference under torch.no_grad, bf16 on "
          "GPU; plain profile of 3 iterations, record_shapes",
          ["launch_bound", "no_profiler_step", "inference"], build_gpt2_infer, steps=3,
          record_shapes=True),
        V("bert_infer", "bert_infer",
          "BERT encoder (BertConfig, 2 layers, random weights) inference under torch.no_grad, "
          "float32; schedule wait=1 warmup=1 active=3, with_stack + record_shapes",
          ["launch_bound", "with_stack_inflation", "inference"], build_bert_infer, steps=5,
          schedule=SCHED_3, with_stack=True, record_shapes=True),
        V("resnet_amp", "resnet_amp", resnet + "; schedule wait=1 warmup=1 active=2",
          ["amp_grad_scaler", "cnn_training"], build_resnet_amp, steps=4, schedule=SCHED_2),
        V("resnet_amp_stack", "resnet_amp", resnet + "; same with with_stack=True",
          ["with_stack_inflation", "amp_grad_scaler", "cnn_training"], build_resnet_amp, steps=4,
          schedule=SCHED_2, with_stack=True),
        V("resnet_amp_mem", "resnet_amp",
          resnet + "; plain profile of 1 iteration, profile_memory + record_shapes",
          ["profile_memory", "amp_grad_scaler", "no_profiler_step", "cnn_training"],
          build_resnet_amp, steps=1,
          profile_memory=True, record_shapes=True),
        V("gloo_ddp", "gloo_ddp",
          "2 processes, torch.distributed gloo (file:// init), each rank profiling DDP steps "
          "of a 3-layer MLP (cuda tensors on the one GPU; cpu tensors on a CPU host); "
          "schedule wait=1 warmup=1 active=2; one trace per rank",
          ["collective"], build_ddp, steps=4, schedule=SCHED_2, runner="gloo"),
        V("swiglu_compile", "swiglu_compile",
          "SwiGLU MLP (w2(silu(w1 x) * w3 x)) under torch.compile (default mode), forward + "
          "backward; schedule wait=1 warmup=1 active=3",
          ["torch_compile"], build_swiglu_compile, steps=5, schedule=SCHED_3),
        V("swiglu_compile_stack", "swiglu_compile",
          "the same compiled SwiGLU MLP with with_stack=True (Dynamo / AOT wrappers' frames)",
          ["with_stack_inflation", "torch_compile"], build_swiglu_compile, steps=5,
          schedule=SCHED_3, with_stack=True),
        V("decode_cudagraphs", "decode_cudagraphs",
          "token-by-token greedy decode (4 tokens a step) of a tiny 2-layer bf16 decoder under "
          "torch.compile(mode='reduce-overhead'): CUDA graph replays, graphs warmed before "
          "the profile; schedule wait=1 warmup=1 active=3",
          ["cuda_graphs"], build_decode_cudagraphs, steps=5, schedule=SCHED_3,
          devices=("cuda",)),
        V("decode_cudagraphs_plain", "decode_cudagraphs",
          "the same CUDA-graph decode under a plain profile of 3 iterations (no schedule, no "
          "ProfilerStep; each iteration inside record_function 'decode_step')",
          ["cuda_graphs", "no_profiler_step"], build_decode_cudagraphs, steps=3,
          devices=("cuda",)),
        # GEMMs through other entry points, and programs of other shapes.
        V("fp8_scaled_mm", "fp8_gemm",
          "torch._scaled_mm of 8192^3 float8_e4m3fn (tensor-wise float32 scales, bfloat16 out), "
          "2 per iteration in record_function 'fp8_gemm', fresh random inputs; plain profile of "
          "3 iterations, record_shapes; CUDA-event timing of the same call in the manifest",
          ["fp8_gemm", "no_profiler_step"], build_fp8_scaled_mm, steps=3, record_shapes=True),
        V("int8_int_mm", "int8_gemm",
          "torch._int_mm of 8192^3 int8 (int32 out), 2 per iteration in record_function "
          "'int8_gemm'; plain profile of 3 iterations, record_shapes; CUDA-event timing in the "
          "manifest", ["int8_gemm", "no_profiler_step"], build_int8_int_mm, steps=3,
          record_shapes=True),
        V("compiled_gemm", "compiled_gemm",
          "relu(x @ w + b), 4096^3 bf16, under torch.compile(mode='max-autotune-no-cudagraphs') "
          "with Triton GEMM templates only (max_autotune_gemm_backends='TRITON'); 2 calls per "
          "iteration; plain profile of 3 iterations, record_shapes; CUDA-event timing in the "
          "manifest (CPU: mode 'default')", ["gemm_template", "torch_compile", "no_profiler_step"],
          build_compiled_gemm, steps=3, record_shapes=True),
        V("alloc_only", "alloc_only",
          "torch.empty blocks of 64-1024 MiB on the GPU, all but the largest freed, "
          "torch.cuda.empty_cache() each step: cudaMalloc / cudaFree and no kernel launch at "
          "all; plain profile of 3 iterations, profile_memory + record_shapes",
          ["alloc_only", "profile_memory", "no_profiler_step"], build_alloc_only, steps=3,
          profile_memory=True, record_shapes=True),
        V("schedule_repeat", "schedule_repeat",
          SEED_DESC + "; schedule wait=1 warmup=1 active=2 repeat=3 with on_trace_ready saving "
          "each cycle as <stem>_cycle<k>, schedule repeat=4 but 15 steps: three full cycles, then "
          "the profile exits in the 4th cycle's first active step (a 4th, short export)",
          ["schedule_repeat"], build_seed, steps=15,
          schedule=dict(wait=1, warmup=1, active=2, repeat=4), record_shapes=True,
          runner="cycles"),
        V("moe_routing", "moe_routing",
          "top-2 routing over 8 expert MLPs (router softmax, topk, nonzero per expert: "
          "data-dependent sizes and a host sync each, index_select / index_add_), bf16 "
          "no_grad; schedule wait=1 warmup=1 active=2, record_shapes",
          ["data_dependent", "host_sync_device"], build_moe, steps=4, schedule=SCHED_2,
          record_shapes=True),
        V("generate_loop", "generate_loop",
          "a tiny 2-layer bf16 decoder's eager greedy decode loop, 16 tokens per call with an "
          ".item() end-of-sequence check per token, inside record_function 'generate'; plain "
          "profile of 2 calls",
          ["generation_loop", "launch_bound", "no_profiler_step"], build_generate, steps=2),
        V("checkpoint_train", "checkpoint_train",
          "4 residual MLP blocks each under torch.utils.checkpoint(use_reentrant=False), bf16 "
          "autocast on GPU, backward (recomputes the forward) + SGD; schedule wait=1 warmup=1 "
          "active=2", ["activation_checkpointing"], build_checkpoint, steps=4, schedule=SCHED_2),
        V("module_dataloader", "module_dataloader",
          "a small nn.Module tree (Embedding, 2 blocks of LayerNorm + Linear/GELU/Linear with a "
          "residual, a Linear head) trained with SGD on batches from a torch DataLoader; schedule "
          "wait=1 warmup=1 active=2, with_stack=True (its nn.Module events: the Module view)",
          ["dataloader", "with_stack_inflation"], build_module_dataloader, steps=4, schedule=SCHED_2,
          with_stack=True),
        V("two_threads", "two_threads",
          "two Python worker threads (a ThreadPoolExecutor made before the profile) each "
          "running 4 GEMM+tanh in record_function 'thread<k>_work' (GPU: on its own stream) "
          "while the main thread's 'both_threads' label waits; schedule wait=1 warmup=1 "
          "active=2", ["threads", "multi_stream"], build_two_threads, steps=4, schedule=SCHED_2),
        V("conv_channels_last", "conv_channels_last",
          "3 convolutions (3x3, 3x3 stride 2, 1x1) + BatchNorm + ReLU in channels_last bf16, "
          "no_grad (cuDNN implicit-GEMM kernels: convolutions, not GEMMs); plain profile of 3 "
          "iterations, record_shapes", ["convolution", "no_profiler_step"],
          build_conv_channels_last, steps=3, record_shapes=True),
        V("flex_attention", "flex_attention",
          "torch.compile(flex_attention) with a causal block mask, 4x16x1024x64 bf16 (a Triton "
          "attention template: attention, not a GEMM); plain profile of 3 iterations, "
          "record_shapes", ["attention_template", "torch_compile", "no_profiler_step"],
          build_flex_attention, steps=3, record_shapes=True, devices=("cuda",)),
    ] + new_kind_variants()


# --------------------------------------------------------------------------------------------
# Running the corpus
# --------------------------------------------------------------------------------------------

def _versions() -> dict:
    tf = _optional("transformers")
    tv = None
    try:
        import torchvision
        tv = torchvision.__version__
    except Exception:
        pass
    return dict(torch=torch.__version__, python=platform.python_version(),
                transformers=getattr(tf, "__version__", None), torchvision=tv,
                cuda=torch.version.cuda)


def _device_name(ctx: Ctx) -> str:
    if ctx.cuda:
        return torch.cuda.get_device_name(0)
    return platform.processor() or platform.machine() or "cpu"


def problem_fields(v: Variant, device: str) -> dict:
    """The problems a trace of ``v`` on ``device`` is expected to show (first: the main one)."""
    problems = [p for p in v.problems if device == "cuda" or p not in GPU_ONLY_PROBLEMS]
    return dict(problem=problems[0], problems=problems,
                problems_gpu_only=[p for p in v.problems if p not in problems])


def retag(folder: Path) -> int:
    """Rewrite a recorded manifest's problem fields from this file's variant table.

    The tags are expectations about a program, not measurements: a corpus recorded by an
    earlier revision of this table can be brought up to date without re-recording.
    """
    mpath = folder / "manifest.json"
    manifest = json.loads(mpath.read_text())
    table = {v.stem: v for v in variants()}
    for e in manifest["entries"]:
        stem = e["stem"]
        v = (table.get(stem) or table.get(stem.rsplit("_rank", 1)[0])
             or table.get(stem.rsplit("_cycle", 1)[0]))
        if v is not None:
            e.update(problem_fields(v, manifest["device"]))
    manifest["retagged"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds")
    write_manifest(mpath, manifest)
    return 0


def _entry(ctx: Ctx, v: Variant, prog_extra: dict, res: dict, seconds: float,
           stem: str | None = None) -> dict:
    vers = _versions()
    return dict(stem=stem or v.stem, workload=v.workload, description=v.description,
                **problem_fields(v, ctx.device), options=v.options(),
                device=ctx.device, device_name=_device_name(ctx), torch=vers["torch"],
                python=vers["python"], quick=ctx.quick, events=res["events"],
                trace_bytes=res["trace_bytes"], trace_json_bytes=res["trace_json_bytes"],
                seconds=round(seconds, 2), **{k: res[k] for k in res if k not in (
                    "events", "trace_bytes", "trace_json_bytes")},
                program=prog_extra)


def _free(ctx: Ctx) -> None:
    gc.collect()
    if ctx.cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def record_in_process(ctx: Ctx, v: Variant) -> list[dict]:
    t0 = time.perf_counter()
    prog = v.build(ctx)
    try:
        for i in range(prog.warm):
            prog.step(-1 - i)
        ctx.sync()
        if v.runner == "cycles":
            results = profile_cycles(ctx, v, prog.step)
        else:
            results = [profile_program(ctx, v, prog.step)]
    finally:
        if prog.cleanup:
            prog.cleanup()
    extra = dict(prog.extra)
    del prog
    _free(ctx)
    return [_entry(ctx, v, extra, res, time.perf_counter() - t0, stem=res.pop("stem", None))
            for res in results]


def record_gloo(ctx: Ctx, v: Variant, world: int = 2, timeout_s: float = 180) -> list[dict]:
    """Two child processes (this one profiles nothing meanwhile); one entry per rank."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        init = Path(tmp) / "gloo_init"
        procs = []
        for rank in range(world):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--_worker", v.stem,
                   "--_rank", str(rank), "--_world", str(world), "--_init", str(init),
                   "--device", ctx.device, "--out", str(ctx.out)]
            if ctx.quick:
                cmd.append("--quick")
            procs.append(subprocess.Popen(cmd))
        deadline = time.time() + timeout_s
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(1.0, deadline - time.time())))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                raise RuntimeError(f"gloo ranks did not finish in {timeout_s:.0f} s")
    entries = []
    for rank in range(world):
        ep = ctx.out / f"{v.stem}_rank{rank}.entry.json"
        if ep.exists():
            entries.append(json.loads(ep.read_text()))
            ep.unlink()
    if any(codes) or len(entries) != world:
        raise RuntimeError(f"gloo ranks exited {codes}; {len(entries)} of {world} recorded")
    for e in entries:
        e["seconds_all_ranks"] = round(time.perf_counter() - t0, 2)
    return entries


def gloo_worker(args) -> int:
    import torch.distributed as dist

    ctx = Ctx(args.device, args.quick, Path(args.out))
    v = next(x for x in variants() if x.stem == args._worker)
    dist.init_process_group("gloo", init_method=f"file://{args._init}", rank=args._rank,
                            world_size=args._world)
    try:
        t0 = time.perf_counter()
        if ctx.cuda:
            torch.cuda.set_device(0)
        warm_up_profiler(ctx)
        prog = v.build(ctx)
        for i in range(prog.warm):
            prog.step(-1 - i)
        ctx.sync()
        dist.barrier()
        stem = f"{v.stem}_rank{args._rank}"
        res = profile_program(ctx, v, prog.step, stem=stem)
        entry = _entry(ctx, v, prog.extra, res, time.perf_counter() - t0, stem=stem)
        (ctx.out / f"{stem}.entry.json").write_text(json.dumps(entry))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


def write_manifest(path: Path, manifest: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)


def make_tar(out: Path, tar_path: Path) -> list[Path]:
    """Tar the corpus; split into parts of TAR_PART_BYTES when larger (cat them to join)."""
    tar_path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tar_path, "w:gz", compresslevel=6) as tf:
        for p in sorted(out.iterdir()):
            if p.is_file() and not p.name.endswith(".tmp"):
                tf.add(p, arcname=p.name)
    size = tar_path.stat().st_size
    if size <= TAR_PART_BYTES:
        return [tar_path]
    parts = []
    with open(tar_path, "rb") as f:
        k = 0
        while chunk := f.read(TAR_PART_BYTES):
            part = tar_path.with_name(f"{tar_path.name}.part{k:02d}")
            part.write_bytes(chunk)
            parts.append(part)
            k += 1
    tar_path.unlink()
    return parts


def _summary(manifest: dict) -> str:
    lines = [f"{'stem':28} {'events':>8} {'MB':>7} {'sec':>7}  status"]
    for e in manifest["entries"]:
        lines.append(f"{e['stem']:28} {e['events']:>8} {e['trace_bytes'] / 2**20:>7.2f} "
                     f"{e['seconds']:>7.1f}  ok")
    for e in manifest["failed"]:
        lines.append(f"{e['stem']:28} {'':>8} {'':>7} {e.get('seconds', 0):>7.1f}  FAILED: "
                     f"{e['error'][:70]}")
    for e in manifest["skipped"]:
        lines.append(f"{e['stem']:28} {'':>8} {'':>7} {'':>7}  skipped: {e['reason']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (CPU corpus in minutes)")
    ap.add_argument("--only", default="", help="comma-separated workload names or stems")
    ap.add_argument("--out", default="gt_out")
    ap.add_argument("--tar", default="", help="also write the corpus as this .tar.gz "
                    f"(split into .partNN of {TAR_PART_BYTES >> 20} MiB when larger)")
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds; variants not started by then are skipped (0: no limit)")
    ap.add_argument("--list", action="store_true", help="list the variants and exit")
    ap.add_argument("--retag", default="", metavar="DIR",
                    help="rewrite DIR/manifest.json's problem tags from the variant table, exit")
    ap.add_argument("--_worker", default="", help=argparse.SUPPRESS)
    ap.add_argument("--_rank", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--_world", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--_init", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.list:
        for v in variants():
            print(f"{v.stem:24} {v.workload:18} {','.join(v.devices):9} {','.join(v.problems)}")
        return 0
    if args._worker:
        return gloo_worker(args)
    if args.retag:
        return retag(Path(args.retag))
    if args.device == "cuda" and not torch.cuda.is_available():
        print("CUDA is not available", file=sys.stderr)
        return 2

    t_start = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(args.device, args.quick, out)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    todo = [v for v in variants() if not only or v.stem in only or v.workload in only]
    unknown = only - {v.stem for v in variants()} - {v.workload for v in variants()}
    if unknown:
        print(f"unknown --only names: {sorted(unknown)}", file=sys.stderr)
        return 2

    manifest = dict(format=1, recorder="scripts/record_groundtruth.py",
                    created=datetime.datetime.now(datetime.timezone.utc).isoformat(
                        timespec="seconds"),
                    device=ctx.device, device_name=_device_name(ctx), quick=ctx.quick,
                    **_versions(), host=dict(cpus=os.cpu_count(), platform=platform.platform()),
                    columns=KA_COLUMNS, entries=[], failed=[], skipped=[])
    mpath = out / "manifest.json"
    manifest["warmup_profile_s"] = round(warm_up_profiler(ctx), 2)
    print(f"[gt] {ctx.device} {manifest['device_name']} torch {torch.__version__}; "
          f"warm-up profile {manifest['warmup_profile_s']} s", flush=True)
    write_manifest(mpath, manifest)

    for v in todo:
        if ctx.device not in v.devices:
            manifest["skipped"].append(dict(stem=v.stem, workload=v.workload,
                                            reason=f"{ctx.device} not in {list(v.devices)}"))
            continue
        if args.budget and time.perf_counter() - t_start > args.budget:
            manifest["skipped"].append(dict(stem=v.stem, workload=v.workload,
                                            reason=f"time budget {args.budget:.0f} s spent"))
            print(f"[gt] skip {v.stem}: budget spent", flush=True)
            write_manifest(mpath, manifest)
            continue
        t0 = time.perf_counter()
        print(f"[gt] {v.stem} ...", flush=True)
        try:
            if v.runner == "gloo":
                entries = record_gloo(ctx, v)
            else:
                entries = record_in_process(ctx, v)
            manifest["entries"].extend(entries)
            for e in entries:
                print(f"[gt]   {e['stem']}: {e['events']} events, {e['trace_bytes']} B, "
                      f"{e['key_averages_rows']} key_averages rows, "
                      f"{time.perf_counter() - t0:.1f} s", flush=True)
        except Exception as exc:
            manifest["failed"].append(dict(
                stem=v.stem, workload=v.workload, error=f"{type(exc).__name__}: {exc}"[:500],
                traceback=traceback.format_exc()[-3000:],
                seconds=round(time.perf_counter() - t0, 2)))
            print(f"[gt]   FAILED {v.stem}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            with contextlib.suppress(Exception):
                torch._dynamo.reset()
            with contextlib.suppress(Exception):
                _free(ctx)
        manifest["total_s"] = round(time.perf_counter() - t_start, 1)
        write_manifest(mpath, manifest)

    print(_summary(manifest), flush=True)
    if args.tar:
        parts = make_tar(out, Path(args.tar))
        print("[gt] tar: " + ", ".join(f"{p} ({p.stat().st_size} B)" for p in parts), flush=True)
    print(f"[gt] done in {time.perf_counter() - t_start:.1f} s: {len(manifest['entries'])} "
          f"traces, {len(manifest['failed'])} failed, {len(manifest['skipped'])} skipped",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

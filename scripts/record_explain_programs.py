#!/usr/bin/env python3
"""Record programs whose cause is known, and the same programs with the fix applied, each
beside torch's own ``key_averages()`` and a truth measured without the profiler.

Standalone on purpose (torch, torchvision when installed; never the ``lab`` package). It reuses
the ground-truth recorder's file formats by importing ``record_groundtruth`` from this folder::

    python scripts/record_explain_programs.py --device cuda --out /tmp/ex --tar /tmp/ex.tar.gz
    python scripts/record_explain_programs.py --device cpu --quick --out /tmp/ex_cpu
    python scripts/record_explain_programs.py --list

Every program runs under ``profile(activities=[CPU, CUDA], schedule=schedule(wait=1, warmup=1,
active=K), record_shapes=True, on_trace_ready=...)`` with ``prof.step()`` after each iteration,
and writes what ``record_groundtruth.py`` writes (``<stem>.json.gz``, ``<stem>.key_averages.csv``,
``<stem>.key_averages_by_shape.csv``, ``<stem>.table.txt`` / ``.table_device.txt``) plus an
entry in ``manifest.json`` with its ``truth``:

- ``step_ms``: each step timed alone without the profiler (perf_counter, synchronize before and
  after), with their median;
- ``loop_ms_per_step``: N steps back to back, one synchronize before and after, divided by N:
  the comparable figure where the fix is an overlap the per-step synchronize would undo (a sync
  hoisted out of the loop, pinned non-blocking copies, DataLoader workers);
- ``ops`` where it applies: CUDA-event time of one op (median of 25, ``torch.cuda._sleep``
  before the start event) and, for memory-bound ops, the bytes it moves counted by hand;
- ``profiled``: the ``ProfilerStep#N`` durations in the exported trace and the host's
  perf_counter per profiled step.

``manifest.json`` → ``pairs`` lists (base, fixed, fix) for the what-if table.
"""

from __future__ import annotations

import os

os.environ.setdefault("KINETO_LOG_LEVEL", "6")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
# A compile inside the window must compile, not read Inductor's on-disk caches.
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402
from torch.profiler import schedule as make_schedule  # noqa: E402

import record_groundtruth as gt  # noqa: E402

SLOW_STEP = 13  # slow_step: the ProfilerStep#N that syncs and then works on the host
SLOW_HOST_MS = 30.0
ITEM_HOST_MS = 4.0  # per-item host work of the input-bound DataLoader


@dataclass
class Prog:
    step: Callable[[int], Any]  # one iteration (truth and profile)
    warm: int = 2  # iterations before the truth and the profile
    truth_steps: int = 10
    extra: dict = field(default_factory=dict)
    profile_step: Callable[[int], Any] | None = None  # the profiled iteration, when it differs
    before_truth: Callable[[], None] | None = None  # e.g. torch._dynamo.reset()
    before_profile: Callable[[], None] | None = None
    after_loop: Callable[[], Any] | None = None  # once after a loop (the hoisted .item())
    ops: Callable[[], dict] | None = None  # CUDA-event timings per op
    cleanup: Callable[[], None] | None = None
    loop_truth: bool = True  # also time N steps back to back
    profile_first: bool = False  # profile before the truth (a cold compile belongs in the trace)


@dataclass
class Case:
    stem: str
    description: str
    cause: str  # what the program is known to be bound by
    build: Callable[[gt.Ctx], Prog]
    fix_of: str = ""  # the base program this one is the fixed version of
    fix: str = ""
    active: int = 3
    with_stack: bool = False
    profile_memory: bool = False
    devices: tuple[str, ...] = ("cpu", "cuda")
    plain: bool = False  # no schedule: the whole run is the window, each step under record_function("step")


def busy(ms: float) -> int:
    """Pure-Python host work (no torch op) for ``ms`` milliseconds."""
    end = time.perf_counter() + ms / 1e3
    k = 0
    while time.perf_counter() < end:
        k += 1
    return k


# --------------------------------------------------------------------------- programs


class _SlowItems(torch.utils.data.Dataset):
    """Images whose every item costs ITEM_HOST_MS of host work (decode, augment)."""

    def __init__(self, n: int, px: int):
        self.n, self.px = n, px

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        busy(ITEM_HOST_MS)
        return torch.randn(3, self.px, self.px), i % 10


def _resnet18(ctx: gt.Ctx) -> tuple[nn.Module, str]:
    try:
        import torchvision.models as tvm
        return tvm.resnet18(weights=None, num_classes=10), "torchvision resnet18(weights=None)"
    except Exception:
        return gt._resnet18_plain(10), "ResNet-18 in plain torch"


def build_input_bound(workers: int):
    def build(ctx: gt.Ctx) -> Prog:
        from torch.utils.data import DataLoader

        torch.manual_seed(0)
        model, name = _resnet18(ctx)
        model = model.to(ctx.dev).train()
        batch, px = ctx.pick((16, 112), (16, 64), (4, 32))
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        kw = dict(num_workers=workers, pin_memory=ctx.cuda, persistent_workers=True) if workers else {}
        loader = DataLoader(_SlowItems(batch * 200, px), batch_size=batch, shuffle=False, **kw)
        it = {"it": iter(loader)}

        def step(i):
            try:
                x, y = next(it["it"])
            except StopIteration:
                it["it"] = iter(loader)
                x, y = next(it["it"])
            x, y = x.to(ctx.dev, non_blocking=True), y.to(ctx.dev, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        warm = 2 + (2 * workers if workers else 0)  # the workers run ahead before anything is timed
        return Prog(step, warm=warm, truth_steps=8, extra=dict(
            model=name, batch=batch, image_px=px, item_host_ms=ITEM_HOST_MS,
            host_ms_per_batch=ITEM_HOST_MS * batch, dataloader=dict(num_workers=workers, **{
                k: v for k, v in kw.items() if k != "num_workers"})))
    return build


class GeGLU(nn.Module):
    def __init__(self, d: int, hidden: int, bias: bool = True):
        super().__init__()
        self.up = nn.Linear(d, 2 * hidden, bias=bias)
        self.down = nn.Linear(hidden, d, bias=bias)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        a, g = self.up(self.norm(x)).chunk(2, dim=-1)
        return x + self.down(a * F.gelu(g))


def _compile_sizes(ctx: gt.Ctx) -> tuple[int, int, int]:
    return ctx.pick((1024, 4096, 2048), (128, 256, 64), (64, 128, 32))


def build_compile(warmed: bool, *, first_step: int = 2, train: bool = False, mode: str | None = None):
    """``first_step``: the profiled step of the first compiled call (2: the first active step
    of wait=1, warmup=1; 0 for a profile without a schedule). ``train``: bias-free Linears
    (aten::mm), forward and backward. ``mode``: torch.compile's mode."""
    def build(ctx: gt.Ctx) -> Prog:
        d, hidden, tokens = _compile_sizes(ctx)
        dt = torch.bfloat16 if ctx.cuda else torch.float32
        torch.manual_seed(0)
        model = GeGLU(d, hidden, bias=not train).to(ctx.dev, dt)
        model.train(train)
        compiled = torch.compile(model, mode=mode)
        x = torch.randn(tokens, d, device=ctx.dev, dtype=dt)

        def run(fn):
            if train:
                fn(x).float().square().mean().backward()
                model.zero_grad(set_to_none=True)
                return None
            with torch.no_grad():
                return fn(x)

        def step(i):
            return run(compiled)

        def profile_step(i):
            # Not warmed: the steps before ``first_step`` run eagerly, so the first compiled
            # call (the compilation) lands in the profiled step ``first_step``.
            return run(compiled if warmed or i >= first_step else model)

        return Prog(step, warm=1 if warmed else 0, truth_steps=8, profile_step=profile_step,
                    before_truth=None if warmed else torch._dynamo.reset,
                    before_profile=None if warmed else torch._dynamo.reset, profile_first=not warmed,
                    extra=dict(d=d, hidden=hidden, tokens=tokens, dtype=str(dt).split(".")[-1],
                               train=train, mode=mode, bias=not train,
                               first_compiled_call="before the profile" if warmed else
                               f"ProfilerStep#{first_step}; truth: step 0 after a reset"))
    return build


def build_compile_recompiles(ctx: gt.Ctx) -> Prog:
    d, hidden, tokens = _compile_sizes(ctx)
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    torch.manual_seed(0)
    model = GeGLU(d, hidden).to(ctx.dev, dt).eval()
    compiled = torch.compile(model, dynamic=False)  # each new shape compiles again
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
    shapes = [tokens + 16 * k for k in range(16)]
    xs = [torch.randn(n, d, device=ctx.dev, dtype=dt) for n in shapes]

    def step(i):
        with torch.no_grad():
            return compiled(xs[(i + 1) % len(xs)])  # warm-up i=-1 → shape 0; step i → shape i+1

    return Prog(step, warm=1, truth_steps=6, before_truth=torch._dynamo.reset,
                before_profile=_reset_and(lambda: step(-1)), profile_first=True,
                extra=dict(d=d, hidden=hidden, token_shapes=shapes[:7], dtype=str(dt).split(".")[-1],
                           dynamic=False, note="a new token count every step; one warm-up call"))


def _reset_and(fn: Callable[[], Any]) -> Callable[[], None]:
    def run():
        torch._dynamo.reset()
        fn()
    return run


def build_slow_step(ctx: gt.Ctx) -> Prog:
    n = ctx.pick(4096, 256, 128)
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    x = torch.randn(n, n, device=ctx.dev, dtype=dt)
    w = torch.randn(n, n, device=ctx.dev, dtype=dt) / n ** 0.5
    gemms = ctx.pick(12, 4, 2)

    def step(i):
        y = x
        for _ in range(gemms):
            y = torch.relu(y @ w)
        if i == SLOW_STEP:
            ctx.sync()
            busy(SLOW_HOST_MS)
        return y

    return Prog(step, warm=2, truth_steps=22, loop_truth=False, extra=dict(
        n=n, dtype=str(dt).split(".")[-1], gemms_per_step=gemms, slow_step=SLOW_STEP,
        slow_step_host_ms=SLOW_HOST_MS, note=f"step {SLOW_STEP} (ProfilerStep#{SLOW_STEP}; truth: "
                                             f"step index {SLOW_STEP}) synchronizes, then host work"))


def build_sync(hoisted: bool):
    def build(ctx: gt.Ctx) -> Prog:
        n = ctx.pick(4096, 256, 128)
        dt = torch.bfloat16 if ctx.cuda else torch.float32
        x = torch.randn(n, n, device=ctx.dev, dtype=dt)
        w = torch.randn(n, n, device=ctx.dev, dtype=dt) / n ** 0.5
        host_ms = 2.0
        state: dict = {"acc": 0.0, "gpu": torch.zeros((), device=ctx.dev)}

        def step(i):
            y = x
            for _ in range(8):
                y = torch.relu(y @ w)
            loss = y.float().mean()
            if hoisted:
                state["gpu"] += loss.detach()
            else:
                state["acc"] += loss.item()  # waits for the GPU every step
            busy(host_ms)  # the host's own per-step work (logging, bookkeeping)

        def after_loop():
            return state["gpu"].item() if hoisted else state["acc"]

        return Prog(step, warm=2, truth_steps=10, after_loop=after_loop, extra=dict(
            n=n, dtype=str(dt).split(".")[-1], gemms_per_step=8, host_work_ms=host_ms,
            sync="one .item() after the loop" if hoisted else "loss.item() every step"))
    return build


MEMORY_OPS = ("layer_norm", "softmax", "gelu", "add", "row_sum")


def build_memory_bound(ctx: gt.Ctx) -> Prog:
    n = ctx.pick(8192, 1024, 256)
    dt = torch.bfloat16
    x = torch.randn(n, n, device=ctx.dev, dtype=dt)
    y = torch.randn(n, n, device=ctx.dev, dtype=dt)
    ln = nn.LayerNorm(n, device=ctx.dev, dtype=dt)
    fns = {"layer_norm": lambda: ln(x), "softmax": lambda: torch.softmax(x, dim=-1),
           "gelu": lambda: F.gelu(x), "add": lambda: x + y, "row_sum": lambda: x.sum(dim=-1)}
    e = 2  # bf16 bytes
    nbytes = {  # read + written, counted by hand (the N×N input(s) and the output)
        "layer_norm": 2 * n * n * e + 2 * n * e + 2 * n * 4,  # x in, y out, weight+bias, mean+rstd fp32
        "softmax": 2 * n * n * e,
        "gelu": 2 * n * n * e,
        "add": 3 * n * n * e,
        "row_sum": n * n * e + n * e,
    }

    def step(i):
        with torch.no_grad():
            for name in MEMORY_OPS:
                with record_function(name):
                    fns[name]()

    def ops() -> dict:
        out = {}
        for name in MEMORY_OPS:
            with torch.no_grad():
                t = gt.event_timing(ctx, lambda _: fns[name](), lambda: None)
            if "median_us" in t:
                t["gbs"] = round(nbytes[name] / (t["median_us"] * 1e-6) / 1e9, 1)
            out[name] = dict(bytes=nbytes[name], **t)
        return out

    return Prog(step, warm=3, truth_steps=10, ops=ops, extra=dict(
        n=n, dtype="bfloat16", ops=list(MEMORY_OPS), bytes_per_op=nbytes,
        bytes_rule="bytes read + written by hand: N×N bf16 input(s) and output; LayerNorm adds "
                   "weight, bias (bf16) and its fp32 mean/rstd; the row sum writes N bf16"))


def build_adam(kind: str):
    def build(ctx: gt.Ctx) -> Prog:
        d, layers, batch = ctx.pick((256, 60, 64), (64, 60, 16), (32, 60, 8))
        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Linear(d, d) for _ in range(layers)]).to(ctx.dev)
        kw = {"per_param": dict(foreach=False), "foreach": dict(foreach=True),
              "fused": dict(fused=True)}[kind]
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, **kw)
        x = torch.randn(batch, d, device=ctx.dev)

        def step(i):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return Prog(step, warm=3, truth_steps=10, extra=dict(
            d=d, layers=layers, parameters=2 * layers, batch=batch, adam=kw))
    return build


def build_copies(pinned: bool):
    def build(ctx: gt.Ctx) -> Prog:
        mb = 128
        n = mb * 2 ** 20 // 4
        host = torch.randn(n)
        if pinned:
            host = host.pin_memory()
        w = torch.randn(2048, 2048, device=ctx.dev)

        def step(i):
            d = host.to(ctx.dev, non_blocking=pinned)
            return (d[: 2048 * 2048].view(2048, 2048) @ w).sum()

        def ops() -> dict:
            t = gt.event_timing(ctx, lambda _: host.to(ctx.dev, non_blocking=pinned), lambda: None,
                                samples=10, warm=2)
            if "median_us" in t:
                t["gbs"] = round(host.numel() * 4 / (t["median_us"] * 1e-6) / 1e9, 2)
            return {"h2d_copy": dict(bytes=host.numel() * 4, **t)}

        return Prog(step, warm=2, truth_steps=8, ops=ops, extra=dict(
            copy_bytes=n * 4, host_memory="pinned" if pinned else "pageable",
            non_blocking=pinned))
    return build


def build_fp32_gemm(tf32: bool):
    def build(ctx: gt.Ctx) -> Prog:
        n = 4096
        a = torch.randn(n, n, device=ctx.dev)
        b = torch.randn(n, n, device=ctx.dev)
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32

        def step(i):
            for _ in range(3):
                c = a @ b
            return c

        def ops() -> dict:
            t = gt.event_timing(ctx, lambda _: a @ b, lambda: None)
            if "median_us" in t:
                t["tflops"] = round(2 * n ** 3 / (t["median_us"] * 1e-6) / 1e12, 1)
            return {"mm": dict(flops=2 * n ** 3, **t)}

        def cleanup():
            torch.backends.cuda.matmul.allow_tf32 = before

        return Prog(step, warm=3, truth_steps=8, ops=ops, cleanup=cleanup, extra=dict(
            n=n, dtype="float32", gemms_per_step=3, allow_tf32=tf32, flops_per_gemm=2 * n ** 3))
    return build


def build_launch_bound(graphed: bool):
    def build(ctx: gt.Ctx) -> Prog:
        x = torch.randn(256, 256, device=ctx.dev)
        n_ops = 200

        def body():
            for k in range(n_ops // 2):
                x.mul_(0.999)
                x.add_(0.001)

        if not graphed:
            return Prog(lambda i: body(), warm=3, truth_steps=10, extra=dict(
                shape=[256, 256], ops_per_step=n_ops, graphs=False))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()
        return Prog(lambda i: graph.replay(), warm=3, truth_steps=10, extra=dict(
            shape=[256, 256], ops_per_step=n_ops, graphs="torch.cuda.CUDAGraph capture, replay() per step"))
    return build


class _Block(nn.Module):
    def __init__(self, d: int, heads: int, sdpa: bool):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def attend(self, q, k, v, causal: bool):
        if self.sdpa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        s = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
        if causal:
            t = q.shape[-2]
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v

    def forward(self, x, cache=None, pos=0):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if cache is not None:  # decode: write this token's k, v, attend over the cache so far
            cache[0][:, :, pos:pos + t] = k
            cache[1][:, :, pos:pos + t] = v
            k, v = cache[0][:, :, :pos + t], cache[1][:, :, :pos + t]
        a = self.attend(q, k, v, causal=cache is None)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.n2(x))


def build_attention(sdpa: bool):
    def build(ctx: gt.Ctx) -> Prog:
        b, t, d, heads = ctx.pick((8, 2048, 1024, 16), (2, 128, 128, 4), (1, 64, 64, 4))
        dt = torch.bfloat16 if ctx.cuda else torch.float32
        torch.manual_seed(0)
        block = _Block(d, heads, sdpa).to(ctx.dev, dt)
        opt = torch.optim.AdamW(block.parameters(), lr=1e-4, fused=ctx.cuda)
        x = torch.randn(b, t, d, device=ctx.dev, dtype=dt)

        def step(i):
            loss = block(x).float().square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return Prog(step, warm=3, truth_steps=10, extra=dict(
            batch=b, seq=t, d=d, heads=heads, dtype=str(dt).split(".")[-1], causal=True,
            attention="F.scaled_dot_product_attention" if sdpa else "softmax(QKᵀ/√d + mask)·V in fp32"))
    return build


def build_decode(flash: bool):
    def build(ctx: gt.Ctx) -> Prog:
        return _decode(ctx, flash)
    return build


def _decode(ctx: gt.Ctx, flash: bool) -> Prog:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    b, d, heads, layers, cache_len = ctx.pick((4, 1024, 16, 4, 1024), (2, 128, 4, 2, 256), (1, 64, 4, 2, 128))
    tokens_per_step = 8
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    torch.manual_seed(0)
    blocks = nn.ModuleList([_Block(d, heads, sdpa=True) for _ in range(layers)]).to(ctx.dev, dt).eval()
    caches = [torch.zeros(2, b, heads, cache_len, d // heads, device=ctx.dev, dtype=dt) for _ in range(layers)]
    x0 = torch.randn(b, 1, d, device=ctx.dev, dtype=dt)
    state = {"pos": 0}

    def step(i):
        with torch.no_grad(), sdpa_kernel(backends) if flash else contextlib.nullcontext():
            x = x0
            for _ in range(tokens_per_step):
                if state["pos"] >= cache_len:
                    state["pos"] = 0
                for blk, cache in zip(blocks, caches):
                    x = blk(x, cache, state["pos"])
                state["pos"] += 1
        return x

    return Prog(step, warm=2, truth_steps=10, extra=dict(
        batch=b, d=d, heads=heads, layers=layers, cache_len=cache_len, tokens_per_step=tokens_per_step,
        dtype=str(dt).split(".")[-1], sdpa_backends=[str(x) for x in backends] if flash else "default",
        note="a KV-cache decode loop: one token per forward, SDPA over the cache"))


def build_stack_mem_many(ctx: gt.Ctx) -> Prog:
    """Thousands of gathers into one buffer per step: enough CUPTI records in the window for
    Kineto to ask for new activity buffers while ops run."""
    d, rows = ctx.pick((256, 4096), (64, 256), (32, 64))
    src = torch.randn(rows, d, device=ctx.dev)
    index = torch.randint(0, d, (rows, d // 2), device=ctx.dev)
    out = torch.empty(rows, d // 2, device=ctx.dev)
    gathers = ctx.pick(4000, 400, 100)

    def step(i):
        for _ in range(gathers):
            torch.gather(src, 1, index, out=out)
        return out

    return Prog(step, warm=2, truth_steps=3, extra=dict(
        d=d, rows=rows, gathers_per_step=gathers, note="torch.gather(out=) in a loop under "
        "with_stack + profile_memory"))


def build_stack_mem(ctx: gt.Ctx) -> Prog:
    vocab, d, b, t = ctx.pick((32000, 512, 8, 512), (2000, 64, 2, 64), (500, 32, 2, 32))
    torch.manual_seed(0)
    emb = nn.Embedding(vocab, d).to(ctx.dev)
    mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)).to(ctx.dev)
    tokens = torch.randint(0, vocab, (b, t), device=ctx.dev)
    src = torch.randn(b * t, d, device=ctx.dev)
    index = torch.randint(0, d, (b * t, d // 2), device=ctx.dev)
    gathers = ctx.pick(400, 100, 40)

    def step(i):
        with torch.no_grad():
            h = mlp(emb(tokens))
            acc = torch.zeros((), device=ctx.dev)
            for _ in range(gathers):
                acc = acc + torch.gather(src, 1, index).sum()
            return h, acc

    return Prog(step, warm=2, truth_steps=5, extra=dict(
        vocab=vocab, d=d, batch=b, seq=t, gathers_per_step=gathers,
        note="with_stack + profile_memory: many launches, so Kineto's 'Activity Buffer Request' "
             "lands inside ops"))


def cases() -> list[Case]:
    gpu = ("cuda",)
    return [
        Case("input_bound", "ResNet-18 training fed by a DataLoader without workers; each item "
             f"takes {ITEM_HOST_MS:g} ms on the host", "input_pipeline", build_input_bound(0)),
        Case("input_bound_workers", "the same with num_workers=8, pin_memory, persistent workers "
             "(warmed before timing)", "gpu", build_input_bound(8), fix_of="input_bound",
             fix="DataLoader(num_workers=8, pin_memory=True, persistent_workers=True)"),
        Case("compile_in_window", "a GeGLU MLP under torch.compile whose first call is in the "
             "first active step", "compilation", build_compile(False)),
        Case("compile_warmed", "the same with one compiled call before the profile", "gpu",
             build_compile(True), fix_of="compile_in_window", fix="one warm-up call before profiling"),
        Case("compile_recompiles", "a compiled GeGLU called with a new token count every step "
             "(dynamic=False: each step recompiles)", "compilation", build_compile_recompiles),
        Case("slow_step", f"20 identical steps; step {SLOW_STEP} synchronizes and then does "
             f"{SLOW_HOST_MS:g} ms of host work", "outlier_step", build_slow_step, active=20),
        Case("sync_in_loop", "8 GEMMs, loss.item() every step, 2 ms of host work per step",
             "sync", build_sync(False)),
        Case("sync_hoisted", "the same accumulating the loss on the GPU, one .item() after the "
             "loop", "gpu", build_sync(True), fix_of="sync_in_loop",
             fix="accumulate on the GPU; one .item() after the loop"),
        Case("memory_bound_ops", "LayerNorm, softmax, GELU, add and a row sum over 8192×8192 bf16",
             "memory_bandwidth", build_memory_bound),
        Case("adam_per_param", "Adam(foreach=False) over 120 parameters (60 Linear(256, 256))",
             "optimizer_launches", build_adam("per_param")),
        Case("adam_foreach", "the same with Adam(foreach=True)", "launch", build_adam("foreach"),
             fix_of="adam_per_param", fix="Adam(foreach=True)"),
        Case("adam_fused", "the same with Adam(fused=True)", "launch", build_adam("fused"),
             fix_of="adam_per_param", fix="Adam(fused=True)"),
        Case("copies_pageable", "a 128 MiB host→device copy per step from pageable memory",
             "pageable_copies", build_copies(False), devices=gpu),
        Case("copies_pinned", "the same from pinned memory, non_blocking=True", "copies",
             build_copies(True), fix_of="copies_pageable", fix="pin_memory() + non_blocking=True",
             devices=gpu),
        Case("fp32_gemm", "3 fp32 4096³ GEMMs per step, TF32 off", "fp32_gemm",
             build_fp32_gemm(False), devices=gpu),
        Case("fp32_gemm_tf32", "the same with allow_tf32=True", "gemm", build_fp32_gemm(True),
             fix_of="fp32_gemm", fix="torch.backends.cuda.matmul.allow_tf32 = True", devices=gpu),
        Case("launch_bound", "200 in-place elementwise ops on 256×256 fp32 per step, eager",
             "launch", build_launch_bound(False)),
        Case("launch_bound_graphed", "the same captured once in a CUDA graph and replayed",
             "gpu", build_launch_bound(True), fix_of="launch_bound",
             fix="torch.cuda.CUDAGraph capture + replay", devices=gpu),
        Case("attention_eager", "a bf16 transformer layer training step (8×2048, d 1024, 16 "
             "heads) with attention written out in fp32 softmax", "attention_unfused",
             build_attention(False)),
        Case("attention_sdpa", "the same with F.scaled_dot_product_attention", "gpu",
             build_attention(True), fix_of="attention_eager", fix="F.scaled_dot_product_attention"),
        Case("decode_kv_cache", "KV-cache decode of a 4-layer bf16 transformer, 8 tokens per step, "
             "batch 4", "sdpa_plan_per_length", build_decode(False)),
        Case("decode_kv_cache_flash", "the same with SDPA limited to the flash / efficient / math "
             "backends (no cuDNN plan built for each new KV length)", "launch", build_decode(True),
             fix_of="decode_kv_cache", fix="sdpa_kernel([FLASH_ATTENTION, EFFICIENT_ATTENTION, MATH])"),
        Case("stack_mem_gather", "embedding, an MLP and 400 torch.gather per step under with_stack "
             "and profile_memory", "table_fidelity", build_stack_mem, with_stack=True,
             profile_memory=True),
        # Table fidelity: the profiler's own events inside ops, in more shapes of window.
        Case("stack_mem_plain", "the same under one profile without a schedule (the first CUDA "
             "activity of the profile is inside the window)", "table_fidelity", build_stack_mem,
             with_stack=True, profile_memory=True, plain=True),
        Case("stack_mem_many", "4,000 torch.gather(out=) per step under with_stack and "
             "profile_memory", "table_fidelity", build_stack_mem_many, with_stack=True,
             profile_memory=True),
        Case("compile_train_in_window", "a bias-free GeGLU (aten::mm) trained under torch.compile, "
             "the first call (forward and backward compile) in the first active step", "compilation",
             build_compile(False, train=True)),
        Case("compile_plain", "a compiled GeGLU whose first call is the first step of a profile "
             "without a schedule", "compilation", build_compile(False, first_step=0), plain=True),
        Case("compile_autotune_in_window", "a compiled GeGLU, mode='max-autotune-no-cudagraphs', "
             "first call (GEMM autotuning) in the first active step", "compilation",
             build_compile(False, mode="max-autotune-no-cudagraphs"), devices=("cuda",)),
    ]


# --------------------------------------------------------------------------- measuring


def time_steps(ctx: gt.Ctx, prog: Prog, n: int) -> dict:
    """Each step alone (synchronize before and after), and n steps back to back."""
    if prog.before_truth:
        prog.before_truth()
        ctx.sync()
    each = []
    for i in range(n):
        ctx.sync()
        t0 = time.perf_counter()
        prog.step(i)
        ctx.sync()
        each.append(round((time.perf_counter() - t0) * 1e3, 4))
    if prog.after_loop:
        prog.after_loop()
    out = dict(step_ms=each, median_step_ms=round(statistics.median(each), 4),
               first_step_ms=each[0], median_after_first_ms=round(statistics.median(each[1:]), 4),
               method="perf_counter around each step, torch.cuda.synchronize() before and after, "
                      "no profiler")
    if prog.loop_truth and not prog.before_truth:
        ctx.sync()
        t0 = time.perf_counter()
        for i in range(n):
            prog.step(i)
        if prog.after_loop:
            prog.after_loop()
        ctx.sync()
        out["loop_ms_per_step"] = round((time.perf_counter() - t0) * 1e3 / n, 4)
        out["loop_method"] = f"{n} steps back to back, one synchronize after (and the after-loop call)"
    return out


def step_durations(path: Path) -> dict:
    """ProfilerStep#N durations (ms) in the exported trace (a plain profile: its "step" labels)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    steps = sorted((e for e in events if (str(e.get("name", "")).startswith("ProfilerStep#")
                    or e.get("name") == "step") and e.get("cat") == "user_annotation"), key=lambda e: e["ts"])
    ms = [round(float(e["dur"]) / 1e3, 4) for e in steps]
    # ProfilerStep#N names are unique; a plain profile's "step" labels are numbered: step@0, ...
    return dict(steps={e["name"] if e["name"] != "step" else f"step@{k}": m for k, (e, m) in enumerate(zip(steps, ms))},
                median_step_ms=round(statistics.median(ms), 4) if ms else None)


def profile_case(ctx: gt.Ctx, case: Case, prog: Prog) -> dict:
    path = ctx.out / f"{case.stem}.json.gz"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.cuda else [])
    saved: dict = {}

    def on_ready(p) -> None:
        p.export_chrome_trace(str(path))
        saved.update(gt.save_answers(p, ctx.out, case.stem, record_shapes=True, cuda=ctx.cuda))

    sched = None if case.plain else dict(wait=1, warmup=1, active=case.active, repeat=1)
    kw = {} if case.plain else dict(schedule=make_schedule(**sched), on_trace_ready=on_ready)
    step = prog.profile_step or prog.step
    host_ms = []
    with profile(activities=activities, record_shapes=True, with_stack=case.with_stack,
                 profile_memory=case.profile_memory, **kw) as prof:
        for i in range(case.active if case.plain else 2 + case.active):
            t0 = time.perf_counter()
            with record_function("step") if case.plain else contextlib.nullcontext():
                step(i)  # without a schedule prof.step() labels nothing: a label of our own
            host_ms.append(round((time.perf_counter() - t0) * 1e3, 4))
            prof.step()
        if prog.after_loop:
            prog.after_loop()
    if case.plain:
        on_ready(prof)
    saved["files"] = {"trace": path.name, **saved["files"]}
    saved.update(gt.trace_facts(path))
    saved["profiled"] = dict(host_step_ms=host_ms, **step_durations(path))
    saved["options"] = dict(with_stack=case.with_stack, profile_memory=case.profile_memory,
                            record_shapes=True, schedule=sched,
                            steps=case.active if case.plain else 2 + case.active,
                            export="end" if case.plain else "on_trace_ready")
    return saved


def _profile(ctx: gt.Ctx, case: Case, prog: Prog) -> dict:
    if prog.before_profile:
        prog.before_profile()
    ctx.sync()
    return profile_case(ctx, case, prog)


def record(ctx: gt.Ctx, case: Case) -> dict:
    t0 = time.perf_counter()
    prog = case.build(ctx)
    try:
        for i in range(prog.warm):
            prog.step(-1 - i)
        ctx.sync()
        if prog.profile_first:
            res = _profile(ctx, case, prog)
        truth = time_steps(ctx, prog, prog.truth_steps)
        if prog.ops and ctx.cuda:
            truth["ops"] = prog.ops()
        if not prog.profile_first:
            res = _profile(ctx, case, prog)
    finally:
        if prog.cleanup:
            prog.cleanup()
    truth["profiled_median_step_ms"] = res["profiled"]["median_step_ms"]
    vers = gt._versions()
    entry = dict(stem=case.stem, description=case.description, cause=case.cause,
                 fix_of=case.fix_of or None, fix=case.fix or None, device=ctx.device,
                 device_name=gt._device_name(ctx), torch=vers["torch"], python=vers["python"],
                 quick=ctx.quick, seconds=round(time.perf_counter() - t0, 2), program=prog.extra,
                 truth=truth, **res)
    del prog
    gt._free(ctx)
    return entry


def _summary(manifest: dict) -> str:
    lines = [f"{'stem':22} {'MB':>6} {'truth ms':>9} {'loop ms':>8} {'profiled ms':>11}  cause"]
    for e in manifest["entries"]:
        t = e["truth"]
        lines.append(f"{e['stem']:22} {e['trace_bytes'] / 2**20:>6.2f} {t['median_step_ms']:>9.3f} "
                     f"{t.get('loop_ms_per_step', float('nan')):>8.3f} "
                     f"{t['profiled_median_step_ms'] or float('nan'):>11.3f}  {e['cause']}")
    for e in manifest["failed"]:
        lines.append(f"{e['stem']:22} FAILED: {e['error'][:90]}")
    for e in manifest["skipped"]:
        lines.append(f"{e['stem']:22} skipped: {e['reason']}")
    return "\n".join(lines)


def main(argv=None, *, catalogue: Callable[[], list[Case]] = cases, doc: str = "") -> int:
    ap = argparse.ArgumentParser(description=(doc or __doc__).split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (CPU)")
    ap.add_argument("--only", default="", help="comma-separated stems")
    ap.add_argument("--out", default="explain_out")
    ap.add_argument("--tar", default="")
    ap.add_argument("--budget", type=float, default=0, help="seconds; later cases are skipped")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.list:
        for c in catalogue():
            print(f"{c.stem:22} {','.join(c.devices):9} {c.cause:20} {c.fix_of or ''}")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("CUDA is not available", file=sys.stderr)
        return 2
    t_start = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = gt.Ctx(args.device, args.quick, out)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    todo = [c for c in catalogue() if not only or c.stem in only]
    manifest = dict(format=1, recorder=f"scripts/{Path(sys.argv[0]).name}",
                    created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    device=ctx.device, device_name=gt._device_name(ctx), quick=ctx.quick,
                    **gt._versions(), host=dict(cpus=os.cpu_count(), platform=platform.platform()),
                    columns=gt.KA_COLUMNS, entries=[], failed=[], skipped=[],
                    pairs=[dict(base=c.fix_of, fixed=c.stem, fix=c.fix) for c in todo if c.fix_of])
    mpath = out / "manifest.json"
    manifest["warmup_profile_s"] = round(gt.warm_up_profiler(ctx), 2)
    print(f"[ex] {ctx.device} {manifest['device_name']} torch {torch.__version__}", flush=True)
    for case in todo:
        if ctx.device not in case.devices:
            manifest["skipped"].append(dict(stem=case.stem, reason=f"{ctx.device} not in {list(case.devices)}"))
            continue
        if args.budget and time.perf_counter() - t_start > args.budget:
            manifest["skipped"].append(dict(stem=case.stem, reason=f"time budget {args.budget:.0f} s spent"))
            continue
        t0 = time.perf_counter()
        print(f"[ex] {case.stem} ...", flush=True)
        try:
            e = record(ctx, case)
            manifest["entries"].append(e)
            print(f"[ex]   {e['events']} events, {e['trace_bytes']} B, truth {e['truth']['median_step_ms']} ms, "
                  f"profiled {e['truth']['profiled_median_step_ms']} ms, {time.perf_counter() - t0:.1f} s", flush=True)
        except Exception as exc:
            manifest["failed"].append(dict(stem=case.stem, error=f"{type(exc).__name__}: {exc}"[:500],
                                           traceback=traceback.format_exc()[-3000:]))
            print(f"[ex]   FAILED {case.stem}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            with contextlib.suppress(Exception):
                torch._dynamo.reset()
            with contextlib.suppress(Exception):
                gt._free(ctx)
        manifest["total_s"] = round(time.perf_counter() - t_start, 1)
        gt.write_manifest(mpath, manifest)
    print(_summary(manifest), flush=True)
    if args.tar:
        parts = gt.make_tar(out, Path(args.tar))
        print("[ex] tar: " + ", ".join(f"{p} ({p.stat().st_size} B)" for p in parts), flush=True)
    print(f"[ex] done in {time.perf_counter() - t_start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

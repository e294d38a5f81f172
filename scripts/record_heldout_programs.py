#!/usr/bin/env python3
"""Record programs the explain model was not built on: the test for its words.

The programs in ``record_explain_programs.py`` were recorded while the attribution and the rules
were written, so a verdict that names their cause shows the rules fit them. These are recorded
afterwards, each with the cause its author expects written down *before* the lab reads it
(``cause``; ``expect`` lists the finding rules that would name it), and ``tests/data/heldout/``
keeps what the lab said the first time (``tests/test_heldout_programs.py``).

Standalone like its sibling (torch; transformers and timm where installed, else a plain-torch
stand-in), and the same formats and command line::

    python scripts/record_heldout_programs.py --device cuda --out /tmp/ho --tar /tmp/ho.tar.gz
    python scripts/record_heldout_programs.py --device cpu --quick --out /tmp/ho_cpu
"""

from __future__ import annotations

import io
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import record_explain_programs as rep  # noqa: E402
import record_groundtruth as gt  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from record_explain_programs import Case, Prog, busy  # noqa: E402


def _mlp(d: int, layers: int, dev) -> nn.Module:
    return nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(d, d), nn.ReLU())]).to(dev)


def build_generate(ctx: gt.Ctx) -> Prog:
    """Greedy decoding of a small GPT-2 (random weights), batch 1, KV cache, 16 tokens a step."""
    torch.manual_seed(0)
    layers, tokens = ctx.pick((6, 16), (2, 4), (1, 2))
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
        model = GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=768, n_head=12)).to(ctx.dev).eval()
        name = f"transformers GPT2LMHeadModel({layers} layers, 768, random weights)"

        def generate(ids):
            return model.generate(ids, max_new_tokens=tokens, do_sample=False, pad_token_id=0)
    except Exception:
        model = _mlp(768, layers, ctx.dev).eval()
        name = "MLP stand-in (transformers not installed)"

        def generate(ids):
            x = torch.randn(1, 768, device=ctx.dev)
            for _ in range(tokens):
                x = model(x)
            return x
    ids = torch.randint(0, 1000, (1, 32), device=ctx.dev)

    def step(i):
        with torch.no_grad():
            generate(ids)

    return Prog(step, warm=2, truth_steps=5, extra=dict(model=name, new_tokens=tokens, batch=1))


def build_masking(ctx: gt.Ctx, tf32: bool = False) -> Prog:
    """Boolean-mask indexing 20 times a step: each x[mask] waits for the GPU (nonzero's size)."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    n = ctx.pick(4096, 512, 128)
    x = torch.randn(n, n, device=ctx.dev)
    w = torch.randn(n, n, device=ctx.dev) / n ** 0.5

    def step(i):
        y = x
        for _ in range(20):
            y = torch.tanh(y @ w)
            kept = y[y > 0]  # data-dependent size: a sync per call
            busy(0.1)  # bookkeeping on the host between calls
            y = y + kept.mean()

    return Prog(step, warm=2, truth_steps=10, extra=dict(n=n, masks_per_step=20, host_ms_between=0.1, tf32=tf32),
                cleanup=_tf32_back_on)


def build_empty_cache(ctx: gt.Ctx, empty: bool = True) -> Prog:
    """An MLP training step that calls torch.cuda.empty_cache() at its end, every step."""
    torch.manual_seed(0)
    d, b = ctx.pick((2048, 512), (256, 64), (64, 16))
    model = _mlp(d, 8, ctx.dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(b, d, device=ctx.dev)

    def step(i):
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if ctx.cuda and empty:
            torch.cuda.empty_cache()

    return Prog(step, warm=2, truth_steps=10, extra=dict(d=d, batch=b, layers=8,
                                                          empty_cache="every step" if empty else "never"))


class _Rows(torch.utils.data.Dataset):
    def __init__(self, n: int, d: int):
        self.n, self.d = n, d

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        return [float(i % 7)] * self.d, i % 10


def _collate_slowly(items):
    """A collate function written in Python over lists: 25 ms of host work per batch."""
    busy(25.0)
    xs = torch.tensor([x for x, _ in items])
    ys = torch.tensor([y for _, y in items])
    return xs, ys


def build_collate(ctx: gt.Ctx, workers: int = 0) -> Prog:
    """A classifier fed by a DataLoader (no workers) whose collate_fn takes 25 ms per batch."""
    from torch.utils.data import DataLoader
    torch.manual_seed(0)
    d, b = ctx.pick((1024, 256), (128, 32), (32, 8))
    model = nn.Sequential(_mlp(d, 4, ctx.dev), nn.Linear(d, 10).to(ctx.dev))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kw = dict(num_workers=workers, persistent_workers=True, prefetch_factor=4) if workers else {}
    loader = DataLoader(_Rows(b * 100, d), batch_size=b, collate_fn=_collate_slowly, **kw)
    it = {"it": iter(loader)}

    def step(i):
        try:
            x, y = next(it["it"])
        except StopIteration:
            it["it"] = iter(loader)
            x, y = next(it["it"])
        loss = F.cross_entropy(model(x.to(ctx.dev)), y.to(ctx.dev))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Prog(step, warm=2 + 4 * workers, truth_steps=6, extra=dict(d=d, batch=b, collate_host_ms=25.0,
                                                                       num_workers=workers))


def build_layernorm_by_hand(ctx: gt.Ctx, fused: bool = False) -> Prog:
    """LayerNorm written out in eager ops over 8192×4096 bf16: nine memory-bound kernels."""
    n, d = ctx.pick((8192, 4096), (512, 512), (128, 128))
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    x = torch.randn(n, d, device=ctx.dev, dtype=dt)
    g, b = torch.ones(d, device=ctx.dev, dtype=dt), torch.zeros(d, device=ctx.dev, dtype=dt)

    def step(i):
        for _ in range(4):
            if fused:
                y = F.layer_norm(x, (d,), g, b, 1e-5)
                continue
            mu = x.mean(-1, keepdim=True)
            var = (x - mu).pow(2).mean(-1, keepdim=True)
            y = (x - mu) * torch.rsqrt(var + 1e-5) * g + b
        return y

    return Prog(step, warm=2, truth_steps=10, extra=dict(rows=n, d=d, dtype=str(dt).split(".")[-1],
                                                          norms_per_step=4, fused=fused))


def build_clip_per_param(ctx: gt.Ctx, foreach: bool = False) -> Prog:
    """clip_grad_norm_(foreach=False) over 200 parameters each step, a small MLP."""
    torch.manual_seed(0)
    model = _mlp(128, 100, ctx.dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    x = torch.randn(32, 128, device=ctx.dev)

    def step(i):
        model(x).square().mean().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=foreach)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Prog(step, warm=2, truth_steps=10, extra=dict(parameters=200, clip=f"foreach={foreach}"))


def build_vit_fp32(ctx: gt.Ctx, tf32: bool = False) -> Prog:
    """A ViT-S/16 training step in fp32 with TF32 off (timm, else a plain encoder)."""
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    b = ctx.pick(64, 4, 2)
    try:
        import timm
        model = timm.create_model("vit_small_patch16_224", pretrained=False).to(ctx.dev)
        name = "timm vit_small_patch16_224"
        x = torch.randn(b, 3, 224, 224, device=ctx.dev)
    except Exception:
        model = nn.TransformerEncoder(nn.TransformerEncoderLayer(384, 6, 1536, batch_first=True), 12).to(ctx.dev)
        name = "nn.TransformerEncoder 12×384 (timm not installed)"
        x = torch.randn(b, 197, 384, device=ctx.dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=ctx.cuda)

    def step(i):
        model(x).float().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Prog(step, warm=2, truth_steps=6, extra=dict(model=name, batch=b, dtype="float32", tf32=tf32),
                cleanup=_tf32_back_on)


def _tf32_back_on() -> None:
    """torch's defaults again."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True


def build_resnet50_bf16(ctx: gt.Ctx) -> Prog:
    """ResNet-50 training, bf16 autocast, channels_last, batch 128: convolution-bound."""
    torch.manual_seed(0)
    b, px = ctx.pick((128, 224), (4, 64), (2, 32))
    try:
        import torchvision.models as tvm
        model = tvm.resnet50(weights=None).to(ctx.dev).to(memory_format=torch.channels_last)
        name = "torchvision resnet50"
    except Exception:
        model = gt._resnet18_plain(1000).to(ctx.dev).to(memory_format=torch.channels_last)
        name = "ResNet-18 in plain torch (torchvision not installed)"
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
    x = torch.randn(b, 3, px, px, device=ctx.dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (b,), device=ctx.dev)
    dt = torch.bfloat16 if ctx.cuda else torch.bfloat16

    def step(i):
        with torch.autocast(ctx.dev.type, dtype=dt):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Prog(step, warm=3, truth_steps=5, extra=dict(model=name, batch=b, image_px=px, autocast="bfloat16",
                                                         memory_format="channels_last"))


def build_logged_gemms(ctx: gt.Ctx) -> Prog:
    """Eight 8192² bf16 GEMMs a step and loss.item() for a log line: a sync, but the GPU is busy."""
    n = ctx.pick(8192, 256, 128)
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    x = torch.randn(n, n, device=ctx.dev, dtype=dt)
    w = torch.randn(n, n, device=ctx.dev, dtype=dt) / n ** 0.5
    log: list[float] = []

    def step(i):
        y = x
        for _ in range(8):
            y = y @ w
        log.append(y.float().mean().item())

    return Prog(step, warm=2, truth_steps=10, extra=dict(n=n, gemms_per_step=8, sync="loss.item() per step"))


def build_small_uploads(ctx: gt.Ctx, batched: bool = False) -> Prog:
    """300 small tensors built from Python lists and copied to the device one by one, per step
    (``batched``: one tensor of all 300 rows, one copy, one GEMM)."""
    rows = [[float(j) for j in range(64)] for _ in range(300)]
    w = torch.randn(64, 64, device=ctx.dev)

    def step(i):
        if batched:
            return (torch.tensor(rows).to(ctx.dev) @ w).sum(0)
        acc = torch.zeros(64, device=ctx.dev)
        for r in rows:
            acc += torch.tensor(r).to(ctx.dev) @ w
        return acc

    return Prog(step, warm=2, truth_steps=10, extra=dict(uploads_per_step=1 if batched else 300, floats_each=64))


def build_sleepy_logger(ctx: gt.Ctx, sleep_ms: float = 6.0) -> Prog:
    """A small training step followed by 6 ms of time.sleep (a logger flushing to disk)."""
    torch.manual_seed(0)
    model = _mlp(512, 4, ctx.dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    x = torch.randn(64, 512, device=ctx.dev)

    def step(i):
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if sleep_ms:
            time.sleep(sleep_ms / 1e3)

    return Prog(step, warm=2, truth_steps=10, extra=dict(sleep_ms=sleep_ms))


def build_item_in_forward(ctx: gt.Ctx, on_device: bool = False) -> Prog:
    """A 12-layer bf16 MLP whose forward checks each activation on the host (``x.abs().max().item()``,
    a guard against overflow): twelve syncs a step, each draining the GPU's queue (``on_device``: the
    same guard as a clamp on the GPU, which changes nothing when the values are in range, and no sync)."""
    torch.manual_seed(0)
    d, b = ctx.pick((4096, 2048), (256, 64), (64, 16))
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    layers = [nn.Linear(d, d).to(ctx.dev, dt) for _ in range(12)]
    x0 = torch.randn(b, d, device=ctx.dev, dtype=dt)

    def step(i):
        x = x0
        with torch.no_grad():
            for layer in layers:
                x = torch.relu(layer(x))
                if on_device:
                    x = x.clamp(-1e4, 1e4)
                elif x.abs().max().item() > 1e4:  # the guard: one sync per layer
                    x = x.clamp(-1e4, 1e4)
        return x

    return Prog(step, warm=2, truth_steps=10, extra=dict(d=d, batch=b, layers=12,
                                                         syncs_per_step=0 if on_device else 12))


def build_cpu_positions(ctx: gt.Ctx, on_device: bool = False) -> Prog:
    """Rotary-style position tables computed each step on CPU tensors (sin/cos over 8192×1024 fp32)
    and copied to the device before a small bf16 attention block: the host's own tensor math
    (``on_device``: the same tables computed on the device each step)."""
    torch.manual_seed(0)
    seq, d = ctx.pick((8192, 1024), (1024, 256), (128, 64))
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    w = torch.randn(d, d, device=ctx.dev, dtype=dt) / d ** 0.5
    x = torch.randn(seq, d, device=ctx.dev, dtype=dt)

    where = ctx.dev if on_device else torch.device("cpu")

    def step(i):
        pos = (torch.arange(seq, dtype=torch.float32, device=where)[:, None]
               * torch.arange(d, dtype=torch.float32, device=where)[None, :])
        table = torch.cat([pos.sin(), pos.cos()], dim=1)[:, :d]  # on the CPU every step, unless on_device
        y = (x + table.to(ctx.dev, dt)) @ w
        return y

    return Prog(step, warm=2, truth_steps=10,
                extra=dict(seq=seq, d=d, where="on the device" if on_device else "torch ops on CPU tensors"))


def build_amp_gradscaler(ctx: gt.Ctx) -> Prog:
    """A 4-layer 4096-wide MLP trained under fp16 autocast with GradScaler, batch 4096: GEMM-bound;
    the scaler's inf check syncs once a step but the GPU stays busy."""
    torch.manual_seed(0)
    d, b = ctx.pick((4096, 4096), (256, 128), (64, 16))
    model = _mlp(d, 4, ctx.dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=ctx.cuda)
    scaler = torch.amp.GradScaler(ctx.dev.type, enabled=ctx.cuda)
    x = torch.randn(b, d, device=ctx.dev)
    dt = torch.float16 if ctx.cuda else torch.bfloat16

    def step(i):
        with torch.autocast(ctx.dev.type, dtype=dt):
            loss = model(x).float().square().mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    return Prog(step, warm=3, truth_steps=10, extra=dict(d=d, batch=b, autocast="float16", scaler="GradScaler"))


def build_compiled_graphs(ctx: gt.Ctx) -> Prog:
    """A small MLP (8 × 512 wide, batch 32) under torch.compile(mode="reduce-overhead"), warmed up:
    CUDA graphs already replace its launches, so what is left is the GPU's work and the replay."""
    torch.manual_seed(0)
    model = _mlp(512, 8, ctx.dev).eval()
    mode = "reduce-overhead" if ctx.cuda else "default"
    compiled = torch.compile(model, mode=mode)
    x = torch.randn(32, 512, device=ctx.dev)

    def step(i):
        with torch.no_grad():
            return compiled(x).clone()

    return Prog(step, warm=5, truth_steps=20, extra=dict(width=512, layers=8, batch=32, mode=mode))


# Recorded 2026-12-06, each cause (and the verdict expected of the lab) written here before the lab
# read its trace: HELDOUT_EXPECTED below.

def build_loader_restarted(ctx: gt.Ctx, kept: bool = False) -> Prog:
    """A classifier fed by a DataLoader with 4 workers whose iterator is made again every step
    (``for x, y in loader: ...; break`` in a loop): each step starts 4 worker processes and waits for
    their first batch (``kept``: persistent workers and one iterator for the whole run)."""
    from torch.utils.data import DataLoader
    torch.manual_seed(0)
    d, b = ctx.pick((1024, 256), (128, 32), (32, 8))
    model = nn.Sequential(_mlp(d, 4, ctx.dev), nn.Linear(d, 10).to(ctx.dev))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kw = dict(num_workers=4, persistent_workers=kept, prefetch_factor=2)
    loader = DataLoader(_Rows(b * 100, d), batch_size=b, collate_fn=_collate_quickly, **kw)
    it = {"it": iter(loader)}

    def step(i):
        if kept:
            try:
                x, y = next(it["it"])
            except StopIteration:
                it["it"] = iter(loader)
                x, y = next(it["it"])
        else:
            x, y = next(iter(loader))  # a fresh iterator: its workers start, then the first batch
        loss = F.cross_entropy(model(x.to(ctx.dev)), y.to(ctx.dev))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    iterator = "one, persistent workers" if kept else "new every step"
    return Prog(step, warm=2 + 4 * kept, truth_steps=6, extra=dict(d=d, batch=b, num_workers=4, iterator=iterator))


def _collate_quickly(items):
    xs = torch.tensor([x for x, _ in items])
    ys = torch.tensor([y for _, y in items])
    return xs, ys


def build_metric_on_host(ctx: gt.Ctx, on_device: bool = False) -> Prog:
    """A bf16 MLP classifier's training step that scores its batch on the host every step:
    ``logits.float().cpu().numpy()``, a numpy argmax and a top-5 over 8192×1000, while the GPU waits
    for the next step (``on_device``: argmax and top-5 on the GPU, counts kept there)."""
    import numpy as np
    torch.manual_seed(0)
    d, b, classes = ctx.pick((2048, 8192, 1000), (256, 512, 1000), (64, 64, 100))
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    model = nn.Sequential(_mlp(d, 4, ctx.dev), nn.Linear(d, classes).to(ctx.dev)).to(dt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    x = torch.randn(b, d, device=ctx.dev, dtype=dt)
    y = torch.randint(0, classes, (b,), device=ctx.dev)
    y_host = y.cpu().numpy()
    score = {"top1": 0, "top5": torch.zeros((), device=ctx.dev, dtype=torch.long)}

    def step(i):
        logits = model(x)
        F.cross_entropy(logits.float(), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if on_device:
            top5 = logits.topk(5, dim=1).indices
            score["top5"] += (top5 == y[:, None]).any(1).sum()
            return
        host = logits.detach().float().cpu().numpy()  # waits for the step, then copies 32 MB
        score["top1"] += int((host.argmax(1) == y_host).sum())
        top5 = np.argpartition(-host, 5, axis=1)[:, :5]
        score["top5_host"] = score.get("top5_host", 0) + int((top5 == y_host[:, None]).any(1).sum())

    return Prog(step, warm=2, truth_steps=10, extra=dict(d=d, batch=b, classes=classes, dtype=str(dt).split(".")[-1],
                                                          metric="on the device" if on_device else "numpy on the host"))


def build_gemm_unaligned(ctx: gt.Ctx, aligned: bool = False) -> Prog:
    """Eight bf16 GEMMs a step whose sizes are odd (4095 × 4093 by 4093 × 4097): no dimension a multiple
    of 8, so cuBLAS cannot use its aligned tensor-core kernels (``aligned``: 4096 everywhere)."""
    m, k, n = (ctx.pick((4096,) * 3, (512,) * 3, (128,) * 3) if aligned
               else ctx.pick((4095, 4093, 4097), (511, 509, 513), (127, 125, 129)))
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    a = torch.randn(m, k, device=ctx.dev, dtype=dt)
    w = torch.randn(k, n, device=ctx.dev, dtype=dt) / k ** 0.5

    def step(i):
        for _ in range(8):
            y = a @ w
        return y

    return Prog(step, warm=2, truth_steps=10, extra=dict(m=m, k=k, n=n, gemms_per_step=8,
                                                          dtype=str(dt).split(".")[-1]))


def build_attention_by_hand(ctx: gt.Ctx, sdpa: bool = False) -> Prog:
    """Causal self-attention written out (``softmax(q @ k.T / √d + mask) @ v``) in bf16, batch 4,
    16 heads, sequence 4096, head 64, forward and backward: the 4096² scores per head go through HBM
    several times (``sdpa``: F.scaled_dot_product_attention(is_causal=True), a fused kernel)."""
    torch.manual_seed(0)
    b, h, s, hd = ctx.pick((4, 16, 4096, 64), (1, 4, 256, 32), (1, 2, 64, 16))
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    q, k, v = (torch.randn(b, h, s, hd, device=ctx.dev, dtype=dt, requires_grad=True) for _ in range(3))
    mask = torch.full((s, s), float("-inf"), device=ctx.dev, dtype=dt).triu(1)

    def step(i):
        if sdpa:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-2, -1) / hd ** 0.5 + mask
            out = scores.softmax(-1) @ v
        out.float().square().mean().backward()
        q.grad = k.grad = v.grad = None

    return Prog(step, warm=2, truth_steps=10, extra=dict(batch=b, heads=h, seq=s, head_dim=hd,
                                                          dtype=str(dt).split(".")[-1],
                                                          attention="F.scaled_dot_product_attention" if sdpa
                                                          else "written out, causal mask added"))


def build_checkpoint_each_step(ctx: gt.Ctx, every: int = 1) -> Prog:
    """An MLP training step (8 × 2048 wide, 34 M parameters) followed by torch.save of the model's and
    the optimizer's state to a file, every step (``every``: once in that many steps, none in the window)."""
    torch.manual_seed(0)
    d, b = ctx.pick((2048, 512), (256, 64), (64, 16))
    model = _mlp(d, 8, ctx.dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(b, d, device=ctx.dev)
    path = ctx.out / "_checkpoint.pt"

    def step(i):
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if (i + 1) % every == 0:
            buf = io.BytesIO()
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
            path.write_bytes(buf.getbuffer())

    return Prog(step, warm=2, truth_steps=10, extra=dict(d=d, batch=b, layers=8,
                                                          checkpoint=f"every {every} step(s)"),
                cleanup=lambda: path.unlink(missing_ok=True))


def build_predictions_logged(ctx: gt.Ctx) -> Prog:
    """A bf16 MLP classifier whose step logs its predictions: ``logits.argmax(1).tolist()`` (8192
    int64, 64 KiB off the GPU), then a per-class count and a JSON line built in Python."""
    import collections
    import json as _json
    torch.manual_seed(0)
    d, b, classes = ctx.pick((2048, 8192, 1000), (256, 512, 100), (64, 64, 10))
    dt = torch.bfloat16 if ctx.cuda else torch.float32
    model = nn.Sequential(_mlp(d, 4, ctx.dev), nn.Linear(d, classes).to(ctx.dev)).to(dt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    x = torch.randn(b, d, device=ctx.dev, dtype=dt)
    y = torch.randint(0, classes, (b,), device=ctx.dev)
    log = io.StringIO()

    def step(i):
        logits = model(x)
        F.cross_entropy(logits.float(), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        preds = logits.argmax(1).tolist()
        counts = collections.Counter(preds)
        log.write(_json.dumps({"step": i, "preds": preds, "counts": sorted(counts.items())}) + "\n")
        log.seek(0)
        log.truncate()

    return Prog(step, warm=2, truth_steps=10, extra=dict(d=d, batch=b, classes=classes,
                                                          log="argmax(1).tolist(), Counter, json.dumps"))


def build_activations_offloaded(ctx: gt.Ctx) -> Prog:
    """An MLP step that copies a 64 MiB activation to the host every step with ``.cpu()`` and keeps
    the last two copies, doing nothing else with them on the host."""
    torch.manual_seed(0)
    d, b = ctx.pick((4096, 4096), (512, 512), (64, 64))
    model = _mlp(d, 4, ctx.dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    x = torch.randn(b, d, device=ctx.dev)
    kept: list = []

    def step(i):
        h = model(x)
        h.square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        kept.append(h.detach().cpu())
        del kept[:-2]

    return Prog(step, warm=2, truth_steps=10, extra=dict(d=d, batch=b, copy_mib=b * d * 4 / 2**20))


# What the lab's verdict is expected to be (its finding rule), written before any of these five was
# recorded, with the cause a user would need to hear. tests/test_heldout_programs.py reads the
# manifest's ``expect``; this is where those entries came from.
HELDOUT_EXPECTED = {
    "loader_restarted": ("input_pipeline", "the step waits for 4 DataLoader workers to start and send "
                         "their first batch, every step"),
    "metric_on_host": ("sync_waits", "the metric's .cpu() waits for the step's GPU work, then numpy "
                       "scores 8192×1000 on the host while the GPU idles"),
    "gemm_unaligned": ("gemm_below_roof", "odd GEMM sizes: the bf16 GEMMs run well below the rate of "
                       "aligned ones"),
    "attention_by_hand": ("attention_written_out", "the 4096² scores are written, masked, softmaxed and "
                          "read back through HBM; SDPA's fused kernel never writes them"),
    "checkpoint_each_step": ("pageable_copies", "torch.save copies 34 M parameters and Adam's state to "
                             "pageable host memory every step, then writes a file"),
    # Written 2026-12-06 21:20 UTC, before recording, after the rule for host work after a copy off
    # the GPU existed: two programs that rule was not written on, one it should name, one it must not.
    "predictions_logged": ("host_unrecorded", "the host builds a JSON log line from 8192 predictions "
                           "it copied off the GPU with .tolist(), GPU idle: 'the host works on tensors "
                           "copied off the GPU'"),
    "activations_offloaded": ("pageable_copies", "a 64 MiB .cpu() to pageable memory every step and no "
                              "host work after it: the copy, not host work, is the cause"),
}


def cases() -> list[Case]:
    gpu = ("cuda",)
    return [
        Case("generate_gpt2", "greedy decoding of a 6-layer GPT-2 (random weights), batch 1, 16 new tokens "
             "per step", "host_launch", build_generate),
        Case("mask_indexing", "20 boolean-mask indexings per step (x[x > 0]) between 4096² GEMMs",
             "sync", build_masking),
        Case("empty_cache_each_step", "an MLP training step that ends with torch.cuda.empty_cache()",
             "allocator", build_empty_cache, devices=gpu),
        Case("collate_in_python", "a DataLoader without workers whose collate_fn takes 25 ms per batch",
             "input_pipeline", build_collate),
        Case("layernorm_by_hand", "LayerNorm written out in eager ops over 8192×4096 bf16, 4 per step",
             "memory_bandwidth_unfused", build_layernorm_by_hand),
        Case("clip_per_param", "clip_grad_norm_(foreach=False) over 200 parameters per step",
             "launch", build_clip_per_param),
        Case("vit_fp32", "ViT-S/16 training in fp32 with TF32 off, batch 64", "fp32_gemm", build_vit_fp32,
             devices=gpu),
        Case("resnet50_bf16", "ResNet-50 training under bf16 autocast, channels_last, batch 128",
             "gpu_convolution", build_resnet50_bf16, devices=gpu),
        Case("logged_gemms", "eight 8192² bf16 GEMMs and loss.item() per step (GPU-bound despite the sync)",
             "gpu_gemm", build_logged_gemms),
        Case("small_uploads", "300 tensors built from Python lists and copied one by one per step",
             "host_launch", build_small_uploads),
        Case("sleepy_logger", "a small training step then 6 ms of time.sleep", "host_unrecorded",
             build_sleepy_logger),
        # Recorded later still (2026-12-05), each with its cause written before the lab read it.
        Case("item_in_forward", "a 12-layer bf16 MLP whose forward calls .item() on each activation",
             "sync", build_item_in_forward),
        Case("cpu_positions", "position tables computed on CPU tensors each step (sin/cos over 8192×1024) "
             "and copied to the device", "host_op", build_cpu_positions),
        Case("amp_gradscaler", "an MLP trained under fp16 autocast with GradScaler (one inf-check sync a "
             "step; GEMM-bound)", "gpu_gemm", build_amp_gradscaler, devices=gpu),
        Case("compiled_graphs", "a small MLP under torch.compile(mode='reduce-overhead'), warmed up",
             "gpu", build_compiled_graphs, devices=gpu),
        # The same programs with the fix the lab suggests, for the what-if (bench/bench_whatif.py).
        Case("mask_indexing_tf32", "mask_indexing with TF32 on", "gemm", partial(build_masking, tf32=True),
             fix_of="mask_indexing", fix="torch.backends.cuda.matmul.allow_tf32 = True"),
        Case("cache_kept", "empty_cache_each_step without empty_cache()", "gemm",
             partial(build_empty_cache, empty=False), fix_of="empty_cache_each_step", devices=gpu,
             fix="torch.cuda.empty_cache() taken out of the loop"),
        Case("collate_workers", "collate_in_python with 4 workers", "gpu", partial(build_collate, workers=4),
             fix_of="collate_in_python", fix="DataLoader(num_workers=4, persistent_workers=True, prefetch_factor=4)"),
        Case("layernorm_fused", "layernorm_by_hand as F.layer_norm", "memory_bandwidth",
             partial(build_layernorm_by_hand, fused=True), fix_of="layernorm_by_hand", fix="F.layer_norm"),
        Case("vit_tf32", "vit_fp32 with TF32 on", "gemm", partial(build_vit_fp32, tf32=True), fix_of="vit_fp32",
             devices=gpu, fix="torch.backends.cuda.matmul.allow_tf32 = True (and cudnn)"),
        Case("sleepy_logger_no_sleep", "sleepy_logger without the sleep", "launch",
             partial(build_sleepy_logger, sleep_ms=0.0), fix_of="sleepy_logger", fix="the sleep taken out"),
        # Fixes of programs recorded after the rules, each as its finding's advice words it (2026-12-05).
        Case("item_guard_on_device", "item_in_forward with the guard as a clamp on the GPU", "gpu",
             partial(build_item_in_forward, on_device=True), fix_of="item_in_forward",
             fix="the guard as x.clamp(-1e4, 1e4) on the GPU, no .item()"),
        Case("positions_on_device", "cpu_positions with the tables computed on the device", "gpu",
             partial(build_cpu_positions, on_device=True), fix_of="cpu_positions",
             fix="torch.arange(..., device='cuda'): the tables' math on the device"),
        Case("clip_foreach", "clip_per_param with clip_grad_norm_(foreach=True)", "launch",
             partial(build_clip_per_param, foreach=True), fix_of="clip_per_param",
             fix="clip_grad_norm_(foreach=True): the work batched"),
        Case("small_uploads_batched", "small_uploads as one tensor, one copy and one GEMM", "gpu",
             partial(build_small_uploads, batched=True), fix_of="small_uploads",
             fix="one tensor of the 300 rows, one copy, one GEMM: the work batched"),
        # Recorded 2026-12-06 (HELDOUT_EXPECTED: the verdicts expected before recording), and their fixes.
        Case("loader_restarted", "a DataLoader with 4 workers whose iterator is made again every step",
             "input_pipeline", build_loader_restarted),
        Case("metric_on_host", "a bf16 MLP classifier scoring each batch with numpy on the host (.cpu() "
             "of 8192×1000 logits a step)", "sync_host_work", build_metric_on_host),
        Case("gemm_unaligned", "eight bf16 GEMMs of 4095×4093 by 4093×4097 a step", "gemm_unaligned",
             build_gemm_unaligned),
        Case("attention_by_hand", "causal attention written out in bf16 (batch 4, 16 heads, 4096 tokens), "
             "forward and backward", "attention_unfused", build_attention_by_hand),
        Case("checkpoint_each_step", "an MLP training step followed by torch.save of the model and "
             "optimizer, every step", "checkpoint", build_checkpoint_each_step),
        Case("loader_kept", "loader_restarted with persistent workers and one iterator", "gpu",
             partial(build_loader_restarted, kept=True), fix_of="loader_restarted",
             fix="DataLoader(persistent_workers=True) and one iterator for the run"),
        Case("metric_on_device", "metric_on_host scored on the GPU", "gpu",
             partial(build_metric_on_host, on_device=True), fix_of="metric_on_host",
             fix="argmax/top-5 on the GPU, counts kept there, no .cpu() in the step"),
        Case("gemm_aligned", "gemm_unaligned at 4096 everywhere", "gemm",
             partial(build_gemm_unaligned, aligned=True), fix_of="gemm_unaligned",
             fix="sizes padded to multiples of 64 (4096)"),
        Case("attention_sdpa", "attention_by_hand as F.scaled_dot_product_attention", "attention",
             partial(build_attention_by_hand, sdpa=True), fix_of="attention_by_hand",
             fix="F.scaled_dot_product_attention(q, k, v, is_causal=True)"),
        Case("checkpoint_every_100", "checkpoint_each_step saving every 100 steps (none in the window)", "gpu",
             partial(build_checkpoint_each_step, every=100), fix_of="checkpoint_each_step",
             fix="torch.save every 100 steps, not every step"),
        Case("predictions_logged", "a bf16 MLP classifier logging its 8192 predictions a step as JSON "
             "(argmax(1).tolist(), Counter, json.dumps)", "host_work_after_copy", build_predictions_logged),
        Case("activations_offloaded", "an fp32 MLP step copying a 64 MiB activation to the host with .cpu() "
             "every step", "pageable_copy", build_activations_offloaded),
    ]


if __name__ == "__main__":
    sys.exit(rep.main(catalogue=cases, doc=__doc__))

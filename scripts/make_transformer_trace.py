"""A realistic large trace: a GPT-style training step profiled with every option on.

The model is torch.nn only: token + position embedding, N blocks of (LayerNorm, attention
through ``F.scaled_dot_product_attention``, LayerNorm, GELU MLP), a final LayerNorm and an
LM head; loss = cross-entropy; AdamW; bf16 autocast. The profile records shapes, memory and
Python stacks over a ``schedule(wait=1, warmup=1, active=N)``, and ``export_chrome_trace``
writes a ``.json.gz`` (the ``.gz`` suffix makes torch gzip it).

The event count is steered towards ``--target-events`` (default 70k: ~20 MB of JSON with
stacks and shapes): one probe profile of a single step measures events per step, then the
real profile records as many active steps as reach the target (two profile sessions, one
after the other: never overlapping). Events, sizes and categories are printed at the end.

    python scripts/make_transformer_trace.py --out /tmp/transformer_trace.json.gz         # GPU
    python scripts/make_transformer_trace.py --device cpu --quick --out /tmp/t.json.gz   # CPU test
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "6")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# Active steps are kept within these bounds whatever the probe says: at least two steps so
# the trace shows step-to-step repetition, at most what the lab's host limit allows.
MIN_ACTIVE, MAX_ACTIVE = 2, 40


@dataclass(frozen=True)
class ModelSize:
    vocab: int
    d_model: int
    heads: int
    layers: int
    seq: int
    batch: int


# ~125M parameters (GPT-2 small's shape, smaller vocabulary): a step takes tens of ms on an
# H200, and 12 layers give enough distinct ops per step for a dense trace.
GPU_SIZE = ModelSize(vocab=8192, d_model=768, heads=12, layers=12, seq=512, batch=8)
QUICK_SIZE = ModelSize(vocab=256, d_model=64, heads=4, layers=2, seq=32, batch=2)


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, size: ModelSize):
        super().__init__()
        self.tok = nn.Embedding(size.vocab, size.d_model)
        self.pos = nn.Embedding(size.seq, size.d_model)
        self.blocks = nn.ModuleList(Block(size.d_model, size.heads) for _ in range(size.layers))
        self.ln_f = nn.LayerNorm(size.d_model)
        self.head = nn.Linear(size.d_model, size.vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def make_step(size: ModelSize, device: torch.device):
    torch.manual_seed(0)
    model = GPT(size).to(device)
    # fused=False, foreach default: the multi-tensor kernels most training loops run.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, size.vocab, (size.batch, size.seq), device=device)
    targets = torch.randint(0, size.vocab, (size.batch, size.seq), device=device)
    record = torch.profiler.record_function

    def step():
        with record("train_step"):
            with record("forward"), torch.autocast(device.type, dtype=torch.bfloat16):
                logits = model(idx)
                loss = F.cross_entropy(logits.view(-1, size.vocab).float(), targets.view(-1))
            with record("backward"):
                loss.backward()
            with record("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
        return loss

    params = sum(p.numel() for p in model.parameters())
    return step, params


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profile_steps(step, device: torch.device, active: int, path: Path) -> float:
    """Profile ``active`` steps (after one wait and one warm-up step); export to ``path``."""
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    t0 = time.perf_counter()
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=active),
                 record_shapes=True, profile_memory=True, with_stack=True) as prof:
        for _ in range(2 + active):
            step()
            prof.step()
        sync(device)
    elapsed = time.perf_counter() - t0
    prof.export_chrome_trace(str(path))
    return elapsed


def read_trace(path: Path) -> tuple[dict, int]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw), len(raw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny model (for testing on CPU)")
    parser.add_argument("--out", type=Path, default=Path("transformer_trace.json.gz"))
    parser.add_argument("--target-events", type=int, default=None,
                        help="aim for this many trace events (default 70,000; 3,000 with --quick)")
    parser.add_argument("--layers", type=int, default=None, help="override the number of blocks")
    args = parser.parse_args(argv)

    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA GPU is visible; use --device cpu --quick", file=sys.stderr)
        return 2
    size = QUICK_SIZE if args.quick else GPU_SIZE
    if args.layers:
        size = ModelSize(**{**asdict(size), "layers": args.layers})
    target = args.target_events or (3_000 if args.quick else 70_000)
    device = torch.device(args.device)
    if str(args.out).endswith(".gz") is False:
        print("note: --out does not end in .gz, the trace is written uncompressed")

    step, params = make_step(size, device)
    print(f"model: {params / 1e6:.1f} M parameters, {size}; device {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""), flush=True)
    t0 = time.perf_counter()
    for _ in range(3):  # warm-up: cuBLAS handles, autotuning, allocator
        step()
    sync(device)
    print(f"warm-up 3 steps: {time.perf_counter() - t0:.2f} s", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.json"
        probe_s = profile_steps(step, device, 1, probe)
        data, _ = read_trace(probe)
        per_step = max(1, len(data.get("traceEvents", [])))
        del data
    active = max(MIN_ACTIVE, min(MAX_ACTIVE, round(target / per_step)))
    print(f"probe: {per_step:,} events for 1 active step ({probe_s:.2f} s) → {active} active steps "
          f"for ~{target:,} events", flush=True)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    prof_s = profile_steps(step, device, active, args.out)
    data, raw_bytes = read_trace(args.out)
    events = data.get("traceEvents", [])
    cats = collections.Counter(e.get("cat", "") for e in events)
    phases = collections.Counter(e.get("ph", "") for e in events)
    print(f"wrote {args.out}: {len(events):,} events, {raw_bytes / 2**20:.1f} MB JSON, "
          f"{args.out.stat().st_size / 2**20:.2f} MB on disk; {active} active steps profiled in {prof_s:.2f} s")
    print("phases:", dict(phases.most_common()))
    print("categories:", dict(cats.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

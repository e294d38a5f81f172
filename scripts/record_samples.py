"""Record the bundled sample traces: a grid of runs through ``lab.runner.run_profile``.

Run on a GPU host (one process, one run at a time, after ``warm_up``)::

    python scripts/record_samples.py --device cuda --out lab/samples --tar /tmp/samples.tar.gz

Each run's Chrome trace is written exactly as ``RunResult.trace_gz`` to
``<RunResult.trace_stem><variant>.json.gz`` and described in ``manifest.json`` (the format of
``lab/samples/manifest.json``: the existing entries are kept, an entry with the same file is
replaced). Runs that fail are listed under ``"failed"`` and printed; they never stop the
rest. The manifest is rewritten after every run, so a batch cut short keeps what it recorded.

The grid: the seed's runs (4096³ bf16 eager and compiled), tiny and large, cold and warm,
fp32/tf32, 8192³ bf16, and every lesson's GPU runs (``lab.lessons``); identical configs are
recorded once. ``--device cpu --quick`` runs the same grid shrunk to tiny sizes on the CPU
(dtypes the CPU refuses land in "failed"): that is how it is tested without a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import tarfile
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # before torch starts a profile
# The cold runs have no schedule warm-up on purpose; torch warns about it on every such run.
warnings.filterwarnings("ignore", message=".*Profiler won't be using warmup")

from lab.core.config import RunConfig  # noqa: E402
from lab.core.workloads import WORKLOADS  # noqa: E402
from lab.lessons import LESSONS  # noqa: E402

DEFAULT_OUT = ROOT / "lab" / "samples"
SEED_MANIFEST = DEFAULT_OUT / "manifest.json"
# --quick divides every dimension by this (4096 → 64), never below QUICK_MIN_DIM.
QUICK_DIVISOR = 64
QUICK_MIN_DIM = 8
# The GPU box returns files of at most 16 MB; warn well before.
TAR_WARN_BYTES = 15 * 2**20

# The extra runs keep traces small: shapes on (the lab's GEMM analysis needs them), memory and
# stacks off (they multiply the event count), at most 5 recorded steps. Lesson runs are
# recorded exactly as the lesson runs them.
_COLD = dict(warmup_iters=0, wait=0, warmup=0, active=5)  # recorded from the very first iteration
_WARM = dict(warmup_iters=3, wait=1, warmup=1, active=5)  # its warm twin


@dataclass
class Item:
    """One run of the grid: its config (device already set) and how the manifest describes it."""

    config: RunConfig
    variant: str  # file-name suffix after RunResult.trace_stem: "", "_cold", "_warm", …
    lessons: list[str]
    notes: list[str]
    stem: str = ""  # the file name without .json.gz, unique within the grid (set by build_grid)


def base_stem(config: RunConfig, kind: str) -> str:
    """``RunResult.trace_stem`` as it will be for ``config`` on a device of ``kind``."""
    tag = "_compiled" if config.compile else ""
    return f"{config.workload}{tag}_{config.shape_text}_{config.dtype}_{kind}"


def stem_of(item: Item, kind: str) -> str:
    return item.stem or base_stem(item.config, kind) + item.variant


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text.lower()).strip("_")


def base_grid() -> list[tuple[RunConfig, str, str | None, str]]:
    """(GPU config, variant suffix, lesson key or None, note) in recording order.

    Lesson runs come first so that a batch cut short still has every lesson; the extra runs
    (the seed's grid and sizes the lessons do not cover) come last. A lesson whose two runs
    share workload, shape and dtype (cold vs warm) names its files by run name.
    """
    grid: list[tuple[RunConfig, str, str | None, str]] = []
    for key, lesson in LESSONS.items():
        same_shape = len({base_stem(r.gpu, "x") for r in lesson.runs}) < len(lesson.runs)
        for run in lesson.runs:
            variant = f"_{_slug(run.name)}" if same_shape else ""
            grid.append((run.gpu, variant, key,
                         f"Lesson '{lesson.title}', run '{run.name}'."))  # no hint: notes show before predictions
    bf16 = dict(workload="matmul_add", dtype="bfloat16")
    grid += [
        (RunConfig(m=4096, k=4096, n=4096, **bf16), "", None,
         "The seed exercise: a GEMM kernel then an elementwise add kernel per step."),
        (RunConfig(m=4096, k=4096, n=4096, compile=True, step_label="matmul_add_compiled", **bf16), "", None,
         "matmul + add under torch.compile, recorded on the H200."),
        (RunConfig(m=4096, k=4096, n=4096, dtype="float32"), "", None,
         "Full FP32 on the CUDA cores: no tensor cores without TF32."),
        (RunConfig(m=4096, k=4096, n=4096, dtype="tf32"), "", None, "TF32 tensor-core GEMM (float32 storage)."),
        (RunConfig(m=1024, k=1024, n=1024, **_COLD, **bf16), "_cold", None,
         "Recorded from the very first iteration: the first step shows the cold start."),
        (RunConfig(m=1024, k=1024, n=1024, **_WARM, **bf16), "_warm", None,
         "The cold run's twin, after three un-profiled iterations and one schedule warm-up step."),
        (RunConfig(m=8192, k=8192, n=8192, **bf16), "", None,
         "The largest GEMM of the grid: the closest to the device's peak."),
    ]
    return grid


def shrink(config: RunConfig) -> RunConfig:
    """The --quick version of a config: every dimension divided by QUICK_DIVISOR."""
    dims = {d: max(QUICK_MIN_DIM, getattr(config, d) // QUICK_DIVISOR) for d in ("m", "k", "n")}
    return config.replace(**dims)


def build_grid(device: str, *, quick: bool) -> list[Item]:
    """The grid for ``device`` ("cuda" or "cpu"): identical configs merged (their lessons and
    notes kept), then each given a unique file stem (a clash gets "_2", "_3", …)."""
    items: dict[RunConfig, Item] = {}
    for config, variant, lesson, note in base_grid():
        config = config.replace(device=device)
        if quick:
            config = shrink(config)
        item = items.setdefault(config, Item(config, variant, [], []))
        if lesson and lesson not in item.lessons:
            item.lessons.append(lesson)
        if note not in item.notes:
            item.notes.append(note)
    taken: set[str] = set()
    for item in items.values():
        stem, n = base_stem(item.config, device) + item.variant, 1
        while stem in taken:
            n += 1
            stem = f"{base_stem(item.config, device)}{item.variant}_{n}"
        item.variant = stem[len(base_stem(item.config, device)):]
        item.stem = stem
        taken.add(stem)
    return list(items.values())


def select(items: list[Item], only: list[str], kind: str) -> list[Item]:
    """Items whose file stem contains any of the ``only`` substrings (all when empty)."""
    if not only:
        return items
    return [it for it in items if any(o in stem_of(it, kind) for o in only)]


# ----------------------------------------------------------------------------- manifest


def load_manifest(out: Path) -> dict:
    """The manifest to extend: ``out``'s own, else the bundled one (keeps the seed entries)."""
    for path in (out / "manifest.json", SEED_MANIFEST):
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            data.setdefault("samples", [])
            return data
    return {"about": "Real GPU traces recorded with torch.profiler.", "samples": []}


def write_atomic(path: Path, data: bytes) -> None:
    # Write beside, then rename: a reader never sees half a file, and a read-only old file
    # (the seed traces are mode 444) is replaced rather than opened for writing.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def save_manifest(out: Path, manifest: dict) -> None:
    write_atomic(out / "manifest.json", (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode())


def upsert(manifest: dict, entry: dict) -> None:
    samples = manifest["samples"]
    for i, old in enumerate(samples):
        if old.get("file") == entry["file"]:
            samples[i] = entry
            return
    samples.append(entry)


def short_device(name: str, kind: str) -> str:
    return "CPU" if kind == "cpu" else name.replace("NVIDIA ", "").strip()


def title_of(config: RunConfig, variant: str, device: str) -> str:
    w = WORKLOADS[config.workload]
    if config.m == config.k == config.n:
        shape = f"{config.m}³"
    elif w.dim_names == ("M", "K", "N"):
        shape = f"{config.m}×{config.k}×{config.n}"
    else:
        shape = ", ".join(f"{v} {name}" for v, name in zip((config.m, config.k, config.n), w.dim_names))
    parts = [w.title, f"{shape} {config.dtype}"]
    if config.compile:
        parts.append("torch.compile")
    if variant:
        parts.append(variant.strip("_").replace("_", " "))
    return f"{', '.join(parts)} ({device})"


def schedule_text(config: RunConfig) -> str:
    warm = f"{config.warmup_iters} un-profiled warm-up iterations" if config.warmup_iters else "no warm-up (cold)"
    return f"Schedule wait={config.wait} warmup={config.warmup} active={config.active}, {warm}."


def entry_for(item: Item, result, file: str, recorded: str) -> dict:
    t = result.timing
    device = result.device
    return {
        "file": file,
        "title": title_of(item.config, item.variant, short_device(device.name, device.kind)),
        "device": device.name,
        "torch": device.torch_version,
        "cuda": device.cuda_version,
        "recorded": recorded,
        "lesson": item.lessons[0] if item.lessons else "",
        "lessons": list(item.lessons),
        "config": result.config.to_dict(),
        "timing": {
            "profiled_median_us": _finite(t.profiled_median_us),
            "unprofiled_median_us": _finite(t.unprofiled_median_us),
            "method": t.method,
            "compile_s": t.compile_s,
        },
        "note": " ".join(item.notes + [schedule_text(item.config)]),
    }


def _finite(value: float):
    # JSON has no NaN; 0.01 µs is far below any timer's resolution here.
    return round(value, 2) if math.isfinite(value) else None


# ----------------------------------------------------------------------------- recording


def check_trace(trace_gz: bytes) -> dict:
    """What the lab reads from the trace: events, kernels, GPU lanes, launch links."""
    from lab.trace.load import load_trace

    trace = load_trace(trace_gz)
    ev = trace.events
    return {
        "events": len(ev),
        "kernels": int((ev["cat"] == "kernel").sum()),
        # Kernels, copies and memsets: a copy lesson's trace has GPU work and no kernel.
        "gpu_ops": int(ev["cat"].isin(["kernel", "gpu_memcpy", "gpu_memset"]).sum()),
        "gpu_lanes": int(ev.loc[ev["lane_kind"] == "gpu", "lane"].nunique()),
        "flows": len(trace.flows),
    }


def record(items: list[Item], out: Path, *, kind: str, budget_s: float | None) -> tuple[list[str], list[dict]]:
    """Run each item; returns (files written, rows for the final table)."""
    import torch

    from lab.run.runner import run_profile, warm_up

    manifest = load_manifest(out)
    manifest["failed"] = []
    manifest["skipped"] = []
    recorded = datetime.date.today().isoformat()
    written: list[str] = []
    rows: list[dict] = []
    started = time.perf_counter()
    try:
        info = warm_up(kind)
        print(f"warmed up on {info.label} (torch {info.torch_version}, CUDA {info.cuda_version}) "
              f"in {time.perf_counter() - started:.1f} s", flush=True)
    except Exception as exc:  # noqa: BLE001 - the runs report their own errors
        print(f"warm-up failed: {type(exc).__name__}: {exc}", flush=True)
    manifest["recording"] = {"command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
                             "date": recorded, "torch": torch.__version__, "cuda": torch.version.cuda}
    save_manifest(out, manifest)

    for i, item in enumerate(items, 1):
        stem = stem_of(item, kind)
        if budget_s is not None and time.perf_counter() - started > budget_s:
            manifest["skipped"].append({"name": stem, "config": item.config.to_dict(),
                                        "reason": f"over the {budget_s:.0f} s budget"})
            rows.append({"name": stem, "status": "skipped"})
            save_manifest(out, manifest)
            continue
        print(f"[{i}/{len(items)}] {stem} ...", flush=True)
        t0 = time.perf_counter()
        try:
            result = run_profile(item.config)
            file = f"{result.trace_stem}{item.variant}.json.gz"
            check = check_trace(result.trace_gz)
            if kind == "cuda" and not (check["gpu_ops"] and check["gpu_lanes"] and check["flows"]):
                # A sample exists to show GPU work; without it (no CUPTI?) it would mislead.
                raise RuntimeError(f"the trace lacks GPU work ({check}); not kept as a sample")
            write_atomic(out / file, result.trace_gz)
            upsert(manifest, entry_for(item, result, file, recorded))
            written.append(file)
            rows.append({"name": file, "status": "ok", "wall_s": time.perf_counter() - t0,
                         "profiled_us": result.timing.profiled_median_us,
                         "unprofiled_us": result.timing.unprofiled_median_us,
                         "trace_kb": len(result.trace_gz) / 1024, **check})
            del result
        except Exception as exc:  # noqa: BLE001 - record it, go on with the next run
            message = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            print(f"    FAILED {message}", flush=True)
            if not isinstance(exc, (ValueError, RuntimeError)):
                traceback.print_exc()
            manifest["failed"].append({"name": stem, "config": item.config.to_dict(), "error": message[:500]})
            rows.append({"name": stem, "status": "failed", "wall_s": time.perf_counter() - t0, "error": message})
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        save_manifest(out, manifest)
    return written, rows


def print_table(rows: list[dict]) -> None:
    print()
    print(f"{'file':58} {'status':8} {'wall s':>7} {'prof µs':>10} {'plain µs':>10} {'KB':>7} "
          f"{'events':>7} {'kernels':>7} {'lanes':>5} {'flows':>6}")
    for r in rows:
        if r["status"] != "ok":
            extra = r.get("error", "")
            print(f"{r['name'][:58]:58} {r['status']:8} {r.get('wall_s', 0):7.1f} {extra[:80]}")
            continue
        print(f"{r['name'][:58]:58} {'ok':8} {r['wall_s']:7.1f} {r['profiled_us']:10.1f} {r['unprofiled_us']:10.1f} "
              f"{r['trace_kb']:7.1f} {r['events']:7d} {r['kernels']:7d} {r['gpu_lanes']:5d} {r['flows']:6d}")
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "failed", "skipped")}
    print(f"\n{counts['ok']} recorded, {counts['failed']} failed, {counts['skipped']} skipped")


def make_tar(out: Path, files: list[str], tar_path: Path) -> None:
    """This session's traces and the manifest, flat, in one .tar.gz (extract into lab/samples/)."""
    tar_path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tar_path, "w:gz") as tar:
        for name in [*files, "manifest.json"]:
            tar.add(out / name, arcname=name)
    size = tar_path.stat().st_size
    print(f"wrote {tar_path} ({size / 2**20:.2f} MB, {len(files)} traces + manifest.json)")
    if size > TAR_WARN_BYTES:
        print(f"warning: {tar_path} is over {TAR_WARN_BYTES / 2**20:.0f} MB; the GPU box returns at most 16 MB per file")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for traces + manifest.json")
    parser.add_argument("--only", action="append", default=[],
                        help="record only runs whose file stem contains this text (repeatable, or comma-separated)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (dimensions / 64): for testing")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="start no new run after this many seconds (the rest are listed as skipped)")
    parser.add_argument("--tar", type=Path, default=None, help="also pack the new traces + manifest into this .tar.gz")
    parser.add_argument("--list", action="store_true", help="print the grid and exit")
    args = parser.parse_args(argv)

    only = [o.strip() for arg in args.only for o in arg.split(",") if o.strip()]
    items = select(build_grid(args.device, quick=args.quick), only, args.device)
    if args.list:
        for item in items:
            print(f"{stem_of(item, args.device):58} lessons={','.join(item.lessons) or '-'}")
        return 0
    if not items:
        print(f"no run matches --only {only}; see --list", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    written, rows = record(items, args.out, kind=args.device, budget_s=args.budget_s)
    print_table(rows)
    if args.tar is not None:
        make_tar(args.out, written, args.tar)
    # Exit 0 when something was recorded: failures are data (listed in the manifest).
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())

"""The lab's TensorBoard views against the removed plugin's own code, trace by trace.

    git clone https://github.com/pytorch/kineto && git -C kineto checkout 041e7ce9^   # before its removal
    python scripts/check_tb_plugin.py --plugin kineto/tb_plugin tests/data/groundtruth/*/*.json.gz lab/samples/*.json.gz

Each trace is given to the plugin's ``RunProfileData`` with its ``gpu_user_annotation`` rows
removed (lab/analysis/step_time.py says why), and compared with ``step_time``, ``kernel_view``
and ``module_view`` on the same JSON: per step and category (µs), per kernel name (calls,
durations, "Tensor Cores used" by the plugin's list, occupancy, blocks per SM), per module
(occurrences, host and device totals and selfs). Prints one line a trace and the largest
deviations; a known plugin bug is named where it decides the difference (its categories not
summing to the step once the higher ones cover a whole step; runtime calls without External id
attached to the first module). Needs pandas and numpy, not tensorboard.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lab.analysis import STEP_TIME_CATEGORIES, kernel_view, module_view, step_time  # noqa: E402
from lab.analysis.step_time import column_of  # noqa: E402
from lab.trace.load import load_trace  # noqa: E402


def plugin_figures(raw: bytes):
    from torch_tb_profiler.profiler import module_op
    from torch_tb_profiler.profiler.data import RunProfileData

    p = RunProfileData.from_json("worker", 0, json.loads(raw))
    modules = {}

    def walk(stats, path):
        for s in stats:
            modules[" › ".join((*path, s.name))] = s
            walk(s.children, (*path, s.name))

    walk(module_op.aggegate_module_view(p.tid2tree, p.events) or [], ())
    return p, modules


def compare(path: Path) -> dict:
    doc = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "gpu_user_annotation"]
    raw = json.dumps(doc).encode()
    p, plugin_modules = plugin_figures(raw)
    trace = load_trace(raw)
    out: dict = {"trace": str(path)}
    st = step_time(trace)
    mine = st.steps[[f"{column_of(c)}_us" for c in STEP_TIME_CATEGORIES] + ["step_us"]].to_numpy()
    theirs = np.array([c.costs for c in p.steps_costs])
    if mine.shape == theirs.shape:
        overcount = np.abs(theirs[:, :8].sum(axis=1) - theirs[:, 8]) > 0.01
        out["steps"] = len(mine)
        out["step_dev_us"] = float(np.abs(mine - theirs)[~overcount].max()) if (~overcount).any() else 0.0
        out["plugin_overcounted_steps"] = int(overcount.sum())
    else:
        out["step_shape"] = f"lab {mine.shape[0]} steps, plugin {theirs.shape[0]}"
    kv = kernel_view(trace)
    if p.kernel_stat is not None:
        ks, got = p.kernel_stat, kv.by_name.set_index("name")
        pairs = [("count", "calls"), ("sum", "total_us"), ("mean", "mean_us"), ("max", "max_us"), ("min", "min_us"),
                 ("blocks_per_sm", "blocks_per_sm"), ("occupancy", "occupancy_pct")]
        out["kernels"] = len(ks)
        out["kernel_dev"] = max(float(np.abs(ks[a].astype(float) - got.loc[ks.index, b].astype(float)).max())
                                for a, b in pairs)
        out["tc_plugin_rule_equal"] = bool((ks["tc_used"] == got.loc[ks.index, "tensor_cores_plugin"]).all())
    if plugin_modules:
        rows = module_view(trace).rows.set_index("path")
        pairs = [("occurences", "occurrences"), ("host_duration", "host_total_us"),
                 ("self_host_duration", "host_self_us"), ("device_duration", "device_total_us"),
                 ("self_device_duration", "device_self_us")]
        out["modules"] = len(plugin_modules)
        out["module_paths_equal"] = list(plugin_modules) == list(rows.index)
        devs = {b: max(abs(getattr(s, a) - rows.loc[k, b]) for k, s in plugin_modules.items()) for a, b in pairs}
        out["module_dev_us"] = {k: round(float(v), 3) for k, v in devs.items()}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plugin", required=True, help="the tb_plugin directory (holds torch_tb_profiler/)")
    ap.add_argument("traces", nargs="+", type=Path)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(args.plugin).resolve()))
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    results = []
    for path in args.traces:
        try:
            results.append(compare(path))
        except Exception as exc:  # noqa: BLE001 - the plugin fails on some traces: say which
            results.append({"trace": str(path), "plugin_failed": f"{type(exc).__name__}: {exc}"[:200]})
        print(json.dumps(results[-1]), flush=True)
    steps = [r for r in results if "step_dev_us" in r]
    kernels = [r for r in results if "kernel_dev" in r]
    mods = [r for r in results if "modules" in r]
    print(f"step time: {len(steps)} traces, {sum(r['steps'] for r in steps)} steps, max deviation "
          f"{max((r['step_dev_us'] for r in steps), default=0):.3f} µs where the plugin's categories sum to the "
          f"step; {sum(r['plugin_overcounted_steps'] for r in steps)} steps where they do not (plugin bug); "
          f"{sum('step_shape' in r for r in results)} traces with other step counts, "
          f"{sum('plugin_failed' in r for r in results)} the plugin could not read")
    print(f"kernels: {len(kernels)} traces, {sum(r['kernels'] for r in kernels)} kernel names, max deviation "
          f"{max((r['kernel_dev'] for r in kernels), default=0):.2e}; plugin's Tensor-Core rule equal on "
          f"{sum(r['tc_plugin_rule_equal'] for r in kernels)}")
    print(f"modules: {len(mods)} traces, hierarchy equal on {sum(r['module_paths_equal'] for r in mods)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the lab predicts a fix would save, against the program recorded with the fix applied.

    python bench/bench_whatif.py            # tests/data/explain: H200 pairs (scripts/record_explain_programs.py)
    python bench/bench_whatif.py heldout    # tests/data/heldout: pairs recorded after the rules were written

For each pair in the recordings' manifest: the finding the lab gives the base trace for the
cause the fix addresses, its predicted step (the base trace's step minus the saving; for a
one-off, the window minus the saving), the fixed trace's step as the lab measures it, and the
truth without the profiler (``truth.median_step_ms``: each step alone, synchronised;
``loop_ms_per_step``: back to back) for the saving. Prints a Markdown table; no figure is
edited by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.analysis import analyze  # noqa: E402
from lab.explain import explain  # noqa: E402
from lab.judge import judge_trace  # noqa: E402
from lab.measure import measure  # noqa: E402
from lab.trace import load_trace  # noqa: E402

DATA = ROOT / "tests" / "data" / "explain"
# The rule whose finding a pair's fix answers (the recorder names the fix, the lab names rules).
FIX_RULE = {"input_bound": "input_pipeline", "compile_in_window": "compilation", "adam_per_param": "optimizer_loop",
            "sync_in_loop": "sync_waits", "copies_pageable": "pageable_copies", "fp32_gemm": "tf32_gemms",
            "launch_bound": "launch_bound", "attention_eager": "attention_written_out",
            "decode_kv_cache": "slow_host_op",
            # tests/data/heldout (scripts/record_heldout_programs.py)
            "mask_indexing": "tf32_gemms", "empty_cache_each_step": "allocator_calls",
            "collate_in_python": "input_pipeline", "layernorm_by_hand": "below_roof", "vit_fp32": "tf32_gemms",
            "sleepy_logger": "host_unrecorded", "item_in_forward": "sync_waits", "cpu_positions": "slow_host_op",
            "clip_per_param": "launch_bound", "small_uploads": "launch_bound",
            "loader_restarted": "input_pipeline", "metric_on_host": "host_unrecorded",
            "gemm_unaligned": "gemm_below_roof", "attention_by_hand": "attention_written_out",
            "checkpoint_each_step": "host_unrecorded"}


def pair_rows(folder: Path = DATA) -> list[dict]:
    manifest = json.loads((folder / "manifest.json").read_text())
    truth = {e["stem"]: e["truth"] for e in manifest["entries"]}
    out = []
    for pair in manifest["pairs"]:
        base, fixed = pair["base"], pair["fixed"]
        explained, judged = {}, {}
        for stem in (base, fixed):  # as the page judges it: the analysed trace, with its context
            trace = load_trace((folder / f"{stem}.json.gz").read_bytes())
            analysis = analyze(trace)
            explained[stem] = explain(measure(trace, analysis=analysis))
            judged[stem] = judge_trace(trace, analysis, explained[stem])
        rule = FIX_RULE[base]
        finding = next((f for f in judged[base].findings if f.rule == rule), None)
        a, b = explained[base].attribution, explained[fixed].attribution
        once = finding is not None and finding.scope == "once"
        base_us = float(a.steps["wall_us"].sum()) if once else a.step_us
        fixed_us = float(b.steps["wall_us"].sum()) if once else b.step_us
        saving = finding.saving_us if finding is not None else float("nan")
        t_base, t_fixed = truth[base].get("median_step_ms"), truth[fixed].get("median_step_ms")
        out.append({"base": base, "fixed": fixed, "fix": pair["fix"], "rule": rule, "fired": finding is not None,
                    "scope": "window" if once else "step", "base_us": base_us, "predicted_us": base_us - saving,
                    "fixed_us": fixed_us, "saving_us": saving, "measured_saving_us": base_us - fixed_us,
                    "truth_saving_us": (t_base - t_fixed) * 1e3 if t_base and t_fixed else float("nan")})
    return out


def _ms(us: float) -> str:
    return f"{us / 1e3:,.2f}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = ROOT / "tests" / "data" / args[0] if args else DATA
    print("| base → fixed (fix) | finding | saving predicted (ms) | measured: base − fixed, profiled (ms) | error |"
          " measured without the profiler (ms) | error | step predicted / fixed, profiled (ms) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in pair_rows(folder):
        err = 100 * (r["saving_us"] - r["measured_saving_us"]) / r["measured_saving_us"]
        what = f"{r['rule']}{'' if r['fired'] else ' (did not fire)'}"
        if r["scope"] == "window":  # a one-off: the window's saving; the truth's per-step median does not hold it
            truth, err_t, what = "–", "–", what + " (once, whole window)"
        else:
            truth = _ms(r["truth_saving_us"])
            err_t = f"{100 * (r['saving_us'] - r['truth_saving_us']) / r['truth_saving_us']:+.0f} %"
        print(f"| {r['base']} → {r['fixed']} ({r['fix']}) | {what} | {_ms(r['saving_us'])} | "
              f"{_ms(r['measured_saving_us'])} | {err:+.0f} % | {truth} | {err_t} | "
              f"{_ms(r['predicted_us'])} / {_ms(r['fixed_us'])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

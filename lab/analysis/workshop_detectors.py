"""The lesson checks of the workshop lessons (issue 23): one detector per lesson, added to
``signals.DETECTORS``. Each reads its figures from ``lab.analysis.figures`` (one definition each) and
says, on a CPU trace, when the lesson's effect is a GPU one (``expected=False``).
"""

from __future__ import annotations

import math

from lab.analysis import figures as fig
from lab.analysis.signal_types import Run, Signal
from lab.units import fmt_us

__all__ = ["WORKSHOP_DETECTORS"]

# A launch delay "grows" when the last recorded step's is at least this many times the first's,
# and stays "flat" within this factor (H200: 13.9 → 812 µs without a sync, 17 → 12 µs with one).
DELAY_GROWTH = 3.0
_ON_GPU_ONLY = "a CPU run has no launch queue: open the H200 recording"


def _gpu(runs: list[Run]) -> bool:
    return all(r.trace.has_gpu for r in runs)


def _delays_text(delays: list[float]) -> str:
    return " → ".join(fmt_us(d) for d in delays) or "no kernels"


def _launch_overlap(runs: list[Run]) -> list[Signal]:
    free, synced = runs
    if not _gpu(runs):
        text = f"steps {fmt_us(fig.step_us(free))} vs {fmt_us(fig.step_us(synced))}; {_ON_GPU_ONLY}"
        return [Signal("the CPU runs ahead of the GPU", False, text, expected=False)]
    d_free, d_sync = fig.launch_delays_us(free), fig.launch_delays_us(synced)
    grows = len(d_free) >= 2 and d_free[-1] >= DELAY_GROWTH * max(d_free[0], 1e-3)
    flat = len(d_sync) >= 2 and max(d_sync) <= DELAY_GROWTH * max(min(d_sync), 1e-3)
    share = fig.call_share_pct(synced, "cudaDeviceSynchronize")
    return [
        Signal(
            f"without a sync the launch delay grows step after step ({free.name})",
            grows,
            f"first kernel of each step: {_delays_text(d_free)} after its launch",
        ),
        Signal(f"with a sync it stays short ({synced.name})", flat, f"{_delays_text(d_sync)}"),
        Signal(
            "cudaDeviceSynchronize holds the synced steps' CPU time",
            share > 50.0,
            f"{share:.0f} % of the steps' CPU time is spent waiting in it",
        ),
    ]


def _calls(runs: list[Run]) -> list[Signal]:
    loop, vec = runs
    mul_loop, mul_vec = fig.calls_per_step(loop, "aten::mul"), fig.calls_per_step(vec, "aten::mul")
    select = fig.calls_per_step(loop, "aten::select")
    ratio = fig.step_us(loop) / fig.step_us(vec)
    return [
        Signal(
            "the loop calls aten::mul once per row, the vectorized step once",
            mul_vec == 1 and mul_loop > 1,
            f"aten::mul per step: {mul_loop:.0f} vs {mul_vec:.0f}; aten::select {select:.0f} (three per row)",
        ),
        Signal(
            "the vectorized step is faster",
            ratio > 1.0,
            f"{fmt_us(fig.step_us(loop))} vs {fmt_us(fig.step_us(vec))} per step ({ratio:.0f}×)",
        ),
    ]


def _host_sync(runs: list[Run]) -> list[Signal]:
    each, once = runs
    child = fig.child_op(each, "aten::item")
    out = [
        Signal(
            "aten::item runs aten::_local_scalar_dense",
            child == "aten::_local_scalar_dense",
            f"aten::item's child: {child or 'none'}",
        )
    ]
    if not _gpu(runs):
        return out + [
            Signal(
                "each .item() waits for the GPU",
                False,
                "a CPU tensor's value is already on the host: no copy, no wait",
                expected=False,
            )
        ]
    s_each = fig.calls_per_step(each, "cudaStreamSynchronize")
    s_once = fig.calls_per_step(once, "cudaStreamSynchronize")
    gemms, _ = fig.gemms_per_step(each)
    return out + [
        Signal(
            "the .item() run waits once per matmul, the read-once run once per step",
            s_each == gemms and s_once == 1,
            f"cudaStreamSynchronize per step: {s_each:.0f} vs {s_once:.0f} ({gemms:.0f} matmuls a step)",
        ),
        _read_once_faster(each, once, gemms),
    ]


def _read_once_faster(each: Run, once: Run, gemms: float) -> Signal:
    """Information, not a check: whether dropping the syncs paid off depends on who waits for whom."""
    t_each, t_once = fig.step_us(each), fig.step_us(once)
    kernel_us = fig.gemm_kernel_us(once)
    host_us = float(once.analysis.steps["cpu_us"].median()) / max(gemms, 1.0)
    evidence = (
        f"{fmt_us(t_each)} with .item() vs {fmt_us(t_once)} reading once per step; GPU busy "
        f"{each.analysis.utilization.active_busy_pct:.0f} % vs {once.analysis.utilization.active_busy_pct:.0f} %"
    )
    if kernel_us < host_us:
        evidence += (
            f": a GEMM kernel takes {fmt_us(kernel_us)} and the host {fmt_us(host_us)} per matmul, so the "
            "GPU waits for the host in both runs and there is no queue for a sync to drain"
        )
    return Signal("reading once per step is faster", t_once < t_each, evidence, expected=t_once < t_each)


def _cuda_graphs(runs: list[Run]) -> list[Signal]:
    eager, graphed = runs
    if not _gpu(runs):
        return [
            Signal(
                "one cudaGraphLaunch replays the step",
                False,
                "a CPU has no CUDA graphs: the 'graphed' run is eager here; open the H200 recording",
                expected=False,
            )
        ]
    k_eager = len(fig.kernel_step_index(eager)[0]) / fig.step_count(eager)
    k_graph = len(fig.kernel_step_index(graphed)[0]) / fig.step_count(graphed)
    launches = fig.calls_per_step(graphed, "cudaGraphLaunch")
    return [
        Signal(
            "the graphed step is one cudaGraphLaunch, no cudaLaunchKernel",
            launches == 1 and fig.calls_per_step(graphed, "cudaLaunchKernel") == 0,
            f"{launches:.0f} cudaGraphLaunch per step",
        ),
        Signal(
            "the GPU still runs every kernel", k_graph == k_eager, f"{k_eager:.0f} vs {k_graph:.0f} kernels per step"
        ),
        Signal(
            "the graphed step is faster",
            fig.step_us(graphed) < fig.step_us(eager),
            f"{fmt_us(fig.step_us(eager))} vs {fmt_us(fig.step_us(graphed))} per step",
        ),
    ]


def _training_step(runs: list[Run]) -> list[Signal]:
    (run,) = runs
    names = set(run.analysis.key_averages["name"].astype(str))
    backward = sorted(n.split(": ", 1)[1] for n in names if n.startswith("autograd::engine::evaluate_function: "))
    gemms, unit = fig.gemms_per_step(run)
    return [
        Signal(
            "backward ops appear as autograd::engine::evaluate_function rows",
            bool(backward),
            ", ".join(backward) or "none",
        ),
        Signal(
            "five matrix multiplications per step: 2 forward, 3 backward", gemms == 5, f"{gemms:.0f} {unit} per step"
        ),
        Signal("the optimizer labels itself", "Optimizer.step#AdamW.step" in names, "Optimizer.step#AdamW.step"),
    ]


def _pinned_copies(runs: list[Run]) -> list[Signal]:
    pageable, pinned = runs
    if not _gpu(runs):
        return [
            Signal(
                "pinned copies run faster",
                False,
                "host to host on a CPU: no DMA, nothing to pin; open the H200 recording",
                expected=False,
            )
        ]
    bw_page, bw_pin = fig.copy_gb_per_s(pageable), fig.copy_gb_per_s(pinned)
    r_page, r_pin = fig.copy_call_ratio(pageable), fig.copy_call_ratio(pinned)
    return [
        Signal(
            "the trace names the host memory of each copy",
            any("Pageable" in n for n in fig.copy_names(pageable))
            and any("Pinned" in n for n in fig.copy_names(pinned)),
            f"{', '.join(fig.copy_names(pageable))}; {', '.join(fig.copy_names(pinned))}",
        ),
        Signal("the pinned copy is faster", bw_pin > bw_page, f"{bw_page:.1f} vs {bw_pin:.1f} GB/s"),
        Signal(
            "from pageable memory cudaMemcpyAsync holds the CPU for the whole copy",
            r_page >= 0.9 and r_pin < 0.1,
            f"its CPU time over the copy's: {r_page:.2f} (pageable) vs {r_pin:.3f} (pinned)",
        ),
    ]


def _memory_peak(runs: list[Run]) -> list[Signal]:
    (run,) = runs
    if run.analysis.memory is None:
        return [Signal("profile_memory records allocations", False, "no [memory] records in this trace")]
    label, units = fig.memory_peak_label(run), fig.memory_rise_units(run)
    return [
        Signal("the peak is in the step's last label (h, a and y alive)", label == "down", f"the peak is in '{label}'"),
        Signal(
            "three tensors of the step are alive at the peak",
            round(units) == 3,
            f"peak − the step's starting level = {units:.2f} × its largest allocation",
        ),
    ]


def _profiler_overhead(runs: list[Run]) -> list[Signal]:
    loop, gemm = runs
    a, b = fig.overhead_ratio(loop), fig.overhead_ratio(gemm)
    if math.isnan(a) or math.isnan(b):  # no timing (an upload)
        return [Signal("profiled vs unprofiled timing", False, "these runs carry no timing")]
    present = a > b
    evidence = f"profiled / unprofiled time per step: {a:.2f}× (row loop) vs {b:.2f}× (GEMM)"
    if not present and not _gpu(runs):
        # A wall-clock CPU step of a large GEMM on a shared host moves by more than the profiler's cost.
        evidence += "; on a busy CPU host the GEMM's wall-clock steps vary more than the profiler costs"
    return [Signal("the profiler costs the many-op loop more than the one GEMM", present, evidence,
                   expected=present or _gpu(runs))]


def _self_total_shapes(runs: list[Run]) -> list[Signal]:
    (run,) = runs
    share = fig.self_share_pct(run, "aten::matmul")
    shapes = fig.shape_rows(run, "aten::mm")
    per_step = {calls / fig.step_count(run) for _, calls, _ in shapes}
    return [
        Signal(
            "aten::matmul's Self CPU is a small part of its Total",
            share < 50.0,
            f"Self CPU {share:.0f} % of its CPU total: the rest is aten::mm",
        ),
        Signal(
            "grouped by shape, aten::mm splits into three rows of one call per step",
            len(shapes) == 3 and per_step == {1.0},
            "; ".join(f"{s}: {t:,.0f} µs" for s, _, t in shapes),
        ),
    ]


WORKSHOP_DETECTORS = {
    "launch_overlap": _launch_overlap,
    "calls": _calls,
    "host_sync": _host_sync,
    "cuda_graphs": _cuda_graphs,
    "training_step": _training_step,
    "pinned_copies": _pinned_copies,
    "memory_peak": _memory_peak,
    "profiler_overhead": _profiler_overhead,
    "self_total_shapes": _self_total_shapes,
}

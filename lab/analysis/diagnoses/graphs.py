"""CUDA graph replays: one ``cudaGraphLaunch`` starts a whole recorded sequence of kernels.

Every kernel of a replay carries the graph launch's correlation id, so a per-kernel "launch
delay" (kernel start − launch start) grows along the replay — 222–406 µs for kernels that
were never individually launched. The meaningful delay is per replay: the first
kernel's start − the cudaGraphLaunch start. ``graph_replay_rows`` names the GPU rows that
belong to replays so per-kernel launch statistics can leave them out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.analysis.columns import gpu_activity_mask
from lab.analysis.diagnoses.common import gpu_busy, mask_in, mask_where, merge_intervals, pct
from lab.analysis.diagnoses.steps import StepSpans, step_spans
from lab.trace import Trace
from lab.vocab import LAUNCH_CATS

__all__ = ["GRAPH_LAUNCH_PREFIXES", "GraphReplays", "find_graph_replays", "graph_launch_rows", "graph_replay_rows"]

# Runtime and driver spellings (CUPTI appends a version suffix on some releases: cudaGraphLaunch_v10000).
GRAPH_LAUNCH_PREFIXES = ("cudaGraphLaunch", "cuGraphLaunch")


@dataclass(frozen=True)
class GraphReplays:
    """Graph launches and what each replay ran; delays are per replay, never per kernel."""

    launches: int  # graph launch calls on the host
    replays: int  # launches whose GPU work is in the trace
    activities: int  # kernels, memcpys and memsets run by replays
    kernels_per_replay_median: float
    kernels_per_replay_min: int
    kernels_per_replay_max: int
    launch_delay_median_us: float  # first activity start − cudaGraphLaunch start, per replay
    launch_delay_max_us: float
    replay_span_median_us: float  # first activity start → last activity end, per replay
    launch_call_median_us: float  # host time inside one cudaGraphLaunch
    graph_kernel_pct: float  # replayed kernels / all kernels (count)
    graph_busy_pct: float  # GPU busy time inside replays / all GPU busy time
    replays_per_step: float | None  # None when the trace has no steps
    severity: str = "info"  # replays are not a problem: they are named so they are read right


def graph_launch_rows(trace: Trace) -> np.ndarray:
    ev = trace.events
    return np.flatnonzero(mask_in(ev["cat"], LAUNCH_CATS)
                          & mask_where(ev["name"], lambda n: n.startswith(GRAPH_LAUNCH_PREFIXES)))


def _replay_pairs(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(launch_row, gpu_row) for every GPU activity a graph launch started, by launch then start."""
    launches = graph_launch_rows(trace)
    flows = trace.flows
    lrows, grows = flows["launch_row"].to_numpy(), flows["gpu_row"].to_numpy()
    if not len(launches):  # no graph launched: no pairs (without the tests over every flow)
        return lrows[:0], grows[:0]
    keep = np.isin(lrows, launches) & gpu_activity_mask(trace)[grows]
    lrows, grows = lrows[keep], grows[keep]
    order = np.lexsort((trace.events["ts_us"].to_numpy()[grows], lrows))
    return lrows[order], grows[order]


def graph_replay_rows(trace: Trace) -> np.ndarray:
    """Rows of ``Trace.events`` (GPU activity) that CUDA graph replays ran, sorted.

    Per-kernel launch delays must skip these rows; ``GraphReplays.launch_delay_*`` carries the
    per-replay delay instead.
    """
    return np.unique(_replay_pairs(trace)[1])


def _per_step(launch_ts: np.ndarray, steps: StepSpans) -> float | None:
    """Replays launched inside the steps, per step (warm-up replays before them do not count)."""
    if not len(steps):
        return None
    inside = (launch_ts >= steps.start_us[0]) & (launch_ts < steps.period_end_us[-1])
    return float(inside.sum()) / len(steps)


def find_graph_replays(trace: Trace, *, steps: StepSpans | None = None) -> GraphReplays | None:
    """CUDA graph replays in the trace; None when it has none."""
    launches = graph_launch_rows(trace)
    lrows, grows = _replay_pairs(trace)
    if not len(grows):
        return None
    ev = trace.events
    ts, dur = ev["ts_us"].to_numpy(), ev["dur_us"].to_numpy()
    replay, first = np.unique(lrows, return_index=True)
    count = np.diff(np.append(first, len(lrows)))
    last_end = np.maximum.reduceat(ts[grows] + dur[grows], first)
    delay = ts[grows[first]] - ts[replay]
    kernels = mask_in(ev["cat"], ("kernel",))
    busy = gpu_busy(trace)
    gs, ge = merge_intervals(ts[grows], ts[grows] + dur[grows])
    steps = steps if steps is not None else step_spans(trace)
    return GraphReplays(
        launches=len(launches), replays=len(replay), activities=len(grows),
        kernels_per_replay_median=float(np.median(count)), kernels_per_replay_min=int(count.min()),
        kernels_per_replay_max=int(count.max()),
        launch_delay_median_us=float(np.median(delay)), launch_delay_max_us=float(delay.max()),
        replay_span_median_us=float(np.median(last_end - ts[grows[first]])),
        launch_call_median_us=float(np.median(dur[launches])),
        graph_kernel_pct=pct(float(kernels[grows].sum()), float(kernels.sum())),
        graph_busy_pct=pct(float((ge - gs).sum()), busy.busy_us),
        replays_per_step=_per_step(ts[replay], steps),
    )

"""Stage 4 of ``load_trace``: CPU launch ↔ GPU activity pairs (``Trace.flows``).

Two sources, because either may be missing: correlation ids in args, and ``ac2g`` flow
events ("s" on the launch, "f" on the GPU activity, same id, located by lane and ts). Each GPU
row gets one launch; where both sources speak for a row, the ac2g pair wins.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lab.trace.columns import grouped_keys
from lab.trace.lanes import Lane
from lab.trace.values import MAX_ABS_US, id_int, relative_us

__all__ = ["build_flows"]


def build_flows(ev: dict, flows: dict | None, start_ts: float,
                lanes: dict[tuple[str, str], Lane]) -> tuple[pd.DataFrame, int]:
    """Launch ↔ GPU pairs, and the number of flow events dropped as unusable. ``ev`` holds the
    sorted event columns as numpy arrays (is_launch, is_gpu, lane_order, ts_us, correlation),
    ``flows`` the ac2g flow events' columns (``columns.FlowParts.columns``)."""
    ts, corr = ev["ts_us"], ev["correlation"]
    launch_of = np.full(len(ts), -1, dtype=np.int64)
    flow_id_of = np.full(len(ts), -1, dtype=np.int64)
    _link_by_correlation(ev, launch_of)
    # Kineto writes both sources and they agree, so flows are matched only for GPU rows still
    # unlinked (traces without correlation args, or hand-made ones).
    skipped = 0 if flows is None else _link_by_ac2g(ev, flows, start_ts, lanes, launch_of, flow_id_of)

    gpu_rows = np.nonzero(launch_of >= 0)[0]
    launch_rows = launch_of[gpu_rows]
    order = np.lexsort((gpu_rows, launch_rows))
    gpu_rows, launch_rows = gpu_rows[order], launch_rows[order]
    # The GPU event's own correlation; else its launch's; else the flow id.
    flow_corr = corr[gpu_rows]
    flow_corr = np.where(flow_corr < 0, corr[launch_rows], flow_corr)
    flow_corr = np.where(flow_corr < 0, flow_id_of[gpu_rows], flow_corr)
    frame = pd.DataFrame({
        "correlation": np.asarray(flow_corr, np.int64), "launch_row": np.asarray(launch_rows, np.int64),
        "gpu_row": np.asarray(gpu_rows, np.int64),
        "delay_us": np.asarray(np.round(ts[gpu_rows] - ts[launch_rows], 3), np.float64),
    })  # fmt: skip
    return frame, skipped


def _link_by_correlation(ev: dict, launch_of: np.ndarray) -> None:
    """For each GPU row, the latest launch with its correlation that starts no later than it
    (else the first one): ids repeat only across processes or graphs."""
    ts, corr = ev["ts_us"], ev["correlation"]
    launch_idx = np.nonzero(ev["is_launch"] & (corr >= 0))[0]
    gpu_idx = np.nonzero(ev["is_gpu"] & (corr >= 0))[0]
    if not (len(launch_idx) and len(gpu_idx)):
        return
    ids = np.unique(corr[launch_idx])
    l_rank = np.searchsorted(ids, corr[launch_idx])
    g_rank = np.searchsorted(ids, corr[gpu_idx])
    known = (g_rank < len(ids)) & (ids[np.minimum(g_rank, len(ids) - 1)] == corr[gpu_idx])
    g_rank, g_rows = g_rank[known], gpu_idx[known]
    l_key, g_key, g_first = grouped_keys(
        (l_rank, ts[launch_idx]), (g_rank, ts[g_rows]), (g_rank, np.zeros(len(g_rank)))
    )
    l_sort = np.argsort(l_key, kind="stable")
    l_key, l_rank_s, l_rows = l_key[l_sort], l_rank[l_sort], launch_idx[l_sort]
    before = np.searchsorted(l_key, g_key, side="right") - 1
    ok_before = (before >= 0) & (l_rank_s[np.maximum(before, 0)] == g_rank)
    first = np.searchsorted(l_key, g_first, side="left")
    pick = np.where(ok_before, before, np.minimum(first, len(l_key) - 1))
    launch_of[g_rows] = l_rows[pick]


def _link_by_ac2g(ev: dict, flows: dict, start_ts: float, lanes: dict, launch_of: np.ndarray,
                  flow_id_of: np.ndarray) -> int:
    """ac2g flow events, located on the launch / GPU row with the same lane and start, link the
    GPU rows correlation left unlinked. Returns the number of unusable flow events."""
    is_gpu = ev["is_gpu"]
    f_ts, is_start = flows["ts"], flows["is_start"]
    (pid_c, _), (tid_c, _), (id_c, id_u) = flows["pid"], flows["tid"], flows["id"]
    usable = (pid_c >= 0) & (tid_c >= 0) & (id_c >= 0) & np.isfinite(f_ts)
    skipped = int((~usable).sum())
    unlinked = np.nonzero(is_gpu & (launch_of < 0))[0]
    if len(unlinked) < int(is_gpu.sum()):  # only the flows that can reach those rows
        ends_near = usable & ~is_start & _near(f_ts, ev["ts_us"][unlinked], start_ts)
        usable &= ends_near | (is_start & np.isin(id_c, id_c[ends_near]))
    if not (len(unlinked) and usable.any()):
        return skipped
    f_lane = _flow_lanes(flows, usable, lanes)
    in_range = np.abs(f_ts) <= MAX_ABS_US  # False for NaN; beyond it, no event sits there
    f_rel = relative_us(np.where(in_range, f_ts, start_ts), start_ts)
    valid = usable & (f_lane >= 0) & in_range & (f_rel >= 0)
    s_ids, s_rows = _last_per_id(id_c, valid & is_start)
    f_ids, f_rows = _last_per_id(id_c, valid & ~is_start)
    common, s_at, f_at = np.intersect1d(s_ids, f_ids, assume_unique=True, return_indices=True)
    if not len(common):
        return skipped
    s_rows, f_rows = s_rows[s_at], f_rows[f_at]
    keys, want_s, want_f = grouped_keys((ev["lane_order"], ev["ts_us"]), (f_lane[s_rows], f_rel[s_rows]),
                                        (f_lane[f_rows], f_rel[f_rows]))
    launch_rows, gpu_rows = _locate(keys, want_s, ev["is_launch"]), _locate(keys, want_f, is_gpu)
    ok = (launch_rows >= 0) & (gpu_rows >= 0)
    launch_of[gpu_rows[ok]] = launch_rows[ok]
    flow_ids = np.array([id_int(i) for i in id_u[common].tolist()], dtype=np.int64)
    flow_id_of[gpu_rows[ok]] = flow_ids[ok]
    return skipped


def _near(flow_ts: np.ndarray, gpu_ts: np.ndarray, start_ts: float) -> np.ndarray:
    """Which flow timestamps fall on one of the given GPU starts (relative µs), to the ns with
    1 ns slack for float rounding: a coarse filter before exact matching."""
    wanted_ns = np.rint(gpu_ts * 1000)
    wanted_ns = np.concatenate([wanted_ns - 1, wanted_ns, wanted_ns + 1])
    in_range = np.abs(flow_ts) <= MAX_ABS_US  # False for NaN
    flow_ns = np.rint((np.where(in_range, flow_ts, start_ts) - start_ts) * 1000)
    return in_range & np.isin(flow_ns, wanted_ns)


def _flow_lanes(flows: dict, usable: np.ndarray, lanes: dict) -> np.ndarray:
    """Lane order of each flow event's (pid, tid); -1 when no complete event has that lane."""
    (pid_c, pid_u), (tid_c, tid_u) = flows["pid"], flows["tid"]
    pair = pid_c.astype(np.int64) * len(tid_u) + tid_c
    pair_u, pair_c = np.unique(np.where(usable, pair, -1), return_inverse=True)
    found = [None if p < 0 else lanes.get((pid_u[p // len(tid_u)], tid_u[p % len(tid_u)])) for p in pair_u.tolist()]
    return np.array([-1 if ln is None else ln.order for ln in found], dtype=np.int64)[pair_c.reshape(-1)]


def _last_per_id(id_c: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.nonzero(mask)[0][::-1]  # last event wins for a repeated id
    ids, first = np.unique(id_c[rows], return_index=True)
    return ids, rows[first]


def _locate(keys: np.ndarray, want: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Row among ``mask`` whose (lane, ts) key equals each wanted key, -1 where none does."""
    rows = np.nonzero(mask)[0]
    if not len(rows):
        return np.full(len(want), -1, dtype=np.int64)
    rows = rows[np.argsort(keys[rows], kind="stable")]
    sorted_keys = keys[rows]
    pos = np.minimum(np.searchsorted(sorted_keys, want), len(rows) - 1)
    return np.where(sorted_keys[pos] == want, rows[pos], -1)

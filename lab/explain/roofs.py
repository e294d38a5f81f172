"""Every op against its roof: FLOPs and bytes from the recorded shapes and dtypes
(``lab.explain.op_work``, the one model), the achieved rate over the op's own GPU time, and its
bound (the one classifier, ``lab.analysis.gemm.bound``).

One row per (op, input shapes, input types) that owns GPU work. An op's GPU time is the sum
of the kernels, copies and memsets launched from inside it (``Links.owner``: the innermost op
around the launch call). A copy's bytes are the ones the trace records for its memcpys where it
has them. Ops whose bytes or FLOPs the model cannot know keep their time but show no rate, and
the ``note`` says why.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lab.analysis.columns import codes, mask_in
from lab.analysis.gemm.bound import (
    LATENCY_BOUND,
    LATENCY_FRACTION,
    LATENCY_IDEAL_US,
    MEMORY_BOUND,
    bound_of,
    pct_of_roof,
)
from lab.analysis.operators import Links
from lab.core.devices import DevicePeak
from lab.explain.attribution import work_classes
from lab.explain.classes import CAUSES
from lab.explain.op_work import op_work
from lab.trace import Trace
from lab.vocab import GPU_ACTIVITY_CATS

__all__ = ["ABOVE_ROOF_PCT", "ROOF_COLUMNS", "op_roofs"]

ROOF_COLUMNS = ("name", "input_dims", "input_type", "op_class", "dtype", "calls", "gpu_us", "us_per_call", "flops",
                "bytes", "tflops", "gbs", "pct_of_roof", "bound", "kernel", "note")
# A rate above the roof cannot have been measured: the model's bytes (an output dtype or a
# broadcast it cannot see) were not what ran. As the GEMM table does, such a figure is not shown.
ABOVE_ROOF_PCT = 110.0


def op_roofs(trace: Trace, *, links: Links, peak: DevicePeak | None, classes: np.ndarray | None = None
             ) -> pd.DataFrame:
    """One row per op (name, shapes, types) that owns GPU work, longest GPU time first.
    ``classes``: ``work_classes(trace, links)`` when the caller has it."""
    ev = trace.events
    gpu = np.flatnonzero(mask_in(ev["cat"], GPU_ACTIVITY_CATS))
    owned = gpu[links.owner[gpu] >= 0]
    if not len(owned):
        return pd.DataFrame({c: [] for c in ROOF_COLUMNS})
    classes = classes if classes is not None else work_classes(trace, links)
    owner = links.owner[owned]
    keys = ("name", "input_dims", "input_type")
    cats = {k: codes(ev[k]) for k in keys}  # integer codes: grouping on them, not on strings
    kernel_codes, kernel_names = codes(ev["name"])
    concrete_codes, concrete_texts = codes(ev["concrete_inputs"])  # the scalars: a convolution's stride, is_causal
    frame = pd.DataFrame({
        "owner": owner, **{k: cats[k][0][owner] for k in keys}, "dur": ev["dur_us"].to_numpy()[owned],
        "kernel": kernel_codes[owned], "cls": classes[owned], "concrete": concrete_codes[owner],
        "copy_bytes": ev["copy_bytes"].to_numpy()[owned],
    })
    frame["group"] = frame.groupby(list(keys), sort=False).ngroup()
    by = frame.groupby("group", sort=False)
    agg = by.agg(name=("name", "first"), input_dims=("input_dims", "first"), input_type=("input_type", "first"),
                 concrete_inputs=("concrete", "first"),
                 calls=("owner", "nunique"), gpu_us=("dur", "sum"),
                 copy_bytes=("copy_bytes", "sum"), copies_known=("copy_bytes", "count"))
    per_class = frame.groupby(["group", "cls"], sort=False)["dur"].sum().reset_index()
    agg["cls"] = per_class.loc[per_class.groupby("group")["dur"].idxmax()].set_index("group")["cls"]  # by GPU time
    agg.loc[agg["copies_known"] == 0, "copy_bytes"] = np.nan
    for k in keys:
        agg[k] = cats[k][1][agg[k].to_numpy()]
    agg["concrete_inputs"] = concrete_texts[agg["concrete_inputs"].to_numpy()]
    per_kernel = frame.groupby(["group", "kernel"], sort=False)["dur"].sum().reset_index()
    main = per_kernel.loc[per_kernel.groupby("group")["dur"].idxmax()].set_index("group")["kernel"]
    main = pd.Series(kernel_names[main.to_numpy()], index=main.index)
    rows = []
    for g, r in agg.iterrows():
        cls, calls, kernel = CAUSES[int(r["cls"])].key, int(r["calls"]), str(main[g])
        work = op_work(str(r["name"]), str(r["input_dims"]), str(r["input_type"]), cls, kernel=kernel,
                       concrete_text=str(r["concrete_inputs"]))
        flops, nbytes, dtype, note = work.flops, work.bytes, work.dtype, work.note
        if cls == "copy" and np.isfinite(r["copy_bytes"]):
            nbytes, note = float(r["copy_bytes"]) / calls, ""
        rows.append({"name": r["name"], "input_dims": r["input_dims"], "input_type": r["input_type"], "op_class": cls,
                     "dtype": dtype, "calls": calls, "gpu_us": float(r["gpu_us"]), "flops": flops * calls,
                     "bytes": nbytes * calls, "kernel": kernel, "note": note})
    out = pd.DataFrame(rows)
    out["us_per_call"] = out["gpu_us"] / out["calls"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["tflops"] = out["flops"] / out["gpu_us"] / 1e6
        out["gbs"] = out["bytes"] / out["gpu_us"] / 1e3
    out["pct_of_roof"], out["bound"] = _against_roof(out, peak)
    return out.sort_values("gpu_us", ascending=False, kind="stable").reset_index(drop=True)[list(ROOF_COLUMNS)]


def _against_roof(out: pd.DataFrame, peak: DevicePeak | None) -> tuple[np.ndarray, np.ndarray]:
    if peak is None or not len(out):
        return np.full(len(out), np.nan), np.full(len(out), "", dtype=object)
    peaks = np.array([peak.peak_tflops(d) or np.nan for d in out["dtype"]], dtype=float)
    bw = float(peak.memory_bandwidth_gbs)
    flops, nbytes = out["flops"].to_numpy(float), out["bytes"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = flops / nbytes
    memory_only = out["op_class"].isin(["copy", "reduction"]).to_numpy() & np.isfinite(nbytes)
    pct = pct_of_roof(out["tflops"].to_numpy(float), intensity, peaks, bw)
    bound = bound_of(out["tflops"].to_numpy(float), intensity, peaks, bw, flops=flops / out["calls"].to_numpy(float))
    # Copies and reductions: bandwidth alone (no compute roof); latency-bound when under a tenth of
    # it and a call would take under LATENCY_IDEAL_US at the roof, as the classifier says for the rest.
    gbs_pct = 100.0 * out["gbs"].to_numpy(float) / bw
    ideal_us = nbytes / out["calls"].to_numpy(float) / (bw * 1e3)
    slow = (gbs_pct < 100.0 * LATENCY_FRACTION) & (ideal_us < LATENCY_IDEAL_US)
    pct = np.where(memory_only, gbs_pct, pct)
    bound = np.where(memory_only, np.where(slow, LATENCY_BOUND, MEMORY_BOUND), bound)
    host_link = out["kernel"].str.contains(r"HtoD|DtoH|Pageable|Pinned", regex=True).to_numpy()
    above = np.isfinite(pct) & (pct > ABOVE_ROOF_PCT)
    out.loc[above, "note"] = "rate above the roof: the model's bytes or FLOPs are not what ran"
    pct = np.where(host_link | above, np.nan, pct)  # a host↔device copy's roof is the host link, not HBM
    bound = np.where(host_link | above, "", bound)
    return pct, bound

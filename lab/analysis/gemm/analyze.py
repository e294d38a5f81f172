"""GEMM efficiency: achieved TFLOP/s (TOPS for int8) of each GEMM against the device's peak.

A GPU kernel is a GEMM by what it is (``lab.analysis.gemm.kinds.is_gemm_kernel``: cuBLAS,
cuBLASLt/nvjet incl. FP8, CUTLASS incl. int8, Triton GEMM templates), whichever op launched it;
its shape comes from the nearest GEMM op of ``GEMM_OP_KINDS`` above it, else from the op that
launched it. The dtype is the one the kernel's name states, refined by the op's input types
(float8 → float8_e4m3fn). A figure above the device's peak is never shown (``GemmFigures``
counts it), nor a rate without a shape (``GemmFigures.notes`` says what to record). Also the
trace's device (name, compute capability, datasheet peak), which the rate is judged by.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.columns import codes, frame, group_ids, mask_in, mask_where, texts
from lab.analysis.diagnoses.graphs import graph_replay_rows
from lab.analysis.gemm.bound import bound_of, pct_of_roof, roof_tflops
from lab.analysis.gemm.kinds import (
    GEMM_OP_KINDS,
    gemm_kernel_dtype,
    gemm_shape,
    is_gemm_kernel,
    is_gemm_op,
    is_not_gemm_op,
)
from lab.analysis.operators import Links, build_links
from lab.core.config import RunConfig
from lab.core.devices import DevicePeak, lookup_peak
from lab.trace.facts import TraceFacts
from lab.trace.load import Trace
from lab.vocab import ELEMENT_BYTES, INPUT_TYPE_DTYPES, rate_unit

__all__ = [
    "ABOVE_PEAK_NOTE", "CONFIG_GEMM_WORKLOADS", "GEMM_COLUMNS", "GRAPH_REPLAY_SOURCE", "GemmFigures", "NO_SHAPE_NOTE",
    "compute_capability", "GEMM_MIN_KERNEL_US", "device_name", "gemm_efficiency", "gemm_figures", "peak_for",
    "typical_gemm",
]  # fmt: skip

# Workloads whose one GEMM is M×K @ K×N, so a RunConfig gives its shape when the trace lacks it.
CONFIG_GEMM_WORKLOADS = ("matmul_add", "linear")
# A fused op (addmm, linear) also reads its bias once.
_BIAS_GEMM_OPS = tuple(name for name, g in GEMM_OP_KINDS.items() if g.bias is not None)

# A GEMM kernel this long is big enough to approach peak; below it, launch and tail effects
# dominate and a low % of peak says little.
GEMM_MIN_KERNEL_US = 100.0

GEMM_COLUMNS = ("op", "kernel", "ts_us", "device", "kernel_us", "kernels_launched", "m", "k", "n", "batch",
                "dtype", "shape_source", "flops", "bytes_moved", "tflops", "peak_tflops", "pct_of_peak",
                "intensity_flops_per_byte", "ridge_flops_per_byte", "roof_tflops", "pct_of_roof", "bound",
                "rate_unit")


# --------------------------------------------------------------------------- the device


def device_name(trace: Trace | TraceFacts) -> str:
    props = trace.meta.device_properties
    return str(props[0].get("name", "")) if props and isinstance(props[0], dict) else ""


def compute_capability(trace: Trace) -> tuple[int, int] | None:
    props = trace.meta.device_properties
    if not props or not isinstance(props[0], dict) or "computeMajor" not in props[0]:
        return None
    return int(props[0]["computeMajor"]), int(props[0].get("computeMinor", 0))


def peak_for(trace: Trace) -> DevicePeak | None:
    """Datasheet peak of the trace's first GPU, via ``lab.core.devices.lookup_peak`` (None if unknown)."""
    name = device_name(trace)
    return lookup_peak(name) if name else None


# --------------------------------------------------------------------------- shapes and dtypes


def _parse_list(text: str):
    """Recorded "Input Dims"/"Input type" text → Python list (None when absent or unreadable)."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return None


def _dtype_of(input_type: str) -> str:
    types = _parse_list(input_type) or []
    for t in types:
        if t in INPUT_TYPE_DTYPES:
            return INPUT_TYPE_DTYPES[t]
    return ""


# --------------------------------------------------------------------------- GEMM efficiency

ABOVE_PEAK_NOTE = "GEMM figure above peak — shape or kernel unrecognised"
# ``shape_source`` of a GEMM kernel a CUDA graph replay ran: no op around its launch has shapes.
GRAPH_REPLAY_SOURCE = "graph replay"
NO_SHAPE_NOTE = "GEMM kernels without a rate"


@dataclass(frozen=True)
class GemmFigures:
    """``gemm_efficiency``'s rows, and what was left out of them.

    A rate above the device's peak cannot have been measured: the shape (or the kernel paired
    with it) was not the one that ran. Such rows are dropped, never shown; ``above_peak``
    counts them and ``notes`` says so.
    """

    rows: pd.DataFrame  # columns GEMM_COLUMNS
    above_peak: int = 0
    above_peak_max_pct: float = float("nan")  # the highest dropped figure, % of its peak
    shapes_recorded: bool | None = None  # the profile's record_shapes, as the trace says

    @property
    def no_shape(self) -> int:
        """Rows whose FLOPs are unknown: no recorded shape (and no recorded flops)."""
        return int(self.rows["flops"].isna().sum()) if len(self.rows) else 0

    @property
    def notes(self) -> tuple[str, ...]:
        notes = []
        if self.no_shape:
            replayed = self.rows["flops"].isna() & (self.rows["shape_source"] == GRAPH_REPLAY_SOURCE)
            if replayed.any():
                notes.append(f"{NO_SHAPE_NOTE}: {int(replayed.sum())} replayed from a CUDA graph (cudaGraphLaunch): "
                             "their ops ran when the graph was captured, so the replay records no shapes "
                             "(record_shapes cannot help); profile the same call without CUDA graphs "
                             "(torch.compile mode 'max-autotune-no-cudagraphs' or 'default') to see its rate")
            unknown = self.rows["flops"].isna() & ~replayed
            no_op = int((unknown & (self.rows["op"].astype(str) == "")).sum())
            with_op = int(unknown.sum()) - no_op
            if with_op:
                ops = ", ".join(sorted(set(self.rows["op"][unknown].astype(str)) - {""})[:3])
                why = ("their ops' shapes were not recorded: profile with record_shapes=True"
                       if not self.shapes_recorded else f"their ops ({ops}) recorded no matrix operands")
                notes.append(f"{NO_SHAPE_NOTE}: {with_op} — {why}")
            if no_op:
                notes.append(f"{NO_SHAPE_NOTE}: {no_op} launched by no op in the trace (before the profile's "
                             "window opened, a CUDA graph replay, or work on a thread the profiler did not "
                             "record), so their shapes are unknown")
        if self.above_peak:
            notes.append(f"{ABOVE_PEAK_NOTE}: {self.above_peak} GEMM instance(s) left out "
                         f"(up to {self.above_peak_max_pct:,.0f} % of peak)")
        return tuple(notes)


@dataclass(frozen=True)
class _Gemms:
    """One entry per GEMM group (an op instance, or a lone kernel): positions into the events."""

    kernel: np.ndarray  # the group's main kernel: its longest GEMM-named kernel
    op: np.ndarray  # the GEMM op (0 where ``has_op`` is False)
    has_op: np.ndarray
    kernels_launched: np.ndarray  # every kernel of the group, helpers and casts included


NOT_A_GEMM = -2  # ``_nearest_gemm_op`` of a kernel whose nearest listed op is a convolution


def _nearest_gemm_op(trace: Trace, links: Links, kernels: np.ndarray) -> np.ndarray:
    """Per kernel: the nearest GEMM op among its owner and the owner's ancestors; else the op that
    launched it (an entry point ``GEMM_OP_KINDS`` does not list); -1 if none; ``NOT_A_GEMM`` when a
    convolution (``kinds.is_not_gemm_op``) comes first: its kernels are no GEMMs."""
    ev = trace.events
    on_cpu = mask_in(ev["lane_kind"], ("cpu",))
    is_op = mask_in(ev["cat"], ("cpu_op",)) & on_cpu
    is_gemm = mask_where(ev["name"], is_gemm_op) & is_op
    not_gemm = mask_where(ev["name"], is_not_gemm_op) & is_op
    gemm_op = np.full(len(kernels), -1, dtype=np.int64)
    cur = links.owner[kernels].copy()
    while (cur >= 0).any():
        live = cur >= 0
        at = np.where(live, cur, 0)
        hit = live & (gemm_op == -1) & is_gemm[at]
        gemm_op[hit] = cur[hit]
        gemm_op[live & (gemm_op == -1) & not_gemm[at]] = NOT_A_GEMM  # a convolution's kernels
        cur = np.where(live & (gemm_op == -1), links.parent[at], -1)
    owner = links.owner[kernels]
    launcher = (gemm_op == -1) & (owner >= 0) & is_op[np.where(owner >= 0, owner, 0)]
    gemm_op[launcher] = owner[launcher]
    return gemm_op


def _gemm_groups(trace: Trace, links: Links) -> _Gemms | None:
    """GEMM kernels, with the other kernels of their op, grouped per op instance (a kernel no op
    owns is a group of its own).

    Only a GEMM kernel (``is_gemm_kernel``) can be a group's main kernel: an op whose kernels are
    all something else (the dtype casts autocast runs inside an outer aten::linear) is no GEMM
    figure; its matrix multiply shows under the inner op that launched the GEMM kernel.
    """
    ev = trace.events
    kernels = np.flatnonzero(mask_in(ev["cat"], ("kernel",)))
    if not len(kernels):
        return None
    gemm_op = _nearest_gemm_op(trace, links, kernels)
    # A CUDA graph replay's kernels each stand alone: the op around cudaGraphLaunch ("## Call
    # CompiledFxGraph …") ran the whole graph, not one GEMM (decode_cudagraphs: 132 GEMM kernels in 12).
    gemm_op[np.isin(kernels, graph_replay_rows(trace))] = -1
    gemm_named = mask_where(ev["name"], is_gemm_kernel, rows=kernels)
    keep = ((gemm_op >= 0) | gemm_named) & (gemm_op != NOT_A_GEMM)
    if not keep.any():
        return None
    dur = ev["dur_us"].to_numpy()
    k_rows, named = kernels[keep], gemm_named[keep]
    # Group key: the op instance, or the kernel itself when no op is known.
    group = np.where(gemm_op[keep] >= 0, gemm_op[keep], -1 - k_rows)
    order = np.lexsort((-dur[k_rows], ~named, group))  # per group, GEMM kernels first, longest first
    g_sorted = group[order]
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
    launched = np.diff(np.r_[starts, len(order)])
    starts_ok = named[order][starts]
    starts, launched = starts[starts_ok], launched[starts_ok]
    if not len(starts):
        return None
    op_row = g_sorted[starts]
    has_op = op_row >= 0
    return _Gemms(kernel=k_rows[order][starts], op=np.where(has_op, op_row, 0), has_op=has_op,
                  kernels_launched=launched)


def _shapes(trace: Trace, gemms: _Gemms) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(batch/M/K/N/extra table with NaN where unknown, dtype per group, op name per group)."""
    ev = trace.events
    has_op, op_row = gemms.has_op, gemms.op
    # Parse each distinct (op, dims, types) once: a 100k-event trace has a handful of them.
    name_codes, name_text = codes(ev["name"])
    dims_codes, dims_text = codes(ev["input_dims"])
    type_codes, type_text = codes(ev["input_type"])
    combo, first = group_ids(np.where(has_op, name_codes[op_row], -1), np.where(has_op, dims_codes[op_row], -1),
                             np.where(has_op, type_codes[op_row], -1))
    table = np.full((len(first), 5), np.nan)
    combo_dtype = np.empty(len(first), dtype=object)
    op_names = np.where(has_op, name_text[name_codes[op_row]], "")
    for c, row in enumerate(first):
        op, at = op_names[row], op_row[row]
        shape = gemm_shape(op, _parse_list(dims_text[dims_codes[at]])) if has_op[row] else None
        if shape:
            table[c] = shape
        combo_dtype[c] = _dtype_of(type_text[type_codes[at]]) if has_op[row] else ""
    return table[combo], combo_dtype[combo], op_names


def _op_flops(trace: Trace, gemms: _Gemms) -> np.ndarray:
    """The op's recorded ``flops`` (profile(with_flops=True)) per group, NaN where absent."""
    ev = trace.events
    if "flops" not in ev.columns:
        return np.full(len(gemms.op), np.nan)
    flops = ev["flops"].to_numpy(dtype=float)[gemms.op]
    return np.where(gemms.has_op & (flops > 0), flops, np.nan)


def _dtypes(trace: Trace, gemms: _Gemms, op_dtype: np.ndarray, config: RunConfig | None) -> np.ndarray:
    """Per group: the dtype the kernel's name states, else the op's input type, else the config's.

    A name that states only the family ("float8": nvjet_sm90_qqtst_…) takes the op's format
    (float8_e4m3fn). Float32 inputs run as TF32 when the run enabled it (config dtype "tf32")
    and the kernel's name does not say otherwise.
    """
    name_codes, labels = codes(trace.events["name"])
    kernel_names, which = np.unique(name_codes[gemms.kernel], return_inverse=True)  # once per distinct name
    named = np.array([gemm_kernel_dtype(str(labels[c])) or "" for c in kernel_names], dtype=object)[which.reshape(-1)]
    family = (named == "float8") & np.array([str(d).startswith("float8") for d in op_dtype], dtype=bool)
    dtype = np.where((named != "") & ~family, named, op_dtype).astype(object)
    if config is not None:
        dtype[dtype == ""] = config.dtype
        dtype[(named == "") & (op_dtype == "float32") & (config.dtype == "tf32")] = "tf32"
    return dtype


def _fill_from_config(config: RunConfig, shape: np.ndarray, op_names: np.ndarray, source: np.ndarray) -> None:
    """Shapes the trace lacks from the run's config (its one GEMM); in place."""
    if config.workload in CONFIG_GEMM_WORKLOADS:
        fill = np.isnan(shape[:, 1])
        shape[fill, :4] = (1, config.m, config.k, config.n)
        # A fused op (addmm) also reads the bias vector of N elements.
        shape[fill, 4] = np.where(np.isin(op_names[fill], _BIAS_GEMM_OPS), config.n, 0)
        source[fill] = "config"


def _rates(shape: np.ndarray, op_flops: np.ndarray, dtype: np.ndarray, kernel_us: np.ndarray,
           peak: DevicePeak | None) -> dict:
    """FLOPs (from the shape, else the op's recorded flops), bytes, TFLOP/s, % of peak, intensity
    and the roofline verdict per group."""
    batch, m, k, n, extra = (shape[:, i] for i in range(5))
    extra = np.nan_to_num(extra)
    # Per-dtype constants, looked up once per distinct dtype.
    kinds, which = np.unique(dtype.astype(str), return_inverse=True)
    elem = np.array([ELEMENT_BYTES.get(d, np.nan) for d in kinds], dtype=float)[which]
    peak_tflops = np.array([(peak.peak_tflops(d) or np.nan) if peak else np.nan for d in kinds], dtype=float)[which]
    ridge = np.array([(peak.ridge_flops_per_byte(d) or np.nan) if peak else np.nan for d in kinds],
                     dtype=float)[which]
    flops = np.where(np.isnan(m), op_flops, 2.0 * batch * m * k * n)
    bytes_moved = elem * (batch * (m * k + k * n + m * n) + extra)
    with np.errstate(divide="ignore", invalid="ignore"):
        tflops = np.where(kernel_us > 0, flops / kernel_us / 1e6, np.nan)
        intensity = flops / bytes_moved
    bandwidth = peak.memory_bandwidth_gbs if peak else np.nan
    # One classifier (lab.analysis.gemm.bound): latency-bound under a tenth of the roof at its own
    # intensity, else memory- or compute-bound by the side of the ridge.
    return dict(m=m, k=k, n=n, batch=batch, flops=flops, bytes_moved=bytes_moved, tflops=tflops,
                peak_tflops=peak_tflops, pct_of_peak=100.0 * tflops / peak_tflops,
                intensity_flops_per_byte=intensity, ridge_flops_per_byte=ridge,
                roof_tflops=roof_tflops(intensity, peak_tflops, bandwidth),
                pct_of_roof=pct_of_roof(tflops, intensity, peak_tflops, bandwidth),
                bound=bound_of(tflops, intensity, peak_tflops, bandwidth, flops),
                rate_unit=np.array([rate_unit(d) for d in kinds], dtype=object)[which])


def gemm_figures(trace: Trace, *, peak: DevicePeak | None = None, config: RunConfig | None = None,
                 links: Links | None = None) -> GemmFigures:
    """One row per GEMM: an op instance that ran a GEMM kernel, or a GEMM kernel no op owns.

    A GEMM kernel is one by its name (``kinds.is_gemm_kernel``), whichever op launched it.
    Its op is the nearest GEMM op of ``GEMM_OP_KINDS`` (or an Inductor GEMM template) among the
    launching op and its ancestors, else the launching op itself (``aten::_scaled_mm``, an entry
    point torch adds later). ``kernel`` is the op's longest GEMM kernel and ``kernel_us`` its
    duration (memsets, casts and helper kernels excluded). The shape comes from the op's recorded
    Input Dims (``kinds.gemm_shape``), else from ``config`` (``shape_source`` says which;
    "unknown" leaves the FLOP columns NaN unless the op recorded ``flops``, and
    ``GemmFigures.notes`` says what to record). FLOPs = 2·batch·M·K·N (integer operations for
    int8: ``rate_unit`` TOPS); bytes_moved = inputs read once + output written once;
    ``roof_tflops`` is the roof at the row's intensity, ``pct_of_roof`` the rate against it,
    ``bound`` the classifier's label (``lab.analysis.gemm.bound``). dtype: the one the kernel's name states
    (``kinds.gemm_kernel_dtype``: TF32 tensor-op kernels are tf32; "float8" takes the op's
    format), else the op's "Input type", else the config's. Rows above the peak of their dtype
    are dropped and counted (``GemmFigures``).
    """
    links = links or build_links(trace)
    peak = peak if peak is not None else peak_for(trace)
    gemms = _gemm_groups(trace, links)
    recorded = trace.meta.record_shapes
    if gemms is None:
        return GemmFigures(pd.DataFrame({c: pd.Series(dtype=float) for c in GEMM_COLUMNS}), shapes_recorded=recorded)
    ev = trace.events
    kr = gemms.kernel
    shape, op_dtype, op_names = _shapes(trace, gemms)
    source = np.where(np.isnan(shape[:, 1]), "unknown", "trace").astype(object)
    source[(source == "unknown") & np.isin(kr, graph_replay_rows(trace))] = GRAPH_REPLAY_SOURCE
    if config is not None:
        _fill_from_config(config, shape, op_names, source)
    dtype = _dtypes(trace, gemms, op_dtype, config)
    kernel_us = ev["dur_us"].to_numpy()[kr]
    columns = dict(
        op=op_names, kernel=texts(ev["name"], kr), ts_us=ev["ts_us"].to_numpy()[kr],
        device=ev["device"].to_numpy()[kr], kernel_us=kernel_us, kernels_launched=gemms.kernels_launched,
        dtype=dtype, shape_source=source, **_rates(shape, _op_flops(trace, gemms), dtype, kernel_us, peak),
    )
    rows = frame({c: columns[c] for c in GEMM_COLUMNS}, sort_by="ts_us", descending=False)
    return _drop_above_peak(rows, peak, recorded)


def _drop_above_peak(rows: pd.DataFrame, peak: DevicePeak | None, recorded: bool | None) -> GemmFigures:
    """Rows whose TFLOP/s exceed the peak of their dtype (or, for a dtype the peak table lacks,
    the device's highest peak) left out and counted."""
    if peak is None or rows.empty or not peak.tflops:
        return GemmFigures(rows, shapes_recorded=recorded)
    ceiling = rows["peak_tflops"].fillna(max(peak.tflops.values())).to_numpy(dtype=float)
    above = rows["tflops"].to_numpy(dtype=float) > ceiling
    if not above.any():
        return GemmFigures(rows, shapes_recorded=recorded)
    worst = float(np.max(100.0 * rows["tflops"].to_numpy(dtype=float)[above] / ceiling[above]))
    return GemmFigures(rows[~above].reset_index(drop=True), int(above.sum()), worst, recorded)


def gemm_efficiency(trace: Trace, *, peak: DevicePeak | None = None, config: RunConfig | None = None,
                    links: Links | None = None) -> pd.DataFrame:
    """``gemm_figures``' rows (columns ``GEMM_COLUMNS``), figures above the peak left out."""
    return gemm_figures(trace, peak=peak, config=config, links=links).rows


def typical_gemm(gemm: pd.DataFrame) -> pd.Series | None:
    """The one GEMM instance every view quotes as typical: the median-rate instance among the long
    ones (kernel ≥ ``GEMM_MIN_KERNEL_US``), else among all rated ones (the upper middle of an even
    count). One real row, so its rate, % of peak, intensity and shape belong together. The Summary
    card, the roofline point and the below-peak insight's caveat all quote it: three medians over
    three populations said 42.1, 36.5 and 36.5 TFLOP/s of one sdpa_backends trace."""
    if gemm.empty:
        return None
    rated = gemm[np.isfinite(gemm["tflops"].to_numpy(dtype=float))]
    if rated.empty:
        return None
    long = rated[rated["kernel_us"].to_numpy(dtype=float) >= GEMM_MIN_KERNEL_US]
    pool = (long if len(long) else rated).sort_values("tflops", kind="stable")
    return pool.iloc[len(pool) // 2]

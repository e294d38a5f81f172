"""GEMM efficiency: achieved TFLOP/s of each GEMM op instance against the device's peak.

Figures come from GEMM kernels only (recognised by name, ``lab.vocab.is_gemm_kernel``), with the
dtype the kernel's name states before the op's input types; a figure above the device's peak is
never shown (``GemmFigures`` counts it). Also the trace's device (name, compute capability,
datasheet peak), which the rate is judged by.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.columns import codes, frame, group_ids, mask_in, mask_where, texts
from lab.analysis.gemm.bound import bound_of, pct_of_roof, roof_tflops
from lab.analysis.operators import Links, build_links
from lab.core.config import RunConfig
from lab.core.devices import DevicePeak, lookup_peak
from lab.trace.load import Trace
from lab.vocab import ELEMENT_BYTES, GEMM_OPS, INPUT_TYPE_DTYPES, gemm_kernel_dtype, is_gemm_kernel

__all__ = [
    "ABOVE_PEAK_NOTE", "CONFIG_GEMM_WORKLOADS", "GEMM_COLUMNS", "GemmFigures", "compute_capability", "device_name",
    "gemm_efficiency", "gemm_figures", "peak_for",
]  # fmt: skip

# Workloads whose one GEMM is M×K @ K×N, so a RunConfig gives its shape when the trace lacks it.
CONFIG_GEMM_WORKLOADS = ("matmul_add", "linear")
_BIAS_GEMM_OPS = ("aten::addmm", "aten::baddbmm", "aten::_addmm_activation", "aten::linear")

GEMM_COLUMNS = ("op", "kernel", "ts_us", "device", "kernel_us", "kernels_launched", "m", "k", "n", "batch",
                "dtype", "shape_source", "flops", "bytes_moved", "tflops", "peak_tflops", "pct_of_peak",
                "intensity_flops_per_byte", "ridge_flops_per_byte", "roof_tflops", "pct_of_roof", "bound")


# --------------------------------------------------------------------------- the device


def device_name(trace: Trace) -> str:
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


def _gemm_shape(op: str, dims) -> tuple[int, int, int, int, int] | None:
    """(batch, M, K, N, extra input elements e.g. bias) of one GEMM op from its recorded dims."""
    try:
        if op == "aten::mm":
            (m, k), (_, n) = dims[0], dims[1]
            return 1, m, k, n, 0
        if op in ("aten::addmm", "aten::_addmm_activation"):
            (m, k), (_, n) = dims[1], dims[2]
            return 1, m, k, n, int(np.prod(dims[0])) if dims[0] else 0
        if op == "aten::bmm":
            (b, m, k), (_, _, n) = dims[0], dims[1]
            return b, m, k, n, 0
        if op == "aten::baddbmm":
            (b, m, k), (_, _, n) = dims[1], dims[2]
            return b, m, k, n, int(np.prod(dims[0])) if dims[0] else 0
        if op == "aten::linear":
            a, w = dims[0], dims[1]
            bias = dims[2] if len(dims) > 2 and dims[2] else []
            return 1, int(np.prod(a[:-1])) if len(a) > 1 else 1, a[-1], w[0], int(np.prod(bias)) if bias else 0
        if op == "aten::matmul":
            a, b = dims[0], dims[1]
            if len(a) < 2 or not b:
                return None
            n = b[-1] if len(b) >= 2 else 1
            batch = int(np.prod(a[:-2])) if len(a) > 2 else (int(np.prod(b[:-2])) if len(b) > 2 else 1)
            return batch, a[-2], a[-1], n, 0
    except (TypeError, ValueError, IndexError):
        return None
    return None


def _dtype_of(input_type: str) -> str:
    types = _parse_list(input_type) or []
    for t in types:
        if t in INPUT_TYPE_DTYPES:
            return INPUT_TYPE_DTYPES[t]
    return ""


# --------------------------------------------------------------------------- GEMM efficiency

ABOVE_PEAK_NOTE = "GEMM figure above peak — shape or kernel unrecognised"


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

    @property
    def notes(self) -> tuple[str, ...]:
        if not self.above_peak:
            return ()
        return (f"{ABOVE_PEAK_NOTE}: {self.above_peak} GEMM instance(s) left out "
                f"(up to {self.above_peak_max_pct:,.0f} % of peak)",)


@dataclass(frozen=True)
class _Gemms:
    """One entry per GEMM group (an op instance, or a lone kernel): positions into the events."""

    kernel: np.ndarray  # the group's main kernel: its longest GEMM-named kernel
    op: np.ndarray  # the GEMM op (0 where ``has_op`` is False)
    has_op: np.ndarray
    kernels_launched: np.ndarray  # every kernel of the group, helpers and casts included


def _nearest_gemm_op(trace: Trace, links: Links, kernels: np.ndarray) -> np.ndarray:
    """Per kernel: the nearest GEMM op among its owner and the owner's ancestors (-1 if none)."""
    ev = trace.events
    is_gemm_op = mask_in(ev["name"], GEMM_OPS) & mask_in(ev["lane_kind"], ("cpu",))
    gemm_op = np.full(len(kernels), -1, dtype=np.int64)
    cur = links.owner[kernels].copy()
    while (cur >= 0).any():
        live = cur >= 0
        hit = live & (gemm_op < 0) & is_gemm_op[np.where(live, cur, 0)]
        gemm_op[hit] = cur[hit]
        cur = np.where(live & (gemm_op < 0), links.parent[np.where(live, cur, 0)], -1)
    return gemm_op


def _gemm_groups(trace: Trace, links: Links, config: RunConfig | None) -> _Gemms | None:
    """Kernels of GEMM ops (and, with a config, lone GEMM kernels), grouped per op instance.

    Only a GEMM kernel (``lab.vocab.is_gemm_kernel``) can be a group's main kernel: an op whose
    kernels are all something else (the dtype casts autocast runs inside an outer aten::linear)
    is no GEMM figure; its matrix multiply shows under the inner op that launched the GEMM kernel.
    """
    ev = trace.events
    kernels = np.flatnonzero(mask_in(ev["cat"], ("kernel",)))
    if not len(kernels):
        return None
    gemm_op = _nearest_gemm_op(trace, links, kernels)
    gemm_named = mask_where(ev["name"], is_gemm_kernel)[kernels]
    keep = (gemm_op >= 0) | (gemm_named if config is not None else False)
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
        shape = _gemm_shape(op, _parse_list(dims_text[dims_codes[at]])) if has_op[row] else None
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

    Float32 inputs run as TF32 when the run enabled it (config dtype "tf32") and the kernel's
    name does not say otherwise.
    """
    name_codes, labels = codes(trace.events["name"])
    kernel_names, which = np.unique(name_codes[gemms.kernel], return_inverse=True)  # once per distinct name
    named = np.array([gemm_kernel_dtype(str(labels[c])) or "" for c in kernel_names], dtype=object)[which.reshape(-1)]
    dtype = np.where(named != "", named, op_dtype).astype(object)
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
    and the roofline verdict per group (``lab.analysis.gemm.bound``)."""
    batch, m, k, n, extra = (shape[:, i] for i in range(5))
    extra = np.nan_to_num(extra)
    # Per-dtype constants, looked up once per distinct dtype.
    kinds, which = np.unique(dtype.astype(str), return_inverse=True)
    elem = np.array([ELEMENT_BYTES.get(d, np.nan) for d in kinds], dtype=float)[which]
    peak_tflops = np.array([peak.tflops.get(d, np.nan) if peak else np.nan for d in kinds], dtype=float)[which]
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
                bound=bound_of(tflops, intensity, peak_tflops, bandwidth))


def gemm_figures(trace: Trace, *, peak: DevicePeak | None = None, config: RunConfig | None = None,
                 links: Links | None = None) -> GemmFigures:
    """One row per GEMM op instance that ran a GEMM kernel: achieved TFLOP/s vs the device's peak.

    A row is an op of ``GEMM_OPS`` that launched (itself or through its descendants) a GEMM
    kernel — recognised by name, ``lab.vocab.is_gemm_kernel`` — or, when ``config`` is given, a
    GEMM kernel no op owns. ``kernel`` is the op's longest GEMM kernel and ``kernel_us`` its
    duration (memsets, casts and helper kernels excluded). The shape comes from the op's recorded
    Input Dims, else from ``config`` (``shape_source`` says which; "unknown" leaves the FLOP
    columns NaN unless the op recorded ``flops``). FLOPs = 2·batch·M·K·N; bytes_moved = inputs
    read once + output written once; ``roof_tflops`` is the roof at the row's intensity,
    ``pct_of_roof`` the rate against it, ``bound`` the classifier's label (``lab.analysis.gemm.bound``).
    dtype: the one the kernel's name states (``lab.vocab.gemm_kernel_dtype``: TF32 tensor-op
    kernels are tf32), else the op's "Input type", else the config's. Rows above the peak are
    dropped and counted (``GemmFigures``).
    """
    links = links or build_links(trace)
    peak = peak if peak is not None else peak_for(trace)
    gemms = _gemm_groups(trace, links, config)
    if gemms is None:
        return GemmFigures(pd.DataFrame({c: pd.Series(dtype=float) for c in GEMM_COLUMNS}))
    ev = trace.events
    kr = gemms.kernel
    shape, op_dtype, op_names = _shapes(trace, gemms)
    source = np.where(np.isnan(shape[:, 1]), "unknown", "trace").astype(object)
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
    return _drop_above_peak(rows, peak)


def _drop_above_peak(rows: pd.DataFrame, peak: DevicePeak | None) -> GemmFigures:
    """Rows whose TFLOP/s exceed the peak of their dtype (or, for a dtype the peak table lacks,
    the device's highest peak) left out and counted."""
    if peak is None or rows.empty or not peak.tflops:
        return GemmFigures(rows)
    ceiling = rows["peak_tflops"].fillna(max(peak.tflops.values())).to_numpy(dtype=float)
    above = rows["tflops"].to_numpy(dtype=float) > ceiling
    if not above.any():
        return GemmFigures(rows)
    worst = float(np.max(100.0 * rows["tflops"].to_numpy(dtype=float)[above] / ceiling[above]))
    return GemmFigures(rows[~above].reset_index(drop=True), int(above.sum()), worst)


def gemm_efficiency(trace: Trace, *, peak: DevicePeak | None = None, config: RunConfig | None = None,
                    links: Links | None = None) -> pd.DataFrame:
    """``gemm_figures``' rows (columns ``GEMM_COLUMNS``), figures above the peak left out."""
    return gemm_figures(trace, peak=peak, config=config, links=links).rows

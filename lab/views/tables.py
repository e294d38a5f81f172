"""key_averages table views: sort, limit, hide annotations, format units, CSV, text tables.

Pure functions of ``RunResult.key_averages`` (columns ``KEY_AVERAGES_COLUMNS``) or of the
trace-derived table (``lab.analysis.trace_key_averages``, through ``trace_table``), so a fresh
run and an uploaded trace share one view.
No streamlit here: ``format_key_averages`` returns data plus per-column printf formats that
the UI turns into ``st.column_config.NumberColumn(format=...)``.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lab.analysis.table.shares import cpu_shares_pct, share_pct
from lab.core.result import KEY_AVERAGES_COLUMNS
from lab.vocab import SORT_KEYS

# User-facing sort label → key_averages column.
# Why an annotation row reads oddly (torch sums device time without annotations, so a GPU
# annotation's "Self CUDA %" can pass 100 %; a CPU annotation's total covers the ops inside it).
GPU_ANNOTATION_NOTE = "annotation: excluded from totals, % may exceed 100"
CPU_ANNOTATION_NOTE = "annotation: its CPU total includes the ops inside it"
# The Table shows a short mark in its Note column and the note whole under the table: as a
# column of sentences it was the 16th column, scrolled out of view at 1280 px and cut in its
# cell. Marks are numbered in the order the rows shown use them.
NOTE_MARK = "label"
NOTE_FOOTNOTES = {
    GPU_ANNOTATION_NOTE: "A record_function label's GPU row: torch leaves labels out of the device totals, "
                         "so its Self device % may pass 100 %.",
    CPU_ANNOTATION_NOTE: "A record_function label's CPU row: its CPU total includes the ops inside it, "
                         "whose time their own rows count again.",
}
_SUPERSCRIPTS = "¹²³⁴⁵⁶⁷⁸⁹"
# The Table's GPU kernel list (``Analysis.kernels``) as a reader names its columns: its raw field
# names (total_us, share_pct, registers_per_thread) read like data, not a table.
KERNEL_LABELS = {
    "name": "Kernel", "cat": "Kind", "count": "Calls", "total_us": "Total (µs)", "mean_us": "Mean (µs)",
    "min_us": "Min (µs)", "max_us": "Max (µs)", "share_pct": "GPU share", "grid": "Grid", "block": "Block",
    "registers_per_thread": "Registers / thread", "shared_memory_bytes": "Shared memory (B)",
    "occupancy_pct": "Est. occupancy",
}
# Each labelled column's printf format (st.column_config.NumberColumn): whole registers and bytes.
KERNEL_FORMATS = {"Total (µs)": "%.1f", "Mean (µs)": "%.1f", "Min (µs)": "%.1f", "Max (µs)": "%.1f",
                  "GPU share": "%.1f%%", "Registers / thread": "%.0f", "Shared memory (B)": "%.0f",
                  "Est. occupancy": "%.0f%%"}

# Share columns added by key_averages_view, computed as torch's table does.
SHARE_COLUMNS = ("self_cpu_pct", "cpu_total_pct", "self_device_pct")

# Unit ladders: time in µs, bytes as torch prints them (1024-based "KB"), FLOPs decimal.
_TIME_UNITS = ((1e6, "s"), (1e3, "ms"), (1.0, "µs"))
_BYTE_UNITS = ((1024.0**3, "GB"), (1024.0**2, "MB"), (1024.0, "KB"), (1.0, "B"))
_FLOP_UNITS = ((1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "KFLOP"), (1.0, "FLOP"))

# Display label and kind of each column format_key_averages shows, in order.
_DISPLAY = (
    ("name", "Name", "text"),
    ("note", "Note", "note"),  # second: in view beside the name at 800 px (a short mark, see NOTE_FOOTNOTES)
    ("input_shapes", "Input shapes", "text"),
    ("count", "Calls", "count"),
    ("self_cpu_us", "Self CPU", "time"),
    ("self_cpu_pct", "Self CPU %", "pct"),
    ("cpu_total_us", "CPU total", "time"),
    ("cpu_total_pct", "CPU total %", "pct"),
    ("self_device_us", "Self device", "time"),
    ("self_device_pct", "Self device %", "pct"),
    ("device_total_us", "Device total", "time"),
    ("self_cpu_memory_bytes", "Self CPU mem", "bytes"),
    ("cpu_memory_bytes", "CPU mem", "bytes"),
    ("self_device_memory_bytes", "Self device mem", "bytes"),
    ("device_memory_bytes", "Device mem", "bytes"),
    ("flops", "FLOPs", "flops"),
)
_DEVICE_COLUMNS = ("self_device_us", "self_device_pct", "device_total_us")


@dataclass(frozen=True)
class FormattedTable:
    """Display-ready table: ``data`` holds numbers scaled to ``units``; ``column_formats`` maps
    each numeric column to a printf format (``"%.1f ms"``) for st.column_config.NumberColumn;
    ``footnotes`` are the notes whose marks the Note column shows ("¹ A record_function …")."""

    data: pd.DataFrame
    column_formats: dict[str, str] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    footnotes: tuple[str, ...] = ()


def sort_column(sort_by: str) -> str:
    """A sort label (``"Self CPU"``) or column name (``"self_cpu_us"``) → the column."""
    if sort_by in SORT_KEYS:
        return SORT_KEYS[sort_by]
    if sort_by in SORT_KEYS.values():
        return sort_by
    raise ValueError(f"sort_by={sort_by!r} is not a sort key; use one of {list(SORT_KEYS)}")


def key_averages_view(df: pd.DataFrame, *, sort_by: str, row_limit: int, show_annotations: bool) -> pd.DataFrame:
    """Rows sorted by ``sort_by`` (largest first, ties in torch's order), at most ``row_limit``
    (negative: all, as in torch), annotations left out unless ``show_annotations``.

    Adds ``self_cpu_pct``, ``cpu_total_pct`` and ``self_device_pct`` computed as torch's table
    does (over all rows, annotations included for CPU, excluded for device), and ``note``.
    """
    column = sort_column(sort_by)
    missing = [c for c in ("name", column) if c not in df.columns]
    if missing:
        raise ValueError(f"the table has no {missing} column; pass RunResult.key_averages "
                         "or trace_table(trace_key_averages(...))")
    view = _with_shares(df)
    # Stable descending sort: equal keys keep their order, as in torch's sorted(reverse=True).
    order = np.argsort(-_sort_values(view[column]), kind="stable")
    view = view.iloc[order]
    if not show_annotations and "is_user_annotation" in view.columns:
        view = view[~view["is_user_annotation"].astype(bool)]
    if row_limit >= 0:
        view = view.head(row_limit)
    return view.reset_index(drop=True)


def format_key_averages(df: pd.DataFrame) -> FormattedTable:
    """Readable columns: one unit per column (µs or ms, B…GB, FLOP…TFLOP) chosen from its
    largest value, so the numbers stay sortable; device and memory columns only when used."""
    view = df if set(SHARE_COLUMNS) <= set(df.columns) else _with_shares(df)
    data, formats, units = {}, {}, {}
    footnotes: list[str] = []
    has_device = any(view.get(c, pd.Series(dtype=float)).fillna(0).abs().sum() > 0
                     for c in ("self_device_us", "device_total_us"))
    for column, label, kind in _DISPLAY:
        if column not in view.columns:
            continue
        values = view[column]
        if column in _DEVICE_COLUMNS and not has_device:
            continue
        if kind in ("bytes", "flops") and not (values.fillna(0) != 0).any():
            continue  # memory or FLOPs were not recorded
        if column == "input_shapes" and not (values.astype(str) != "").any():
            continue
        if kind == "note":
            marks, footnotes = _note_marks(values)
            if footnotes:  # no column when no row shown has a note
                data[label] = marks
            continue
        if kind == "text":
            data[label] = values.astype(object).where(values.notna(), "").astype(str).to_numpy(dtype=object)
            continue
        numbers = values.to_numpy(dtype=np.float64)
        if kind == "count":
            data[label], formats[label] = numbers, "%d"
        elif kind == "pct":
            data[label], formats[label], units[label] = numbers, "%.2f%%", "%"
        else:
            ladder = {"time": _TIME_UNITS, "bytes": _BYTE_UNITS, "flops": _FLOP_UNITS}[kind]
            scale, unit = _pick_unit(numbers, ladder)
            data[label] = numbers / scale
            formats[label] = f"%.{_decimals(scale, kind)}f {unit}"
            units[label] = unit
    return FormattedTable(pd.DataFrame(data), formats, units, tuple(footnotes))


def _note_marks(notes: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Each row's note as a short mark ("label ¹"), and the footnotes the marks point to, numbered
    in the order the rows first use them."""
    numbers: dict[str, int] = {}
    marks = np.full(len(notes), "", dtype=object)
    for i, note in enumerate(notes.astype(object).where(notes.notna(), "").astype(str)):
        if note:
            n = numbers.setdefault(note, len(numbers))
            marks[i] = f"{NOTE_MARK} {_SUPERSCRIPTS[n]}"
    return marks, [f"{_SUPERSCRIPTS[n]} {NOTE_FOOTNOTES.get(note, note)}" for note, n in numbers.items()]


# What the kernel list is read for, first: at 800 px with the sidebar open its grid is ~466 px
# wide, and Total and Share (the 4th and 8th columns before) were scrolled out of view.
KERNEL_FIRST = ("Kernel", "Total (µs)", "GPU share")


def kernel_table(kernels: pd.DataFrame) -> FormattedTable:
    """``Analysis.kernels`` with the column names of ``KERNEL_LABELS`` (other columns as they are),
    ``KERNEL_FIRST`` first, and their formats; the numbers are unchanged (sortable)."""
    data = kernels.rename(columns=KERNEL_LABELS)
    first = [c for c in KERNEL_FIRST if c in data.columns]
    data = data[first + [c for c in data.columns if c not in first]]
    return FormattedTable(data, {c: f for c, f in KERNEL_FORMATS.items() if c in data.columns})


def trace_table(frame: pd.DataFrame, *, profile_memory: bool = False) -> pd.DataFrame:
    """A trace-derived key_averages frame (``lab.analysis.trace_key_averages``) for the views.

    The memory columns are torch's (from the trace's ``[memory]`` records) when the trace was
    recorded with ``profile_memory`` (``Trace.has_memory``), else NaN: shown as absent, not as
    zeros. FLOPs stay where torch would count them (``with_flops``).
    """
    out = frame.copy()
    for column in ("self_cpu_memory_bytes", "cpu_memory_bytes", "self_device_memory_bytes", "device_memory_bytes"):
        out[column] = out[column] if profile_memory else np.nan
    if not (out["flops"] > 0).any():
        out["flops"] = np.nan
    return out[list(KEY_AVERAGES_COLUMNS)]


def to_csv_bytes(df: pd.DataFrame) -> bytes:
    """UTF-8 CSV without the index (column names carry the units)."""
    buffer = io.StringIO()
    df.to_csv(buffer, index=False)
    return buffer.getvalue().encode("utf-8")


def limit_text_table(text: str, row_limit: int) -> str:
    """torch's table text (``table(row_limit=-1)``) cut to its first ``row_limit`` rows.

    Identical to what ``table(row_limit=row_limit)`` prints for the same sort: torch computes
    column widths and totals over all rows before it stops printing, so cutting rows is enough.
    Layout: [=== header ===] dashed rule, column titles, dashed rule, rows, dashed rule, totals.
    With stacks (``group_by_stack_n``) a row continues on lines whose name column is blank.
    Negative ``row_limit``: all rows, as in torch.
    """
    if row_limit < 0 or not text:
        return text
    lines = text.split("\n")
    rule = next((line for line in lines if _is_rule(line)), None)
    rules = [i for i, line in enumerate(lines) if rule is not None and line == rule]
    if rule is None or len(rules) < 3:
        return text  # not a torch table; leave it whole rather than guess
    body = lines[rules[1] + 1: rules[-1]]
    name_width = len(rule.split(" ", 1)[0])  # the first column is the name
    starts = [i for i, line in enumerate(body) if line[:name_width].strip()]
    cut = starts[row_limit] if row_limit < len(starts) else len(body)
    return "\n".join(lines[: rules[1] + 1] + body[:cut] + lines[rules[-1]:])


# --------------------------------------------------------------------------- helpers


def _with_shares(df: pd.DataFrame) -> pd.DataFrame:
    """Share columns and notes, as torch's table computes its percentages."""
    view = df.copy()
    is_annotation = _bool_column(view, "is_user_annotation")
    on_device = view["device_type"].astype(str).str.lower() != "cpu" if "device_type" in view.columns \
        else pd.Series(False, index=view.index)
    # torch: "Self CPU time total" sums every row's self CPU time, annotations included.
    view["self_cpu_pct"], view["cpu_total_pct"] = cpu_shares_pct(view)
    # torch: device time total sums device-type rows that are not user annotations.
    self_device = _number_column(view, "self_device_us")
    device_rows = on_device.to_numpy() & ~is_annotation
    if not device_rows.any():
        # A table derived from a trace has no kernel rows: each kernel's time sits on the one op
        # that launched it, so the ops' self device time sums to the same total.
        device_rows = ~is_annotation
    device_total = self_device[device_rows].sum()
    view["self_device_pct"] = share_pct(self_device, device_total)
    note = np.full(len(view), "", dtype=object)
    note[is_annotation & on_device.to_numpy()] = GPU_ANNOTATION_NOTE
    note[is_annotation & ~on_device.to_numpy()] = CPU_ANNOTATION_NOTE
    view["note"] = note
    return view


def _bool_column(df: pd.DataFrame, column: str) -> np.ndarray:
    if column not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return df[column].fillna(False).to_numpy(dtype=bool)


def _number_column(df: pd.DataFrame, column: str) -> np.ndarray:
    if column not in df.columns:
        return np.zeros(len(df))
    return df[column].to_numpy(dtype=np.float64)


def _sort_values(column: pd.Series) -> np.ndarray:
    """Numbers to sort by; missing values sort last."""
    values = column.to_numpy(dtype=np.float64)
    return np.where(np.isnan(values), -np.inf, values)


def _pick_unit(values: np.ndarray, ladder) -> tuple[float, str]:
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if len(finite) else 0.0
    for scale, unit in ladder:
        if top >= scale:
            return scale, unit
    return ladder[-1]


def _decimals(scale: float, kind: str) -> int:
    if scale == 1.0 and kind in ("bytes", "flops"):
        return 0  # whole bytes and FLOPs
    return 3 if kind == "time" else 2


def _is_rule(line: str) -> bool:
    return line.startswith("-") and set(line) <= {"-", " "}

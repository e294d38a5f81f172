"""Compare the lab's trace-derived table with torch's own key_averages, trace by trace.

    python scripts/check_groundtruth.py DIR [DIR ...] [--by-shape] [--tables] [--verbose]

Each ``*.json.gz`` / ``*.json`` trace under DIR with a ``<stem>.key_averages.csv`` beside it
(``<stem>.key_averages_by_shape.csv`` with ``--by-shape``) is read with ``lab.trace.load_trace``,
turned into a table by ``lab.key_averages.trace_key_averages``, and compared row by row with
torch's CSV (columns name, device_type, count, self_cpu_us, cpu_total_us, self_device_us,
device_total_us, ..., is_user_annotation[, input_shapes]). A row matches when the count and
FLOPs are equal, self CPU, CPU total, self device and device total are each within 0.1 % or
0.001 µs (the target; every committed trace is exact to the printed microsecond), and
the four memory columns (profile_memory traces: torch's ``*_memory_usage``, bytes) are each
within 1 %. ``--tables`` also prints ``lab.tables.torch_table_text`` for the trace and compares it
with torch's ``<stem>.table*.txt`` (the sort key read from the file name: ``table.txt`` self CPU,
``table_device.txt`` self device, as scripts/record_groundtruth.py writes them).

Prints per trace: rows compared, rows mismatching, rows only in one table, the worst relative
error per column; then a total line. Exit status 1 when any row mismatches or is missing.
Traces recorded by torch 2.12–2.13 list with_stack's python frames as rows: when torch's CSV
has such rows, the lab's table is built with ``include_python_functions=True``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lab.analysis.table.key_averages import trace_key_averages  # noqa: E402
from lab.trace import Trace, load_trace  # noqa: E402
from lab.views.torch_table import profiled_device, torch_table_text  # noqa: E402

TIME_COLUMNS = ("self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us")
REL_TOLERANCE, ABS_TOLERANCE_US = 0.001, 0.001  # times within 0.1 % or 0.001 µs
MEMORY_COLUMNS = ("self_cpu_memory_bytes", "cpu_memory_bytes", "self_device_memory_bytes", "device_memory_bytes")
MEMORY_REL_TOLERANCE = 0.01  # memory within 1 %


@dataclass
class Comparison:
    trace: str
    rows: int = 0  # rows present in both tables
    mismatching: list = field(default_factory=list)  # (key, column, torch, lab)
    only_torch: list = field(default_factory=list)
    only_lab: list = field(default_factory=list)
    worst: dict = field(default_factory=dict)  # column -> (relative error, abs error µs, key)
    worst_memory: dict = field(default_factory=dict)  # column -> (relative error, abs error bytes, key)
    memory_rows: int = 0  # rows compared where torch's memory columns are not all zero
    python_functions: bool = False
    tables: dict = field(default_factory=dict)  # table file name -> identical text?

    @property
    def ok(self) -> bool:
        return not (self.mismatching or self.only_torch or self.only_lab)


def row_key(name: str, device_type: str, annotation, shapes: str | None) -> tuple:
    device = "cpu" if str(device_type).lower().endswith("cpu") else "device"
    return (name, device, str(annotation).lower() in ("true", "1"), shapes)


def torch_rows(csv_path: Path, by_shape: bool) -> dict:
    with open(csv_path, newline="") as f:
        return {row_key(r["name"], r["device_type"], r["is_user_annotation"],
                        r.get("input_shapes", "") if by_shape else None): r for r in csv.DictReader(f)}


def compare_trace(trace_path: Path, csv_path: Path, *, by_shape: bool = False,
                  tables: bool = False, trace: Trace | None = None) -> Comparison:
    """``trace_path``'s table against torch's CSV; ``trace`` is the path already parsed, where the
    caller holds it (the tests read each corpus trace once)."""
    if trace is None:
        trace = load_trace(trace_path)
    want = torch_rows(csv_path, by_shape)
    python_names = set(trace.events.loc[trace.events["cat"] == "python_function", "name"].astype(str))
    python = any(k[0] in python_names for k in want)
    frame = trace_key_averages(trace, group_by_input_shape=by_shape, include_python_functions=python)
    got = {row_key(r.name, r.device_type, r.is_user_annotation, r.input_shapes if by_shape else None): r
           for r in frame.itertuples(index=False)}
    out = Comparison(str(trace_path), python_functions=python)
    out.only_torch = sorted(set(want) - set(got), key=str)
    out.only_lab = sorted(set(got) - set(want), key=str)
    for key in set(want) & set(got):
        out.rows += 1
        w, g = want[key], got[key]
        for column in ("count", "flops"):
            if column in w and int(float(w[column] or 0)) != int(getattr(g, column)):
                out.mismatching.append((key, column, w[column], getattr(g, column)))
        for column in TIME_COLUMNS:
            ref, val = float(w[column]), float(getattr(g, column))
            err = abs(val - ref)
            rel = err / abs(ref) if ref else (0.0 if err == 0 else float("inf"))
            if err > out.worst.get(column, (0.0, 0.0, None))[1]:
                out.worst[column] = (rel, err, key[0])
            if err > max(REL_TOLERANCE * abs(ref), ABS_TOLERANCE_US):
                out.mismatching.append((key, column, ref, val))
        _compare_memory(out, key, w, g)
    if tables and not by_shape:
        out.tables = compare_tables(trace, frame, csv_path)
    return out


def _compare_memory(out: Comparison, key: tuple, want: dict, got) -> None:
    """The memory columns of one row: within MEMORY_REL_TOLERANCE of torch's (exact when 0)."""
    present = [c for c in MEMORY_COLUMNS if c in want]
    if any(int(float(want[c] or 0)) for c in present):
        out.memory_rows += 1
    for column in present:
        ref, val = int(float(want[column] or 0)), int(getattr(got, column))
        err = abs(val - ref)
        rel = err / abs(ref) if ref else (0.0 if err == 0 else float("inf"))
        if err > out.worst_memory.get(column, (0.0, 0, None))[1]:
            out.worst_memory[column] = (rel, err, key[0])
        if err > MEMORY_REL_TOLERANCE * abs(ref):
            out.mismatching.append((key, column, ref, val))


TABLE_SORTS = {"table.txt": "self_cpu_time_total", "table_device.txt": "self_device_time_total"}


def compare_tables(trace, frame, csv_path: Path) -> dict:
    stem = csv_path.name.removesuffix(".key_averages.csv")
    out = {}
    for suffix, sort_by in TABLE_SORTS.items():
        path = csv_path.parent / f"{stem}.{suffix}"
        if path.exists():
            text = torch_table_text(frame, sort_by=sort_by, row_limit=-1,
                                    use_device=profiled_device(trace),
                                    with_flops=bool(trace.meta.with_flops),
                                    profile_memory=bool(trace.meta.profile_memory))
            out[path.name] = text == path.read_text()
    return out


def find_pairs(directory: Path, by_shape: bool) -> list[tuple[Path, Path]]:
    suffix = ".key_averages_by_shape.csv" if by_shape else ".key_averages.csv"
    pairs = {}
    for trace in sorted(directory.rglob("*.json*")):  # .json.gz sorts after .json: it wins
        stem = trace.name.removesuffix(".gz").removesuffix(".json")
        if trace.name.endswith((".json", ".json.gz")) and (trace.parent / (stem + suffix)).exists():
            pairs[trace.parent / stem] = (trace, trace.parent / (stem + suffix))
    return list(pairs.values())


def _fmt_worst(worst: dict) -> str:
    parts = []
    for column in TIME_COLUMNS:
        rel, err, _ = worst.get(column, (0.0, 0.0, None))
        parts.append(f"{column} {100 * rel:.2f}% ({err:.1f} µs)")
    return ", ".join(parts)


def _fmt_worst_memory(worst: dict) -> str:
    parts = []
    for column in MEMORY_COLUMNS:
        rel, err, _ = worst.get(column, (0.0, 0, None))
        parts.append(f"{column} {100 * rel:.2f}% ({err:,} B)")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--by-shape", action="store_true", help="compare the by-input-shape tables")
    parser.add_argument("--tables", action="store_true", help="compare the text tables too")
    parser.add_argument("--verbose", action="store_true", help="list each mismatching row")
    args = parser.parse_args(argv)
    results = [compare_trace(t, c, by_shape=args.by_shape, tables=args.tables)
               for d in args.dirs for t, c in find_pairs(d, args.by_shape)]
    worst_all: dict = {}
    worst_memory: dict = {}
    for r in results:
        bad = len({m[0] for m in r.mismatching})
        print(f"{Path(r.trace).name}: {r.rows} rows compared, {bad} mismatching, "
              f"{len(r.only_torch)} only in torch, {len(r.only_lab)} only in the lab"
              f"{' (python frames as rows)' if r.python_functions else ''}; worst: {_fmt_worst(r.worst)}")
        if r.memory_rows:
            print(f"    memory: {r.memory_rows} rows with memory; worst: {_fmt_worst_memory(r.worst_memory)}")
        if r.tables:
            print(f"    tables identical: {', '.join(f'{k} {v}' for k, v in r.tables.items())}")
        if args.verbose:
            for m in r.mismatching + [(k, "only in torch") for k in r.only_torch] + [(k, "only in lab") for k in r.only_lab]:
                print("    ", m)
        for column, value in r.worst.items():
            if value[1] > worst_all.get(column, (0.0, 0.0, None))[1]:
                worst_all[column] = value
        for column, value in r.worst_memory.items():
            if value[1] > worst_memory.get(column, (0.0, 0, None))[1]:
                worst_memory[column] = value
    rows = sum(r.rows for r in results)
    bad = sum(len({m[0] for m in r.mismatching}) + len(r.only_torch) + len(r.only_lab) for r in results)
    print(f"TOTAL: {len(results)} traces, {rows} rows compared, {bad} rows mismatching or missing; "
          f"worst: {_fmt_worst(worst_all)}")
    memory = [r for r in results if r.memory_rows]
    if memory:
        print(f"MEMORY: {len(memory)} traces with memory columns, {sum(r.memory_rows for r in memory)} rows with "
              f"memory; worst: {_fmt_worst_memory(worst_memory)}")
    if args.tables:
        texts = [v for r in results for v in r.tables.values()]
        print(f"TABLES: {sum(texts)} of {len(texts)} identical to torch's text")
    return 0 if results and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

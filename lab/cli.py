"""Command line: ``python -m lab profile|analyze|compare|table|memory|ranks|replay|serve`` (installed:
``profiler-lab …``, the same ``main``).

``profile`` runs in this process (``run_profile`` directly) and writes the run's artifacts:
``trace.json.gz`` (the Chrome trace as torch exported it), ``key_averages.csv`` and
``summary.json`` (config, device, timings, stage seconds); a distributed workload (``--workload
ddp_gloo --ranks 4 --straggler 2``) writes its rank traces under their own names instead of
``trace.json.gz`` and prints the ranks' text, as ``ranks`` does. ``analyze``, ``compare`` and
``ranks`` read each trace in this process (``lab.read.ReadHere``: someone at the command line
owns the machine) — or, with ``--isolated``, through reader processes (``lab.read.ReaderPool``,
the page's bounded path: memory and time limits, lower priority; ``ranks`` reads its ranks
there in parallel) — and print what ``lab.views`` made of it.
Bad input exits with status ``EXIT_BAD_INPUT`` and one line on stderr, never a traceback.
torch is imported only once a run is accepted. The printing and the exit statuses live here
only: the views return data.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from lab.core.config import OPTIONS, ConfigError, Option, RunConfig, check_device, check_limits
from lab.core.settings import HostSettings, SettingsError
from lab.read import Parsed, ReaderPool, ReadFailed, ReadHere
from lab.run.artifacts import write_artifacts, write_rank_traces

EXIT_BAD_INPUT = 2
# The classic table as torch's tutorial prints it.
PRINT_ROW_LIMIT = 15


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse prints the whole usage block on an error; we want one line and status 2."""

    def error(self, message: str):
        raise _UsageError(f"{self.prog}: {message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    prog = "profiler-lab" if Path(sys.argv[0]).name == "profiler-lab" else "python -m lab"
    parser = _Parser(prog=prog, description="Profile a workload, read a trace, or serve the page.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("profile", help="profile one run and write its trace, table and summary")
    for option in OPTIONS.values():  # every RunConfig field, as its Option declares it
        _add_flag(p, option)
    p.add_argument("--out", type=Path, default=None, help="folder for trace.json.gz, key_averages.csv, summary.json")

    for name, text in (("analyze", "read one trace and print where its time went and its findings"),):
        a = sub.add_parser(name, help=text)
        a.add_argument("trace", help="a Chrome trace (.json or .json.gz)")
        a.add_argument("--json", action="store_true", help="print JSON instead of text")
        _add_isolated_flag(a)
    _add_table_parser(sub)
    mem = sub.add_parser("memory", help="profile_memory's allocations: peaks, steps, memory insights")
    mem.add_argument("trace", help="a Chrome trace (.json or .json.gz) recorded with profile_memory=True")
    mem.add_argument("--csv", action="store_true",
                     help="CSV: per device one whole-trace row (step -1), then one row per step")
    c = sub.add_parser("compare", help="compare two traces")
    c.add_argument("a", help="baseline trace")
    c.add_argument("b", help="trace to compare with the baseline")
    c.add_argument("--json", action="store_true", help="print JSON instead of text")
    _add_isolated_flag(c)
    r = sub.add_parser("ranks", help="read the ranks of one torch.distributed job side by side")
    r.add_argument("traces", nargs="+",
                   help="one Chrome trace per rank (its rank from distributedInfo, else 'rank<N>' in the file name), "
                        "or one directory: its newest span (one tensorboard_trace_handler export per worker)")
    r.add_argument("--span", type=int, default=None, metavar="N",
                   help="with a directory: span N (0 = each worker's first export) instead of the newest")
    r.add_argument("--sort", default="rank", choices=("rank", "step", "compute", "comm", "idle", "overlap", "calls"),
                   help="the table's order: by rank, or the largest first (text only)")
    r.add_argument("--top", type=int, default=None, metavar="N", help="print only the table's first N rows")
    r.add_argument("--json", action="store_true", help="print JSON instead of text")
    _add_isolated_flag(r, ranks=True)
    _add_replay_parser(sub)
    s = sub.add_parser("serve", help="start the page (streamlit run app.py), listing the traces in DIR")
    s.add_argument("dirs", nargs="*", metavar="DIR",
                   help="trace directories the page lists (PROFILER_LAB_TRACE_DIR), e.g. tensorboard_trace_handler's")
    s.add_argument("--port", type=int, default=None, help="the page's port (Streamlit's default 8501)")
    s.add_argument("--address", default=None, help="the address to listen on (e.g. 0.0.0.0 for a room)")
    return parser


def _add_isolated_flag(parser: argparse.ArgumentParser, *, ranks: bool = False) -> None:
    parallel = ", every rank read at once by the host's readers" if ranks else ""
    parser.add_argument("--isolated", action="store_true",
                        help="read in reader processes, as the page does (the host's memory and time limits per "
                             f"trace, lower priority){parallel}; default: in this process")


def _add_flag(parser: argparse.ArgumentParser, option: Option) -> None:
    """One RunConfig field as a flag: ``--name`` (or ``option.flag``), its default and help."""
    extra: dict = {"help": option.help} if option.help else {}
    if option.kind == "bool":
        # A flag on by default can be turned off (--no-record-shapes); one off by default is a switch.
        action = argparse.BooleanOptionalAction if option.default else "store_true"
        parser.add_argument(option.cli_flag, action=action, default=option.default, **extra)
    else:
        kind = int if option.kind == "int" else str
        parser.add_argument(option.cli_flag, type=kind, default=option.default, **extra)


def _dest(option: Option) -> str:
    # argparse names the attribute after the flag: --steps → args.steps (RunConfig.active).
    return option.cli_flag.lstrip("-").replace("-", "_")


def config_from_args(args: argparse.Namespace) -> RunConfig:
    return RunConfig(**{name: getattr(args, _dest(option)) for name, option in OPTIONS.items()})


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "profile":
            config = config_from_args(args)
            # Read once, here, after the config's own checks (so their message comes first).
            return _profile(args, config, HostSettings.from_env())
        if args.command == "table":
            return _table(args, HostSettings.from_env())
        if args.command == "memory":
            return _memory(args, HostSettings.from_env())
        if args.command == "replay":
            return _replay(args, HostSettings.from_env())
        if args.command == "serve":
            from lab.serve import serve

            HostSettings.from_env()  # a bad PROFILER_LAB_* setting is refused here, in one line
            return serve(args.dirs, port=args.port, address=args.address)
        settings = HostSettings.from_env()  # the trace limits (max events, decompressed size)
        with _reads(args, settings) as pool:
            if args.command == "ranks":
                return ranks_main(_rank_paths(args.traces, args.span), as_json=args.json, pool=pool, sort=args.sort,
                                  top=args.top)
            if args.command == "analyze":
                return analyze_main(args.trace, as_json=args.json, settings=settings, pool=pool)
            return compare_main(args.a, args.b, as_json=args.json, settings=settings, pool=pool)
    except Exception as exc:
        if not isinstance(exc, _refusals()):
            raise  # a bug: keep its traceback
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _rank_paths(traces: list[str], span: int | None) -> list[str]:
    """``ranks``' files: the traces given, or one directory's span (``lab.tracedir.job_files``);
    the directory's files that are not traces are named on stderr, as skipped."""
    if len(traces) == 1 and Path(traces[0]).is_dir():
        from lab.tracedir import job_files

        try:
            job = job_files(traces[0], span)
        except ValueError as exc:
            raise _UsageError(str(exc)) from None
        if job.skipped:
            what = "file that is not a trace" if len(job.skipped) == 1 else "files that are not traces"
            print(f"skipped {len(job.skipped)} {what}: {', '.join(job.skipped)}", file=sys.stderr)
        return list(job.paths)
    if span is not None:
        raise _UsageError("--span picks a span of a directory: give one directory, not files")
    return traces


def _refusals() -> tuple[type[Exception], ...]:
    # RunError lives with the result (pandas): imported only once something went wrong, so a
    # refused command line answers without loading pandas or torch.
    from lab.core.result import RunError
    from lab.replay import ReplayFailed, ReplayRefusal
    from lab.serve import ServeError
    from lab.trace import TraceError

    return (_UsageError, ConfigError, SettingsError, RunError, TraceError, ServeError, ReplayRefusal, ReplayFailed,
            OSError)


def _reads(args: argparse.Namespace, settings: HostSettings) -> ReaderPool | ReadHere:
    """Where ``analyze``/``compare``/``ranks`` read: here, or with ``--isolated`` reader processes.
    Those start (~1 s of imports) while this process imports the report's own modules; ranks:
    the host's readers (2-4), every rank read at once; one trace or two: a pool of one."""
    if not args.isolated:
        return ReadHere(settings=settings)
    return ReaderPool(settings=settings, readers=None if args.command == "ranks" else 1)  # started by `with`


def _readers(settings: HostSettings | None, pool: ReaderPool | ReadHere | None):
    """``pool`` (started, the caller's) or reads in this process (``ReadHere``)."""
    if pool is not None:
        return contextlib.nullcontext(pool)
    return ReadHere(settings=settings or HostSettings())


def _read(pool: ReaderPool | ReadHere, path: str, *, name_path: bool = False) -> Parsed | None:
    """``path`` read (parsed and analysed) here or by the pool's reader; None, with the reason on stderr, if not."""
    try:
        return pool.read(path=path, label=path)
    except ReadFailed as exc:
        where = f"{path}: " if name_path else ""
        print(f"error: {where}{' '.join(str(exc).split())}", file=sys.stderr)
        return None


def _print(data: dict, text: str, *, as_json: bool) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False) if as_json else text, end="\n" if as_json else "")


def analyze_main(path: str, *, as_json: bool, settings: HostSettings | None = None,
                 pool: ReaderPool | ReadHere | None = None) -> int:
    """``python -m lab analyze TRACE [--json]``."""
    from lab.views.report import build_report, format_report

    with _readers(settings, pool) as readers:
        parsed = _read(readers, path)
    if parsed is None:
        return EXIT_BAD_INPUT
    report = build_report(parsed.trace, analysis=parsed.analysis, explanation=parsed.explanation,
                          judgement=parsed.judgement)
    _print(report, format_report(report) + "\n", as_json=as_json)
    return 0


def compare_main(a: str, b: str, *, as_json: bool, settings: HostSettings | None = None,
                 pool: ReaderPool | ReadHere | None = None) -> int:
    """``python -m lab compare A B [--json]``: B against the baseline A."""
    from lab.analysis import compare_analyses
    from lab.views.report import comparison_to_dict, format_comparison

    with _readers(settings, pool) as readers:
        parsed_a = _read(readers, a)
        parsed_b = _read(readers, b) if parsed_a is not None else None
    if parsed_a is None or parsed_b is None:
        return EXIT_BAD_INPUT
    label_a, label_b = _trace_label(a), _trace_label(b)
    if label_a == label_b:
        label_a, label_b = "A", "B"
    # What compare_traces does, on the analyses the reader made (traces alone: no run config).
    comparison = compare_analyses(parsed_a.analysis, parsed_b.analysis, findings_a=parsed_a.findings,
                                  findings_b=parsed_b.findings, label_a=label_a, label_b=label_b)
    data = comparison_to_dict(comparison)
    _print(data, format_comparison(data) + "\n", as_json=as_json)
    return 0


def _trace_label(path: str) -> str:
    name = Path(path).name
    for suffix in (".gz", ".json"):
        name = name[: -len(suffix)] if name.endswith(suffix) else name
    return name


def ranks_main(paths: Sequence[str], *, as_json: bool, settings: HostSettings | None = None,
               pool: ReaderPool | ReadHere | None = None, sort: str = "rank", top: int | None = None) -> int:
    """``python -m lab ranks A B … [--json]``: every rank read at once (the pool's readers, or Ray
    tasks with ``PROFILER_LAB_BACKEND=ray``), each sending back only its summary; then the job."""
    from lab.analysis import RanksError, combine_ranks
    from lab.judge import judge_ranks
    from lab.read import read_rank_summaries
    from lab.views.ranks import ranks_dict, ranks_text

    with _readers(settings, pool) as readers:
        try:
            summaries = read_rank_summaries(list(paths), settings=settings or readers.settings, pool=readers)
        except ReadFailed as exc:
            print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        ranks = combine_ranks(summaries)
    except RanksError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    findings = judge_ranks(ranks)
    _print(ranks_dict(ranks, findings), ranks_text(ranks, findings, sort=sort, top=top), as_json=as_json)
    return 0


def _profile(args: argparse.Namespace, config: RunConfig, settings: HostSettings) -> int:
    # Refuse what needs no torch before importing it (run_profile checks all of it again).
    check_limits(config, settings)
    if config.device == "cpu":
        check_device(config, kind="cpu", compute_capability=None)
    from lab.run.runner import default_sort_key, run_profile
    from lab.views.tables import limit_text_table

    result = run_profile(config, settings=settings)
    if result.rank_traces:
        return _print_job(result, args.out, settings)
    if args.out is not None:
        write_artifacts(result, args.out)
    key = default_sort_key(result.device.kind)
    table = result.tables.get(key) or result.tables.get("cpu_time_total", "")
    print(limit_text_table(table, PRINT_ROW_LIMIT))
    t = result.timing
    print(f"{result.device.label}: step {t.unprofiled_median_us:.1f} µs without the profiler, "
          f"{t.profiled_median_us:.1f} µs with it ({t.overhead_pct:+.1f} %, {t.method})")
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.out is not None:
        print(f"wrote {args.out / 'trace.json.gz'}, key_averages.csv, summary.json")
    return 0


# ``table --csv``: the CPU-side rows, one per name, these columns exactly; the trace's [memory]
# records (profile_memory) add torch's four memory columns, in bytes.
TABLE_CSV_COLUMNS = ("name", "count", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us")
TABLE_CSV_MEMORY_COLUMNS = ("self_cpu_memory_bytes", "cpu_memory_bytes", "self_device_memory_bytes",
                            "device_memory_bytes")
TORCH_TABLE_ROW_LIMIT = 100  # torch's table() default


def _add_table_parser(sub) -> None:
    t = sub.add_parser("table", help="print torch's key_averages table of a trace, derived from its events")
    t.add_argument("trace", help="a Chrome trace (.json or .json.gz)")
    t.add_argument("--csv", action="store_true",
                   help=f"CSV of the CPU-side rows: {','.join(TABLE_CSV_COLUMNS)} (+ input_shapes when grouped; "
                        f"+ {','.join(TABLE_CSV_MEMORY_COLUMNS)} when the trace has profile_memory's records)")
    t.add_argument("--sort", default=None, metavar="KEY",
                   help="torch's sort key (self_cpu_time_total, cpu_time_total, device_time_total, "
                        "self_device_time_total, count, ...); default: device total on a GPU trace, else CPU total")
    t.add_argument("--row-limit", type=int, default=None, metavar="N",
                   help=f"rows to print (negative: all); default {TORCH_TABLE_ROW_LIMIT} as torch's table(), "
                        "all for --csv")
    t.add_argument("--group-by-shape", action="store_true", help="one row per (name, input shapes)")
    t.add_argument("--python-functions", action="store_true",
                   help="count with_stack's python frames as events, as torch 2.12-2.13 do")


def _table(args: argparse.Namespace, settings: HostSettings) -> int:
    from lab.analysis import trace_key_averages
    from lab.trace import load_trace
    from lab.views import TORCH_SORT_COLUMNS, profiled_device, torch_sorted, torch_table_text

    trace = load_trace(args.trace, settings=settings)
    sort_by = args.sort or ("device_time_total" if trace.has_gpu else "cpu_time_total")
    if sort_by not in TORCH_SORT_COLUMNS:
        raise _UsageError(f"--sort {sort_by!r} is not a sort key; use one of {', '.join(TORCH_SORT_COLUMNS)}")
    frame = trace_key_averages(trace, group_by_input_shape=args.group_by_shape,
                               include_python_functions=args.python_functions)
    if not args.csv:
        limit = TORCH_TABLE_ROW_LIMIT if args.row_limit is None else args.row_limit
        print(torch_table_text(frame, sort_by=sort_by, row_limit=limit, use_device=profiled_device(trace),
                               with_flops=bool(trace.meta.with_flops),
                               profile_memory=bool(trace.meta.profile_memory)), end="")
        return 0
    rows = torch_sorted(frame[frame["device_type"] == "cpu"], sort_by)
    if args.row_limit is not None and args.row_limit >= 0:
        rows = rows.head(args.row_limit)
    shapes = ["input_shapes"] if args.group_by_shape else []
    memory = list(TABLE_CSV_MEMORY_COLUMNS) if trace.has_memory else []
    columns = list(TABLE_CSV_COLUMNS[:1]) + shapes + list(TABLE_CSV_COLUMNS[1:]) + memory
    rows[columns].to_csv(sys.stdout, index=False, float_format="%.3f")  # µs to the ns, as traced
    return 0


def _memory(args: argparse.Namespace, settings: HostSettings) -> int:
    from lab.analysis import analyze
    from lab.judge import judge_trace
    from lab.trace import load_trace
    from lab.views.memory import MEMORY_CSV_COLUMNS, NO_MEMORY, memory_findings, memory_rows, memory_text

    trace = load_trace(args.trace, settings=settings)
    if not trace.has_memory:
        raise _UsageError(f"{args.trace}: {NO_MEMORY}")
    analysis = analyze(trace)
    memory = analysis.memory
    assert memory is not None  # has_memory
    if args.csv:
        memory_rows(trace, memory)[list(MEMORY_CSV_COLUMNS)].to_csv(sys.stdout, index=False, float_format="%.3f")
        return 0
    print(memory_text(trace, memory, memory_findings(judge_trace(trace, analysis).findings)), end="")
    return 0


def _print_job(result, out: Path | None, settings: HostSettings) -> int:
    """A distributed run: its rank traces written under their own names (to ``out``, or a temporary
    folder), then read as one job, as ``ranks`` reads a directory, and its text printed."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="profiler_lab_job_") as tmp:
        folder = out if out is not None else Path(tmp)
        paths = write_rank_traces(result, folder)
        if out is not None:
            write_artifacts(result, out, trace=False)
        t = result.timing
        print(f"{result.config.ranks} ranks over gloo on {result.device.label}: "
              f"step {t.unprofiled_median_us / 1e3:.1f} ms without the profiler, "
              f"{t.profiled_median_us / 1e3:.1f} ms with it (rank 0, {t.method})")
        status = ranks_main([str(p) for p in paths], as_json=False, settings=settings)
    if out is not None:
        print(f"wrote {len(paths)} rank traces to {out}, key_averages.csv (rank 0), summary.json")
    return status


def _add_replay_parser(sub) -> None:
    p = sub.add_parser("replay", help="replay one op of a trace (recorded with record_shapes=True) here")
    p.add_argument("trace", help="a Chrome trace (.json or .json.gz) recorded with record_shapes=True")
    p.add_argument("--op", default=None, help="the op's name as the trace writes it, e.g. aten::mm")
    p.add_argument("--list", action="store_true",
                   help="list the trace's replayable ops by total time (op, shapes, calls) instead of replaying")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--index", type=int, default=None, metavar="N",
                       help="the op's N-th call, 0 = the first (default: the call of median duration)")
    which.add_argument("--shapes", default=None,
                       help="the call with these Input Dims, e.g. '[[4096, 4096], [4096, 4096]]'")
    p.add_argument("--export", type=Path, default=None, metavar="FILE",
                   help="write a standalone replay script (torch only) to FILE")
    p.add_argument("--no-run", action="store_true", help="with --export: write the script, run nothing")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="where to replay (default auto)")
    p.add_argument("--calls", type=int, default=20, help="timed and profiled calls (default %(default)s)")
    p.add_argument("--warmup", type=int, default=5, help="un-profiled calls first (default %(default)s)")
    v = p.add_argument_group("variants (the row's op, changed)")
    v.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                   help="floating-point inputs in this dtype instead of the recorded one")
    v.add_argument("--tf32", action=argparse.BooleanOptionalAction, default=None,
                   help="allow TF32 for float32 GEMMs and convolutions (default: as the trace's kernels ran)")
    layout = v.add_mutually_exclusive_group()
    layout.add_argument("--contiguous", action="store_true", help="contiguous inputs instead of the recorded strides")
    layout.add_argument("--channels-last", action="store_true", help="4-D inputs in channels_last")
    v.add_argument("--compile", action="store_true", help="call the op through torch.compile")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _variant_flags(args: argparse.Namespace) -> tuple[str, ...]:
    """The replay script's flags for the variants asked for."""
    flags = [f"--dtype={args.dtype}"] if args.dtype else []
    flags += [] if args.tf32 is None else ["--tf32" if args.tf32 else "--no-tf32"]
    flags += [flag for flag, on in (("--contiguous", args.contiguous), ("--channels-last", args.channels_last),
                                    ("--compile", args.compile)) if on]
    return tuple(flags)


def _replay(args: argparse.Namespace, settings: HostSettings) -> int:
    """``python -m lab replay TRACE --op NAME``: the row's spec, refused before torch is imported
    if it cannot be rebuilt; then the replay in a child process, printed beside the row."""
    from lab.replay import export_script, find_row, row_figures, script_spec, spec_of_row
    from lab.trace import load_trace

    if args.calls < 1 or args.warmup < 0:
        raise _UsageError("--calls must be ≥ 1 and --warmup ≥ 0")
    if args.op is None and not args.list:
        raise _UsageError("name the op to replay with --op NAME, or list the trace's ops with --list")
    trace = load_trace(args.trace, settings=settings)
    if args.list:
        return _replay_list(trace, as_json=args.json)
    row = find_row(trace, args.op, index=args.index, shapes=args.shapes)
    spec, original = spec_of_row(trace, row), row_figures(trace, row)
    if args.export is not None:
        args.export.write_text(export_script(spec, original, source=str(args.trace)), encoding="utf-8")
        print(f"wrote {args.export}", file=sys.stderr)
        if args.no_run:
            return 0
    from lab.core.devices import detect_device
    from lab.replay import run_replay
    from lab.replay.report import check_replay, format_side_by_side, side_by_side

    info = detect_device(args.device)
    if args.device == "cuda" and info.kind != "cuda":
        raise _UsageError("--device cuda was asked for but no CUDA GPU is visible; use --device cpu")
    check_replay(spec, info)
    result = run_replay(script_spec(spec, original), device=info.kind, calls=args.calls, warmup=args.warmup,
                        options=_variant_flags(args))
    data = side_by_side(spec, original, result)
    _print(data, format_side_by_side(data), as_json=args.json)
    return 0


def _replay_list(trace, *, as_json: bool) -> int:
    from lab.replay import hot_ops

    hot = hot_ops(trace, top=PRINT_ROW_LIMIT)
    lines = [f"{'total µs':>12} {'calls':>6} {'median µs':>10}  op and shapes (replay with --op NAME --shapes DIMS)"]
    lines += [f"{h.total_us:12.1f} {h.calls:6d} {h.median_us:10.1f}  {h.op} {h.shapes}"
              + ("" if h.refusal is None else f"  [cannot replay: {h.refusal}]") for h in hot]
    basis = hot[0].basis if hot else "time"
    text = "\n".join(lines) + f"\n(by {basis})\n" if hot else "no replayable ops in this trace\n"
    _print({"ops": [h.to_dict() for h in hot]}, text, as_json=as_json)
    return 0

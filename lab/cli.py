"""Command line: ``python -m lab profile|analyze|compare``.

``profile`` runs in this process (``run_profile`` directly) and writes the run's artifacts:
``trace.json.gz`` (the Chrome trace as torch exported it), ``key_averages.csv`` and
``summary.json`` (config, device, timings, stage seconds). Bad input exits with status 2 and
one line on stderr, never a traceback. torch is imported only once a run is accepted.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import sys
from pathlib import Path

from lab.read import ReaderPool
from lab.run.config import OPTIONS, ConfigError, Option, RunConfig, check_device, check_limits
from lab.run.settings import HostSettings, SettingsError

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
    parser = _Parser(prog="python -m lab", description="Profile a workload, or read a trace.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("profile", help="profile one run and write its trace, table and summary")
    for option in OPTIONS.values():  # every RunConfig field, as its Option declares it
        _add_flag(p, option)
    p.add_argument("--out", type=Path, default=None, help="folder for trace.json.gz, key_averages.csv, summary.json")

    for name, text in (("analyze", "read one trace and print its insights"),):
        a = sub.add_parser(name, help=text)
        a.add_argument("trace", help="a Chrome trace (.json or .json.gz)")
        a.add_argument("--json", action="store_true", help="print JSON instead of text")
    c = sub.add_parser("compare", help="compare two traces")
    c.add_argument("a", help="baseline trace")
    c.add_argument("b", help="trace to compare with the baseline")
    c.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser


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
        settings = HostSettings.from_env()  # the trace limits (max events, decompressed size)
        # One reader process reads the traces (lab.read); it starts (~1 s of imports) while
        # this process imports the report's own modules.
        with ReaderPool(settings=settings, readers=1).start() as pool:
            report = _import_report(args.command)
            if args.command == "analyze":
                return report.analyze_main(args.trace, as_json=args.json, settings=settings, pool=pool)
            return report.compare_main(args.a, args.b, as_json=args.json, settings=settings, pool=pool)
    except Exception as exc:
        if not isinstance(exc, _refusals()):
            raise  # a bug: keep its traceback
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _refusals() -> tuple[type[Exception], ...]:
    # RunError lives with the result (pandas): imported only once something went wrong, so a
    # refused command line answers without loading pandas or torch.
    from lab.run.result import RunError

    return (_UsageError, ConfigError, SettingsError, RunError, OSError)


def _import_report(command: str):
    """lab.views.report, imported only when asked for: profiling does not need it."""
    try:
        return importlib.import_module("lab.views.report")
    except ModuleNotFoundError as exc:
        if exc.name != "lab.views.report":
            raise
        raise _UsageError(f"{command} needs lab/report.py, which this checkout lacks") from None


def _profile(args: argparse.Namespace, config: RunConfig, settings: HostSettings) -> int:
    # Refuse what needs no torch before importing it (run_profile checks all of it again).
    check_limits(config, settings)
    if config.device == "cpu":
        check_device(config, kind="cpu", compute_capability=None)
    from lab.run.runner import default_sort_key, run_profile
    from lab.views.tables import limit_text_table

    result = run_profile(config, settings=settings)
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


def write_artifacts(result, out: Path) -> None:
    """trace.json.gz, key_averages.csv and summary.json for one ``RunResult`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "trace.json.gz").write_bytes(result.trace_gz)
    result.key_averages.to_csv(out / "key_averages.csv", index=False)
    (out / "summary.json").write_text(json.dumps(summary(result), indent=2) + "\n", encoding="utf-8")


def summary(result) -> dict:
    """Plain-JSON description of a run: what ran, where, how long each part took."""
    t = result.timing
    return {
        "config": result.config.to_dict(),
        "device": dataclasses.asdict(result.device),
        "timing": {
            "method": t.method,
            "profiled_us": list(t.profiled_us),
            "unprofiled_us": list(t.unprofiled_us),
            "profiled_median_us": _finite(t.profiled_median_us),
            "unprofiled_median_us": _finite(t.unprofiled_median_us),
            "overhead_pct": _finite(t.overhead_pct),
            "compile_s": t.compile_s,
        },
        "stage_s": dict(result.stage_s),
        "warnings": list(result.warnings),
        "trace_stem": result.trace_stem,
    }


def _finite(value: float) -> float | None:
    # JSON has no NaN: an empty timing becomes null.
    return value if math.isfinite(value) else None

"""Layers that only point down, seen in real interpreters (``tests/test_layout.py`` reads the
source; this runs it): a process that reads and analyses a trace loads no runner.

Each check starts a fresh ``python -c`` (a module loaded by an earlier test in this process
would hide what the read itself loads), reads a real GPU trace through ``load_trace`` →
``analyze`` → ``judge_trace`` and reports ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.subprocess]

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests" / "data" / "matmul_add_4096_bf16.json.gz"

_READ = """
import json, sys
{entry}
from lab.analysis import analyze
from lab.judge import judge_trace
from lab.trace import load_trace

trace = load_trace(sys.argv[1])
analysis = analyze(trace)
findings = judge_trace(trace, analysis).findings
loaded = sorted(m for m in sys.modules if m in ("lab.run", "torch") or m.startswith(("lab.run.", "torch.")))
print(json.dumps({{"events": len(trace.events), "gemm_rows": len(analysis.gemm), "rules": [f.rule for f in findings],
                   "lab_modules": sum(m.startswith("lab.") for m in sys.modules), "loaded": loaded}}))
"""


def _read_in_child(entry: str = "") -> dict:
    done = subprocess.run([sys.executable, "-c", _READ.format(entry=entry), str(TRACE)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_reading_a_trace_loads_no_runner_and_no_torch():
    out = _read_in_child()
    # A real read: the 4096³ bf16 sample's events, its GEMM row, its findings (the unfused bias add).
    assert out["events"] > 100 and out["gemm_rows"] >= 1 and "unfused_bias_add" in out["rules"]
    assert out["lab_modules"] > 40  # trace, analysis and core were all imported
    assert out["loaded"] == []


def test_a_reader_process_loads_no_runner():
    # What a reader interpreter imports (lab/read/reader.py, its READER_CODE entry), then a read.
    out = _read_in_child("import lab.read.reader")
    assert out["events"] > 100
    assert out["loaded"] == []

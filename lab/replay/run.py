"""Run a replay in a child process (the script ``lab.replay.export`` writes, with the spec in a
file): a profiler already on in this process would crash a second one."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from lab.replay.export import SCRIPT_BODY

__all__ = ["REPLAY_TIMEOUT_S", "ReplayFailed", "run_replay"]

# A replay is warm-up + 5 timed rounds + 1 profiled round of a few dozen calls of one op: seconds,
# even for an 8192³ GEMM on a CPU; past this the op or the machine is not what was meant.
REPLAY_TIMEOUT_S = 300


class ReplayFailed(RuntimeError):
    """The replay's process failed; the message is its last error line."""


def run_replay(spec: dict, *, device: str, calls: int = 20, warmup: int = 5, options: tuple[str, ...] = (),
               timeout_s: float = REPLAY_TIMEOUT_S) -> dict:
    """The replay's result (``lab.replay.standalone.replay``'s dict) from a fresh interpreter.
    ``options`` are the script's variant flags (``--tf32``, ``--contiguous``, ``--dtype bfloat16`` …)."""
    with tempfile.TemporaryDirectory(prefix="lab_replay_") as tmp:
        path = Path(tmp) / "spec.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        cmd = [sys.executable, str(SCRIPT_BODY), "--spec", str(path), "--device", device, "--calls", str(calls),
               "--warmup", str(warmup), "--json", *options]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise ReplayFailed(f"the replay ran past {timeout_s:.0f} s; use fewer --calls or a smaller op") from None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        errors = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise ReplayFailed(errors[-1] if errors else f"the replay exited with status {done.returncode}")
    return json.loads(lines[-1])

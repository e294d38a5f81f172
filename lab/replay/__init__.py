"""Replay one op row of a trace: its spec (``spec``), the row and what the trace measured
(``rows``), its FLOPs and bytes (``rates``), a standalone script (``export``, ``standalone``)
and a run of it in a child process (``run``)."""

from lab.replay.export import export_script, script_spec
from lab.replay.hot import HotOp, hot_ops
from lab.replay.rates import op_bytes, op_flops
from lab.replay.rows import RowFigures, find_row, row_figures, spec_of_row
from lab.replay.run import ReplayFailed, run_replay
from lab.replay.spec import OP_CLASSES, ReplayInput, ReplayRefusal, ReplaySpec, build_spec, device_refusal

__all__ = [
    "OP_CLASSES", "HotOp", "ReplayFailed", "ReplayInput", "ReplayRefusal", "ReplaySpec", "RowFigures", "build_spec",
    "device_refusal", "export_script", "find_row", "hot_ops", "op_bytes", "op_flops", "row_figures", "run_replay",
    "script_spec", "spec_of_row",
]  # fmt: skip

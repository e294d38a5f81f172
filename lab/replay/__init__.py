"""Replay one op row of a trace: its spec (``spec``), the row and what the trace measured
(``rows``), its FLOPs and bytes (``rates``); ``standalone`` rebuilds the inputs with torch."""

from lab.replay.rates import op_bytes, op_flops
from lab.replay.rows import RowFigures, find_row, row_figures, spec_of_row
from lab.replay.spec import OP_CLASSES, ReplayInput, ReplayRefusal, ReplaySpec, build_spec, device_refusal

__all__ = [
    "OP_CLASSES", "ReplayInput", "ReplayRefusal", "ReplaySpec", "RowFigures", "build_spec", "device_refusal",
    "find_row", "op_bytes", "op_flops", "row_figures", "spec_of_row",
]  # fmt: skip

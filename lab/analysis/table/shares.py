"""The CPU share columns of torch's table (``EventList.table()``): each row's Self CPU and CPU total
as a percentage of "Self CPU time total", the sum of every row's self CPU time, annotations
(``ProfilerStep*``, record_function labels) included.

One computation, read by the Table view (``lab.views.tables``) and by the lessons that quote a
row's share (``lab.analysis.figures.gemm_op_share_pct``), so a lesson and the Table say one figure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["cpu_shares_pct", "share_pct"]


def share_pct(values: np.ndarray, total: float) -> np.ndarray:
    """``values`` as % of ``total`` (zeros where the total is 0 or unknown)."""
    if not total or not np.isfinite(total):
        return np.zeros(len(values))
    return 100.0 * values / total


def cpu_shares_pct(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(Self CPU %, CPU total %) per row of a key_averages frame, as torch's table computes them."""
    self_cpu = df["self_cpu_us"].to_numpy(dtype=np.float64) if "self_cpu_us" in df.columns else np.zeros(len(df))
    cpu_total = df["cpu_total_us"].to_numpy(dtype=np.float64) if "cpu_total_us" in df.columns else np.zeros(len(df))
    total = float(np.nansum(self_cpu))
    return share_pct(self_cpu, total), share_pct(cpu_total, total)

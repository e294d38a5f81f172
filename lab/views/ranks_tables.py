"""The Ranks view's tables and the job's summary, in words: what the page and a reader see first.

``rank_table``: a row per rank, every time per step (the rank's total over its steps ÷ its
steps; "whole trace" in the header when the ranks have no steps), headers in words with their
unit. ``collective_table``: a row per collective matched across ranks
(``RanksAnalysis.collectives``). ``job_summary``: what an open job's Summary leads with — the
job, its straggler and the cause, the insight to read first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.insights.record import Insight
from lab.analysis.ranks.analyze import RankRow, RanksAnalysis
from lab.analysis.ranks.insights import STRAGGLER_TITLE, straggler_sentence
from lab.units import fmt_us

__all__ = ["COLLECTIVE_TABLE_COLUMNS", "RANK_CAUSE_GROUPS", "JobSummary", "collective_table", "job_summary",
           "rank_causes_table", "rank_table", "table_headers"]

_MS = 1e-3
_KB = 1e-3
COLLECTIVE_TABLE_COLUMNS = ("Collective", "Process group", "Seq", "Ranks", "Start skew (ms)", "Slowest to arrive",
                            "Transfer (ms)", "Size (KB)", "algbw (GB/s)", "busbw (GB/s)")


def table_headers(per_step: bool) -> dict[str, str]:
    """The per-rank table's headers, by the RankRow figure they show."""
    per = "per step" if per_step else "whole trace"
    return {
        "rank": "Rank", "steps": "Steps", "step": "Step (ms, median)", "gpu_busy": f"GPU busy {per} (ms)",
        "compute": f"Compute {per} (ms)", "comm": f"Communication {per} (ms)",
        "wait": f"Waiting for the last rank {per} (ms)", "transfer": f"Transfer {per} (ms)",
        "comm_in_window": f"Communication in window {per} (ms)", "overlap": "Overlap (% of communication)",
        "idle": f"Idle {per} (ms)", "launch": "Launch delay (µs, median)", "calls": "Collective calls (total)",
        "source": "Communication measured on", "file": "File",
    }


def _per_step(r: RankRow, value: float, per_step: bool) -> float:
    return value / r.steps if per_step and r.steps else value


def rank_table(ranks: RanksAnalysis) -> pd.DataFrame:
    """The per-rank table as the page shows it: per step (ms), headers in words; without the GPU
    columns when no rank has a GPU, without wait and transfer when no collective was matched."""
    per_step = all(r.steps > 0 for r in ranks.ranks)
    h = table_headers(per_step)
    rows = []
    for r in ranks.ranks:
        def ms(value: float, r=r) -> float:
            return _per_step(r, value, per_step) * _MS

        rows.append({
            h["rank"]: r.rank, h["steps"]: r.steps, h["step"]: r.step_us * _MS, h["gpu_busy"]: ms(r.gpu_busy_us),
            h["compute"]: ms(r.compute_us), h["comm"]: ms(r.comm_us), h["wait"]: ms(r.comm_wait_us),
            h["transfer"]: ms(r.comm_transfer_us), h["comm_in_window"]: ms(r.comm_in_window_us),
            h["overlap"]: r.overlap_pct, h["idle"]: ms(r.idle_us), h["launch"]: r.launch_delay_us,
            h["calls"]: r.collective_calls, h["source"]: r.comm_source, h["file"]: r.name,
        })
    table = pd.DataFrame(rows, columns=list(h.values()))
    if not table[h["gpu_busy"]].any() and table[h["launch"]].isna().all():
        table = table.drop(columns=[h["gpu_busy"], h["launch"]])  # a CPU-only job: no GPU to show
    if table[h["wait"]].isna().all():
        table = table.drop(columns=[h["wait"], h["transfer"]])
    return table


def collective_table(ranks: RanksAnalysis) -> pd.DataFrame:
    """One row per collective matched across ranks, in words; empty without any."""
    c = ranks.collectives
    if c is None or not len(c):
        return pd.DataFrame(columns=list(COLLECTIVE_TABLE_COLUMNS))
    return pd.DataFrame({
        "Collective": c["kind"].astype(str), "Process group": c["group"].astype(str).replace("", "—"),
        "Seq": [f"{v:.0f}" if np.isfinite(v) else "—" for v in c["seq"].astype(float)], "Ranks": c["ranks"],
        "Start skew (ms)": c["start_skew_us"] * _MS,
        "Slowest to arrive": [f"rank {r}" for r in c["last_rank"]], "Transfer (ms)": c["transfer_us"] * _MS,
        "Size (KB)": c["size_bytes"] * _KB, "algbw (GB/s)": c["algbw_gbs"], "busbw (GB/s)": c["busbw_gbs"],
    }, columns=list(COLLECTIVE_TABLE_COLUMNS))


@dataclass(frozen=True)
class JobSummary:
    """What an open job's Summary leads with."""

    headline: str  # "4 ranks of a world of 4 over gloo"
    straggler: str  # "Straggler: rank 2 spends …", or why there is none
    collectives: str  # the matched collectives in one line ("" without)
    top_insight: Insight | None  # the straggler's insight when it fired, else the first


def _collectives_line(ranks: RanksAnalysis) -> str:
    c = ranks.collectives
    if c is None or not len(c):
        return ""
    how = "by sequence number" if c["seq"].notna().all() else "by order within each process group"
    parts = []
    for kind, g in c.groupby("kind", sort=False):
        size = g["size_bytes"].median()
        bw = g["busbw_gbs"].median()
        figures = [f"{len(g)} × {kind}"]
        if math.isfinite(size):
            figures.append(f"{size / 1e6:.3g} MB")
        figures.append(f"median start skew {fmt_us(float(g['start_skew_us'].median()))}")
        if math.isfinite(bw):
            figures.append(f"busbw {bw:.3g} GB/s")
        parts.append(", ".join(figures))
    return f"Collectives matched across ranks ({how}): " + "; ".join(parts) + "."


def job_summary(ranks: RanksAnalysis, insights: Sequence[Insight]) -> JobSummary:
    backend = f" over {ranks.backend}" if ranks.backend else ""
    s = ranks.straggler
    if s is None:
        straggler = "No straggler: the ranks made no collective calls to match."
    else:
        sentence = straggler_sentence(ranks)
        straggler = f"Straggler: {sentence[0].lower()}{sentence[1:]}" if sentence else f"Straggler: rank {s.rank}."
    first = next((i for i in insights if i.title == STRAGGLER_TITLE), insights[0] if insights else None)
    waits = [r.comm_wait_us / r.steps for r in ranks.ranks if r.steps and np.isfinite(r.comm_wait_us)]
    headline = f"{len(ranks.ranks)} ranks of a world of {ranks.world_size}{backend}"
    if waits:
        headline += f"; the ranks wait {fmt_us(float(np.median(waits)))} per step at the median for the last to arrive"
    return JobSummary(headline=headline, straggler=straggler, collectives=_collectives_line(ranks), top_insight=first)


# The per-rank attribution's columns: each a group of lab.explain's causes (every cause in one).
RANK_CAUSE_GROUPS = (
    ("Compute (ms/step)", ("gemm", "attention", "convolution", "normalization", "softmax", "elementwise",
                           "reduction", "copy", "other_work")),
    ("Communication (ms/step)", ("communication",)),
    ("Synchronisation (ms/step)", ("sync",)),
    ("Input pipeline (ms/step)", ("input",)),
    ("Host work (ms/step)", ("compile", "optimizer", "allocator", "launch", "dispatch", "python")),
    ("Profiler (ms/step)", ("profiler",)),
    ("Nothing recorded (ms/step)", ("unrecorded",)),
)


def rank_causes_table(ranks: RanksAnalysis) -> pd.DataFrame:
    """Per rank, where its median step went (lab.explain's attribution, grouped): empty when the
    ranks were read without it. A rank's "host work" includes Python inside labelled ranges
    (``record_function("load_batch")`` around a slow loader)."""
    causes = ranks.causes
    if causes is None or not len(causes):
        return pd.DataFrame()
    out = pd.DataFrame({"Rank": causes.index.astype(int)})
    for label, keys in RANK_CAUSE_GROUPS:
        present = [k for k in keys if k in causes.columns]
        out[label] = (causes[present].sum(axis=1).to_numpy() if present else 0.0) * _MS
    return out.loc[:, (out != 0).any(axis=0)]

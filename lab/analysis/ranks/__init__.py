"""A job's ranks read together: one trace per rank of a torch.distributed job.

``analyze`` is the facade (``analyze_ranks`` → ``RanksAnalysis``: per-rank rows, stragglers);
``job`` checks that the traces form one job and aligns their clocks, ``comm`` splits each rank's
time into compute and communication, ``sentence`` says the straggler in words. The findings over
the ranks are the judge's (``lab.judge.rank_rules``).
"""

from lab.analysis.ranks.analyze import (
    RankRow,
    RanksAnalysis,
    RanksError,
    Straggler,
    analyze_ranks,
    combine_ranks,
    rank_frame,
)
from lab.analysis.ranks.summary import HEAT_COLUMNS, RankSummary, rank_summary

__all__ = ["HEAT_COLUMNS", "RankRow", "RankSummary", "RanksAnalysis", "RanksError", "Straggler",
           "analyze_ranks", "combine_ranks", "rank_frame", "rank_summary"]

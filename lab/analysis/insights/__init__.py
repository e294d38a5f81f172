"""Insights: findings that cite numbers. ``record`` is the one record every analyzer returns
(``Insight``); ``rules`` is the tuple of rules over a trace and its ``Analysis`` (``find_insights``).

Only the record is re-exported here: every analyzer (diagnoses, memory, ranks) imports it from
this package, and the rules import every analyzer, so a facade that imported the rules would
close a circle. Take ``find_insights`` from ``lab.analysis``.
"""

from lab.analysis.insights.record import SEVERITIES, Insight

__all__ = ["SEVERITIES", "Insight"]

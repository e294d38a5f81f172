"""Judge: findings with what fixing each would save, and the verdict (the biggest of them).

``Finding`` is the one record (``finding.py``); ``rules.RULES`` are pure functions of a
``lab.explain.Explanation`` that check a premise and return a Finding or None; ``judge`` runs
them all (with a trace's context: ``context``, ``gemm_rules``, ``memory_rules``) and ranks them by
saving. A job's ranks are judged in a context of their own: ``judge_ranks`` (``rank_rules``).
"""

from lab.judge.context import TraceContext, context_of
from lab.judge.finding import MATERIAL_PCT, SEVERITIES, Finding, severity_of
from lab.judge.judgement import Judgement, judge, judge_trace
from lab.judge.rank_rules import RANK_RULES, judge_ranks
from lab.judge.rules import RULES

__all__ = ["MATERIAL_PCT", "RANK_RULES", "RULES", "SEVERITIES", "Finding", "Judgement", "TraceContext", "context_of",
           "judge", "judge_ranks", "judge_trace", "severity_of"]

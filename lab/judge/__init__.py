"""Judge: findings with what fixing each would save, and the verdict (the biggest of them).

``Finding`` is the one record (``finding.py``); ``rules.RULES`` are pure functions of a
``lab.explain.Explanation`` that check a premise and return a Finding or None; ``judge`` runs
them all and ranks them by saving.
"""

from lab.judge.context import TraceContext, context_of
from lab.judge.finding import MATERIAL_PCT, SEVERITIES, Finding, severity_of
from lab.judge.judgement import Judgement, judge, judge_trace
from lab.judge.rules import RULES

__all__ = ["MATERIAL_PCT", "RULES", "SEVERITIES", "Finding", "Judgement", "TraceContext", "context_of", "judge",
           "judge_trace", "severity_of"]

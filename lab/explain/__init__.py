"""Explain: where a step's time went, and how close each op runs to its roof.

``attribute`` splits every step's wall time into disjoint causes (``classes.CAUSES``: the
class of GPU work running, or what held up the next launch while the GPU sat idle);
``outlier_steps`` names steps far slower than the median and where their extra time went;
``op_roofs`` puts each op against its device's compute or bandwidth roof. ``lab.judge`` turns
these into findings with what fixing each would save.
"""

from lab.explain.attribution import CAUSE_COLUMNS, Attribution, attribute
from lab.explain.classes import CAUSES, HOST_CAUSES, WORK_CLASSES, Cause, cause
from lab.explain.explanation import Explanation, LaunchFacts, explain
from lab.explain.outliers import Outlier, outlier_steps
from lab.explain.roofs import ROOF_COLUMNS, op_roofs

__all__ = [
    "CAUSES", "CAUSE_COLUMNS", "HOST_CAUSES", "ROOF_COLUMNS", "WORK_CLASSES", "Attribution", "Cause", "Explanation",
    "LaunchFacts", "Outlier", "attribute", "cause", "explain", "op_roofs", "outlier_steps",
]  # fmt: skip

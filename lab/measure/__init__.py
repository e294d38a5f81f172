"""Measure: every figure of one trace computed once (``measure`` → ``Measures``).

``Measures`` holds ``analyze``'s tables (key_averages, operators, kernels, GPU use, launches, the
steps table, GEMMs, memory) and the arrays every later stage reads instead of recomputing them:
the GPU activity rows, the GPU-busy union, the launch links, the steps and their windows (the one
definition of "in a step"), and each GPU activity's work class. ``lab.explain`` and ``lab.judge``
read it; a second definition of any of these figures is a defect ``tests/test_measures.py``
catches.
"""

from lab.measure.measures import Measures, measure

__all__ = ["Measures", "measure"]

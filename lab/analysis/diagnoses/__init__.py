"""The diagnoses: what bounds a trace, each weighed against the GPU's idle time.

``findings`` is the facade (``diagnose`` → ``Findings``); one module per concern: ``steps``
(step spans), ``comm`` (collectives), ``graphs`` (CUDA-graph replays), ``capture`` (empty
captures, profiler inflation); ``common`` holds their interval helpers. ``lab.judge`` says what
they mean.
"""

from lab.analysis.diagnoses.findings import Findings, diagnose
from lab.analysis.diagnoses.steps import StepSpans, step_spans

__all__ = ["Findings", "StepSpans", "diagnose", "step_spans"]

"""The diagnoses: what bounds a trace, each weighed against the GPU's idle time.

``findings`` is the facade (``diagnose`` → ``Findings``, the rules' insights, the cause
named first); one module per concern: ``steps`` (step spans), ``host`` (host gaps and syncs),
``copies`` (pageable copies), ``comm`` (collectives), ``graphs`` (CUDA-graph replays),
``capture`` (empty captures, profiler inflation); ``common`` holds their interval helpers and
``text`` the insights' sentences.
"""

from lab.analysis.diagnoses.findings import (
    DIAGNOSIS_RULES,
    Findings,
    diagnose,
    diagnosis_insights,
    findings_of,
    named_cause,
)
from lab.analysis.diagnoses.steps import StepSpans, step_spans

__all__ = ["DIAGNOSIS_RULES", "Findings", "StepSpans", "diagnose", "diagnosis_insights",
           "findings_of", "named_cause", "step_spans"]

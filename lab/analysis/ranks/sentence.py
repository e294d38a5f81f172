"""The straggler in words: why it is late (a range or op that outgrew the other ranks', or the
same work run slower: the host's scheduling) and how long the others wait for it. What an open
job's Summary leads with (``straggler_sentence``) and what the judge's straggler finding says
(``lab.judge.rank_rules``).
"""

from __future__ import annotations

import numpy as np

from lab.analysis.ranks.analyze import RanksAnalysis, Straggler
from lab.units import fmt_us

__all__ = ["host_scheduled", "straggler_lead", "straggler_sentence", "waits_text"]


def straggler_lead(ranks: RanksAnalysis) -> str:
    """Why the straggler is late, when its own events say it: a range or op that outgrew the
    others', or the same work run slower (``host_scheduled``); "" when neither."""
    s = ranks.straggler
    assert s is not None
    if s.cause is not None:
        c = s.cause
        what = f"in {c.text}" if c.kind == "range" else f"in {c.name} (op time)"
        return (f"rank {s.rank} spends {fmt_us(c.mine_us)} per step {what} (the other ranks' median: "
                f"{fmt_us(c.others_us)})")
    if host_scheduled(ranks):
        compute = dict(s.deltas_us)["compute"]
        return (f"rank {s.rank} runs the same work as the others but its compute takes {fmt_us(compute)} longer per "
                "step: the host's scheduling (CPU contention), not the program")
    return ""


def host_scheduled(ranks: RanksAnalysis) -> bool:
    """The straggler has no cause of its own but ran the others' work slower: its compute grew most."""
    s = ranks.straggler
    if s is None or s.cause is not None or not ranks.same_work:
        return False
    compute = dict(s.deltas_us).get("compute", 0.0)
    return compute > 0 and compute >= max(d for _, d in s.deltas_us)


def waits_text(s: Straggler) -> str:
    """"the others wait … per step for it at the collectives (rank N: …)", "" without the waits."""
    if not (np.isfinite(s.others_wait_us) and np.isfinite(s.wait_us)):
        return ""
    return (f"the others wait {fmt_us(s.others_wait_us)} per step for it at the collectives (rank {s.rank}: "
            f"{fmt_us(s.wait_us)})")


def straggler_sentence(ranks: RanksAnalysis) -> str:
    """The straggler in one sentence, its cause first when one is found: what the Summary leads with."""
    s = ranks.straggler
    if s is None:
        return ""
    lead = straggler_lead(ranks) or f"rank {s.rank} starts its collectives last, by {fmt_us(s.late_median_us)}"
    waits = waits_text(s)
    return lead + (f"; {waits}" if waits else "") + "."

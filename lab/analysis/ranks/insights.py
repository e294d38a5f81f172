"""Insights across the ranks of one job: low comm/compute overlap, a straggler, compute imbalance.

Rules as elsewhere (``insights.py``): pure functions ``rule(ranks) -> Insight | None`` of a
``RanksAnalysis``, constant titles, the numbers that triggered them in the evidence, thresholds
named here with their reason; ``RANK_RULES`` is the tuple, ``rank_insights`` runs it.
"""

from __future__ import annotations

import numpy as np

from lab.analysis.diagnoses.comm import COMM_LOW_OVERLAP_PCT, COMM_WARN_PCT
from lab.analysis.insights.record import Insight
from lab.analysis.ranks.analyze import RanksAnalysis
from lab.units import fmt_us

__all__ = [
    "IMBALANCE_PCT", "IMBALANCE_TITLE", "LOW_OVERLAP_COMM_PCT", "LOW_OVERLAP_PCT", "LOW_OVERLAP_TITLE", "RANK_RULES",
    "SCHEDULING_TITLE", "STRAGGLER_STEP_PCT", "STRAGGLER_TITLE", "compute_imbalance", "low_overlap", "rank_insights",
    "straggler", "straggler_sentence",
]  # fmt: skip

# The single-trace diagnosis's bars (lab/analysis/diagnoses/comm.py, with their sources): communication
# at ≥ 20 % of the window with under half of it hidden behind compute is worth acting on — what
# does not overlap, every rank waits for, and DDP's gradient buckets exist to overlap all-reduce
# with backward.
LOW_OVERLAP_COMM_PCT = COMM_WARN_PCT
LOW_OVERLAP_PCT = COMM_LOW_OVERLAP_PCT
# Collectives are synchronous: every rank waits for the last to arrive, so a rank late by x costs
# each other rank x of waiting. Two gloo ranks sharing one H200 (tests/data/groundtruth/cuda)
# arrive 0.4 ms apart in 48.5 ms steps (0.9 %): scheduling noise. 5 % of a step is five times that
# and what a 20-rank job pays twenty times over.
STRAGGLER_STEP_PCT = 5.0
# Data-parallel ranks run the same model on equal batches: their compute should match. The H200
# pair differs by 0.2 %; 10 % is a rank doing more work (uneven batches or sequence lengths, a
# rank that logs or evaluates) or a slower device, which the others then wait for.
IMBALANCE_PCT = 10.0

LOW_OVERLAP_TITLE = "Communication barely overlaps compute"
STRAGGLER_TITLE = "A straggler rank: the others wait for it"
IMBALANCE_TITLE = "Compute is imbalanced across ranks"
SCHEDULING_TITLE = "The ranks run the same work at different speeds: host scheduling"
DDP_DOCS = "https://pytorch.org/docs/stable/notes/ddp.html"
HTA_OVERLAP = "https://hta.readthedocs.io/en/latest/source/features/comm_comp_overlap.html"
HTA_STRAGGLER = "https://hta.readthedocs.io/en/latest/source/features/temporal_breakdown.html"


# Past this many ranks an insight names them as ranges and figures as ranges, not one by one
# (a 64-rank job's evidence would otherwise be 64 clauses long).
LISTED_RANKS = 4


def _ranks_text(ranks) -> str:
    """The ranks' numbers, runs of consecutive ones as ranges: "0–36, 38–63"."""
    ids = sorted(r.rank for r in ranks)
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs)


def _comm_clause(r) -> str:
    share = 100 * r.comm_in_window_us / r.window_us
    return (f"rank {r.rank}: communication {fmt_us(r.comm_in_window_us)} ({share:.0f} % of its "
            f"{fmt_us(r.window_us)} window), {r.overlap_pct or 0.0:.0f} % of it overlapped")


def _range_pct(values: list[float]) -> str:
    lo, hi = f"{min(values):.0f}", f"{max(values):.0f}"
    return f"{lo} %" if lo == hi else f"{lo}–{hi} %"


def _comm_detail(hit, total: int) -> str:
    """One clause a rank for a few ranks; for many, the ranges and the worst rank."""
    if len(hit) <= LISTED_RANKS:
        return "; ".join(_comm_clause(r) for r in hit)
    share = [100 * r.comm_in_window_us / r.window_us for r in hit]
    over = [r.overlap_pct or 0.0 for r in hit]
    worst = max(hit, key=lambda r: r.comm_in_window_us / r.window_us)
    return (f"{len(hit)} of {total} ranks (ranks {_ranks_text(hit)}): communication {_range_pct(share)} of their "
            f"windows, {_range_pct(over)} of it overlapped; the largest share, "
            + _comm_clause(worst))


def low_overlap(ranks: RanksAnalysis) -> Insight | None:
    """Ranks whose communication is a large share of their window and mostly not overlapped."""
    # A share of the window, with overlap measured in it: the window's communication, not the
    # launched one (which may run past the window's end).
    hit = [r for r in ranks.ranks if r.window_us > 0 and 100 * r.comm_in_window_us / r.window_us >= LOW_OVERLAP_COMM_PCT
           and (r.overlap_pct or 0.0) < LOW_OVERLAP_PCT]
    if not hit:
        return None
    detail = _comm_detail(hit, len(ranks.ranks))
    gloo = " With gloo the reduction runs on CPU threads; for CUDA tensors use NCCL." if ranks.backend == "gloo" else ""
    return Insight(
        severity="warning", title=LOW_OVERLAP_TITLE,
        evidence=f"{detail} (overlap: communication time during which compute ran, HTA's definition).",
        suggestion=("Let all-reduce run during backward: DDP buckets gradients (bucket_cap_mb, 25 MB by default — "
                    "smaller buckets start earlier), use model.no_sync() on the accumulation steps of gradient "
                    "accumulation so only the last one communicates, and keep compute queued while collectives "
                    f"run.{gloo}"),
        learn_more=HTA_OVERLAP,
    )


def _lead(ranks: RanksAnalysis) -> str:
    """Why the straggler is late, when its own events say it: a range or op that outgrew the
    others', or the same work run slower (``_host_scheduled``); "" when neither."""
    s = ranks.straggler
    assert s is not None
    if s.cause is not None:
        c = s.cause
        what = f"in {c.text}" if c.kind == "range" else f"in {c.name} (op time)"
        return (f"rank {s.rank} spends {fmt_us(c.mine_us)} per step {what} (the other ranks' median: "
                f"{fmt_us(c.others_us)})")
    if _host_scheduled(ranks):
        compute = dict(s.deltas_us)["compute"]
        return (f"rank {s.rank} runs the same work as the others but its compute takes {fmt_us(compute)} longer per "
                "step: the host's scheduling (CPU contention), not the program")
    return ""


def _host_scheduled(ranks: RanksAnalysis) -> bool:
    """The straggler has no cause of its own but ran the others' work slower: its compute grew most."""
    s = ranks.straggler
    if s is None or s.cause is not None or not ranks.same_work:
        return False
    compute = dict(s.deltas_us).get("compute", 0.0)
    return compute > 0 and compute >= max(d for _, d in s.deltas_us)


def _waits(s) -> str:
    if not (np.isfinite(s.others_wait_us) and np.isfinite(s.wait_us)):
        return ""
    return (f"the others wait {fmt_us(s.others_wait_us)} per step for it at the collectives (rank {s.rank}: "
            f"{fmt_us(s.wait_us)})")


def straggler_sentence(ranks: RanksAnalysis) -> str:
    """The straggler in one sentence, its cause first when one is found: what the Summary leads with."""
    s = ranks.straggler
    if s is None:
        return ""
    lead = _lead(ranks) or f"rank {s.rank} starts its collectives last, by {fmt_us(s.late_median_us)}"
    waits = _waits(s)
    return lead + (f"; {waits}" if waits else "") + "."


def straggler(ranks: RanksAnalysis) -> Insight | None:
    """The rank whose collective calls start last, when it is late by a real share of a step;
    led by its cause (``cause.straggler_cause``) when one is found."""
    s = ranks.straggler
    if s is None:
        return None
    steps = [r.step_us for r in ranks.ranks if np.isfinite(r.step_us)]
    step = float(np.median(steps)) if steps else float(np.median([r.window_us for r in ranks.ranks]))
    if step <= 0 or 100 * s.late_median_us / step < STRAGGLER_STEP_PCT:
        return None
    # Lateness is read on the job's clock, baseTimeNanoseconds + ts; without it on every rank the
    # traces share a clock only if the ranks ran on one host, which the traces cannot tell.
    one_clock = all(i.has_base_time for i in ranks.infos)
    clock = "" if one_clock else (" The traces lack baseTimeNanoseconds, so this lateness holds only if every "
                                  "rank ran on one host (one clock).")
    where = ", ".join(f"{what} {'+' if d >= 0 else '−'}{fmt_us(abs(d))}" for what, d in s.deltas_us)
    ops = ("; ops with the most extra time: " + ", ".join(f"{n} +{fmt_us(d)}" for n, d in s.op_deltas_us)
           if s.op_deltas_us else "")
    late = (f"rank {s.rank} starts its collectives last: by {fmt_us(s.late_median_us)} at the median of "
            f"{s.matched_calls} matched {s.call_name} ({100 * s.late_median_us / step:.0f} % of a {fmt_us(step)} step)")
    lead, waits = _lead(ranks), _waits(s)
    sentences = [lead, late] if lead else [late]
    if waits:
        sentences.append(waits)
    evidence = ". ".join(x[0].upper() + x[1:] for x in sentences)
    if s.cause is not None and s.cause.kind == "range":
        look = f"Shorten or overlap what rank {s.rank} does in {s.cause.text}"
    elif _host_scheduled(ranks):
        look = (f"Give rank {s.rank} cores of its own (taskset or numactl, OMP_NUM_THREADS = its cores) and keep "
                "other work off them")
    else:
        look = f"Look at what rank {s.rank} does before each collective (the stacked timeline)"
    return Insight(
        severity="warning" if one_clock else "info", title=STRAGGLER_TITLE,
        evidence=f"{evidence}. Per step against the other ranks' median: {where}{ops}.{clock}",
        suggestion=(f"{look}: every other rank waits that long at each collective. Common causes: a data loader "
                    "that cannot keep up (more workers, pin_memory, prefetch), uneven batches or sequence lengths, "
                    "extra work on that rank (logging, evaluation, checkpoints), or a slower or shared device."),
        learn_more=HTA_STRAGGLER,
    )


def compute_imbalance(ranks: RanksAnalysis) -> Insight | None:
    """Per-step compute differing across ranks by ≥ IMBALANCE_PCT of its median."""
    if len({r.steps > 0 for r in ranks.ranks}) > 1:
        return None  # per step on some ranks, whole traces on others: not comparable
    per_step = {r.rank: r.compute_us / r.steps if r.steps else r.compute_us for r in ranks.ranks}
    median = float(np.median(list(per_step.values())))
    if median <= 0:
        return None
    hi, lo = max(per_step, key=per_step.__getitem__), min(per_step, key=per_step.__getitem__)
    spread = 100 * (per_step[hi] - per_step[lo]) / median
    if spread < IMBALANCE_PCT:
        return None
    figures = (f"compute per step: rank {hi} {fmt_us(per_step[hi])}, rank {lo} {fmt_us(per_step[lo])} — a spread "
               f"of {spread:.0f} % of the median ({fmt_us(median)}) across ranks {_ranks_text(ranks.ranks)}")
    if ranks.same_work:  # the premise fails: the program gave every rank the same work
        return Insight(
            severity="info", title=SCHEDULING_TITLE,
            evidence=(f"{figures}; but {ranks.work_note}, so the difference is in how the host ran them (CPU "
                      "contention: processes sharing cores, a rank's threads preempted), not in the work."),
            suggestion=("Give each rank its own cores (taskset or numactl, OMP_NUM_THREADS = cores per rank) and "
                        "keep other jobs off them; on GPUs, check the devices' clocks and that no two ranks share "
                        "one. The program needs no change."),
            learn_more=DDP_DOCS,
        )
    note = f" ({ranks.work_note})" if ranks.work_note and ranks.same_work is False else ""
    return Insight(
        severity="warning", title=IMBALANCE_TITLE,
        evidence=f"{figures}{note}.",
        suggestion=("Give every rank the same work: equal batch sizes (DistributedSampler, drop_last), sequence "
                    "lengths bucketed or padded alike, no rank-0-only work inside the step; then check the "
                    "devices are alike (clocks, a shared GPU)."),
        learn_more=DDP_DOCS,
    )


RANK_RULES = (low_overlap, straggler, compute_imbalance)


def rank_insights(ranks: RanksAnalysis) -> list[Insight]:
    """Every rule that fires, in ``RANK_RULES`` order."""
    return [i for rule in RANK_RULES if (i := rule(ranks)) is not None]

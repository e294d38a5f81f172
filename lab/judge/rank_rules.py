"""Findings across the ranks of one job, judged in a context of their own: the job's
``RanksAnalysis`` (``lab.analysis.ranks``) and its step time. Each rule checks a premise and
returns a ``Finding`` whose saving is what the job's step would lose with the cause fixed:

- ``low_overlap``: communication no compute hides, on the rank where it is largest;
- ``straggler``: the time the other ranks wait for the late rank at the collectives;
- ``compute_imbalance`` / ``rank_scheduling``: the slowest rank's compute above the median rank's
  (collectives are synchronous: every rank waits for the slowest).

Per step where every rank has steps (the rank table's convention: a rank's total ÷ its steps),
else once over the ranks' windows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lab.analysis.diagnoses.comm import COMM_LOW_OVERLAP_PCT, COMM_WARN_PCT
from lab.analysis.ranks.analyze import RankRow, RanksAnalysis
from lab.analysis.ranks.sentence import host_scheduled, straggler_lead, waits_text
from lab.judge.finding import Finding
from lab.units import fmt_us

__all__ = ["IMBALANCE_PCT", "LISTED_RANKS", "LOW_OVERLAP_COMM_PCT", "LOW_OVERLAP_PCT", "RANK_RULES",
           "STRAGGLER_STEP_PCT", "RankContext", "compute_imbalance", "judge_ranks", "low_overlap", "rank_context",
           "straggler"]

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
# Past this many ranks a finding names them as ranges and figures as ranges, not one by one
# (a 64-rank job's evidence would otherwise be 64 clauses long).
LISTED_RANKS = 4

DDP_DOCS = "https://pytorch.org/docs/stable/notes/ddp.html"
HTA_OVERLAP = "https://hta.readthedocs.io/en/latest/source/features/comm_comp_overlap.html"
HTA_STRAGGLER = "https://hta.readthedocs.io/en/latest/source/features/temporal_breakdown.html"


@dataclass(frozen=True)
class RankContext:
    """What the rank rules read: the job and its one step time."""

    ranks: RanksAnalysis
    step_us: float  # the median rank's step (its window where the ranks have no step time)
    scope: str  # "per step" where every rank has steps, else "once" (whole traces)

    def per_step(self, r: RankRow, value: float) -> float:
        """A rank's total as the rank table shows it: per step where every rank has steps."""
        return value / r.steps if self.scope == "per step" and r.steps else value


def rank_context(ranks: RanksAnalysis) -> RankContext:
    steps = [r.step_us for r in ranks.ranks if np.isfinite(r.step_us)]
    step = float(np.median(steps)) if steps else float(np.median([r.window_us for r in ranks.ranks]))
    return RankContext(ranks=ranks, step_us=step,
                       scope="per step" if all(r.steps > 0 for r in ranks.ranks) else "once")


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


def _comm_clause(r: RankRow) -> str:
    share = 100 * r.comm_in_window_us / r.window_us
    return (f"rank {r.rank}: communication {fmt_us(r.comm_in_window_us)} ({share:.0f} % of its "
            f"{fmt_us(r.window_us)} window), {r.overlap_pct or 0.0:.0f} % of it overlapped")


def _range_pct(values: list[float]) -> str:
    lo, hi = f"{min(values):.0f}", f"{max(values):.0f}"
    return f"{lo} %" if lo == hi else f"{lo}–{hi} %"


def _comm_detail(hit: list[RankRow], total: int) -> str:
    """One clause a rank for a few ranks; for many, the ranges and the worst rank."""
    if len(hit) <= LISTED_RANKS:
        return "; ".join(_comm_clause(r) for r in hit)
    share = [100 * r.comm_in_window_us / r.window_us for r in hit]
    over = [r.overlap_pct or 0.0 for r in hit]
    worst = max(hit, key=lambda r: r.comm_in_window_us / r.window_us)
    return (f"{len(hit)} of {total} ranks (ranks {_ranks_text(hit)}): communication {_range_pct(share)} of their "
            f"windows, {_range_pct(over)} of it overlapped; the largest share, " + _comm_clause(worst))


def low_overlap(ctx: RankContext) -> Finding | None:
    """Ranks whose communication is a large share of their window and mostly not overlapped; the
    saving is the largest rank's communication that no compute hides."""
    ranks = ctx.ranks
    # A share of the window, with overlap measured in it: the window's communication, not the
    # launched one (which may run past the window's end).
    hit = [r for r in ranks.ranks if r.window_us > 0 and 100 * r.comm_in_window_us / r.window_us >= LOW_OVERLAP_COMM_PCT
           and (r.overlap_pct or 0.0) < LOW_OVERLAP_PCT]
    if not hit:
        return None
    exposed = {r.rank: ctx.per_step(r, r.comm_in_window_us * (1 - (r.overlap_pct or 0.0) / 100)) for r in hit}
    worst = max(exposed, key=exposed.__getitem__)
    gloo = " With gloo the reduction runs on CPU threads; for CUDA tensors use NCCL." if ranks.backend == "gloo" else ""
    per = "per step" if ctx.scope == "per step" else "over its window"
    return Finding(
        "low_overlap", "communication", "Communication barely overlaps compute",
        premise=f"communication holds ≥ {LOW_OVERLAP_COMM_PCT:.0f} % of a rank's window and under "
                f"{LOW_OVERLAP_PCT:.0f} % of it runs during compute",
        evidence=f"{_comm_detail(hit, len(ranks.ranks))} (overlap: communication time during which compute ran, "
                 f"HTA's definition); rank {worst} has {fmt_us(exposed[worst])} {per} of communication no compute "
                 "hides",
        suggestion=("Let all-reduce run during backward: DDP buckets gradients (bucket_cap_mb, 25 MB by default — "
                    "smaller buckets start earlier), use model.no_sync() on the accumulation steps of gradient "
                    "accumulation so only the last one communicates, and keep compute queued while collectives "
                    f"run.{gloo}"),
        saving_us=exposed[worst], base_us=ctx.step_us, scope=ctx.scope, learn_more=HTA_OVERLAP)


def straggler(ctx: RankContext) -> Finding | None:
    """The rank whose collective calls start last, when it is late by a real share of a step; led
    by its cause (``cause.straggler_cause``) when one is found. The saving is the other ranks'
    wait for it at the collectives (its lateness where the waits were not matched)."""
    ranks, step = ctx.ranks, ctx.step_us
    s = ranks.straggler
    if s is None or step <= 0 or 100 * s.late_median_us / step < STRAGGLER_STEP_PCT:
        return None
    # Lateness is read on the job's clock, baseTimeNanoseconds + ts; without it on every rank the
    # traces share a clock only if the ranks ran on one host, which the traces cannot tell.
    one_clock = all(i.has_base_time for i in ranks.infos)
    where = ", ".join(f"{what} {'+' if d >= 0 else '−'}{fmt_us(abs(d))}" for what, d in s.deltas_us)
    ops = ("; ops with the most extra time: " + ", ".join(f"{n} +{fmt_us(d)}" for n, d in s.op_deltas_us)
           if s.op_deltas_us else "")
    late = (f"rank {s.rank} starts its collectives last: by {fmt_us(s.late_median_us)} at the median of "
            f"{s.matched_calls} matched {s.call_name} ({100 * s.late_median_us / step:.0f} % of a {fmt_us(step)} step)")
    lead, waits = straggler_lead(ranks), waits_text(s)
    sentences = [lead, late] if lead else [late]
    if waits:
        sentences.append(waits)
    evidence = ". ".join(x[0].upper() + x[1:] for x in sentences)
    if s.cause is not None and s.cause.kind == "range":
        look = f"Shorten or overlap what rank {s.rank} does in {s.cause.text}"
    elif host_scheduled(ranks):
        look = (f"Give rank {s.rank} cores of its own (taskset or numactl, OMP_NUM_THREADS = its cores) and keep "
                "other work off them")
    else:
        look = f"Look at what rank {s.rank} does before each collective (the stacked timeline)"
    saving = s.others_wait_us if np.isfinite(s.others_wait_us) else s.late_median_us
    return Finding(
        "straggler", "communication", "A straggler rank: the others wait for it",
        premise=f"one rank starts its collectives last by ≥ {STRAGGLER_STEP_PCT:.0f} % of a step (collectives "
                "are synchronous: every other rank waits for it)",
        evidence=f"{evidence}. Per step against the other ranks' median: {where}{ops}",
        suggestion=(f"{look}: every other rank waits that long at each collective. Common causes: a data loader "
                    "that cannot keep up (more workers, pin_memory, prefetch), uneven batches or sequence lengths, "
                    "extra work on that rank (logging, evaluation, checkpoints), or a slower or shared device."),
        saving_us=max(saving, 0.0), base_us=step, scope=ctx.scope, learn_more=HTA_STRAGGLER,
        caveat="" if one_clock else ("The traces lack baseTimeNanoseconds, so this lateness holds only if every "
                                     "rank ran on one host (one clock)."))


def compute_imbalance(ctx: RankContext) -> Finding | None:
    """Per-step compute differing across ranks by ≥ IMBALANCE_PCT of its median. Where every rank
    ran the same work the program is not the cause: the host's scheduling is (``rank_scheduling``)."""
    ranks = ctx.ranks
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
    premise = (f"per-step compute differs across ranks by ≥ {IMBALANCE_PCT:.0f} % of its median (the others wait "
               "for the slowest at each collective)")
    saving = per_step[hi] - median
    if ranks.same_work:  # the premise fails: the program gave every rank the same work
        return Finding(
            "rank_scheduling", "communication", "The ranks run the same work at different speeds: host scheduling",
            premise=premise + ", and every rank ran the same ops and kernels",
            evidence=(f"{figures}; but {ranks.work_note}, so the difference is in how the host ran them (CPU "
                      "contention: processes sharing cores, a rank's threads preempted), not in the work"),
            suggestion=("Give each rank its own cores (taskset or numactl, OMP_NUM_THREADS = cores per rank) and "
                        "keep other jobs off them; on GPUs, check the devices' clocks and that no two ranks share "
                        "one. The program needs no change."),
            saving_us=saving, base_us=ctx.step_us, scope=ctx.scope, learn_more=DDP_DOCS)
    note = f" ({ranks.work_note})" if ranks.work_note and ranks.same_work is False else ""
    return Finding(
        "compute_imbalance", "communication", "Compute is imbalanced across ranks",
        premise=premise + ", and the ranks are not known to run the same work", evidence=f"{figures}{note}",
        suggestion=("Give every rank the same work: equal batch sizes (DistributedSampler, drop_last), sequence "
                    "lengths bucketed or padded alike, no rank-0-only work inside the step; then check the "
                    "devices are alike (clocks, a shared GPU)."),
        saving_us=saving, base_us=ctx.step_us, scope=ctx.scope, learn_more=DDP_DOCS)


RANK_RULES: tuple[Callable[[RankContext], Finding | None], ...] = (low_overlap, straggler, compute_imbalance)


def judge_ranks(ranks: RanksAnalysis) -> tuple[Finding, ...]:
    """Every rank rule that fired on the job, the largest saving (as a share of the step) first."""
    ctx = rank_context(ranks)
    found = [f for rule in RANK_RULES if (f := rule(ctx)) is not None]
    return tuple(sorted(found, key=lambda f: (f.scope == "note", -f.saving_pct, f.rule)))

"""The slow-step rule: one step far slower than the median, and what held it (the first step's
one-time costs are their own case), with advice by the cause that holds most of its extra time."""

from __future__ import annotations

from lab.analysis.steps import profiler_step_number
from lab.explain.classes import cause
from lab.explain.explanation import Explanation
from lab.explain.outliers import OUTLIER_FACTOR
from lab.judge.finding import Finding
from lab.units import fmt_us

__all__ = ["SLOW_STEP_ADVICE", "SLOW_STEP_FALLBACK", "slow_step"]


def slow_step(ex: Explanation) -> Finding | None:
    """A step far slower than the median. The first step is its own case: it pays one-time costs
    (CUDA context and library handles, kernel loading, the caching allocator's first blocks, a
    first compile) that every later step skips, so the fix is a warm-up, not a change to the loop."""
    # A step slow because torch.compile compiled in it is the compilation finding's, not this one's.
    slow = [o for o in ex.outliers if o.extra_us - dict(o.extra_by_cause).get("compile", 0.0) >= o.median_us]
    if not slow:
        return None
    o = slow[0]
    window = float(ex.attribution.steps["wall_us"].sum())
    where = ", ".join(f"{cause(k).label} +{fmt_us(us)}" for k, us in o.extra_by_cause[:3])
    others = f" ({len(slow) - 1} more such steps)" if len(slow) > 1 else ""
    first = o.step == 0
    caveat = ""
    if first:
        title, fix = (f"The first step pays one-time costs: {o.name}",
                      "Warm up before profiling: run a few iterations first, or use schedule(wait=1, warmup=1, "
                      "active=N) so the first steps fall outside the recorded window.")
        if _steps_skipped(o.name):
            fix = (f"The schedule already skipped {_steps_skipped(o.name)} step(s), so the profiler's own start-up "
                   "is outside this one: what remains is the program's first use of something (a new shape, an "
                   "allocator growing, a lazy import). Run un-profiled iterations of the same code before "
                   "profiling, and read this step's longest op to see what it is.")
        caveat = ("One cold step, measured once: its size changes from run to run with what ran before in the "
                  "process (a second run in the same process is already warm) and with the profiler's own start-up "
                  "work landing in it. Read it as 'the first step pays start-up', not as a fixed figure.")
    else:
        title, fix = f"One slow step: {o.name}", _slow_step_advice(o)
    return Finding(
        "slow_step", o.extra_by_cause[0][0] if o.extra_by_cause else "unrecorded", title,
        premise=f"a step over {OUTLIER_FACTOR:g}× the median of ≥ 3 steps",
        evidence=f"{o.name} took {fmt_us(o.wall_us)} against a median of {fmt_us(o.median_us)}; its extra time: "
                 f"{where}{others}",
        suggestion=fix, saving_us=sum(x.extra_us - dict(x.extra_by_cause).get("compile", 0.0) for x in slow),
        base_us=window, scope="once", caveat=caveat)


# What held a slow step, by the cause that holds most of its extra time: the advice for that cause.
SLOW_STEP_ADVICE = {
    "input": "The input pipeline held that step: the DataLoader had no batch ready, so its workers make batches "
             "slower than the steps use them (or they were restarted): more workers, a larger prefetch_factor, "
             "persistent_workers=True, or cheaper loading and collation.",
    "sync": "A synchronize held that step (a checkpoint, an evaluation or a log line reading a GPU value): move it "
            "out of the loop, do it every N steps, or copy the value with non_blocking=True and read it later.",
    "unrecorded": "Host work that no op records held that step (a checkpoint written to disk, logging, garbage "
                  "collection): record it with with_stack=True or record_function, then move it out of the loop.",
    "allocator": "The allocator held that step (cudaMalloc / cudaFree: the cache grew, or was emptied): keep "
                 "shapes steady, or reserve memory once before the loop.",
}
SLOW_STEP_FALLBACK = ("Look at that step in the Timeline (zoom to it): a one-off (a checkpoint, a log, a "
                      "synchronize, garbage collection): move it out of the loop or out of the profiled window.")


def _slow_step_advice(o) -> str:
    """The advice for the cause holding at least half of the step's extra time, else the general one."""
    if o.extra_by_cause and o.extra_by_cause[0][1] >= 0.5 * o.extra_us:
        return SLOW_STEP_ADVICE.get(o.extra_by_cause[0][0], SLOW_STEP_FALLBACK)
    return SLOW_STEP_FALLBACK


def _steps_skipped(name: str) -> int:
    """How many steps the profiler's schedule skipped before ``ProfilerStep#N`` (0: none or unknown)."""
    return profiler_step_number(name) or 0

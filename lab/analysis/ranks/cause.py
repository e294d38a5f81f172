"""Why a rank is late, and whether the ranks ran the same work: read from each rank's own events.

``rank_ranges`` (in the reader) sums each labelled range of a rank (``record_function`` names:
its ``user_annotation`` events, the profiler's step labels and the communication ranges aside)
over its steps, and says what each one precedes in its step: its forward (a range whose name
holds "forward", e.g. DDP's ``DistributedDataParallel.forward``) or its collectives.
``straggler_cause`` is a pure function of per-step figures: the range (else the op) whose
per-step time on the late rank exceeds the other ranks' median the most. It takes plain
mappings of name → µs per step so that another attribution (per-step causes) can feed it.

``rank_work`` counts a rank's work in its steps: each op by name and input shapes, each kernel
by name. Ranks with the same counts ran the same work; a compute difference between them is
then the host's scheduling (CPU contention, frequency), not the program.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.diagnoses.comm import COMM_OP_PREFIXES
from lab.analysis.diagnoses.common import mask_in, mask_where
from lab.analysis.diagnoses.steps import StepSpans
from lab.analysis.intervals import step_of
from lab.trace import Trace
from lab.vocab import PROFILER_STEP_PREFIX

__all__ = ["CAUSE_MIN_SHARE", "RANGE_COLUMNS", "Cause", "rank_ranges", "rank_work", "same_work", "straggler_cause"]

# A range names the cause when its extra time per step is at least this share of the rank's
# lateness: a planted 60 ms sleep in 'load_batch' is ~100 % of it; the next-largest range's
# excess on the 4-rank gloo recordings is a few ms (scheduling noise). Half leaves room for a
# cause split over two ranges while never naming noise.
CAUSE_MIN_SHARE = 0.5
RANGE_COLUMNS = ("name", "total_us", "count", "precedes")
FORWARD_WORD = "forward"


@dataclass(frozen=True, kw_only=True)
class Cause:
    """What a late rank does longer than the others, per step."""

    name: str
    kind: str  # "range" (a record_function label) | "op"
    extra_us: float  # its per-step µs − the other ranks' median per-step µs
    mine_us: float
    others_us: float
    precedes: str  # "its forward" | "its collectives" | ""

    @property
    def text(self) -> str:
        where = f" before {self.precedes}" if self.precedes else ""
        return f"'{self.name}'{where}"


def _labels(trace: Trace) -> np.ndarray:
    ev = trace.events
    return np.flatnonzero(mask_in(ev["cat"], ("user_annotation",)) & mask_in(ev["lane_kind"], ("cpu",))
                          & ~mask_where(ev["name"], lambda n: n.startswith((PROFILER_STEP_PREFIX, *COMM_OP_PREFIXES))))


def _precedes(name: np.ndarray, ends: np.ndarray, first_forward: np.ndarray, first_comm: np.ndarray) -> str:
    """What the range's occurrences end before in their steps, for most of them."""
    if np.isfinite(first_forward).any() and np.mean(ends <= first_forward) > 0.5:
        return "its forward"
    if np.isfinite(first_comm).any() and np.mean(ends <= first_comm) > 0.5:
        return "its collectives"
    return ""


def _first_in_step(starts: np.ndarray, spans: StepSpans, at: np.ndarray) -> np.ndarray:
    """For each time in ``at``, the first of ``starts`` in the same step at or after it (inf if none)."""
    out = np.full(len(at), np.inf)
    if not len(starts) or not len(spans):
        return out
    nxt = np.searchsorted(np.sort(starts), at, side="left")
    s = np.append(np.sort(starts), np.inf)[nxt]
    k = step_of(spans.start_us, spans.period_end_us, at)
    ok = (k >= 0) & (step_of(spans.start_us, spans.period_end_us, s) == k)
    out[ok] = s[ok]
    return out


def rank_ranges(trace: Trace, spans: StepSpans, comm_starts_us: np.ndarray) -> pd.DataFrame:
    """Each labelled range inside the steps: total µs, occurrences, what it precedes (``RANGE_COLUMNS``)."""
    ev = trace.events
    rows = _labels(trace)
    if not len(rows) or not len(spans):
        return pd.DataFrame(columns=list(RANGE_COLUMNS))
    ts, dur = ev["ts_us"].to_numpy(dtype=float), ev["dur_us"].to_numpy(dtype=float)
    inside = (ts[rows] >= spans.start_us[0]) & (ts[rows] < spans.period_end_us[-1])
    rows = rows[inside]
    names = ev["name"].astype(str).to_numpy()
    forward = np.flatnonzero(mask_where(ev["name"], lambda n: FORWARD_WORD in n.lower()) & mask_in(ev["lane_kind"],
                                                                                                  ("cpu",)))
    out = []
    for name in pd.unique(names[rows]):
        mine = rows[names[rows] == name]
        starts, ends = ts[mine], ts[mine] + dur[mine]
        first_forward = _first_in_step(ts[forward[names[forward] != name]], spans, starts)
        first_comm = _first_in_step(np.asarray(comm_starts_us, dtype=float), spans, starts)
        out.append((name, float(dur[mine].sum()), len(mine), _precedes(names, ends, first_forward, first_comm)))
    return pd.DataFrame(out, columns=list(RANGE_COLUMNS))


def rank_work(trace: Trace, spans: StepSpans) -> pd.Series:
    """The rank's work in its steps: "op name | input shapes" and kernel names → count (by
    categorical codes: the names are made for the distinct pairs only)."""
    ev = trace.events
    is_op = mask_in(ev["cat"], ("cpu_op",))
    ts = ev["ts_us"].to_numpy(dtype=float)
    rows = np.flatnonzero(is_op | mask_in(ev["cat"], ("kernel",)))
    if len(spans):
        rows = rows[(ts[rows] >= spans.start_us[0]) & (ts[rows] < spans.period_end_us[-1])]
    names, dims = ev["name"].cat, ev["input_dims"].cat
    width = len(dims.categories) + 1
    pair = names.codes.to_numpy()[rows].astype(np.int64) * width + np.where(
        is_op[rows], dims.codes.to_numpy()[rows].astype(np.int64) + 1, 0)
    uniq, counts = np.unique(pair, return_counts=True)
    keys = [str(names.categories[u // width]) + (f" | {dims.categories[u % width - 1]}" if u % width else "")
            for u in uniq.tolist()]
    return pd.Series(counts, index=keys, dtype="int64").sort_index()


def same_work(works: Sequence[pd.Series], ranks: Sequence[int]) -> tuple[bool, str]:
    """Whether every rank counted the same ops (by input shapes) and kernels in its steps; the
    sentence that says so, or which rank differs from the first and where."""
    if not works or any(not len(w) for w in works):
        return False, "the ranks' work could not be compared (a rank has no ops in its steps)"
    first = works[0]
    for rank, w in zip(ranks[1:], works[1:], strict=True):
        if not w.equals(first):
            key = str(first.sub(w, fill_value=0).abs().idxmax())
            return False, (f"the ranks' work differs: rank {rank} ran {int(w.get(key, 0))} × {key}, rank {ranks[0]} "
                           f"{int(first.get(key, 0))}")
    return True, f"every rank ran the same {int(first.sum()):,} ops and kernels (by name and input shapes)"


def straggler_cause(mine: Mapping[str, float], others: Sequence[Mapping[str, float]], *, late_us: float,
                    kind: str = "range", precedes: Mapping[str, str] | None = None) -> Cause | None:
    """The name whose per-step µs on the late rank (``mine``) exceeds the others' median the most,
    when that excess is at least ``CAUSE_MIN_SHARE`` of ``late_us``; None otherwise."""
    if not mine or late_us <= 0:
        return None
    best: Cause | None = None
    for name, value in mine.items():
        median = float(np.median([o.get(name, 0.0) for o in others])) if others else 0.0
        extra = value - median
        if best is None or extra > best.extra_us:
            best = Cause(name=name, kind=kind, extra_us=extra, mine_us=value, others_us=median,
                         precedes=(precedes or {}).get(name, ""))
    if best is None or best.extra_us < CAUSE_MIN_SHARE * late_us:
        return None
    return best

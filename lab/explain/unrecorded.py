"""Host time no recorded event explains, and what it touches.

A stretch of the step's thread in no op for at least ``LONG_HOST_GAP_US`` is not Python between
ops (``long_host_gaps``). Where such a stretch touches a DataLoader's ``__next__`` it is the input
pipeline's (``next_to_input``: ``iter(loader)`` starting its workers is not recorded); the rest
is put on the op it follows, marked where that op copied device → host (``what_unrecorded_follows``:
NumPy on ``.cpu()`` logits, ``torch.save`` pickling what it copied).

Each function works on ``attribution.attribute``'s segments and labels (indices into
``classes.CAUSES``), in place where it relabels.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lab.analysis.columns import mask_in, mask_where, texts
from lab.analysis.diagnoses.common import ancestor_in
from lab.analysis.intervals import step_of
from lab.analysis.operators import Links
from lab.explain.classes import CAUSE_INDEX, INPUT_PIPELINE_PATTERN
from lab.explain.segments import Segments
from lab.trace import Trace

__all__ = ["AFTER_COPY_US", "HOST_WORK_COPY_BYTES", "LONG_HOST_GAP_US", "NEXT_TO_INPUT_US", "long_host_gaps",
           "next_to_input", "what_unrecorded_follows"]

# Host time in no op, in one piece, from which on it is not "Python between ops": CPython's work
# between two eager ops (argument parsing, a module's __call__ and hooks) is 5–100 µs: the p99 of
# the gaps is under 0.15 ms on every H200 recording in tests/data/explain, the longest one without
# planted host work 0.79 ms (a DataLoader's next batch with workers), while a time.sleep, a log
# write or a NumPy call runs for milliseconds (tests/data/heldout: a 6 ms sleep per step).
LONG_HOST_GAP_US = 1000.0
# Host time no recorded event explains that begins this soon after an op copied device → host is
# put on that copy: ``.numpy()`` or ``.tolist()`` right after ``.cpu()`` dispatch in tens of µs
# (tests/data/heldout metric_on_host: the NumPy metric's 53 ms begin 72 µs after aten::to ends).
AFTER_COPY_US = 200.0
# … when that copy moved at least this much: a scalar's .item() (4–8 bytes) or a few values read for
# a log line are control flow, and the time after them is the host's own (an .item() and then
# unrelated bookkeeping: tests/data/explain sync_in_loop); an array of 1 KiB or more is data the
# host works on (tests/data/heldout: the NumPy metric copied 32 MiB, torch.save 16 MiB weights and
# 8 KiB biases, each written right after its copy).
HOST_WORK_COPY_BYTES = 1024
# … and such time that touches a DataLoader's __next__ on the step's thread (ends this soon before
# one begins, in the same step, or begins this soon after one ends) is the input pipeline's: torch
# records only __next__, not iter(loader), which starts the workers (33.8 ms a step in
# tests/data/heldout loader_restarted, 34 µs before __next__), nor an iterator's shutdown.
NEXT_TO_INPUT_US = AFTER_COPY_US
# Segment bounds are the events' own times: a stretch that begins where an op ends matches it
# exactly, up to float rounding.
_SAME_INSTANT_US = 1e-6


def long_host_gaps(trace: Trace, on_host: np.ndarray, step_rows: np.ndarray, bnd: Segments,
                    label: np.ndarray) -> None:
    """A stretch of "Python between ops" of at least ``LONG_HOST_GAP_US`` in one piece, inside the
    step and nothing else, is host time no recorded event explains (a sleep, I/O, logging, NumPy):
    CPython's own work between two eager ops is tens of µs, so a graph or fusion would not recover
    such a stretch. Python frames recorded by with_stack, and a range the program labelled itself
    (``record_function("load_batch")`` around a read), say what ran there: those stay Python."""
    gap = label == CAUSE_INDEX["python"]
    if not gap.any() or not len(on_host):
        return
    cat = trace.events["cat"]
    named = on_host[mask_in(cat, ("python_function", "user_annotation"))[on_host]]
    named = named[~np.isin(named, step_rows)]
    if len(named):
        gap &= ~bnd.covered(named)
    run, _, _, length = _runs(gap, bnd.bounds)
    long_run = gap.copy()
    long_run[gap] = length[run[gap]] >= LONG_HOST_GAP_US
    label[long_run] = CAUSE_INDEX["unrecorded"]


def _runs(mask: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The runs of consecutive segments where ``mask`` holds: each segment's run (valid where
    ``mask`` holds), and each run's first and last segment and its µs."""
    opens = mask & ~np.concatenate(([False], mask[:-1]))
    run = np.cumsum(opens) - 1
    first, last = np.flatnonzero(opens), np.flatnonzero(mask & ~np.concatenate((mask[1:], [False])))
    seg = np.diff(bounds)
    return run, first, last, np.bincount(run[mask], weights=seg[mask], minlength=len(first))


def next_to_input(trace: Trace, on_host: np.ndarray, bnd: Segments, label: np.ndarray, ts: np.ndarray,
                  end: np.ndarray, win_start: np.ndarray, win_end: np.ndarray) -> float:
    """Relabel as "input" each stretch of unrecorded host time that touches a DataLoader's
    ``__next__`` on the step's thread (``NEXT_TO_INPUT_US``); return their µs. ``ts``, ``end``:
    every event's start and end."""
    un = label == CAUSE_INDEX["unrecorded"]
    if not un.any() or not len(on_host):
        return 0.0
    rows = on_host[mask_where(trace.events["name"], lambda n: bool(INPUT_PIPELINE_PATTERN.search(n)), on_host)]
    if not len(rows):
        return 0.0
    run, first, last, us = _runs(un, bnd.bounds)
    lo, hi = bnd.bounds[first], bnd.bounds[last + 1]
    ends, starts = np.sort(end[rows]), np.sort(ts[rows])
    k = np.searchsorted(ends, lo + _SAME_INSTANT_US, side="right") - 1
    after = (k >= 0) & (lo - ends[np.maximum(k, 0)] <= NEXT_TO_INPUT_US)
    j = np.searchsorted(starts, hi - _SAME_INSTANT_US, side="left")
    nxt = starts[np.minimum(j, len(starts) - 1)]
    before = ((j < len(starts)) & (nxt - hi <= NEXT_TO_INPUT_US)
              & (step_of(win_start, win_end, nxt) == step_of(win_start, win_end, lo)))
    take = after | before
    label[un & take[np.maximum(run, 0)]] = CAUSE_INDEX["input"]
    return float(us[take].sum())


def what_unrecorded_follows(trace: Trace, on_host: np.ndarray, bnd: Segments, links: Links, label: np.ndarray,
                            gpu_rows: np.ndarray, end: np.ndarray, *,
                            stretches: np.ndarray) -> tuple[tuple[tuple[str, float, bool], ...], float]:
    """Each stretch of unrecorded host time (``stretches``: consecutive segments, as labelled
    before a synchronisation's drain took the first part of one), put on the outermost op of the
    step's thread that ended last before it began, and whether that op copied device → host; its
    µs are those still unrecorded in ``label``. And the GPU time (µs, the window's) of the device →
    host copies the host then worked on."""
    ev = trace.events
    un = label == CAUSE_INDEX["unrecorded"]
    if not un.any() or not len(on_host):
        return (), 0.0
    is_op = mask_in(ev["cat"], ("cpu_op",))
    ops = on_host[is_op[on_host]]
    if not len(ops):
        return (), 0.0
    top = ops[ancestor_in(links.parent, is_op, ops) < 0]
    top = top[np.argsort(end[top], kind="stable")]
    run, first, _, _ = _runs(stretches, bnd.bounds)  # un lies inside stretches: a drain only takes from them
    run_us = np.bincount(run[un], weights=np.diff(bnd.bounds)[un], minlength=len(first))
    k = np.searchsorted(end[top], bnd.bounds[first] + _SAME_INSTANT_US, side="right") - 1
    keep = k >= 0
    before, run_us = top[k[keep]], run_us[keep]
    if not len(before):
        return (), 0.0
    start = bnd.bounds[first][keep]
    copiers, copy_us = _copied_to_host(trace, links, is_op, gpu_rows)
    order = np.argsort(end[copiers], kind="stable")
    copiers, copy_us = copiers[order], copy_us[order]
    copied, fed_us = np.zeros(len(before), dtype=bool), 0.0
    if len(copiers):
        j = np.searchsorted(end[copiers], start + _SAME_INSTANT_US, side="right") - 1
        near = (j >= 0) & (start - end[copiers[np.maximum(j, 0)]] <= AFTER_COPY_US)
        before = np.where(near, copiers[np.maximum(j, 0)], before)
        copied = near
        fed_us = float(copy_us[np.unique(j[near])].sum())
    per = pd.DataFrame({"name": texts(ev["name"], before), "us": run_us, "copied": copied})
    per = per.groupby(["name", "copied"], sort=False)["us"].sum().sort_values(ascending=False, kind="stable")
    return tuple((str(name), float(us), bool(cp)) for (name, cp), us in per.items()), fed_us


def _copied_to_host(trace: Trace, links: Links, is_op: np.ndarray,
                    gpu_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The outermost ops that copied at least ``HOST_WORK_COPY_BYTES`` device → host (Kineto names
    a copy's direction: "Memcpy DtoH (Device -> Pageable)"), once each, and the GPU µs of each
    one's copies."""
    ev = trace.events
    copies = gpu_rows[mask_in(ev["cat"], ("gpu_memcpy",))[gpu_rows]] if len(gpu_rows) else gpu_rows
    if len(copies):
        copies = copies[np.array(["DtoH" in str(n) for n in texts(ev["name"], copies)], dtype=bool)]
    copies = copies[links.owner[copies] >= 0]
    owner = links.owner[copies]
    while len(owner):
        up = ancestor_in(links.parent, is_op, owner)
        if (up < 0).all():
            break
        owner = np.where(up >= 0, up, owner)
    ops, at = np.unique(owner, return_inverse=True)
    at = at.reshape(-1)
    moved = np.bincount(at, weights=np.nan_to_num(ev["copy_bytes"].to_numpy()[copies]), minlength=len(ops))
    us = np.bincount(at, weights=ev["dur_us"].to_numpy()[copies], minlength=len(ops))
    big = moved >= HOST_WORK_COPY_BYTES
    return ops[big], us[big]

"""Column helpers shared by the analyses and the views: text columns as integer codes, and
group-bys on those codes with numpy.

Text columns of ``Trace.events`` are categoricals: test and group on their integer codes and
turn codes into text only for the few rows of a result (building 100k Python strings costs
more than the math). Group-bys use numpy (bincount/lexsort): pandas' named aggregation costs
tens of milliseconds of fixed overhead per call, more than the arithmetic on 100k rows.

This module imports nothing from ``lab``, so any later stage (``lab/views/timeline_lod.py``)
uses it without an import circle.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lab.vocab import GPU_ACTIVITY_CATS

__all__ = [
    "gpu_activity_mask", "gpu_activity_rows",
    "as_category", "codes", "dense_ids", "frame", "group_ids", "group_median", "group_min_max", "group_mode",
    "group_mode_values", "mask_in", "mask_where", "stable_order", "texts",
]  # fmt: skip

# Largest key range counted with a bincount (8 bytes a slot: 32 MB) before sorting instead;
# a bincount is ~20x faster than hashing or sorting 1M keys.
DENSE_RANGE_LIMIT = 1 << 22


# --------------------------------------------------------------------------- text columns


def codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(int64 codes with −1 = missing, labels as an object array with "" appended for code −1).

    ``labels[codes]`` is the text of every row, "" where missing. A categorical keeps its own
    codes; any other column is factorized in order of first appearance.
    """
    row_codes, labels = _stored_codes(column)
    return np.asarray(row_codes, dtype=np.int64), labels


def _stored_codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``codes`` with a categorical's codes as stored (int8 / int16), not widened."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        cat = column.array
        row_codes, uniques = np.asarray(cat.codes), cat.categories
    else:
        row_codes, uniques = pd.factorize(column)
    return row_codes, np.append(np.asarray(uniques, dtype=object), "")


# Up to this many matching texts, a mask compares the stored codes with each one (~0.01 ms a
# comparison over 286k int16 codes) instead of widening them and gathering a flag per row (0.2 ms).
_FEW_TEXTS = 8


def _rows_hit(row_codes: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """``hit[row_codes]``: ``hit`` is one flag per label, its last (code −1, a missing text) False."""
    found = np.flatnonzero(hit)
    if len(found) > _FEW_TEXTS:
        return hit[np.asarray(row_codes, dtype=np.intp)]
    out = np.zeros(len(row_codes), dtype=bool)
    for c in found.tolist():
        out |= row_codes == c
    return out


def mask_in(column: pd.Series, values) -> np.ndarray:
    """Boolean array: the row's text is one of ``values``."""
    row_codes, labels = _stored_codes(column)
    hit = np.isin(labels.astype(str), list(values))
    hit[-1] = False
    return _rows_hit(row_codes, hit)


def mask_where(column: pd.Series, predicate, rows: np.ndarray | None = None) -> np.ndarray:
    """Boolean array: ``predicate(text)`` holds for the row's text (evaluated once per category).
    ``rows``: the mask of these rows only, the predicate evaluated on their texts alone (a
    kernel-name test on a trace's kernels need not run on every op and frame name)."""
    row_codes, labels = _stored_codes(column)
    if rows is None:
        hit = np.fromiter((bool(predicate(str(c))) for c in labels[:-1]), dtype=bool, count=len(labels) - 1)
        return _rows_hit(row_codes, np.append(hit, False))
    row_codes = row_codes[rows]
    hit = np.zeros(len(labels), dtype=bool)  # [-1]: missing text, never a hit
    for c in np.flatnonzero(np.bincount(np.asarray(row_codes, dtype=np.intp) + 1, minlength=len(labels))[1:]).tolist():
        hit[c] = bool(predicate(str(labels[c])))
    return _rows_hit(row_codes, hit)


def texts(column: pd.Series, rows: np.ndarray | None = None) -> np.ndarray:
    """The text of ``rows`` (all rows when None) as an object array."""
    row_codes, labels = codes(column)
    return labels[row_codes if rows is None else row_codes[rows]]


def as_category(column: pd.Series, rows: np.ndarray) -> pd.Categorical:
    """``rows`` of a text column as a categorical (no per-row strings are built)."""
    cat = column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column)
    return pd.Categorical.from_codes(np.asarray(cat.codes)[rows], categories=cat.categories)


# --------------------------------------------------------------------------- grouping


def group_ids(*code_arrays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group id per row, first row of each group), groups numbered in order of first appearance."""
    key = np.zeros(len(code_arrays[0]), dtype=np.int64)
    for column_codes in code_arrays:
        column_codes = np.asarray(column_codes, dtype=np.int64) + 1  # -1 (missing) becomes 0
        key = key * (int(column_codes.max(initial=0)) + 1) + column_codes
    gid, _ = pd.factorize(key)
    first = np.full(int(gid.max(initial=-1)) + 1, len(gid), dtype=np.int64)
    np.minimum.at(first, gid, np.arange(len(gid)))
    return gid, first


def dense_ids(keys: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """Integer keys → (ids 0..n-1 in key order, n, the distinct keys): ``np.unique``'s inverse
    and values, by one bincount where the keys are ≥ 0 and their range is small."""
    if len(keys) == 0:
        return keys, 0, keys
    key_range = int(keys.max()) + 1
    if key_range <= DENSE_RANGE_LIMIT + 2 * len(keys) and int(keys.min()) >= 0:
        present = np.bincount(keys, minlength=key_range) > 0
        remap = np.cumsum(present) - 1
        return remap[keys], int(remap[-1]) + 1, np.flatnonzero(present)
    uniques, ids = np.unique(keys, return_inverse=True)
    return ids.astype(np.int64).reshape(-1), len(uniques), uniques


def stable_order(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` of integers. Where they fit int16 (nesting depths,
    thread numbers) they are sorted as int16: numpy's stable sort of 16-bit integers is a radix
    sort (166k nesting depths: 0.4 ms, against 4.7 ms for the merge sort of the same int64s);
    the order is the same, as a stable sort's order depends only on the values' comparisons."""
    if len(values) and np.iinfo(np.int16).min <= int(values.min()) and int(values.max()) <= np.iinfo(np.int16).max:
        values = values.astype(np.int16)
    return np.argsort(values, kind="stable")


def frame(columns: dict, *, sort_by: str | None = None, descending: bool = True) -> pd.DataFrame:
    """One DataFrame from numpy columns, optionally sorted (stable) by one of them.

    Built in one go: assigning columns one by one costs ~0.1 ms each in pandas 3.
    """
    if sort_by is not None:
        key = np.asarray(columns[sort_by], dtype=float)
        order = np.argsort(-key if descending else key, kind="stable")
        columns = {k: np.asarray(v)[order] if np.ndim(v) else v for k, v in columns.items()}
    return pd.DataFrame(columns)


def group_median(gid: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    if not len(gid):
        return np.full(n_groups, np.nan)
    # By group, then value (NaN last): a quicksort of the values, then a stable sort of the group
    # ids (stable_order); only values are read below, so equal values may come in any order.
    by_value = np.argsort(values)
    order = by_value[stable_order(gid[by_value])]
    g, v = gid[order], values[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, len(g)])
    lo = starts + (sizes - 1) // 2
    hi = starts + sizes // 2
    out = np.full(n_groups, np.nan)
    out[g[starts]] = (v[lo] + v[hi]) / 2.0
    return out


def group_min_max(gid: np.ndarray, values: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group, the smallest value (NaN only where all are NaN) and the largest (NaN where any
    is NaN): the first and last of the group's values sorted with NaN last, found by reducing
    each group's run (fmin skips NaN, maximum keeps it) instead of sorting the values."""
    if not len(gid):
        return np.full(n_groups, np.nan), np.full(n_groups, np.nan)
    order = stable_order(gid)
    g, v = gid[order], values[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    lo, hi = np.full(n_groups, np.nan), np.full(n_groups, np.nan)
    lo[g[starts]] = np.fmin.reduceat(v, starts)
    hi[g[starts]] = np.maximum.reduceat(v, starts)
    return lo, hi


def group_mode(gid: np.ndarray, row_codes: np.ndarray, n_groups: int) -> np.ndarray:
    """The most frequent code ≥ 0 in each group; ties go to the smallest code; −1 where a group
    has none. ``gid`` holds group ids 0..n_groups-1, ``row_codes`` integer codes (−1 = missing)."""
    gid = np.asarray(gid, dtype=np.int64)
    row_codes = np.asarray(row_codes, dtype=np.int64)
    mode = np.full(n_groups, -1, dtype=np.int64)
    present = row_codes >= 0
    if not present.any():
        return mode
    gid, row_codes = gid[present], row_codes[present]
    dense, n_values, values = dense_ids(row_codes)
    if n_groups * n_values <= DENSE_RANGE_LIMIT:
        counts = np.bincount(gid * n_values + dense, minlength=n_groups * n_values).reshape(n_groups, n_values)
        has = counts.any(axis=1)
        mode[has] = values[counts[has].argmax(axis=1)]
        return mode
    pair, counts = np.unique(gid * n_values + dense, return_counts=True)
    pair_gid = pair // n_values
    order = np.lexsort((-counts, pair_gid))  # by group, then the most frequent first (smallest code on ties)
    first = np.ones(len(order), dtype=bool)
    first[1:] = pair_gid[order][1:] != pair_gid[order][:-1]
    mode[pair_gid[order][first]] = values[pair[order][first] % n_values]
    return mode


def group_mode_values(gid: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """``group_mode`` of numbers: the most frequent non-NaN value per group (the smallest on ties),
    NaN where a group has none."""
    values = np.asarray(values, dtype=float)
    ok = ~np.isnan(values)
    inverse, uniques = pd.factorize(values[ok], sort=True)  # np.unique's, by hashing (10x faster on 15k floats)
    value_codes = np.full(len(values), -1, dtype=np.int64)
    value_codes[ok] = inverse
    mode = group_mode(gid, value_codes, n_groups)
    return np.where(mode >= 0, uniques[np.maximum(mode, 0)] if len(uniques) else np.nan, np.nan)


# --------------------------------------------------------------------------- nesting


def parent_rows(depth: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """Direct parent per row: the nearest earlier row of the same lane one level up.

    Rows are sorted by (lane, start), so a row's parent is the last row before it at
    depth − 1; one searchsorted per depth level instead of a stack walk per event.
    """
    n = len(depth)
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return parent
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    for d in range(1, int(depth.max()) + 1):
        above = order[bounds[d - 1]:bounds[d]]  # positions at depth d-1, ascending
        here = order[bounds[d]:bounds[d + 1]]
        if not len(above) or not len(here):
            continue
        at = np.searchsorted(above, here, side="right") - 1
        ok = at >= 0
        cand = above[np.where(ok, at, 0)]
        ok &= lane[cand] == lane[here]
        parent[here[ok]] = cand[ok]
    return parent


def gpu_activity_mask(trace) -> np.ndarray:
    """Per row of ``trace.events`` (a ``lab.trace.Trace``), whether it is GPU activity (``cat`` in
    ``GPU_ACTIVITY_CATS``: kernels, memcpys, memsets): the one definition every "GPU work" figure
    starts from (``tests/test_measures.py`` fails on another reader of the categories)."""
    return mask_in(trace.events["cat"], GPU_ACTIVITY_CATS)


def gpu_activity_rows(trace) -> np.ndarray:
    """Rows of ``trace.events`` that are GPU activity (``gpu_activity_mask``), in row order
    (``lab.analysis.gpu`` re-exports it)."""
    return np.flatnonzero(gpu_activity_mask(trace))

"""``explain``: a trace's attribution, outlier steps, op roofs and the launch facts the findings
need, computed once per trace from its ``Measures`` (``lab.measure``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lab.analysis.columns import mask_in, mask_where, texts
from lab.analysis.operators import Links
from lab.core.devices import DevicePeak
from lab.explain.attribution import Attribution, attribute, work_classes
from lab.explain.classes import OPTIMIZER_PATTERN
from lab.explain.outliers import Outlier, outlier_steps
from lab.explain.roofs import op_roofs
from lab.measure import Measures, measure
from lab.trace import Trace

__all__ = ["Explanation", "LaunchFacts", "explain"]

# Kernels of torch.optim's foreach and fused paths: one launch updates a list of tensors.
_MULTI_TENSOR = r"multi_tensor_apply|_foreach_|fused_adam|FusedAdam|fused_sgd|fused_adamw"


@dataclass(frozen=True)
class LaunchFacts:
    """Counts the findings' premises read: GPU activities, how short they are, and the optimizer's."""

    gpu_activities: int
    median_kernel_us: float
    optimizer_kernels: int  # GPU activities launched inside torch.optim's step / zero_grad
    optimizer_multi_tensor: int  # of those, foreach / fused kernels
    pageable_copy_us: float  # GPU time of copies from or to pageable host memory
    pageable_copy_bytes: float


@dataclass(frozen=True)
class Explanation:
    attribution: Attribution
    outliers: tuple[Outlier, ...]
    roofs: pd.DataFrame  # lab.explain.roofs.ROOF_COLUMNS
    launches: LaunchFacts
    peak: DevicePeak | None


def explain(source: Measures | Trace, *, peak: DevicePeak | None = None) -> Explanation:
    """``source``'s attribution, outlier steps, op roofs and launch facts, read from its
    ``Measures`` (``lab.measure.measure``; a bare ``Trace`` is measured first, with ``peak``)."""
    measures = source if isinstance(source, Measures) else measure(source, peak=peak)
    trace, links, gpu, peak = measures.trace, measures.links, measures.gpu_rows, measures.peak
    classes = work_classes(trace, links, gpu)
    attribution = attribute(measures, classes=classes)
    return Explanation(attribution=attribution, outliers=outlier_steps(attribution),
                       roofs=op_roofs(trace, links=links, peak=peak, classes=classes, gpu_rows=gpu),
                       launches=_launch_facts(trace, links, gpu), peak=peak)


def _launch_facts(trace: Trace, links: Links, gpu: np.ndarray) -> LaunchFacts:
    ev = trace.events
    dur = ev["dur_us"].to_numpy()
    kernels = gpu[mask_in(ev["cat"], ("kernel",))[gpu]]
    opt_rows = np.flatnonzero(mask_where(ev["name"], lambda n: bool(OPTIMIZER_PATTERN.search(n))))
    in_opt = np.zeros(0, dtype=np.int64)
    if len(opt_rows) and len(gpu):
        launch = links.launch[gpu]
        has = launch >= 0
        at = ev["ts_us"].to_numpy()[launch[has]]
        lane = ev["lane_order"].to_numpy()
        starts = ev["ts_us"].to_numpy()[opt_rows]
        ends = starts + dur[opt_rows]
        order = np.argsort(starts)
        starts, ends, opt_lane = starts[order], ends[order], lane[opt_rows][order]
        k = np.searchsorted(starts, at, side="right") - 1
        ok = (k >= 0) & (at < ends[np.maximum(k, 0)]) & (opt_lane[np.maximum(k, 0)] == lane[launch[has]])
        in_opt = gpu[has][ok]
    names = texts(ev["name"], in_opt)
    multi = int(pd.Series(names, dtype=object).str.contains(_MULTI_TENSOR, regex=True).sum()) if len(in_opt) else 0
    copies = gpu[mask_in(ev["cat"], ("gpu_memcpy",))[gpu]]
    pageable = copies[pd.Series(texts(ev["name"], copies), dtype=object).str.contains("Pageable").to_numpy()] \
        if len(copies) else copies
    return LaunchFacts(
        gpu_activities=int(len(gpu)),
        median_kernel_us=float(np.median(dur[kernels])) if len(kernels) else float("nan"),
        optimizer_kernels=int(len(in_opt)), optimizer_multi_tensor=multi,
        pageable_copy_us=float(dur[pageable].sum()),
        pageable_copy_bytes=float(np.nansum(ev["copy_bytes"].to_numpy()[pageable])),
    )

"""The TensorBoard plugin's Overview (step-time breakdown), Kernel and Module views, as the page
and the CLI show them: tables with units in their column names, the stacked step chart, and the
sentences that say what each figure is. The figures come from ``lab.analysis`` (``step_time``,
``kernels``, ``modules``); nothing here reads a trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from lab.analysis.kernels import KernelView
from lab.analysis.modules import ModuleView
from lab.analysis.step_time import STEP_TIME_CATEGORIES, StepTime, column_of
from lab.units import fmt_us
from lab.views.explained import fits_legend

if TYPE_CHECKING:  # pragma: no cover
    import altair as alt

__all__ = [
    "CATEGORY_COLORS", "kernel_by_name_table", "kernel_by_op_table", "kernel_note", "module_table",
    "step_time_chart", "step_time_note", "step_time_table",
]  # fmt: skip

# The plugin's Overview colours were Google Charts' defaults; these are Tableau's, one a category,
# in its legend order.
CATEGORY_COLORS = ("#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#bab0ac")
YES_NO = {True: "yes", False: "no"}
# One bar a step (and the average) with room for its label; the legend's 8 categories need
# about 4 rows' height, so a 1-step trace still shows it whole.
STEP_CHART_ROW_PX = 30
STEP_CHART_AXIS_PX = 50


def step_time_table(st: StepTime) -> pd.DataFrame:
    """One row per step and a last "average" row: the step time, then each category in µs and %
    (the ``_us`` columns sum to ``step_us``)."""
    steps = st.steps
    cols = ["step", "step_us"] + [f"{column_of(c)}{u}" for c in STEP_TIME_CATEGORIES for u in ("_us", "_pct")]
    if not len(steps):
        return pd.DataFrame({c: pd.Series(dtype=object if c == "step" else float) for c in cols})
    mean = {"step": "average", "step_us": float(steps["step_us"].mean())}
    for _, row in st.average.iterrows():
        mean[f"{column_of(row['category'])}_us"] = float(row["us"])
        mean[f"{column_of(row['category'])}_pct"] = float(row["pct"])
    return pd.concat([steps[cols], pd.DataFrame([mean])[cols]], ignore_index=True)


def step_time_chart(st: StepTime) -> alt.Chart:
    """Stacked horizontal bars, one a step (and the average), in the plugin's category order."""
    import altair as alt  # on first draw: the CLI never pays its import

    table = step_time_table(st)
    long = table.melt(id_vars=["step", "step_us"], value_vars=[f"{column_of(c)}_us" for c in STEP_TIME_CATEGORIES],
                      var_name="column", value_name="us")
    label = {f"{column_of(c)}_us": c for c in STEP_TIME_CATEGORIES}
    long["category"] = long["column"].map(label)
    long["order"] = long["category"].map({c: i for i, c in enumerate(STEP_TIME_CATEGORIES)})
    long["pct"] = 100.0 * long["us"] / long["step_us"].where(long["step_us"] > 0, 1.0)
    long["step"] = ["average" if s == "average" else f"step {s}" for s in long["step"]]
    order = list(dict.fromkeys(long["step"]))
    return alt.Chart(long).mark_bar().encode(
        y=alt.Y("step:N", sort=order, title=None),
        x=alt.X("us:Q", stack="zero", title="time (µs)"),
        color=alt.Color("category:N", sort=list(STEP_TIME_CATEGORIES), title="category",
                        scale=alt.Scale(domain=list(STEP_TIME_CATEGORIES), range=list(CATEGORY_COLORS))),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("step:N"), alt.Tooltip("category:N"), alt.Tooltip("us:Q", format=",.1f", title="µs"),
                 alt.Tooltip("pct:Q", format=".1f", title="% of step")],
    ).properties(height=fits_legend(STEP_CHART_AXIS_PX + STEP_CHART_ROW_PX * max(len(order), 4),
                                    len(STEP_TIME_CATEGORIES)))


def step_time_note(st: StepTime) -> str:
    """What the steps are and what was left out, in a sentence or three."""
    if not len(st.steps):
        return "The trace has no CPU ops or steps to break down."
    mean = fmt_us(float(st.steps["step_us"].mean()))
    if st.source == "ProfilerStep":
        n = len(st.steps)
        what = (f"{n} ProfilerStep# steps; the average step is {mean} (the plugin's mean over its steps: the "
                f"Summary's step time is the median, {fmt_us(float(st.steps['step_us'].median()))} here, so one "
                "slow step moves this figure, not that one)." if n > 1 else f"1 ProfilerStep# step of {mean}.")
    else:
        what = (f"No ProfilerStep# events: the whole CPU activity is one step (\"0\") of {mean}, as the plugin "
                "does (record with a schedule and prof.step() for one row a step).")
    parts = [what]
    if st.gpu_adjusted:
        parts.append("Each step runs to the end of the GPU work it launched (and starts where the previous "
                     "one ended), so GPU time queued in one step is counted in that step.")
    if st.dropped_steps:
        parts.append(f"The last {st.dropped_steps} step{'s were' if st.dropped_steps > 1 else ' was'} left out: "
                     "it launched fewer than 80 % of the previous step's GPU work (the profiler may have stopped "
                     "before its kernels were collected).")
    return " ".join(parts)


# The page's order: what the plugin's table led with, then its GPU figures, then the rest.
KERNEL_SHOWN = ("name", "calls", "total_us", "share_pct", "mean_us", "tensor_cores", "occupancy_pct", "blocks_per_sm",
                "tensor_cores_plugin", "max_us", "min_us", "registers_per_thread", "shared_memory_bytes")
KERNEL_BY_OP_SHOWN = ("name", "op", "calls", "total_us", "tensor_cores", "occupancy_pct", "blocks_per_sm", "grid",
                      "block", "registers_per_thread", "shared_memory_bytes", "op_tensor_core_eligible",
                      "tensor_cores_plugin", "mean_us", "max_us", "min_us")


def kernel_by_name_table(kv: KernelView) -> pd.DataFrame:
    df = kv.by_name[list(KERNEL_SHOWN)].copy()
    for col in ("tensor_cores", "tensor_cores_plugin"):
        df[col] = df[col].map(YES_NO)
    return df


def kernel_by_op_table(kv: KernelView) -> pd.DataFrame:
    df = kv.by_op[list(KERNEL_BY_OP_SHOWN)].copy()
    for col in ("tensor_cores", "tensor_cores_plugin", "op_tensor_core_eligible"):
        df[col] = df[col].map(YES_NO)
    return df


def kernel_note(kv: KernelView) -> str:
    """The Tensor-Core share by both rules, and where they disagree."""
    if not kv.has_kernels:
        return "This trace has no GPU kernels (a CPU run): the Kernel view needs a CUDA trace."
    df = kv.by_name
    differ = df[df["tensor_cores"] != df["tensor_cores_plugin"]]
    text = (f"{len(df)} kernels; {kv.tensor_core_pct:.1f} % of kernel time ran on Tensor Cores by the lab's rule, "
            f"{kv.tensor_core_plugin_pct:.1f} % by the plugin's name list.")
    if len(differ):
        text += (f" The rules disagree on {len(differ)} kernel{'s' if len(differ) != 1 else ''} "
                 f"({fmt_us(float(differ['total_us'].sum()))}): the plugin's list predates Hopper's nvjet/wgmma "
                 "kernels, FP8 and int8 WMMA, and counts cuBLAS's FP32 'ffma' tiles as Tensor-Core kernels.")
    zero = df[df["occupancy_missing"]]
    if len(zero):
        share = 100.0 * float(zero["total_us"].sum()) / max(float(df["total_us"].sum()), 1e-12)
        text += (f" CUPTI wrote an estimated occupancy of 0 for every launch of {len(zero)} kernel"
                 f"{'s' if len(zero) != 1 else ''} ({share:.1f} % of kernel time; on the H200 recordings every nvjet "
                 "GEMM, near peak FLOP/s): its estimate is missing there, not a 0 % occupancy.")
    return text


def module_table(mv: ModuleView) -> pd.DataFrame:
    """The hierarchy as rows, each name indented by its depth (the full path is a column)."""
    df = mv.rows.copy()
    df.insert(0, "module_tree", ["\u2003" * int(d) + str(m) for d, m in zip(df["depth"], df["module"])])
    path = df.pop("path")
    df["path"] = path  # last: the long text after the figures
    return df.drop(columns=["module", "depth"])

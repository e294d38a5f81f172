"""The "TensorBoard" tab: the removed TensorBoard plugin's Overview (step-time breakdown), Kernel
and Module views, computed when the tab is first opened on a trace, in a reader
(``JobKind.TENSORBOARD`` → ``lab.analysis.TensorBoardViews``; kept per trace like the by-shape
tables). Layout only; one part drawn at a time."""

from __future__ import annotations

import streamlit as st

from lab import views as lv
from lab.read import Job, JobKind
from ui.messages import md_escape
from ui.state import Subject
from ui.widgets import chosen

PARTS = ("Step time", "Kernels", "Modules")
ROW_PX, MAX_TABLE_PX = 35, 800  # a module tree is read whole: up to ~22 rows without scrolling
NAME_PX = 260  # kernel names run to 300 characters: the numbers stay in view, the name is in the tooltip


def tensorboard_view(subject: Subject, stem: str, jobs) -> None:
    st.caption("What the PyTorch Profiler TensorBoard plugin showed (removed from kineto in 2025), computed "
               "with its own rules from this trace: its Overview's step-time breakdown, its Kernel view and "
               "its Module view. Where the plugin's rules were wrong on today's traces the lab says so below.")
    # A radio, not a segmented control: a second click on a segment deselects it (seen on the page).
    part: str = chosen(st.radio("View", PARTS, key="tb_part", horizontal=True, label_visibility="collapsed"))
    # Not part of every analysis (it took the transformer trace's from 108 ms to ~0.5 s): computed
    # here, on the tab's first opening for this trace, in a reader (``jobs``), then kept.
    views = jobs(Job(kind=JobKind.TENSORBOARD), [subject])
    if views is None:  # the reason is on the page
        return
    if part == "Step time":
        _step_time(views.step_time, stem)
    elif part == "Kernels":
        _kernels(views.kernel_view, stem)
    elif part == "Modules":
        _modules(views.modules, stem)


def _formats(df, pct_suffix: str = "_pct") -> dict:
    config = {}
    for c in df.columns:
        if c.endswith(pct_suffix):
            config[c] = st.column_config.NumberColumn(c, format="%.1f%%")
        elif str(df[c].dtype).startswith("float"):
            config[c] = st.column_config.NumberColumn(c, format="%.2f" if c in ("blocks_per_sm",) else "%.1f")
    return config


def _step_time(step_time, stem: str) -> None:
    st.markdown("**Step-time breakdown** (each instant counted once, for the first category that covers it: "
                "Kernel, Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec; the rest is Other)")
    table = lv.step_time_table(step_time)
    if not len(step_time.steps):
        st.info(lv.step_time_note(step_time))
        return
    st.altair_chart(lv.step_time_chart(step_time), width="stretch", key=f"tb_steps_chart_{stem}")
    st.caption(lv.step_time_note(step_time))
    st.dataframe(table, hide_index=True, width="stretch", column_config=_formats(table))
    st.download_button("Download step-time breakdown (CSV)", lv.to_csv_bytes(table),
                       file_name=f"{stem}_step_time.csv", mime="text/csv", key="dl_tb_steps_csv", on_click="ignore")


def _kernels(kernels, stem: str) -> None:
    if not kernels.has_kernels:
        st.info(lv.kernel_note(kernels))
        return
    st.caption(lv.kernel_note(kernels) + " occupancy_pct and blocks_per_sm are CUPTI's estimates from each "
               "launch, averaged weighted by duration as the plugin does.")
    by_name = lv.kernel_by_name_table(kernels)
    name_col = {"name": st.column_config.Column("name", width=NAME_PX)}
    st.markdown("**By kernel**")
    st.dataframe(by_name, hide_index=True, width="stretch", column_config={**_formats(by_name), **name_col})
    st.download_button("Download kernels (CSV)", lv.to_csv_bytes(by_name), file_name=f"{stem}_kernels.csv",
                       mime="text/csv", key="dl_tb_kernels_csv", on_click="ignore")
    by_op = lv.kernel_by_op_table(kernels)
    st.markdown("**By kernel and the op that launched it** (one row per grid, block, registers and shared memory)")
    st.dataframe(by_op, hide_index=True, width="stretch", column_config={**_formats(by_op), **name_col})
    st.download_button("Download kernels by op (CSV)", lv.to_csv_bytes(by_op), file_name=f"{stem}_kernels_by_op.csv",
                       mime="text/csv", key="dl_tb_kernels_op_csv", on_click="ignore")


def _modules(modules, stem: str) -> None:
    if not modules.available:
        st.info(md_escape(modules.reason))
        return
    st.caption("Per nn.Module (the hierarchy of calls, top-level modules by name): how often it ran, host time "
               "total and self (minus its children), and the GPU time of the work its ops launched — self = "
               "launched by the ops directly in it, not by its child modules.")
    table = lv.module_table(modules)
    st.dataframe(table, hide_index=True, width="stretch", height=min(ROW_PX * (len(table) + 1) + 3, MAX_TABLE_PX),
                 column_config={**_formats(table), "module_tree": st.column_config.Column("module", width=NAME_PX)})
    st.download_button("Download modules (CSV)", lv.to_csv_bytes(modules.rows), file_name=f"{stem}_modules.csv",
                       mime="text/csv", key="dl_tb_modules_csv", on_click="ignore")

"""The result views. Each takes data prepared in ``lab/`` and lays it out; none computes much.

Only the view the visitor opened runs (tabs with ``on_change="rerun"`` and ``.open``).
User-supplied text (labels, trace names, kernel names) is always shown as plain text or
dataframe cells, never as HTML.
"""

from __future__ import annotations

import gzip

import streamlit as st

from lab import views as lv
from lab.analysis import TOTAL_METRICS, step_window
from lab.core import DeviceInfo
from lab.lessons import LESSONS, explanation_for, lesson_signals
from lab.read import Job, JobKind
from lab.samples import Sample
from lab.views import SORT_KEYS, TORCH_SORT_KEYS, comparison_totals, fmt_us, is_device_sort, summarize
from ui import replay, teach
from ui.cache import Loaded, view_job
from ui.messages import md_escape
from ui.state import Subject, opened_lesson, subject_timing
from ui.widgets import chosen, labels_from

# The Table's Note column: its mark ("label ¹", 37 px in the grid's 14 px Source Sans) and the
# cells' 2 × 8 px padding; beside a Name of fixed width, so that it is in view in the ~466 px main
# column of an 800 px window with the sidebar open (a long kernel name is whole in its tooltip).
NOTE_COLUMN_PX = 72
TABLE_NAME_PX = 240
# The Table's GPU kernels: a kernel name can be 300 characters; the name, Total and Share stay in
# view in the ~466 px grid of an 800 px window with the sidebar open (320 px left only Calls there).
KERNEL_NAME_PX = 220
KERNEL_FIGURE_PX = 100  # Total (µs) and GPU share: their headers are ~65 px at 14 px ("Share of GPU time" was 106)
METRIC_CARD_PX = 276  # three cards and their gaps in the ~880 px main column at 1280 px
TRACE_TABLE_NOTE = ("A trace file has no key_averages: this table rebuilds it from the trace's events with torch's "
                    "own rules (python frames are call stacks, not ops; same-name nesting counted once; device time "
                    "through the launch links) — equal to key_averages() on the lab's ground-truth corpus.")
SEVERITY_ICON = {"critical": ":material/error:", "warning": ":material/warning:", "info": ":material/info:"}


def sample_note(sample: Sample, device: DeviceInfo | None) -> None:
    """Say plainly that a sample is a recording, not this visitor's run, and how to make one."""
    here = f" on this host ({device.label})" if device is not None else ""
    st.info(f"You are looking at a trace recorded on an {sample.device or 'NVIDIA GPU'} with torch "
            f"{sample.torch or '2.x'}: real kernels, streams and launches, whatever this host has. "
            f"Run your own profile{here} with the sidebar form, or pick a lesson.",
            icon=":material/science:")


def _job_lead(subject: Subject) -> None:
    """An open job's Summary starts with the job: its ranks, its straggler and why, the finding to read first."""
    ranks = subject.ranks_analysis
    if ranks is None:
        return
    job = lv.job_summary(ranks, subject.ranks_findings)
    st.markdown(f"**The job: {job.headline}**")
    st.text(job.straggler)
    if job.collectives:
        st.text(job.collectives)
    if job.top_finding is not None:
        finding_card(job.top_finding)
    st.caption("The Ranks tab has every rank side by side. Below: the lowest rank's own trace.")
    st.markdown(f"**Rank {ranks.ranks[0].rank} on its own**")


def summary_view(subject: Subject, loaded: Loaded) -> None:
    _job_lead(subject)
    timing = subject.sample.timing if subject.sample else None
    s = summarize(loaded.trace, loaded.analysis, run=subject.run, timing=timing,
                  explanation=loaded.explanation, judgement=loaded.judgement)
    if loaded.explanation is not None and loaded.judgement is not None:
        explained_summary(loaded)
    st.text(f"Device: {s.device}")
    if s.config:
        st.text(f"Ran: {s.config}")
    if subject.sample and subject.sample.note:
        st.caption(subject.sample.note)
    # Cards of one width that wrap: three a row at 1280 px, one or two at 800 px with the sidebar
    # open (three columns there cut "1.8 GFLOP/s" to "1.8 G…"); wide enough for "817 TFLOP/s".
    with st.container(horizontal=True, gap="small"):
        for metric in s.metrics:
            st.metric(metric.label, metric.value, delta=metric.delta, delta_color="off", delta_arrow="off",
                      help=md_escape(metric.help), border=True, width=METRIC_CARD_PX)  # help quotes trace text
    if loaded.judgement is None:  # the judged verdict leads instead (explained_summary)
        st.markdown("**Verdict**")
        st.text(s.verdict)


def explained_summary(loaded: Loaded) -> None:
    """The Summary's lead: the verdict, where each step's time went, and the findings by saving."""
    explanation, judgement = loaded.explanation, loaded.judgement
    if explanation is None or judgement is None:
        return
    st.markdown("**Verdict**")
    st.text(judgement.verdict)
    a = explanation.attribution
    where = {"ProfilerStep": "per ProfilerStep", "annotation": "per repeated record_function",
             "window": "over the whole trace (no steps)"}.get(a.source, a.source)
    st.markdown(f"**Where the time went** · step {fmt_us(a.step_us)} (median), {where}")
    st.altair_chart(lv.attribution_chart(explanation), width="stretch", key="sum_attribution")
    for note in a.unknown:
        st.caption(f":material/help: {note}")
    if judgement.findings:
        st.markdown("**Findings, largest saving first**")
        for finding in judgement.findings[:3]:
            finding_card(finding)


def finding_card(finding) -> None:
    """One ``lab.judge.Finding``: its saving (or "note" for one that explains a figure), evidence,
    premise, what to try, what would change the figure, and where to read more."""
    saves = ("note: explains a figure, saves no time" if finding.scope == "note" else
             lv.saving_words(finding.scope, finding.saving_us, finding.saving_pct, once="once, in the window"))
    with st.container(border=True):
        st.markdown(f"{SEVERITY_ICON.get(finding.severity, '')} **{md_escape(finding.title)}** · {saves}")
        st.text(finding.evidence)
        st.caption(f"Premise: {md_escape(finding.premise)}")
        st.markdown(f"**Try:** {md_escape(finding.suggestion)}")
        if finding.caveat:
            st.caption(f":material/balance: **What would change this figure:** {md_escape(finding.caveat)}")
        if finding.learn_more:
            st.caption(f"Learn more: {finding.learn_more}")


def roof_view(loaded: Loaded) -> None:
    """Each op that ran on the GPU against its roof: achieved rate, % of roof, bound."""
    explanation = loaded.explanation
    if explanation is None:
        return
    peak = explanation.peak
    roof = (f"{peak.model}: HBM {peak.memory_bandwidth_gbs:,.0f} GB/s, compute by dtype ({peak.source})"
            if peak is not None else "no datasheet peak for this device: rates without a roof")
    st.markdown("**Ops against their roof** (FLOPs and bytes from the recorded shapes, over each op's GPU time)")
    st.caption(roof)
    table = lv.roof_table(explanation)
    config = {"Name": st.column_config.TextColumn("Name", width=TABLE_NAME_PX),
              "GPU time (µs)": st.column_config.NumberColumn("GPU time (µs)", format="%.1f"),
              "Per call (µs)": st.column_config.NumberColumn("Per call (µs)", format="%.1f"),
              "TFLOP/s": st.column_config.NumberColumn("TFLOP/s", format="%.2f"),
              "GB/s": st.column_config.NumberColumn("GB/s", format="%,.0f"),
              "% of roof": st.column_config.NumberColumn("% of roof", format="%.0f %%")}
    st.dataframe(table, hide_index=True, width="stretch", column_config=config, key="tbl_roofs")


def insights_view(loaded: Loaded) -> None:
    """Every judged finding of the trace, largest saving first, notes last: the one list."""
    findings = loaded.findings
    if not findings:
        st.success("No rule fired on this trace: no obvious overhead, idle GPU or unfused work.")
        return
    st.markdown("**Findings, largest saving first** (each checked its premise; the saving is what the fix "
                "would recover, from the time attribution; notes explain a figure and come last)")
    for finding in findings:
        finding_card(finding)


def table_view(subject: Subject, loaded: Loaded, jobs) -> None:
    replay.replay_box(subject, loaded, jobs)  # a replay's result beside its row; else "Replay an op here"
    run = subject.run
    has_device = loaded.trace.has_gpu or (run is not None and run.device.kind == "cuda")
    sort_keys = [k for k in SORT_KEYS if has_device or not is_device_sort(k)]
    c1, c2, c3 = st.columns([2, 1, 2], vertical_alignment="bottom")
    first = sort_keys.index(lv.default_table_sort(loaded.judgement, sort_keys))  # by what the verdict blames
    sort_label: str = chosen(c1.selectbox("Sort by", sort_keys, index=first, key="tbl_sort"))
    row_limit = int(c2.number_input("Rows", 1, 500, 15, key="tbl_rows"))
    by_shape = c3.toggle("Group by input shape", key="tbl_shape",
                         help="key_averages(group_by_input_shape=True): one row per op and input shapes.")
    show_ann = c3.toggle("Show record_function labels", True, key="tbl_ann",
                         help="Your labels' rows; their CPU total includes the ops inside them.")
    if run is not None:
        st.caption("key_averages() of the run, as torch computed it.")
        df = run.key_averages_by_shape if by_shape else run.key_averages
    else:
        memory = ("Memory columns come from its [memory] events, as torch sums them." if loaded.trace.has_memory
                  else "Memory columns need [memory] events (profile_memory=True); this trace has none.")
        st.caption(f"{TRACE_TABLE_NOTE} {memory}")
        # Grouped by shape: computed on the first toggle, in a reader (``jobs``), like the rest.
        grouped = jobs(Job(kind=JobKind.BY_SHAPE), [subject]) if by_shape else None
        if by_shape and grouped is None:
            return
        ka = grouped.key_averages if grouped is not None else loaded.analysis.key_averages
        df = lv.trace_table(ka, profile_memory=loaded.trace.has_memory)
    view = lv.key_averages_view(df, sort_by=sort_label, row_limit=row_limit, show_annotations=show_ann)
    shown = lv.format_key_averages(view)
    config = _number_formats(shown.column_formats)
    if "Note" in shown.data.columns:  # a short mark beside the name; the note itself is under the table
        config["Name"] = st.column_config.TextColumn("Name", width=TABLE_NAME_PX)
        config["Note"] = st.column_config.TextColumn("Note", width=NOTE_COLUMN_PX)
    st.dataframe(shown.data, column_config=config, hide_index=True, width="stretch")
    for footnote in shown.footnotes:
        st.caption(md_escape(footnote))
    st.download_button("Download table (CSV)", lv.to_csv_bytes(view), file_name=f"{file_stem(subject)}_table.csv",
                       mime="text/csv", key="dl_table_csv", on_click="ignore")
    if run is not None:
        key = TORCH_SORT_KEYS[sort_label]
        text = run.tables.get(key)
        with st.expander("The classic text table, as torch prints it", expanded=False):
            if text:
                st.code(lv.limit_text_table(text, row_limit), language=None)
                st.caption(f'key_averages(group_by_input_shape=False).table(sort_by="{key}", row_limit={row_limit})')
            else:
                st.caption(f"torch did not produce a table sorted by {key} for this run.")
    if loaded.trace.has_gpu:
        st.markdown("**GPU kernels** (from the trace: every kernel, memcpy and memset by name)")
        kernels = lv.kernel_table(loaded.analysis.kernels)
        config = {**_float_formats(kernels.data), **_number_formats(kernels.column_formats)}
        # A kernel name can be 300 characters: the numbers stay in view, the name is whole in the cell's tooltip.
        config["Kernel"] = st.column_config.Column("Kernel", width=KERNEL_NAME_PX)
        for figure, fmt in (("Total (µs)", "%.1f"), ("GPU share", None)):
            if figure in kernels.data.columns:
                config[figure] = st.column_config.NumberColumn(
                    figure, format=kernels.column_formats.get(figure, fmt), width=KERNEL_FIGURE_PX)
        st.dataframe(kernels.data, hide_index=True, width="stretch", column_config=config)
    if loaded.explanation is not None and len(loaded.explanation.roofs):
        roof_view(loaded)


def _time_window(subject: Subject, loaded: Loaded, prefix: str) -> tuple[float, float]:
    """The "Zoom to" step picker and the window slider (µs since trace start) the Timeline and
    the Memory view share: the same axis, the same default windows."""
    span = max(loaded.analysis.utilization.trace_span_us, 1.0)
    steps = loaded.analysis.steps
    options = ["whole trace"] + [f"step {i + 1}" for i in range(len(steps))]
    # [1, 3] cut "whole trace" to "whole trac" at 800 px with the sidebar open (a ~110 px box).
    c1, c2 = st.columns([1, 2])
    focus: str = chosen(c1.selectbox("Zoom to", options, key=f"{prefix}_focus_{subject.digest}"))
    if focus != "whole trace" and len(steps):  # the step and the GPU work it queued: the reveal's window
        default = step_window(steps, options.index(focus) - 1, span)
    else:
        default = (0.0, span)
    window = c2.slider("Time window (µs since trace start)", 0.0, span, default,
                       key=f"{prefix}_window_{subject.digest}_{focus}", format="%.0f")
    return float(window[0]), float(window[1])


def timeline_view(subject: Subject, loaded: Loaded, jobs) -> None:
    window = _time_window(subject, loaded, "tl")
    has_python = loaded.trace.has_python
    own = loaded.trace.profiler_lanes
    # The toggles this trace needs, side by side from the left: two columns, each wide enough for
    # its label at 800 px with the sidebar open (a quarter of the ~468 px main column cut
    # "Profiler's own lanes" to 43 px, measured).
    cols = iter(st.columns(2))
    all_python = has_python and next(cols).toggle(
        "All Python frames", key="tl_python_all",
        help=f"with_stack's call stacks: by default only the outermost {lv.DEFAULT_PYTHON_LEVELS} levels are drawn.")
    show_own = len(own) > 0 and next(cols).toggle("Profiler's own lanes", key="tl_profiler_lanes",
                                                  help=lv.PROFILER_LANE_NOTE.capitalize() + ".")
    # The window's marks, drawn by the reader that keeps the trace (its events never come here).
    data = jobs(view_job(lv.timeline_window, start_us=window[0], end_us=window[1], all_python=bool(all_python),
                         profiler_lanes=bool(show_own)), [subject])
    if data is None:
        return
    st.altair_chart(lv.timeline_chart(data), width="stretch", key=f"tl_chart_{subject.digest}")
    hidden = (f" The profiler's own lanes ({', '.join(data.profiler_lanes)}) are hidden."
              if len(own) and not show_own else "")
    st.caption(
        f"{data.shown_events:,} of {data.total_events:,} events in this window drawn as themselves; "
        f"{len(data.links):,} launch → GPU links. Scroll on the chart to zoom, drag to pan, "
        "hover for shapes, grid/block, registers and occupancy. A faint bar is mostly idle: opacity is the "
        "share of its width that its events cover." + (f" {data.note}." if data.note else "") + hidden)


def memory_view(subject: Subject, loaded: Loaded, jobs) -> None:
    """profile_memory's allocations: the curve on the timeline's axis, the peaks, the steps."""
    memory = loaded.analysis.memory
    if memory is None:
        st.info(lv.NO_MEMORY, icon=":material/memory:")
        return
    window = _time_window(subject, loaded, "mem")
    view = jobs(view_job(lv.memory_window, start_us=window[0], end_us=window[1]), [subject])  # in the reader
    if view is None:  # it said why (or, never here: no memory records, returned above)
        return
    st.altair_chart(lv.memory_chart(view), width="stretch", key=f"mem_chart_{subject.digest}")
    st.caption(f"Allocated (live tensors) and reserved (held by the caching allocator) bytes after each of "
               f"{view.series.records:,} allocator records in this window, drawn with {view.points:,} points"
               f"{' (per pixel column: first, lowest, highest, last)' if view.series.reduced else ''}; "
               "▼ marks each device's peak. Same time axis as the Timeline: scroll to zoom, drag to pan.")
    for finding in lv.memory_findings(loaded.judgement.findings if loaded.judgement is not None else ()):
        finding_card(finding)
    devices = lv.device_table(memory, view.unit)
    st.markdown("**Devices**")
    st.dataframe(devices, hide_index=True, width="stretch", column_config=_float_formats(devices))
    if len(memory.steps):
        steps = lv.step_table(memory, view.unit)
        st.markdown("**Per step** (a leak shows as the allocated level at the end rising step after step)")
        st.dataframe(steps, hide_index=True, width="stretch", column_config=_float_formats(steps))
    ops = lv.memory_ops(loaded.analysis.key_averages, view.unit)
    if len(ops):
        st.markdown("**Ops that allocate the most** (key_averages' memory columns: frees count negative)")
        st.dataframe(ops, hide_index=True, width="stretch", column_config=_float_formats(ops))


def trace_view(subject: Subject, loaded: Loaded, perfetto_origin: str) -> None:
    data = subject.trace_bytes
    if data:
        _trace_downloads(file_stem(subject), data)
        _open_in_perfetto(subject, data, perfetto_origin)
    else:  # an upload: its bytes were let go once read (the file is on the visitor's disk)
        st.caption("Your uploaded file is not kept on the server once read, only what these views need; "
                   "open your own copy in Perfetto or HTA as below.")
    st.markdown("**Events by category**")
    counts = loaded.trace.categories.rename(columns={"total_us": "total time (µs)"})
    st.dataframe(counts, hide_index=True,
                 column_config={"total time (µs)": st.column_config.NumberColumn("total time (µs)", format="%.1f")})
    perfetto = ("*Open in Perfetto* above opens ui.perfetto.dev in a new tab with this trace; or go to "
                "ui.perfetto.dev → *Open trace file* → pick the downloaded file" if data else
                "go to ui.perfetto.dev → *Open trace file* → pick the file you uploaded, from your own disk")
    st.markdown(
        f"**Open it in Perfetto:** {perfetto} (`.json.gz` works as is). Use W/S to zoom, A/D to pan; click a "
        "kernel and follow its flow arrow back to the CPU launch.\n\n"
        "**Analyze it with HTA:** `pip install HolisticTraceAnalysis`, put the file in a folder, then "
        "`from hta.trace_analysis import TraceAnalysis; TraceAnalysis(trace_dir=folder).get_temporal_breakdown()`.\n\n"
        "**Or here:** `python -m lab analyze FILE` prints the same summary as this page.")


def _open_in_perfetto(subject: Subject, data: bytes, origin: str) -> None:
    """The button that hands the trace to the Perfetto UI in a new tab (lab/views/perfetto.py)."""
    if len(data) > lv.PERFETTO_INLINE_MAX_BYTES:
        st.caption("This trace is too large to hand to Perfetto from the page: download it and open it there.")
        return
    suffix = ".pt.trace.json.gz" if data[:2] == b"\x1f\x8b" else ".pt.trace.json"
    # st.iframe runs the snippet's script (sandbox: scripts, same origin, pop-ups): the trace is
    # the app's own bytes and the title is escaped into a JS string (lab/views/perfetto.py).
    st.iframe(lv.perfetto_button_html(data, title=subject.title, file_name=file_stem(subject) + suffix, origin=origin),
              height=lv.PERFETTO_HEIGHT_PX)


def _trace_downloads(stem: str, data: bytes) -> None:
    # The stored form goes out as is; the other one is made only if that button is clicked.
    is_gz = data[:2] == b"\x1f\x8b"
    gz = data if is_gz else (lambda: gzip.compress(data, compresslevel=6))
    raw = (lambda: gzip.decompress(data)) if is_gz else data
    # Each button as wide as its label, side by side, the second on a row of its own when they do
    # not fit: in two columns of a quarter each, an 800 px window cut both to "Download …".
    with st.container(horizontal=True, gap="small"):
        st.download_button("Download trace (.json.gz)", gz, file_name=f"{stem}.pt.trace.json.gz",
                           mime="application/gzip", key="dl_trace_gz", on_click="ignore", type="primary",
                           width="content")
        st.download_button("Download trace (.json)", raw, file_name=f"{stem}.pt.trace.json",
                           mime="application/json", key="dl_trace_json", on_click="ignore", width="content")


def compare_view(subjects: list[Subject], load, jobs) -> None:
    if len(subjects) < 2:
        st.info("Run twice, or open a sample and upload a trace, to compare two of them.")
        return
    keys = [s.key for s in subjects]
    titles = {s.key: s.title for s in subjects}
    # Defaults through session_state only (a widget given both a default and a state value warns),
    # repaired when a run they named was pushed out of the session.
    # Streamlit forgets a widget's value in a run that does not draw it (another tab was open),
    # so the choice is also kept under "_cmp_a"/"_cmp_b" and restored from there.
    for name, fallback in (("cmp_a", keys[0]), ("cmp_b", keys[1])):
        if st.session_state.get(name) not in titles:
            kept = st.session_state.get(f"_{name}")
            st.session_state[name] = kept if kept in titles else fallback
    # After a new run, compare it (B) with the session's previous run (A), not with a sample.
    runs = [s.key for s in subjects if s.run is not None]  # newest first
    if len(runs) >= 2 and st.session_state.get("_cmp_newest_run") != runs[0]:
        st.session_state["cmp_a"], st.session_state["cmp_b"] = runs[1], runs[0]
    st.session_state["_cmp_newest_run"] = runs[0] if runs else None
    c1, c2 = st.columns(2)
    labels = {s.key: _compare_label(s) for s in subjects}
    a_key: str = chosen(c1.selectbox("A (before)", keys, key="cmp_a", format_func=labels_from(labels)))
    b_key: str = chosen(c2.selectbox("B (after)", keys, key="cmp_b", format_func=labels_from(labels)))
    st.session_state["_cmp_a"], st.session_state["_cmp_b"] = a_key, b_key
    a = next(s for s in subjects if s.key == a_key)
    b = next(s for s in subjects if s.key == b_key)
    la, lb = load(a), load(b)
    if la is None or lb is None:
        return
    # The cached analyses and judged findings (run config and peak included): what the two Insights tabs show.
    cmp = jobs(Job(kind=JobKind.COMPARE, labels=("A", "B")), [a, b])  # in a reader
    if cmp is None:
        return
    st.markdown("**Totals** (delta = B − A; ratio = B / A)")
    totals = comparison_totals(cmp.totals, TOTAL_METRICS)
    st.dataframe(totals, hide_index=True, width="stretch",
                 column_config={"meaning": st.column_config.Column("meaning", width=TOTALS_MEANING_PX)})
    if cmp.findings_gone or cmp.findings_new:
        st.markdown("**Findings that changed**")
        st.text("\n".join([f"gone in B:  {t}" for t in cmp.findings_gone] +
                          [f"new in B:   {t}" for t in cmp.findings_new]))
    st.markdown("**GPU kernels** (time per name; status gone = only in A, new = only in B)")
    if cmp.kernels.empty:
        st.caption("Neither trace has GPU kernels (CPU runs): compare the operators below.")
    else:
        kernels = _ratio_as_text(cmp.kernels)
        st.dataframe(kernels, hide_index=True, width="stretch", column_config=_diff_columns(kernels))
    st.markdown("**Operators** (self CPU time per name)")
    operators = _ratio_as_text(cmp.operators)
    st.dataframe(operators, hide_index=True, width="stretch", column_config=_diff_columns(operators))
    _compare_timelines(a, b, la, lb, jobs)


def _compare_timelines(a: Subject, b: Subject, la: Loaded, lb: Loaded, jobs) -> None:
    spans = {"A": la.analysis.utilization.trace_span_us, "B": lb.analysis.utilization.trace_span_us}
    span = max(spans.values())
    # One scale shows which run is longer; but a run 10× shorter than the other is then a sliver
    # with nothing readable in it, so such a pair starts on a scale each.
    lopsided = min(spans.values()) * SHARED_SCALE_MAX_RATIO < span
    shared = st.toggle("One time scale for both", value=not lopsided, key=f"cmp_shared_{a.digest}_{b.digest}",
                       help="On: both timelines span 0 – the longer trace, so their lengths compare. "
                            "Off: each spans its own trace.")
    for label, subject in (("A", a), ("B", b)):
        st.markdown(f"**Timeline {label}:** {md_escape(subject.title)} ({fmt_us(spans[label])})")
        end = span if shared else max(spans[label], 1.0)
        data = jobs(view_job(lv.timeline_window, start_us=0.0, end_us=end, max_marks=COMPARE_MARKS), [subject])
        if data is None:
            return
        st.altair_chart(lv.timeline_chart(data), width="stretch", key=f"cmp_chart_{label}")
    st.caption(f"Both timelines share one time scale: 0 – {fmt_us(span)}." if shared else
               "Each timeline spans its own trace (the scales differ: read the axes).")


# Compare's timelines start on a scale each when one trace is this many times shorter than the other.
SHARED_SCALE_MAX_RATIO = 10.0
COMPARE_MARKS = 2500  # each of compare's two timelines: half the single Timeline's budget


# Compare's diff tables: 9 columns in a ~466 px (800 px window, sidebar open) to ~880 px (1280 px)
# main column. The name, then what is compared (A, B, B − A, B / A: sized to their numbers, ~70 px
# each), then the rest at fixed widths: at 800 px the name's 160 px and cat's 100 px before them
# pushed B − A and B / A out of view (seen in a browser). A 300-character kernel name is whole in its tooltip.
DIFF_COLUMN_PX = {"name": 140, "status": 64, "A calls": 64, "B calls": 64, "cat": 90}
# The diff tables' display order (after DIFF_LABELS): the comparison first after the name.
DIFF_ORDER = ("name", "A (µs)", "B (µs)", "B − A (µs)", "B / A", "status", "A calls", "B calls", "cat")
# Compare's totals: "meaning" last, at a fixed width (the numbers before it size to their text).
TOTALS_MEANING_PX = 400


def _diff_columns(df) -> dict:
    """One decimal for the times (µs), and widths that keep the name and the comparison in view."""
    config = {c: st.column_config.NumberColumn(c, format="%.1f") for c in df.columns
              if str(df[c].dtype).startswith("float")}
    for column, px in DIFF_COLUMN_PX.items():
        if column in config:
            config[column] = st.column_config.NumberColumn(column, format="%.1f", width=px)
        elif column in df.columns:
            config[column] = st.column_config.Column(column, width=px)
    return config


def _compare_label(subject: Subject) -> str:
    """A short label that starts with what tells runs apart (a selectbox cuts the end off): the
    time, then the size/dtype/device, with a lesson run's name ("cold", "compiled") before them."""
    run = subject.run
    if run is None:
        return subject.title
    c = run.config
    name, _, clock = subject.title.removeprefix("Run: ").rpartition(" (")
    what = f"{c.shape_text} {c.dtype} {run.device.kind}"
    name = name.replace(f" · {c.workload} {what}", "")  # the default title repeats what ran
    parts = (what, name) if name == c.step_label else (name, what)
    return f"Run {clock.rstrip(')')} · {parts[0]} · {parts[1]}"


# A diff table's columns as a reader names them (lab.analysis.compare.DIFF_COLUMNS).
DIFF_LABELS = {"a_count": "A calls", "b_count": "B calls", "a_us": "A (µs)", "b_us": "B (µs)",
               "delta_us": "B − A (µs)", "ratio": "B / A"}


def _ratio_as_text(df):
    """A diff table with readable column names, and "—" for a ratio where A had none (a name new
    in B), not "None"; the times keep their numbers (sortable), shown with one decimal."""
    out = df.copy()
    out["ratio"] = [_ratio_text(r) for r in out["ratio"]]
    out = out.rename(columns=DIFF_LABELS)
    return out[[c for c in DIFF_ORDER if c in out.columns] + [c for c in out.columns if c not in DIFF_ORDER]]


def _ratio_text(ratio) -> str:
    return "—" if ratio is None or ratio != ratio else f"{ratio:.3g}×"  # NaN != NaN; 3 significant digits: "0.00155×"


def file_stem(subject: Subject) -> str:
    """A safe file-name stem for what is downloaded from this subject (its run's or file's name)."""
    if subject.run is not None:
        return subject.run.trace_stem
    name = subject.sample.file if subject.sample else subject.title.removeprefix("Upload: ")
    for suffix in (".gz", ".json", ".pt.trace"):
        name = name.removesuffix(suffix)
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "trace"


def _number_formats(formats: dict[str, str]) -> dict:
    return {column: st.column_config.NumberColumn(column, format=fmt) for column, fmt in formats.items()}


def _float_formats(df, overrides: dict | None = None) -> dict:
    """Three decimals for float columns (µs values read as 1234.568, not 1234.5678901)."""
    config = {c: st.column_config.NumberColumn(c, format="%.3f") for c in df.columns
              if str(df[c].dtype).startswith("float") or str(df[c].dtype) == "Float64"}
    config.update(overrides or {})
    return config


def lesson_check(subjects: list[Subject], load, jobs) -> None:
    """What the last lesson opened shows in its traces: each signal with its evidence."""
    opened = opened_lesson(subjects, load)
    if opened is None:
        return
    lesson = LESSONS[opened.key]
    names = [r.name for r in lesson.runs]
    signals = jobs(Job(kind=JobKind.SIGNALS, lesson=opened.key, names=tuple(names), code=lesson_signals,
                       timings=tuple(subject_timing(s) for s in opened.subjects)), opened.subjects)
    if signals is None:
        return
    # The check's evidence and the explanation state the lesson's figures: its predictions lock.
    teach.lesson_seen(opened.key)
    with teach.lesson_box(opened, f"Lesson check — {lesson.title}"):
        st.markdown(f"**Lesson check — {md_escape(lesson.title)}**")
        recorded = all(s.kind == "sample" for s in opened.subjects)
        where = "the H200 recording" if recorded else "your run" + ("s" if len(opened.subjects) > 1 else "")
        st.caption(f"What the lab finds in {where} (it looks for: {md_escape(lesson.look_for)}):")
        for signal in signals:
            icon = (":material/info:" if not signal.expected
                    else ":material/check_circle:" if signal.present else ":material/cancel:")
            st.markdown(f"{icon} {md_escape(signal.title)} — {md_escape(signal.evidence)}")
        cpu_runs = not recorded and any(s.run is not None and s.run.device.kind != "cuda" for s in opened.subjects)
        explanation = explanation_for(opened.key, recorded=not cpu_runs)
        if explanation:  # after the runs opened: the reveal's companion, never before the predictions
            st.markdown(explanation)

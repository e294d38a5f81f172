"""Sidebar: the run form (nothing runs until "Run profile") and the lesson presets."""

from __future__ import annotations

import math
from collections import Counter

import streamlit as st

from lab.core import (
    DEVICES,
    MAX_LABEL_CHARS,
    OPTIONS,
    WORKLOADS,
    ConfigError,
    DeviceInfo,
    DeviceKind,
    HostSettings,
    Option,
    RunConfig,
    describe_kinds,
    dtype_refusal,
)
from lab.lessons import LESSONS, lesson_configs
from lab.run import DTYPES
from lab.samples import lesson_samples
from ui.widgets import chosen, labels_from

SIZES = [2**p for p in range(4, 15)]  # 16 … 16384, the slider's stops
FORM_KEY = "run_form"
FORCE_FRESH_KEY = "cfg_force_fresh"
# The device model a run asks for ("any" or a DeviceKind.name); offered when the pool has several.
DEVICE_KIND_KEY = "cfg_device_kind"
ANY_KIND = "any"
DIMS = ("m", "k", "n")
# The workloads the form offers: the built-in ones, then those a lesson carries in its own module
# (found by their qualified name, lab.core.workloads), so that "Fill the form" can show its runs.
WORKLOAD_CHOICES = tuple(dict.fromkeys([*WORKLOADS, *(r.gpu.workload for lesson in LESSONS.values()
                                                      for r in lesson.runs)]))
# Widget keys, one per RunConfig field and the exact-sizes box: stable, so a preset can fill
# them and a rerun keeps them.
K = {name: f"cfg_{name}" for name in (*OPTIONS, "exact")}
# The form's expanders, in order: the options of each group (Option.group) under its title. The
# "what" group (workload, sizes, dtype, device) is drawn by hand above them.
EXPANDERS = {"labels": "record_function labels", "schedule": "Steps and schedule", "profiler": "Profiler options",
             "job": "Distributed job (ddp_gloo: ranks, straggler)"}


def nearest_stop(size: int) -> int:
    """The slider stop closest to ``size`` on the slider's (log) scale: 1000 → 1024, 3000 → 4096."""
    return min(SIZES, key=lambda stop: abs(math.log2(stop) - math.log2(max(size, 1))))


def fill_form(config: RunConfig) -> None:
    """Put ``config`` into the form's widgets (used by presets, before the widgets are drawn)."""
    state = st.session_state
    for dim in DIMS:
        state[K[dim]] = nearest_stop(getattr(config, dim))
    exact = any(getattr(config, d) not in SIZES for d in DIMS)
    state[K["exact"]] = config.shape_text.replace("x", ",") if exact else ""
    for name, option in OPTIONS.items():
        if name not in DIMS:
            value = getattr(config, name)
            state[K[name]] = (value or "") if option.kind == "optional text" else value


def _defaults() -> None:
    if K["m"] not in st.session_state:
        fill_form(RunConfig())


# A GPU older than this compute capability is where dtypes differ (tf32, bfloat16 need 8.0):
# before the worker has reported the GPU, those dtypes are shown as not yet known.
_OLDEST_GPU = (7, 0)


def _dtype_refusals(device: DeviceInfo | None, kind: str | None = None) -> dict[str, str]:
    """Why each dtype cannot run here. Before the worker reports the device, a CPU-only host
    (``kind`` "cpu", known without CUDA: no GPU listed) already knows its refusals."""
    if device is not None:
        kind, capability = device.kind, device.compute_capability
    elif kind == "cpu":
        capability = None
    else:
        return {}
    reasons = {d: dtype_refusal(d, kind=kind, compute_capability=capability) for d in DTYPES}
    return {d: r for d, r in reasons.items() if r}


def dtype_labels(device: DeviceInfo | None, kind: str | None = None) -> dict[str, str]:
    """Each dtype's radio label: "(not here)" where refused; on a GPU host whose GPU the worker has
    not reported yet, "(checking…)" on the dtypes an older GPU would refuse, so nothing looks
    selectable and then turns "not here" a few seconds later."""
    refused = _dtype_refusals(device, kind)
    unknown = set()
    if device is None and kind == "cuda":
        unknown = {d for d in DTYPES if dtype_refusal(d, kind="cuda", compute_capability=_OLDEST_GPU)}
    return {d: f"{d} (not here)" if d in refused else f"{d} (checking…)" if d in unknown else d for d in DTYPES}


def _device_caption(device: DeviceInfo | None) -> str:
    if device is None:
        return "Detecting the device… (the worker is warming up)"
    text = f"Detected: **{device.label}**"
    if device.peak:
        bf16 = device.peak.tflops.get("bfloat16")
        text += f" · peak {bf16:g} TFLOP/s bf16, {device.peak.memory_bandwidth_gbs:g} GB/s" if bf16 else ""
    return text


def parse_exact(text: str) -> tuple[int, int, int] | None:
    """"1000, 3000, 500" → (1000, 3000, 500); empty → None. Raises ConfigError with the fix."""
    text = text.strip()
    if not text:
        return None
    parts = [p for p in text.replace("x", ",").replace("×", ",").split(",") if p.strip()]
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 3:
        raise ConfigError(f"exact sizes {text!r} must be three whole numbers like 1000,3000,500; fix or clear them")
    return values


def _exact_sizes() -> tuple[int, int, int] | None:
    """The exact sizes the form holds now (submitted or filled by a preset), if valid."""
    try:
        return parse_exact(str(st.session_state.get(K["exact"]) or ""))
    except ConfigError:
        return None


def run_form(device: DeviceInfo | None, settings: HostSettings, *,
             kind: str | None = None, kinds: tuple[DeviceKind, ...] = ()) -> RunConfig | ConfigError | None:
    """Draw the form; on submit return the RunConfig, or the ConfigError to show; else None.
    ``kind``: the host's device kind, known before the worker reports its device; ``kinds``: the
    warm workers' device models (a choice when there are several, or several nodes)."""
    _defaults()
    # Outside the form so that the slider names follow the workload at once.
    workload: str = chosen(st.selectbox(OPTIONS["workload"].label, WORKLOAD_CHOICES, key=K["workload"],
                                        format_func=lambda w: WORKLOADS[w].title))
    st.caption(WORKLOADS[workload].formula)
    values: dict = {"workload": workload}
    exact_now = _exact_sizes()
    with st.form(FORM_KEY, border=False):
        for i, (dim, label) in enumerate(zip(DIMS, WORKLOADS[workload].dim_names)):
            if exact_now:  # the slider shows the exact size it is overridden by, at its nearest stop
                st.session_state[K[dim]] = nearest_stop(exact_now[i])
                label = f"{label} = {exact_now[i]} (exact size; the slider is at {nearest_stop(exact_now[i])})"
            values[dim] = st.select_slider(label, SIZES, key=K[dim])
        exact = st.text_input("Exact sizes (optional)", key=K["exact"], placeholder="e.g. 1000,3000,500",
                              help="Overrides the sliders with any sizes up to the host's limit "
                                   f"({settings.max_dim}).")
        values["dtype"] = _dtype_radio(device, kind)
        values["device"] = st.radio(OPTIONS["device"].label, DEVICES, key=K["device"], horizontal=True)
        st.caption(_device_caption(device))
        _kind_choice(kinds)
        for group, title in EXPANDERS.items():
            with st.expander(title, expanded=False):
                values.update(_group_widgets(group))
        if settings.reuse_window_s > 0:
            st.checkbox("Force a fresh run", key=FORCE_FRESH_KEY,
                        help=f"This host reuses the result of an identical run made in the last "
                             f"{settings.reuse_window_s:g} s (marked 'reused'). Tick to profile anew.")
        submitted = st.form_submit_button("Run profile", type="primary", width="stretch")
    if not submitted:
        return None
    try:
        values.update(zip(DIMS, parse_exact(exact) or (values["m"], values["k"], values["n"])))
        return RunConfig(**{name: _config_value(OPTIONS[name], value) for name, value in values.items()})
    except ConfigError as exc:
        return exc


def _kind_choice(kinds: tuple[DeviceKind, ...]) -> None:
    """With workers of several device models, or on several nodes (the Ray backend): which one runs it."""
    if len(kinds) > 1 or any(k.nodes > 1 for k in kinds):
        st.selectbox("Device kind", [ANY_KIND, *(k.name for k in kinds)], key=DEVICE_KIND_KEY,
                     help=f"This lab's workers: {describe_kinds(kinds)}.")


def _dtype_radio(device: DeviceInfo | None, kind: str | None) -> str:
    option = OPTIONS["dtype"]
    refusals = _dtype_refusals(device, kind)
    labels = dtype_labels(device, kind)
    why = "  \n".join(f"**{d}**: {r}" for d, r in refusals.items())
    return chosen(st.radio(option.label, DTYPES, key=K["dtype"], horizontal=True, format_func=labels_from(labels),
                           help=(option.tip or "") + (f"  \n{why}" if why else "")))


def _group_widgets(group: str) -> dict:
    """The widgets of one group's options, in field order; inline ones share the last row."""
    options = [o for o in OPTIONS.values() if o.group == group]
    rows = [o for o in options if not o.inline]
    inline = [o for o in options if o.inline]
    values = {o.name: _widget(st, o) for o in rows}
    if inline:
        values.update({o.name: _widget(col, o) for o, col in zip(inline, st.columns(len(inline)))})
    return values


def _widget(where, option: Option):
    """The widget of one option in ``where`` (``st`` or a column): a checkbox, number or text box."""
    key = K[option.name]
    if option.kind == "bool":
        return where.checkbox(option.label, key=key, help=option.tip)
    if option.kind == "int":
        return where.number_input(option.label, option.low, option.high, key=key, help=option.tip)
    return where.text_input(option.label, key=key, max_chars=MAX_LABEL_CHARS, help=option.tip)


def _config_value(option: Option, value):
    """A widget's value as RunConfig takes it: whole numbers as int, an empty optional label as None."""
    if option.kind == "int":
        return int(value)
    if option.kind == "optional text":
        return value or None
    return value


def lesson_picker(device: DeviceInfo | None) -> tuple[str, str] | None:
    """Preset chooser; returns ("run" | "recording", lesson key) for the button clicked."""
    keys = list(LESSONS)
    key: str = chosen(st.selectbox("Lesson", keys, key="lesson_key", format_func=lambda k: LESSONS[k].title))
    lesson = LESSONS[key]
    # Only the set-up before the predictions (lab.teach.giveaway.shown_before): what the lab looks
    # for and what the recordings show come with the lesson check, once the runs opened.
    st.markdown(lesson.text)
    clicked = None
    if lesson_samples(lesson.runs) is not None and st.button(
            "Open the H200 recording", key="open_lesson_recording", width="stretch",
            help="The same lesson recorded on an NVIDIA H200 (bundled samples): opens at once."):
        clicked = ("recording", key)
    try:
        runs = lesson_configs(lesson, device.kind if device else "cpu")
    except ConfigError as exc:
        st.info(str(exc))
        return clicked
    c1, c2 = st.columns(2)
    c1.button("Fill the form", key="fill_lesson", width="stretch", on_click=fill_form, args=(runs[0][1],),
              help="Puts the lesson's first configuration in the form above.")
    if c2.button("Run lesson", key="run_lesson", type="primary", width="stretch",
                 help="Runs the lesson's configuration(s) here and opens the result"
                      + (" side by side." if lesson.is_pair else ".")):
        clicked = ("run", key)
    return clicked


def health_text(health, settings: HostSettings | None = None) -> str:
    """The instructor's status lines: workers, queue, runs served, last error; with ``settings``
    the host's limits and the variables that set them (host-only details stay here, never in an
    attendee's message)."""
    lines = [
        f"workers alive: {health.workers_alive}/{health.workers_total}",
        f"queue: {health.queue_length} waiting",
        f"runs served: {health.runs_served} (failed: {health.runs_failed})",
        f"uptime: {health.uptime_s / 60:.0f} min",
    ]
    mib = 2**20
    for w in health.workers:
        rss = "" if w.rss_bytes is None else f", {w.rss_bytes / mib:.0f} MB resident"
        where = f" @ {w.node}" if w.node else ""
        lines.append(f"  worker {w.index} on {w.device}{where}: {w.state}, {w.runs_served} runs, "
                     f"{w.restarts} restarts{rss}")
        if w.node is None:  # a Ray actor has no warm spare
            spare_rss = "" if w.standby_rss_bytes is None else f", {w.standby_rss_bytes / mib:.0f} MB resident"
            lines.append(f"    warm spare: {w.standby}{spare_rss}, took over {w.promotions} times")
    if health.backend == "ray":
        per_node = Counter((w.node or "not placed yet", w.device) for w in health.workers)
        lines.append("Ray actors per node and device:")
        lines += [f"  {node}: {device} ×{count}" for (node, device), count in sorted(per_node.items())]
    if health.last_error:
        lines.append(f"last error: {health.last_error}")
    if settings is not None:
        lines.append("host limits (environment variables):")
        lines += [f"  {variable}={text}" for variable, text in settings.shown()]  # secrets: "set" only
    return "\n".join(lines)


def reader_text(health) -> str:
    """The trace readers' status: readers and their memory, uploads waiting, what is kept."""
    mib = 2**20
    lines = [
        f"trace readers alive: {health.readers_alive}/{health.readers_total} "
        f"(memory limit {health.memory_limit_mb} MB each)",
        f"uploads waiting: {health.waiting} ({health.waiting_large} large)",
        f"traces read: {health.reads_served} (refused or failed: {health.reads_failed})",
        f"uploads kept (outlines): {health.held_uploads}, {health.held_bytes / mib:.0f} of "
        f"{health.held_limit_bytes / mib:.0f} MB",
    ]
    for r in health.readers:
        rss = "" if r.rss_bytes is None else f", {r.rss_bytes / mib:.0f} MB resident"
        reading = f", reading {r.reading}" if r.reading else ""
        lines.append(f"  reader {r.index}: {r.state}{rss}, {r.reads_served} reads, {r.restarts} restarts{reading}")
    if health.last_error:
        lines.append(f"last reader error: {health.last_error}")
    return "\n".join(lines)

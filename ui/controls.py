"""Sidebar: the run form (nothing runs until "Run profile") and the lesson presets."""

from __future__ import annotations

import streamlit as st

from lab.run import (
    DTYPES,
    LESSONS,
    WORKLOADS,
    ConfigError,
    DeviceInfo,
    HostSettings,
    RunConfig,
    dtype_refusal,
    lesson_configs,
)
from lab.samples import lesson_samples

SIZES = [2**p for p in range(4, 15)]  # 16 … 16384, the slider's stops
FORM_KEY = "run_form"
FORCE_FRESH_KEY = "cfg_force_fresh"
# Widget keys: stable, so a preset can fill them and a rerun keeps them.
K = {name: f"cfg_{name}" for name in (
    "workload", "m", "k", "n", "exact", "dtype", "device", "step_label", "matmul_label",
    "add_label", "warmup_iters", "wait", "warmup", "active", "repeat", "record_shapes",
    "profile_memory", "with_stack", "with_flops", "compile")}


def fill_form(config: RunConfig) -> None:
    """Put ``config`` into the form's widgets (used by presets, before the widgets are drawn)."""
    state = st.session_state
    for dim in ("m", "k", "n"):
        value = getattr(config, dim)
        state[K[dim]] = value if value in SIZES else SIZES[0]
    exact = any(getattr(config, d) not in SIZES for d in ("m", "k", "n"))
    state[K["exact"]] = config.shape_text.replace("x", ",") if exact else ""
    for name in ("workload", "dtype", "device", "step_label", "warmup_iters", "wait", "warmup",
                 "active", "repeat", "record_shapes", "profile_memory", "with_stack", "with_flops",
                 "compile"):
        state[K[name]] = getattr(config, name)
    state[K["matmul_label"]] = config.matmul_label or ""
    state[K["add_label"]] = config.add_label or ""


def _defaults() -> None:
    if K["m"] not in st.session_state:
        fill_form(RunConfig())


def _dtype_refusals(device: DeviceInfo | None) -> dict[str, str]:
    if device is None:
        return {}
    reasons = {d: dtype_refusal(d, kind=device.kind, compute_capability=device.compute_capability) for d in DTYPES}
    return {d: r for d, r in reasons.items() if r}


def _dtype_label(dtype: str, device: DeviceInfo | None) -> str:
    if device and dtype_refusal(dtype, kind=device.kind, compute_capability=device.compute_capability):
        return f"{dtype} (not here)"
    return dtype


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


def run_form(device: DeviceInfo | None, settings: HostSettings) -> RunConfig | ConfigError | None:
    """Draw the form; on submit return the RunConfig, or the ConfigError to show; else None."""
    _defaults()
    # Outside the form so that the slider names follow the workload at once.
    workload = st.selectbox("Workload", list(WORKLOADS), key=K["workload"],
                            format_func=lambda w: WORKLOADS[w].title)
    names = WORKLOADS[workload].dim_names
    st.caption(WORKLOADS[workload].formula)
    with st.form(FORM_KEY, border=False):
        m = st.select_slider(names[0], SIZES, key=K["m"])
        k = st.select_slider(names[1], SIZES, key=K["k"])
        n = st.select_slider(names[2], SIZES, key=K["n"])
        exact = st.text_input("Exact sizes (optional)", key=K["exact"], placeholder="e.g. 1000,3000,500",
                              help="Overrides the sliders with any sizes up to the host's limit "
                                   f"({settings.max_dim}).")
        refusals = _dtype_refusals(device)
        why = "  \n".join(f"**{d}**: {r}" for d, r in refusals.items())
        dtype = st.radio("dtype", DTYPES, key=K["dtype"], horizontal=True,
                         format_func=lambda d: _dtype_label(d, device),
                         help=("Element type of x, w and b. tf32 is float32 storage with tensor-core "
                               "matmuls." + (f"  \n{why}" if why else "")))
        dev = st.radio("Device", ("auto", "cpu", "cuda"), key=K["device"], horizontal=True)
        st.caption(_device_caption(device))
        with st.expander("record_function labels", expanded=False):
            step_label = st.text_input("Whole step", key=K["step_label"], max_chars=64)
            matmul_label = st.text_input("Around the matmul (optional)", key=K["matmul_label"], max_chars=64)
            add_label = st.text_input("Around the bias add (optional)", key=K["add_label"], max_chars=64)
        with st.expander("Steps and schedule", expanded=False):
            warmup_iters = st.number_input("Warm-up iterations before profiling (0 = cold)", 0, 16,
                                           key=K["warmup_iters"])
            c1, c2, c3, c4 = st.columns(4)
            wait = c1.number_input("wait", 0, 8, key=K["wait"])
            warmup = c2.number_input("warmup", 0, 8, key=K["warmup"])
            active = c3.number_input("active", 1, 32, key=K["active"])
            repeat = c4.number_input("repeat", 1, 8, key=K["repeat"])
        with st.expander("Profiler options", expanded=False):
            record_shapes = st.checkbox("record_shapes", key=K["record_shapes"])
            profile_memory = st.checkbox("profile_memory", key=K["profile_memory"])
            with_stack = st.checkbox("with_stack", key=K["with_stack"])
            with_flops = st.checkbox("with_flops", key=K["with_flops"])
            compile_ = st.checkbox("torch.compile the step", key=K["compile"],
                                   help="Compile time is measured apart and kept out of the profile.")
        if settings.reuse_window_s > 0:
            st.checkbox("Force a fresh run", key=FORCE_FRESH_KEY,
                        help=f"This host reuses the result of an identical run made in the last "
                             f"{settings.reuse_window_s:g} s (marked 'reused'). Tick to profile anew.")
        submitted = st.form_submit_button("Run profile", type="primary", width="stretch")
    if not submitted:
        return None
    try:
        sizes = parse_exact(exact) or (m, k, n)
        return RunConfig(
            workload=workload, m=sizes[0], k=sizes[1], n=sizes[2], dtype=dtype, device=dev,
            step_label=step_label, matmul_label=matmul_label or None, add_label=add_label or None,
            warmup_iters=int(warmup_iters), wait=int(wait), warmup=int(warmup), active=int(active),
            repeat=int(repeat), record_shapes=record_shapes, profile_memory=profile_memory,
            with_stack=with_stack, with_flops=with_flops, compile=compile_,
        )
    except ConfigError as exc:
        return exc


def lesson_picker(device: DeviceInfo | None) -> tuple[str, str] | None:
    """Preset chooser; returns ("run" | "recording", lesson key) for the button clicked."""
    keys = list(LESSONS)
    key = st.selectbox("Lesson", keys, key="lesson_key", format_func=lambda k: LESSONS[k].title)
    lesson = LESSONS[key]
    st.markdown(lesson.text)
    st.caption(f"Look for: {lesson.look_for}")
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


def health_text(health) -> str:
    """The instructor's status line: workers, queue, runs served, last error."""
    lines = [
        f"workers alive: {health.workers_alive}/{health.workers_total}",
        f"queue: {health.queue_length} waiting",
        f"runs served: {health.runs_served} (failed: {health.runs_failed})",
        f"uptime: {health.uptime_s / 60:.0f} min",
    ]
    for w in health.workers:
        lines.append(f"  worker {w.index} on {w.device}: {w.state}, {w.runs_served} runs, {w.restarts} restarts")
    if health.last_error:
        lines.append(f"last error: {health.last_error}")
    return "\n".join(lines)

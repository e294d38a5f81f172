"""Profiler Lab: learn to read torch.profiler's table and trace. UI only: wiring, no logic.

Run it with ``streamlit run app.py``. Profiles run in worker processes (``lab.service``);
every number shown is computed in ``lab/``.
"""

from __future__ import annotations

import streamlit as st

from lab.config import ConfigError, check_device, check_limits
from lab.lessons import LESSONS, lesson_configs
from lab.service import ProfileService
from lab.settings import HostSettings
from ui import cache, controls, state, views
from ui.run import run_configs

st.set_page_config(page_title="Profiler Lab", page_icon=":material/speed:", layout="wide")

VIEWS = ("Summary", "Table", "Timeline", "Insights", "Trace", "Compare")


@st.cache_resource(show_spinner=False)
def get_service() -> ProfileService:
    """One worker pool per server, shared by every visitor; started (and warmed up) once."""
    service = ProfileService(settings=HostSettings.from_env())
    service.start()
    return service


settings = HostSettings.from_env()
service = get_service()
device = service.device_info()


@st.fragment(run_every=1.0)
def _await_device() -> None:
    """While the worker warms up, check each second and redraw the page once it is ready."""
    if service.device_info() is not None:
        st.rerun(scope="app")


if device is None:
    _await_device()

with st.sidebar:
    st.header("Run a profile")
    submitted = controls.run_form(device, settings)
    st.divider()
    st.subheader("Lessons")
    lesson_key = controls.lesson_picker(device)
    st.divider()
    with st.expander("Server status", expanded=False):
        st.text(controls.health_text(service.health()))

st.title("Profiler Lab")
st.caption("torch.profiler gives you two artifacts: the key_averages **table** (what takes the most "
           "time?) and the Chrome **trace** (when, and why?). Run the classic matmul + bias add, open "
           "a recorded GPU sample, or upload your own trace — then read both and act on them.")

if isinstance(submitted, ConfigError):
    st.error(str(submitted))
elif submitted is not None:
    try:
        check_limits(submitted, settings)
        if device is not None:
            check_device(submitted, kind=device.kind, compute_capability=device.compute_capability)
    except ConfigError as exc:
        st.error(str(exc))
    else:
        results = run_configs(service, [("run", submitted)])
        if results:
            state.add_run(results[0])
            st.session_state["view"] = "Summary"

if lesson_key is not None:
    lesson = LESSONS[lesson_key]
    try:
        runs = lesson_configs(lesson, device.kind if device else "cpu")
    except ConfigError as exc:
        st.error(str(exc))
    else:
        results = run_configs(service, list(runs))
        if results:
            added = [state.add_run(r, name=f"{lesson.title} — {name}") for (name, _), r in zip(runs, results)]
            if len(added) == 2:
                st.session_state["cmp_a"], st.session_state["cmp_b"] = added[0].key, added[1].key
                st.session_state["view"] = "Compare"

with st.expander("Open your own trace (.json or .json.gz from torch.profiler)", expanded=False):
    upload = st.file_uploader("Trace file", type=["json", "gz"], key="upload",
                              help="export_chrome_trace() output or a tensorboard_trace_handler file. "
                                   "Parsed in memory, never executed.")
    if upload is not None:
        data = upload.getvalue()
        if len(data) > settings.max_upload_mb * 2**20:
            st.error(f"{upload.name} is {len(data) / 2**20:.0f} MB; this host accepts up to "
                     f"{settings.max_upload_mb} MB. Profile fewer steps, or gzip the file.")
        else:
            state.add_upload(upload.name, data)

subjects = state.all_subjects()
subject = state.current_subject(subjects)
st.selectbox("Showing", [s.key for s in subjects], key="subject",
             format_func={s.key: s.title for s in subjects}.get,
             help="Your runs of this session, your uploads, and GPU traces recorded on an H200.")
loaded = cache.load(subject) if subject else None

if loaded is not None:
    tabs = st.tabs(VIEWS, key="view", on_change="rerun")
    show = {
        "Summary": lambda: views.summary_view(subject, loaded),
        "Table": lambda: views.table_view(subject, loaded),
        "Timeline": lambda: views.timeline_view(subject, loaded),
        "Insights": lambda: views.insights_view(loaded),
        "Trace": lambda: views.trace_view(subject, loaded),
        "Compare": lambda: views.compare_view(subjects, cache.load),
    }
    for name, tab in zip(VIEWS, tabs):
        if tab.open:
            with tab:
                show[name]()

"""Profiler Lab: learn to read torch.profiler's table and trace. UI only: wiring, no logic.

Run it with ``streamlit run app.py``. Profiles run in worker processes (``lab.run.service``);
every number shown is computed in ``lab/``; the views live in ``ui/``.
"""

from __future__ import annotations

import functools

import streamlit as st
from streamlit.runtime import Runtime

from lab.access import RateLimiter
from lab.core import HostSettings
from lab.read import ReaderPool
from lab.run import ProfileService
from lab.teach import own_answers
from ui import (
    access,
    cache,
    controls,
    layout,
    messages,
    own_trace,
    ranks,
    replay,
    room,
    state,
    teach,
    tensorboard,
    tracedir,
    upload,
    views,
)
from ui.early_read import EarlyReads
from ui.run import await_worker, open_recording, run_lesson, run_submitted, settle_heap, settle_interrupted
from ui.widgets import labels_from

st.set_page_config(page_title="Profiler Lab", page_icon=":material/speed:", layout="wide")

# "Memory" is always listed; without profile_memory's records it says how to record them.
# "Ranks" is shown only for a group of one job's ranks (several traces uploaded together).
# "TensorBoard": the removed TensorBoard plugin's step-time breakdown, Kernel and Module views.
# "Roofline": this session's size-sweep runs on the roofline, listed once a sweep ran (and opened
# by it); above "Showing" it sat over every view of every run.
VIEWS = ("Summary", "Table", "Timeline", "Memory", "Insights", "Trace", "TensorBoard", "Compare", "Roofline",
         "Ranks")


@st.cache_resource(show_spinner=False)
def get_settings(environment: tuple[tuple[str, str], ...]) -> HostSettings:
    """The host's settings, parsed once per server (keyed by its PROFILER_LAB_* variables)."""
    return HostSettings.from_env(dict(environment))


@st.cache_resource(show_spinner=False)
def get_service(_settings: HostSettings) -> ProfileService:
    """One worker pool per server, shared by every visitor; started (and warmed up) once, with
    the settings of the first page run (``_settings`` is not part of the cache key)."""
    service = ProfileService(settings=_settings)
    service.start()
    return service


@st.cache_resource(show_spinner=False)
def get_readers(_settings: HostSettings) -> ReaderPool:
    """One pool of trace readers per server (uploads, samples, runs' traces), apart from the
    profiling workers; started once, with the settings of the first page run."""
    # Each reader answers a visitor's own-trace questions once on its warm-up read: the first
    # question after a click must not pay their imports.
    return ReaderPool(settings=_settings, warm_code=(own_answers,)).start()


@st.cache_resource(show_spinner=False)
def get_early_reads(_readers: ReaderPool, _settings: HostSettings) -> EarlyReads:
    """Uploads' reads begun when their bytes arrive, before the page run that brings them
    (``ui.early_read``): installed once per server on Streamlit's file store."""
    early = EarlyReads(_readers, _settings)
    # A server's page (AppTest runs the script without one: reads begin on the page), if the host lets it.
    if _settings.early_reads and Runtime.exists():
        early.install(Runtime.instance().uploaded_file_mgr)
    return early


@st.cache_resource(show_spinner=False)
def get_limiter() -> RateLimiter:
    """The per-visitor rate limits' counts, one per server, shared (behind a lock) by every session."""
    return RateLimiter()


# Settings that cannot work (e.g. login=oidc without [auth] in secrets.toml) stop here, saying why.
settings = access.checked_settings(get_settings)
service = get_service(settings)
readers = get_readers(settings)
early_reads = get_early_reads(readers, settings)
limiter = get_limiter()
# Without a passcode or login set, everyone is let in (and is the host); else a visitor who has
# not signed in sees only the sign-in page: the script stops here. Workers warm up meanwhile.
access.gate(settings, limiter)
device = service.device_info()

with st.sidebar:
    st.header("Run a profile")
    submitted = controls.run_form(device, settings, kind=service.device_kind, kinds=service.device_kinds())
    st.divider()
    st.header("Lessons")
    lesson_click = controls.lesson_picker(device)
    # The prediction form and the score are drawn once the page is (below): what the page shows
    # (a reveal, a lesson's explanation, a recording) may lock questions or score them first.
    prediction_form = st.container()
    sidebar_score = st.empty()
    st.divider()
    st.header("Room")
    seat_click = room.room_sidebar(device)
    sweep_click = st.button("Run the size sweep here", key="run_sweep_alone", width="stretch",
                            help="A few matmul shapes from overhead- to compute-bound, run on this host; "
                                 "opens your roofline.")
    st.divider()
    if access.is_host():
        with st.expander("Server status (for the host)", expanded=False):
            st.text(controls.health_text(service.health(), settings))
            st.text(controls.reader_text(readers.health()))
    access.host_sign_in(settings, limiter)
    layout.collapse_sidebar_when_narrow()
    layout.page_styles()

st.title("Profiler Lab")
st.caption("torch.profiler gives you two artifacts: the key_averages **table** (what takes the most time?) "
           "and the Chrome **trace** (when, and why?). Run the classic matmul + bias add from the sidebar, "
           "pick a lesson, open a recorded GPU trace, or upload your own — then read both and act on them.")

# Nothing runs until a button is pressed: the form only returns a config on "Run profile".
if submitted is not None:
    run_submitted(service, settings, device, submitted, limiter=limiter, readers=readers)
replay_asked = replay.take_request()  # the Table's "Replay here" or a variant's button, clicked
if isinstance(replay_asked, str):
    messages.error(replay_asked)
elif replay_asked is not None:
    run_submitted(service, settings, device, replay_asked.config, limiter=limiter, readers=readers,
                  name=replay_asked.name, view="Table")
if lesson_click is not None:
    action, lesson_key = lesson_click
    # Statements, not a conditional expression: Streamlit's magic writes an expression's value
    # to the page (here a stray "None" below the results).
    if action == "run":
        run_lesson(service, device, lesson_key, settings=settings, limiter=limiter, readers=readers)
    else:
        open_recording(lesson_key)

if seat_click is not None:
    room.run_sweep(service, device, [seat_click], settings=settings, limiter=limiter)
if sweep_click:
    room.run_sweep(service, device, room.alone_sweep_shapes(device), settings=settings, limiter=limiter)
room.instructor_view(device)

waiting_upload = upload.upload_box(settings, readers, limiter=limiter, early=early_reads)
waiting_dir = tracedir.trace_dir_box(  # PROFILER_LAB_TRACE_DIR's traces, folded once the visitor has their own
    settings, readers, limiter=limiter, expanded=waiting_upload is None and not state.has_own_subjects())
# A file that came with this page run is read now, before "Showing": once read, this run shows it.
waiting_upload = upload.await_new_upload(waiting_upload, readers)

subjects = state.all_subjects()
load = functools.partial(cache.load, settings=settings, readers=readers)
jobs = functools.partial(cache.job_result, readers=readers)  # multi-trace work, in a reader
views.lesson_check(subjects, load, jobs)
reveal_score = teach.reveal(subjects, load, jobs)
room.share_runs(subjects, load)
subject = state.current_subject(subjects)
teach.recording_seen(subject)  # a lesson's H200 recording on show: its GPU answers can be seen
st.selectbox("Showing", [s.key for s in subjects], key="subject",
             format_func=labels_from({s.key: s.title for s in subjects}),
             help="Your runs of this session (newest first), your uploads, and GPU traces recorded on an H200.")
if subject is not None and subject.sample is not None:
    views.sample_note(subject.sample, device)
loaded = load(subject) if subject else None
if subject is not None and loaded is not None:
    # Its questions, above the views that answer them; asked (a reader job) once the view is drawn.
    own_box = own_trace.own_trace_box(subject)
    # Only the open tab's code runs (on_change="rerun" + .open): each view parses nothing twice.
    shown = [v for v in VIEWS if (v != "Ranks" or subject.kind == "ranks")
             and (v != "Roofline" or room.swept())]
    if "view" in st.session_state and st.session_state["view"] not in shown:  # a single trace after a group
        st.session_state["view"] = shown[0]
    tabs = st.tabs(shown, key="view", on_change="rerun")
    show = {
        "Summary": lambda: views.summary_view(subject, loaded),
        "Table": lambda: views.table_view(subject, loaded, jobs),
        "Timeline": lambda: views.timeline_view(subject, loaded, jobs),
        "Memory": lambda: views.memory_view(subject, loaded, jobs),
        "Insights": lambda: views.insights_view(loaded),
        "Trace": lambda: views.trace_view(subject, loaded, settings.perfetto_origin),
        "TensorBoard": lambda: tensorboard.tensorboard_view(subject, views.file_stem(subject), jobs),
        "Compare": lambda: views.compare_view(subjects, load, jobs),
        "Roofline": lambda: room.my_roofline(subjects, load, device),
        "Ranks": lambda: ranks.ranks_view(subject, readers, jobs),
    }
    for name, tab in zip(shown, tabs):
        if tab.open:
            with tab:
                show[name]()
    own_trace.own_trace_lesson(own_box, subject, jobs)
with prediction_form:
    teach.predict_form(st.session_state["lesson_key"], device.kind if device else "cpu")
teach.show_score(sidebar_score, reveal_score)  # one figure, after every reveal of this run scored

# An upload still being read since an earlier run (a click ended it) is awaited last, once the
# page is drawn: the click is answered first.
upload.await_upload(waiting_upload, readers)
tracedir.await_dir(waiting_dir, readers)
settle_interrupted()  # runs left waiting by an interrupted page run, if this one submitted nothing

if device is not None:
    settle_heap()  # once the worker is warm and the page drawn: before a visitor's first click
elif submitted is None and lesson_click is None and seat_click is None and not sweep_click:
    # Last, once the page is drawn: wait for the worker's warm-up, then redraw with the device.
    # Not after a click that ran or refused something: the redraw would wipe its messages.
    await_worker(service)

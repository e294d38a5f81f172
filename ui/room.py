"""The room: join one by its code (optional), or open one as its instructor; the instructor's live view;
the size sweep (a seat's suggested shape, or the whole sweep alone) and its roofline.

Room state lives in the database (``lab.teach.RoomStore``), shared by every session and server
replica; this session holds only its membership (or its room's instructor key) in
``st.session_state``. A database that is down shows its message here and nothing else changes.
"""

from __future__ import annotations

import functools
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

import pandas as pd
import streamlit as st

from lab import views as lv
from lab.access import RateLimiter
from lab.core import DeviceInfo, HostSettings
from lab.lessons import QUESTIONS
from lab.run import ProfileService
from lab.teach import (
    ALONE_SWEEP,
    OWN_QUESTION_TEXTS,
    Membership,
    RoomKeys,
    RoomNotFound,
    RoomSettings,
    RoomStore,
    RoomsUnavailable,
    RunSummary,
    device_roofline,
    normalize_code,
    roof_caption,
    roof_over,
    roofline_data,
    run_summary,
    seat_shape,
    sweep_config,
)
from ui import access, messages, state
from ui.messages import md_escape

T = TypeVar("T")

MEMBER = "room_member"  # this session's Membership
INSTRUCTOR = "room_instructor"  # RoomKeys of the room this session opened
SHARED = "room_shared_runs"  # subject keys of runs already sent to the room
SWEPT = "teach_sweep_shown"  # this session ran a size sweep: the Roofline view is listed
# A down database is asked again after this long, not on every page run (each try waits up to
# lab.teach.db.CONNECT_TIMEOUT_S).
RETRY_DOWN_S = 30
LIVE_EVERY_S = 3  # the instructor view's refresh


@st.cache_resource(ttl=RETRY_DOWN_S, show_spinner=False)
def _store(url: str, ttl_s: float) -> RoomStore | RoomsUnavailable:
    try:
        return RoomStore.open(RoomSettings(database_url=url, room_ttl_s=ttl_s))
    except RoomsUnavailable as exc:
        return exc


def get_store() -> RoomStore | RoomsUnavailable:
    try:
        settings = RoomSettings.from_env(os.environ)
    except RoomsUnavailable as exc:
        return exc
    return _store(settings.database_url, settings.room_ttl_s)


def _call(what: Callable[[RoomStore], T], *, room_key: str = MEMBER) -> T | None:
    """A store call (``what(store)``); its failure becomes one message, and the session leaves a
    room that is gone (``room_key``: its record of that room, the attendee's or the instructor's)."""
    store = get_store()
    if isinstance(store, RoomsUnavailable):
        st.info(str(store), icon=":material/cloud_off:")
        return None
    try:
        return what(store)
    except RoomNotFound as exc:  # expired or closed: this session is no longer in it
        st.session_state.pop(room_key, None)
        messages.error(str(exc))
    except (RoomsUnavailable, PermissionError) as exc:
        messages.error(str(exc))
    return None


def send_predictions(chosen: dict[str, str]) -> None:
    member: Membership | None = st.session_state.get(MEMBER)
    if member is None:
        return
    for key, choice in chosen.items():
        _call(functools.partial(RoomStore.record_answer, code=member.code, member_key=member.member_key,
                                question_key=key, choice=choice))


def send_reveal(question_key: str, measured_choice: str) -> None:
    member: Membership | None = st.session_state.get(MEMBER)
    if member is not None:
        _call(lambda store: store.record_reveal(member.code, member.member_key, question_key, measured_choice))


def share_runs(subjects, load) -> None:
    """Send this session's new runs' summaries (shape, dtype, device, TFLOP/s, FLOP/byte) to its room."""
    member: Membership | None = st.session_state.get(MEMBER)
    if member is None:
        return
    shared = st.session_state.setdefault(SHARED, set())
    for subject in (s for s in subjects if s.run is not None and s.key not in shared):
        shared.add(subject.key)
        loaded = load(subject)
        point = (run_summary(subject.run.config, loaded.analysis, subject.run.device.name,
                             step_tflops=subject.run.step_tflops) if loaded else None)
        if point is not None:
            _call(functools.partial(RoomStore.record_run, code=member.code, member_key=member.member_key, run=point))


def _join_form() -> None:
    with st.form("join_room", border=False):
        code = st.text_input("Room code", key="room_code", max_chars=8, placeholder="e.g. KMPTX")
        name = st.text_input("Your name (shown to the instructor)", key="room_name", max_chars=40)
        joined = st.form_submit_button("Join the room", width="stretch")
    if joined:
        membership = _call(lambda store: store.join(normalize_code(code), name))
        if membership is not None:
            st.session_state[MEMBER] = membership
            st.session_state[SHARED] = {s.key for s in state.all_subjects() if s.run is not None}
            st.rerun()


def _open_room() -> None:
    keys = _call(lambda store: store.open_room())
    if keys is not None:
        st.session_state[INSTRUCTOR] = keys


def room_sidebar(device: DeviceInfo | None) -> tuple[int, int, int] | None:
    """The sidebar's Room section; returns a sweep shape to run when its button is clicked."""
    store = get_store()
    if isinstance(store, RoomsUnavailable):
        st.info(str(store), icon=":material/cloud_off:")
    member, keys = st.session_state.get(MEMBER), st.session_state.get(INSTRUCTOR)
    kind = device.kind if device else "cpu"
    clicked = None
    if member:
        st.markdown(f"In room **{member.code}** as *{md_escape(member.display_name)}* (seat {member.seat})")
        shape = seat_shape(member.seat, kind)
        if st.button(f"Run my sweep shape: {shape[0]}×{shape[1]}×{shape[2]}", key="run_seat_shape",
                     width="stretch", help="The size sweep: each seat runs a different shape; the room's "
                                           "roofline fills in on the instructor's screen."):
            clicked = shape
        if st.button("Leave the room", key="leave_room"):
            st.session_state.pop(MEMBER, None)
            st.rerun()
    elif not isinstance(store, RoomsUnavailable):
        _join_form()
    if keys:
        until = time.strftime("%H:%M", time.localtime(keys.expires_at_s))
        st.caption(f"You host room {keys.code} (open until {until}).")
    elif not isinstance(store, RoomsUnavailable) and access.is_host():  # on a hosted lab, only the host
        st.button("Open a room (instructor)", key="open_room", on_click=_open_room, width="stretch")
    return clicked


def run_sweep(service: ProfileService, device: DeviceInfo | None, shapes, *, settings: HostSettings,
              limiter: RateLimiter) -> None:
    """Run sweep shapes through the existing service and keep them as this session's runs (a
    click counts as one run against the visitor's limit, like a lesson's)."""
    from ui.run import run_configs

    if (why := access.refusal("run", settings, limiter)) is not None:
        messages.error(why)
        return
    kind = device.kind if device else "cpu"
    runs = [(f"sweep {m}×{k}×{n}", sweep_config((m, k, n), kind)) for m, k, n in shapes]
    results = run_configs(service, runs)
    for (name, _), result in zip(runs, results or []):
        state.add_run(result, name=f"Size sweep — {name}")
    if results:
        st.session_state[SWEPT] = True
        st.session_state["view"] = "Roofline"  # the tabs (app.py) are drawn after this: the sweep opens its view


def alone_sweep_shapes(device: DeviceInfo | None):
    return ALONE_SWEEP["cuda" if device and device.kind == "cuda" else "cpu"]


def _roofline(points: list[RunSummary], device: DeviceInfo | None, title: str, key: str) -> None:
    if not points:
        st.caption("No runs yet: the roofline fills in as runs arrive.")
        return
    dtype = Counter(p.dtype for p in points).most_common(1)[0][0]
    roof = device_roofline(device, dtype) if device else None
    if roof is None:
        st.caption(f"No roof for {dtype} on this host yet (the worker measures it at warm-up).")
        return
    same = [p for p in points if p.dtype == dtype]
    shown = roof_over(roof, same)  # never below a run it is drawn with
    st.altair_chart(lv.roofline_chart(roofline_data(roof, same), title, notes=shown.raised), width="stretch",
                    key=key)
    st.caption(roof_caption(roof, shown))  # lab's own words and figures, no visitor text


def swept() -> bool:
    """Whether this session ran a size sweep (its Roofline view is then listed)."""
    return bool(st.session_state.get(SWEPT))


def my_roofline(subjects, load, device: DeviceInfo | None) -> None:
    """The Roofline view: this session's matmul runs on the roofline (after a sweep)."""
    if not swept():
        return
    points = []
    for s in subjects:
        if s.run is not None and s.run.config.workload == "matmul_add" and (loaded := load(s)) is not None:
            if (p := run_summary(s.run.config, loaded.analysis, s.run.device.name,
                                 step_tflops=s.run.step_tflops)) is not None:
                points.append(RunSummary(**{**p.__dict__, "display_name": "you"}))
    with st.container(border=True, key="my_roofline"):
        st.markdown("**Your roofline** — the size sweep's runs on this host")
        _roofline(points, device, "your runs", "my_roofline_chart")


def _answers(view) -> None:
    asked = {q.key: (q.text, q.choices) for q in QUESTIONS}
    # Own-trace questions (lab.teach.own_trace) count like a lesson's; their choices come from
    # each attendee's trace, so the chart lists the ones given.
    for key, text in OWN_QUESTION_TEXTS.items():
        given = {**view.answers.get(key, {}), **view.measured.get(key, {})}
        asked[key] = (text, tuple(sorted(given)))
    keys = [k for k in asked if k in view.answers or k in view.measured]
    if not keys:
        st.caption("No answers yet: attendees lock in their predictions under the lesson in the sidebar.")
    for key in keys:
        (text, choices), predicted, measured = asked[key], view.answers.get(key, {}), view.measured.get(key, {})
        n = sum(predicted.values())
        truth = ", ".join(f"{md_escape(c)} ({k})" for c, k in measured.items()) or "not revealed yet"
        st.altair_chart(lv.answers_chart(lv.answers_frame(choices, predicted, measured), text),
                        width="stretch", key=f"answers_{key}")
        st.caption(f"{n} answer{'s' if n != 1 else ''} · measured: {truth}")


@st.fragment(run_every=LIVE_EVERY_S)
def _live(device: DeviceInfo | None) -> None:
    keys: RoomKeys | None = st.session_state.get(INSTRUCTOR)
    view = _call(lambda store: store.view(keys.code, keys.instructor_key), room_key=INSTRUCTOR) if keys else None
    if view is None:
        return
    st.latex(rf"\Huge\mathtt{{{view.code}}}")  # the code alone, big: read from the back of the room
    c1, c2 = st.columns(2)
    c1.metric("Joined", view.joined)
    c2.metric("Runs shared", len(view.runs))
    if view.names:
        st.caption("In the room: " + ", ".join(md_escape(n) for n in view.names))
    _answers(view)
    if view.runs:
        st.dataframe(pd.DataFrame([{"who": r.display_name, "shape": r.shape_text, "dtype": r.dtype,
                                    "device": r.device, "TFLOP/s": r.tflops,
                                    "FLOP/byte": r.intensity_flops_per_byte} for r in view.runs]),
                     hide_index=True, width="stretch", key="room_runs")
    _roofline(list(view.runs), device, f"room {view.code}", "room_roofline")


def instructor_view(device: DeviceInfo | None) -> None:
    """The instructor's live view of the room this session opened (refreshes every few seconds)."""
    if not st.session_state.get(INSTRUCTOR) or not access.is_host():
        return
    with st.container(border=True, key="instructor_view"):
        st.markdown("**Your room** — give attendees this code (sidebar → Room → Join)")
        _live(device)

"""Predict, then reveal: a lesson's questions before its runs open, the answers once they have.

The questions and their answers come from ``lab.lessons`` (computed from the traces that opened);
this module lays them out, keeps the session's predictions and score in ``st.session_state`` and,
in a room, sends predictions and reveals to it (``ui.room``).

A prediction counts only if it was made before its answer could be seen. An answer can be seen
once it is revealed, once the lesson's check and explanation are shown (they state the figures),
or once one of the lesson's H200 recordings is open (``answer_seen``, ``lesson_seen``,
``recording_seen``). From then on the question's prediction is locked, and a choice made for it
afterwards is kept apart as not scored (``UNSCORED``): never counted, never sent to the room. The
score is one figure (``score_text``), written once the page is drawn (``show_score``) into every
place that shows it, so the sidebar and the reveal never disagree.
"""

from __future__ import annotations

from collections.abc import Iterable

import streamlit as st

from lab import views as lv
from lab.lessons import LESSONS, Answer, Question, answer_questions, asked_on, questions_for, skipped_for
from lab.read import Job, JobKind
from ui import room, state
from ui.cache import view_job
from ui.messages import md_escape

PREDICTIONS = "teach_predictions"  # question key → the choice predicted
SCORE = "teach_score"  # question key → right or not (None: revealed unpredicted), set at its first reveal
REVEALED = "teach_revealed"  # (question key, subject keys) already sent to the room
SEEN = "teach_seen"  # question keys whose answer this session could see (revealed, explained, recording open)
UNSCORED = "teach_unscored"  # question key → a choice made after its answer could be seen: never scored
LOCKED_NOTE = "teach_locked_note"  # what the last "Lock in" kept, said once under the form


def answer_seen(keys: Iterable[str]) -> None:
    """From now on these questions' answers count as seen: their predictions are locked."""
    st.session_state.setdefault(SEEN, set()).update(keys)


def lesson_seen(lesson_key: str) -> None:
    """The lesson's check and explanation are on the page: they state its figures, GPU and CPU."""
    answer_seen(q.key for q in LESSONS[lesson_key].questions)


def recording_seen(subject: state.Subject | None) -> None:
    """A lesson's H200 recording is on show (opened from *Showing* too): the questions a GPU run
    answers count as seen for the lesson it was recorded for (the sample's manifest says which)."""
    lesson = subject.sample.lesson if subject is not None and subject.sample is not None else ""
    if lesson in LESSONS:
        answer_seen(q.key for q in LESSONS[lesson].questions if "cuda" in q.devices)


def _radio_label(q: Question, device_kind: str, locked: bool, seen: bool) -> str:
    gpu_only = "cpu" not in q.devices
    label = q.text + (" (GPU)" if gpu_only and device_kind != "cuda" else "")
    if locked:
        return label + " — locked: its answer has been shown"
    return label + (" — its answer has been shown: not scored" if seen else "")


def predict_form(lesson_key: str, device_kind: str) -> None:
    """The lesson's questions, before anything opens: a form, nothing runs until *Lock in*."""
    questions = asked_on(lesson_key, device_kind)
    predictions = st.session_state.setdefault(PREDICTIONS, {})
    unscored = st.session_state.setdefault(UNSCORED, {})
    seen = st.session_state.get(SEEN, set())
    with st.form(f"predict_{lesson_key}", border=True):
        st.markdown("**Predict first** — then run the lesson or open its recording")
        for q in questions:
            locked = q.key in seen and q.key in predictions
            help_text = "Answered by a GPU run or the H200 recording." if "cpu" not in q.devices else None
            before = predictions.get(q.key) or unscored.get(q.key)
            default = q.choices.index(before) if before in q.choices else None
            st.radio(_radio_label(q, device_kind, locked, q.key in seen), q.choices, index=default,
                     key=f"predict_{q.key}", help=help_text, disabled=locked)
        # A callback: the choices are kept before the page run draws anything, so every box of
        # that run (the reveal's "you predicted…", the score) already reads them.
        st.form_submit_button("Lock in my predictions", width="stretch", on_click=_lock_in, args=(questions,))
    if note := st.session_state.pop(LOCKED_NOTE, None):
        st.caption(note)


def _lock_in(questions: tuple[Question, ...]) -> None:
    """Keep the form's choices: scored where the answer is still unseen, apart where it was seen."""
    predictions = st.session_state.setdefault(PREDICTIONS, {})
    seen = st.session_state.get(SEEN, set())
    answered = {q.key: st.session_state.get(f"predict_{q.key}") for q in questions}
    chosen: dict[str, str] = {k: v for k, v in answered.items() if v is not None}
    scored = {k: v for k, v in chosen.items() if k not in seen}
    late = {k: v for k, v in chosen.items() if k in seen and k not in predictions}
    predictions.update(scored)
    st.session_state.setdefault(UNSCORED, {}).update(late)
    room.send_predictions(scored)
    note = f"; {len(late)} made after its answer was shown: not scored" if late else ""
    st.session_state[LOCKED_NOTE] = (f"{len(scored)} prediction(s) locked in{note}. "
                                     "Now run the lesson or open the recording.")


def score_text() -> str:
    scored = [right for right in st.session_state.get(SCORE, {}).values() if right is not None]
    return f"Your predictions: {sum(scored)} of {len(scored)} right" if scored else ""


def show_score(*slots) -> None:
    """The score, once every reveal of this page run has scored: the same figure in each slot."""
    text = score_text()
    for slot in slots:
        if slot is not None:
            if text:
                slot.caption(text)
            else:
                slot.empty()


def lesson_box(opened: state.OpenedLesson, title: str):
    """Where a lesson's check or reveal is drawn: a bordered box while it is the latest thing
    opened, folded into a closed expander once a newer run or upload arrived."""
    if opened.finished:
        return st.expander(f"{title} (finished: a newer result arrived)", expanded=False)
    return st.container(border=True)


def where_text(answer: Answer, names: list[str]) -> str:
    where = answer.where
    run = names[where.run] if where.run < len(names) else ""
    if where.view:
        return f"the **{where.view}** view of *{md_escape(run)}*: {md_escape(where.text)}"
    if where.row:
        return f"the **Table** of *{md_escape(run)}*: the row `{where.row.replace('`', '')}`"  # no markup in code
    a, b = where.window_us or (0.0, 0.0)
    return (f"the **Timeline** of *{md_escape(run)}* from {a:,.0f} to {b:,.0f} µs: "
            f"{len(where.event_ids)} event(s) outlined — {md_escape(where.text)}")


def _open_timeline(subject_key: str, digest: str, step: int | None) -> None:
    # The Timeline view's own window: its "Zoom to" picker on the step the reveal's window is
    # (ui.views._time_window gives a step the same window as lab.lessons.answers).
    st.session_state["subject"] = subject_key
    st.session_state[f"tl_focus_{digest}"] = "whole trace" if step is None else f"step {step + 1}"
    st.session_state["view"] = "Timeline"


def open_view(subject_key: str, view: str) -> None:
    st.session_state["subject"] = subject_key
    st.session_state["view"] = view


def open_table(subject_key: str) -> None:
    open_view(subject_key, "Table")


def _score(q: Question, answer: Answer, check_key: tuple) -> str | None:
    """The session's prediction, scored once; sent to the room once per opened lesson."""
    predicted = st.session_state.get(PREDICTIONS, {}).get(q.key)
    answer_seen([q.key])
    # Scored at the first reveal; a prediction made after the answer could be seen is never in
    # PREDICTIONS (it is kept under UNSCORED), so it never counts.
    st.session_state.setdefault(SCORE, {}).setdefault(q.key, None if predicted is None else predicted == answer.choice)
    if predicted is None:
        return None
    revealed = st.session_state.setdefault(REVEALED, set())
    if (q.key, check_key) not in revealed:
        revealed.add((q.key, check_key))
        room.send_reveal(q.key, answer.choice)
    return predicted


def _one(q: Question, answer: Answer, names: list[str], jobs, subjects: list, check_key: tuple) -> None:
    predicted = _score(q, answer, check_key)
    right = predicted == answer.choice
    icon = ":material/help:" if predicted is None else ":material/check_circle:" if right else ":material/cancel:"
    st.markdown(f"{icon} **{md_escape(q.text)}**")
    late = st.session_state.get(UNSCORED, {}).get(q.key)
    said = (f"you picked *{md_escape(late)}* after its answer was shown: not scored" if predicted is None and late
            else "no prediction" if predicted is None else f"you predicted *{md_escape(predicted)}*")
    st.markdown(f"Answer: **{md_escape(answer.choice)}** ({said}) — {md_escape(answer.measured_text)}")
    st.caption("Where to look: " + where_text(answer, names))
    where, subject = answer.where, subjects[answer.where.run]
    if where.window_us:
        # A toggle, not an expander: the chart is built (and sent) only when asked for.
        if st.toggle("The events that prove it", key=f"reveal_show_{q.key}"):
            # The window's marks come from the reader that keeps the trace; the evidence is outlined here.
            data = jobs(view_job(lv.timeline_window, start_us=where.window_us[0], end_us=where.window_us[1],
                                 width_px=lv.REVEAL_WIDTH_PX), [subject])
            if data is not None:
                st.altair_chart(lv.reveal_chart(data, where.event_names), width="stretch",
                                key=f"reveal_chart_{q.key}_{subject.digest}")
        st.button("Open this window in the Timeline", key=f"reveal_tl_{q.key}", on_click=_open_timeline,
                  args=(subject.key, subject.digest, where.step))
    elif where.view:  # the view the caption names (the Summary's cards, the Memory view's peak)
        st.button(f"Open the {where.view}", key=f"reveal_view_{q.key}", on_click=open_view,
                  args=(subject.key, where.view))
    else:
        st.button("Open the Table", key=f"reveal_table_{q.key}", on_click=open_table, args=(subject.key,))


def reveal(subjects, load, jobs):
    """After a lesson opened (``lesson_check`` in the session): each question's answer, measured.
    Returns where the score goes (``show_score`` fills it once the page is drawn), or None."""
    opened = state.opened_lesson(subjects, load)
    if opened is None:
        return None
    loaded = opened.loaded
    lesson = LESSONS[opened.key]
    names = [r.name for r in lesson.runs]  # the runs (``lab.analysis.Run``) are built in the reader job
    kind = "cuda" if all(x.trace.has_gpu for x in loaded) else "cpu"
    check_key = opened.subject_keys
    job = Job(kind=JobKind.ANSWERS, lesson=opened.key, device_kind=kind, names=tuple(names), code=answer_questions,
              timings=tuple(state.subject_timing(s) for s in opened.subjects))
    answers = jobs(job, opened.subjects)  # measured in a reader
    if answers is None:
        return None
    by_key = dict(answers)
    with lesson_box(opened, f"Reveal — {lesson.title}"), st.container(key="reveal_box"):
        st.markdown(f"**Reveal — {md_escape(lesson.title)}**")
        for q in questions_for(opened.key, kind):
            _one(q, by_key[q.key], names, jobs, opened.subjects, check_key)
        for q, reason in skipped_for(opened.key, kind):
            st.caption(f":material/info: Not answered by these runs: {md_escape(q.text)} — {md_escape(reason)}; "
                       "open the H200 recording to see it.")
        answered = {q.key for q in questions_for(opened.key, kind)} | {q.key for q, _ in skipped_for(opened.key, kind)}
        predicted = st.session_state.get(PREDICTIONS, {})
        # A prediction locked in for the other device kind's runs: never left unsaid.
        for q in (*questions_for(opened.key, "cpu"), *questions_for(opened.key, "cuda")):
            if q.key in predicted and q.key not in answered:
                st.caption(f":material/info: Your prediction for “{md_escape(q.text)}” is not answered by these "
                           f"{'GPU' if kind == 'cuda' else 'CPU'} runs: it needs a "
                           f"{'CPU' if kind == 'cuda' else 'GPU'} run; run the lesson on such a host.")
        return st.empty()

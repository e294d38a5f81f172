"""Your own trace as a lesson: predict, then reveal, on whatever trace "Showing" names.

The questions and answers come from ``lab.teach.own_trace``; this lays them out. Nothing of the
answer is drawn before a prediction is locked in for that trace: the form shows only the
question and its choices (the candidates in alphabetical order), and the reveal, per question,
only once predicted. Predictions and reveals go to the visitor's room like a lesson's
(``ui.room``), under the question's key; the session's score counts them per trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lab.read import Job, JobKind
from lab.teach import own_answers
from ui import room
from ui.messages import md_escape
from ui.state import Subject
from ui.teach import SCORE, open_table, where_text

OWN_PREDICTIONS = "own_predictions"  # subject digest → question key → the choice predicted


@dataclass(frozen=True)
class OwnBox:
    """The lesson's expander, drawn above the views before its questions are known."""

    holder: DeltaGenerator  # an st.empty() holding the expander: emptied when there is nothing to ask
    body: DeltaGenerator  # the expander
    notes: DeltaGenerator  # below it: the job's spinner, or why it failed


def own_trace_box(subject: Subject) -> OwnBox:
    """The collapsed "Predict, then look" expander above the views, empty until
    ``own_trace_lesson`` fills it after them: its questions come from a reader job
    (``JobKind.OWN``: the whole trace sent to a reader and back, 0.04-0.38 s on the 2-core box
    for a 22.7 MB trace, bench/bench_upload_verdict.py --timeline) that held back the Summary
    drawn below it, although a collapsed expander shows none of it."""
    predicted = st.session_state.get(OWN_PREDICTIONS, {}).get(subject.digest, {})
    label = "Predict, then look: this trace as a lesson" + (f" ({len(predicted)} predicted)" if predicted else "")
    holder = st.empty()
    body = holder.container().expander(label, expanded=False, icon=":material/quiz:")
    return OwnBox(holder=holder, body=body, notes=st.container())


def own_trace_lesson(box: OwnBox, subject: Subject, jobs) -> None:
    """Fill ``box`` (after the views): the questions this trace can answer, then their answers
    (both measured in a reader: ``JobKind.OWN``); none to ask, the box goes."""
    with box.notes:
        asked = jobs(Job(kind=JobKind.OWN, names=(subject.title,), code=own_answers), [subject])
    if not asked:
        box.holder.empty()
        return
    questions = [q for q, _ in asked]
    answers = {q.key: a for q, a in asked}
    predicted: dict[str, str] = st.session_state.setdefault(OWN_PREDICTIONS, {}).setdefault(subject.digest, {})
    with box.body:
        open_questions = [q for q in questions if q.key not in predicted]
        if open_questions:
            _form(subject, open_questions, predicted)
        for q in questions:
            if q.key in predicted:
                _reveal(subject, q, answers[q.key], predicted[q.key])


def _form(subject: Subject, questions, predicted: dict[str, str]) -> None:
    with st.form(f"own_{subject.digest}", border=False):
        st.caption("Before you read the views: what will this trace show? Each answer is measured from it.")
        for q in questions:
            st.radio(q.text, q.choices, index=None, key=f"own_{subject.digest}_{q.key}")
        locked = st.form_submit_button("Lock in and reveal")
    if locked:
        picked = {q.key: st.session_state.get(f"own_{subject.digest}_{q.key}") for q in questions}
        chosen: dict[str, str] = {k: str(v) for k, v in picked.items() if v is not None}
        predicted.update(chosen)
        room.send_predictions(chosen)
        st.rerun()


def _reveal(subject: Subject, q, answer, choice: str) -> None:
    score_key = f"{q.key}@{subject.digest}"
    if score_key not in st.session_state.setdefault(SCORE, {}):  # scored and sent once per trace
        st.session_state[SCORE][score_key] = choice == answer.choice
        room.send_reveal(q.key, answer.choice)
    right = choice == answer.choice
    icon = ":material/check_circle:" if right else ":material/cancel:"
    st.markdown(f"{icon} **{md_escape(q.text)}**")
    st.markdown(f"Answer: **{md_escape(answer.choice)}** (you predicted *{md_escape(choice)}*) — "
                f"{md_escape(answer.measured_text)}")
    st.caption("Where to look: " + where_text(answer, [subject.title]))
    if q.key == "own.memory_peak_owner":
        st.button("Open the Memory view", key=f"own_mem_{subject.digest}_{q.key}", on_click=_open_view,
                  args=(subject.key, "Memory"))
    elif answer.where.row:
        st.button("Open the Table", key=f"own_table_{subject.digest}_{q.key}", on_click=open_table,
                  args=(subject.key,))
    else:
        st.button("Open the Timeline", key=f"own_tl_{subject.digest}_{q.key}", on_click=_open_view,
                  args=(subject.key, "Timeline"))


def _open_view(subject_key: str, view: str) -> None:
    st.session_state["subject"] = subject_key
    st.session_state["view"] = view

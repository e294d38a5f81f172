"""Teaching a workshop: ``questions`` (predict, then reveal: each lesson's questions, answered from
the trace just opened), ``own_trace`` (the same for any trace the page shows), ``rooms`` (an
instructor's room and its attendees, in a database through ``db`` and ``models``: SQLite by
default, PostgreSQL when the host names one) and ``roofline``
(each run's arithmetic intensity and achieved TFLOP/s over the device's roof; the size sweep).
Nothing here imports streamlit.
"""

from lab.teach.db import RoomSettings, RoomsUnavailable
from lab.teach.own_trace import OWN_QUESTION_TEXTS, own_questions
from lab.teach.questions import QUESTIONS, Answer, Question, Where, asked_on, questions_for, skipped_for
from lab.teach.roofline import (
    ALONE_SWEEP,
    Roofline,
    RunSummary,
    classify,
    device_roofline,
    peak_roofline,
    roof_caption,
    roof_over,
    roofline_data,
    run_summary,
    seat_shape,
    sweep_config,
)
from lab.teach.rooms import Membership, RoomKeys, RoomNotFound, RoomStore, RoomView, normalize_code

__all__ = [
    "ALONE_SWEEP", "OWN_QUESTION_TEXTS", "QUESTIONS", "Answer", "Membership", "Question", "RoomKeys", "RoomNotFound",
    "RoomSettings", "RoomStore", "RoomView", "Roofline", "RoomsUnavailable", "RunSummary", "Where", "classify",
    "asked_on", "device_roofline", "normalize_code", "own_questions", "peak_roofline", "questions_for", "roof_caption",
    "roof_over", "roofline_data", "run_summary",
    "seat_shape", "skipped_for", "sweep_config",
]  # fmt: skip

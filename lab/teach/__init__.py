"""Teaching a workshop, the engine without the lessons (those are ``lab.lessons``): ``own_trace``
(predict, then reveal, for any trace the page shows), ``giveaway`` (whether what a learner reads
before predicting gives an answer away), ``claims`` (checking a lesson's claims on its runs),
``rooms`` (an instructor's room and its attendees, in a database through ``db`` and ``models``:
SQLite by default, PostgreSQL when the host names one) and ``roofline`` (each run's arithmetic
intensity and achieved TFLOP/s over the device's roof; the size sweep). Nothing here imports
streamlit.
"""

from lab.teach.db import RoomSettings, RoomsUnavailable
from lab.teach.own_trace import OWN_QUESTION_TEXTS, own_answers, own_questions
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
    "ALONE_SWEEP", "OWN_QUESTION_TEXTS", "Membership", "RoomKeys", "RoomNotFound",
    "RoomSettings", "RoomStore", "RoomView", "Roofline", "RoomsUnavailable", "RunSummary", "classify",
    "device_roofline", "normalize_code", "own_answers", "own_questions", "peak_roofline", "roof_caption",
    "roof_over", "roofline_data", "run_summary",
    "seat_shape", "sweep_config",
]  # fmt: skip

"""No question's right answer can be read from the text shown before its prediction.

For EVERY question of the registry (``lab.lessons.QUESTIONS``: a question another
engineer adds is checked without a line here), on every device kind it is asked for, the right
choice is computed from the recording it refers to — the H200 samples for a GPU question, a CPU
run of the lesson (the session's ``cpu_lesson_runs``) for a CPU one — and none of that choice's
key words may appear in what the page shows before the prediction. Both "what is shown before"
and "key words" are defined in ``lab.teach.giveaway`` (its docstring); tests/test_app.py checks
that the page shows exactly that before the predictions are locked in.
"""

from __future__ import annotations

import pytest
from lessonruns import cpu_lesson_param, h200_runs

from lab.lessons import LESSONS, QUESTIONS
from lab.teach.giveaway import giveaways, key_words, shown_before

GPU_QUESTIONS = [q for q in QUESTIONS if "cuda" in q.devices]
CPU_QUESTIONS = [q for q in QUESTIONS if "cpu" in q.devices and LESSONS[q.lesson].cpu_refusal is None]


def _assert_not_given_away(q, choice: str, device_kind: str) -> None:
    found = giveaways(q, choice, device_kind)
    assert not found, (f"{q.key}: the right answer {choice!r} is given away before the prediction by "
                       f"{found} in {shown_before(q, device_kind)}")


@pytest.mark.parametrize("q", GPU_QUESTIONS, ids=lambda q: q.key)
def test_no_gpu_question_is_answered_by_the_text_before_it(q):
    choice = q.answer(list(h200_runs(q.lesson))).choice
    for kind in ("cuda", "cpu"):  # a CPU host asks the GPU questions too (the H200 recording answers)
        if LESSONS[q.lesson].cpu_refusal is None or kind == "cuda":
            _assert_not_given_away(q, choice, kind)


@pytest.mark.parametrize("q", [cpu_lesson_param(q.lesson, q, id=q.key) for q in CPU_QUESTIONS])
def test_no_cpu_question_is_answered_by_the_text_before_it(q, cpu_lesson_runs):
    runs = cpu_lesson_runs(q.lesson)[0]
    _assert_not_given_away(q, q.answer(runs).choice, "cpu")


def test_the_check_finds_a_give_away():
    """The test can fail: older lesson texts gave answers away, and the check says so."""
    from dataclasses import replace

    import lab.teach.giveaway as g

    q = next(q for q in QUESTIONS if q.key == "sdpa_backends.flash_kernels")
    old = replace(LESSONS["sdpa_backends"], text="FlashAttention computes attention in tiles that stay on chip, "
                                                 "in one kernel.")
    trend = next(q for q in QUESTIONS if q.key == "launch_overlap.delay_trend")
    old_overlap = replace(LESSONS["launch_overlap"], text="so the host runs ahead and the queue grows.")
    saved = dict(g.LESSONS)
    g.LESSONS["sdpa_backends"] = old
    g.LESSONS["launch_overlap"] = old_overlap  # the workshop lesson's older text, which gave the answer away
    try:
        assert "in one kernel" in giveaways(q, "1", "cuda")
        assert "queue grows" in giveaways(trend, "it grows", "cuda")
    finally:
        g.LESSONS.clear()
        g.LESSONS.update(saved)
    # A label that says something counts; naming every label at once ("Self CPU or Self CUDA?") does not.
    both = next(q for q in QUESTIONS if q.key == "tiny_vs_large.self_cpu_vs_cuda")
    assert "Self CPU" in key_words(both, "Self CPU") and not giveaways(both, "Self CPU", "cuda")


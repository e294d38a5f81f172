"""What a learner reads before predicting, and whether it gives a question's answer away.

**Shown before the prediction** of a question ``q`` of lesson ``L`` on a device kind (the page,
top to bottom: ``ui/controls.lesson_picker`` then ``ui/teach.predict_form``; tests/test_app.py
checks the page against this list):

- ``L.title`` and ``L.text`` (``L.look_for`` and ``L.explain`` are shown only once the lesson's
  runs opened, beside the reveal);
- the titles and notes of the lesson's H200 recordings (the *Showing* selector lists them, the
  Summary shows a sample's note) and the titles of its runs' workloads (the form's selector);
- every question the form asks for ``L`` on that device (the form shows them together): its
  text, and its choices — except ``q``'s own choices, which are the options, not a hint.

**A give-away** is a key word of the right choice in that text. A choice's key words are its
``Question.tells`` (the phrases that would state it: "one kernel", "swaps strides") and its own
label when the label says something by itself (it has a letter and is not "yes"/"no": "Self
CUDA", "fewer", "cudaDeviceSynchronize"; "1" or "2–3" count only through their tells). A label
named in the text together with every other label of ``q`` ("Self CPU or Self CUDA?") favours
none and is no give-away. Matching ignores case and markdown backticks and respects word edges.
"""

from __future__ import annotations

import re

from lab.core.workloads import WORKLOADS
from lab.lessons import LESSONS, Question, asked_on
from lab.samples import lesson_samples

__all__ = ["GENERIC_LABELS", "giveaways", "key_words", "shown_before"]

GENERIC_LABELS = frozenset({"yes", "no"})


def shown_before(question: Question, device_kind: str) -> list[str]:
    """The texts on the page before ``question``'s prediction is locked in (see the module doc)."""
    lesson = LESSONS[question.lesson]
    texts = [lesson.title, lesson.text]
    texts += [WORKLOADS[r.gpu.workload].title for r in lesson.runs]
    texts += [t for s in lesson_samples(lesson.runs) or [] for t in (s.title, s.note)]
    for q in asked_on(question.lesson, device_kind):
        texts.append(q.text)
        if q.key != question.key:
            texts.extend(q.choices)
    return texts


def _says_something(label: str) -> bool:
    return bool(re.search(r"[A-Za-z]", label)) and label.lower() not in GENERIC_LABELS


def key_words(question: Question, choice: str) -> tuple[str, ...]:
    own = (choice,) if _says_something(choice) else ()
    return own + question.tells_for(choice)


def _found(word: str, text: str) -> bool:
    plain = text.replace("`", "").lower()
    edge_a = r"\b" if word[:1].isalnum() else ""
    edge_b = r"\b" if word[-1:].isalnum() else ""
    return re.search(edge_a + re.escape(word.replace("`", "").lower()) + edge_b, plain) is not None


def giveaways(question: Question, choice: str, device_kind: str) -> list[str]:
    """The key words of ``choice`` found in the text shown before ``question``'s prediction."""
    text = "\n".join(shown_before(question, device_kind))
    labels = [c for c in question.choices if _says_something(c)]
    all_named = bool(labels) and all(_found(c, text) for c in labels)
    tells = set(question.tells_for(choice))
    return [w for w in key_words(question, choice) if _found(w, text) and (w in tells or not all_named)]

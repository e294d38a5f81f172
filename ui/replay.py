"""The Table's "Replay here": pick an op of the trace, replay it on this server's device as a run of
the queue, see it beside the row, and try a variant in one click (each a run Compare can open).

A click stores the run asked for in this session's state (a callback, before the page reruns);
the page's top (``app.py``) takes it and runs it through ``ui.run.run_submitted`` like the
sidebar's form, with the same refusals.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from lab import views as lv
from lab.core import RunConfig
from ui.cache import Loaded, view_job
from ui.messages import md_escape
from ui.state import Subject

__all__ = ["ReplayRequest", "replay_box", "take_request"]

REQUEST_KEY = "replay_request"  # session_state: the replay run asked for by the last click
_CHOICE_KEY = "replay_choice"


@dataclass(frozen=True)
class ReplayRequest:
    name: str  # the run's title in "Showing"
    config: RunConfig


def take_request() -> ReplayRequest | str | None:
    """The replay run asked for since the last page run, once (a text: why it could not be built)."""
    return st.session_state.pop(REQUEST_KEY, None)


def _ask(name: str, config: RunConfig) -> None:
    st.session_state[REQUEST_KEY] = ReplayRequest(name=name, config=config)


def _ask_for_choice(options: dict[str, lv.ReplayOption]) -> None:
    option = options[st.session_state[_CHOICE_KEY]]
    if option.config is None:  # a row the lab cannot rebuild after all: said on the page
        st.session_state[REQUEST_KEY] = option.refusal or "this op cannot be replayed here"
        return
    _ask(f"Replay: {lv.replay_title(option.config)} (as recorded)", option.config)


def replay_box(subject: Subject, loaded: Loaded, jobs) -> None:
    """A replay run's result beside its row, with its variants; any other trace's form. The
    trace's rows are read by the reader that keeps it: its replayable ops, each with its run."""
    config = subject.run.config if subject.run is not None else None
    if lv.is_replay(config):
        _replay_result(subject, jobs)
        return
    with st.expander("Replay an op of this trace here", expanded=False):
        if not loaded.trace.meta.record_shapes:
            st.caption("This trace has no input shapes: record it with record_shapes=True to replay its ops.")
            return
        found = jobs(view_job(lv.replay_options, source=subject.title), [subject])
        if found is None:
            return
        choices = {o.choice.label: o for o in found}
        if not choices:
            st.caption("No op of this trace can be replayed here (GEMMs, attention, convolution, norms, "
                       "softmax, elementwise ops and reductions can).")
            return
        st.caption("Runs the op's typical call on this server's device, as a run of the queue, and shows it beside "
                   "the row: its time per call, kernels and rate. Then try a variant in one click.")
        st.selectbox("Op, input shapes and dtypes (largest total time first)", list(choices), key=_CHOICE_KEY)
        st.button("Replay here", key="replay_here", type="primary", on_click=_ask_for_choice,
                  args=(choices,))


def _replay_result(subject: Subject, jobs) -> None:
    assert subject.run is not None
    config = subject.run.config
    beside = jobs(view_job(lv.replay_beside, config=config, device_name=subject.run.device.name), [subject])
    if beside is None:
        return
    title, frame, notes = beside
    with st.container(border=True):
        st.markdown(f"**{md_escape(title)}**")
        st.dataframe(frame, hide_index=True, width="stretch")
        for note in notes:
            st.caption(md_escape(note))
        current = lv.variant_of(config)
        st.markdown("**Try a variant** (one click each; each is a run, and Compare puts it against the run "
                    "before it)")
        names = [v for v in lv.VARIANTS if v != current]
        for column, name in zip(st.columns(3) * 3, names):
            column.button(name, key=f"replay_variant_{name}_{subject.key}", width="stretch", on_click=_ask,
                          args=(f"Replay: {lv.replay_title(config)} ({name})", lv.variant_config(config, name)))

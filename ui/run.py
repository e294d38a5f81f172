"""Submitting runs to the worker service and showing their progress."""

from __future__ import annotations

import gc
import time

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from lab.access import RateLimiter
from lab.core import (
    ConfigError,
    DeviceInfo,
    HostSettings,
    RunConfig,
    RunResult,
    check_device,
    check_limits,
    check_memory,
)
from lab.lessons import LESSONS, lesson_configs
from lab.read import ReaderPool
from lab.run import (
    STAGE_TEXT,
    WORKER_START_TIMEOUT_S,
    ProfileService,
    RunFailed,
    ServiceBusy,
    TicketState,
    TicketStatus,
    check_estimate,
    estimate_text,
)
from lab.samples import lesson_samples
from ui import access, messages, state, upload
from ui.controls import ANY_KIND, DEVICE_KIND_KEY, FORCE_FRESH_KEY

POLL_S = 0.2
# This session's runs whose page run was interrupted (a click) before they finished: the next
# submission replaces them, keeping their place in line and saying so; a page run that submits
# nothing withdraws them at its end (``settle_interrupted``).
INTERRUPTED_KEY = "interrupted_tickets"
FIRST_RUN_NOTE = (
    "The profiling worker is still starting, so this first run waits for it. A fresh process pays "
    "torch's import and the profiler's one-time start-up (about 1 s on a CPU, about 7 s on a GPU while "
    "CUPTI initializes); the server pays it once, at start, and later runs begin at once."
)


def describe(status: TicketStatus, name: str) -> str:
    """One status line for a run: its queue position, or its stage, and the time so far; with
    the run's own estimate once the worker has measured its device."""
    run = estimate_text(status.run_estimate_s) if status.run_estimate_s else None
    if status.state == TicketState.QUEUED:
        eta = f", result in about {status.estimate_s:.0f} s" if status.estimate_s is not None else ""
        pos = status.queue_position
        ahead = "next to run" if pos == 1 else f"{pos - 1} runs ahead" if pos else "waiting"
        itself = f" · the run itself takes {run}" if run else ""
        return f"{name}: queued — position {pos} ({ahead}){eta} · {status.elapsed_s:.1f} s{itself}"
    if status.state == TicketState.RUNNING:
        stage = STAGE_TEXT.get(status.stage or "", status.stage or "starting")
        where = f" on {status.device}" if status.device else ""
        in_all = f" of {run} estimated" if run else ""
        return f"{name}: {stage}{where} · {status.elapsed_s:.1f} s{in_all}"
    return f"{name}: {status.state} · {status.elapsed_s:.1f} s"


def session_id() -> str | None:
    """This browser tab's Streamlit session: the fair queue's unit (one run at a time each)."""
    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.session_id


def _cancel(tickets: list) -> None:
    # on_click runs at the start of the rerun the click causes; the interrupted run's
    # ``finally`` may have cancelled them already.
    for ticket in tickets:
        ticket.cancel()
    if any(ticket.poll().state == TicketState.CANCELLED for ticket in tickets):
        st.toast("Run cancelled: the worker is free for the next run.")


def _submit(service: ProfileService, runs: list[tuple[str, RunConfig]], force_fresh: bool) -> list | None:
    """The tickets of ``runs`` (one submission of this session), or None with a message."""
    try:
        kind = st.session_state.get(DEVICE_KIND_KEY, ANY_KIND)
        tickets = service.submit_all([c for _, c in runs], force_fresh=force_fresh, session=session_id(),
                                     device_name=None if kind == ANY_KIND else kind)
    except ServiceBusy as exc:
        st.warning(messages.md_escape(f"The lab is busy: {exc}"))
        return None
    except ConfigError as exc:  # the run-time estimate, measured by a worker since the page checked
        messages.error(str(exc))
        return None
    st.session_state.pop(INTERRUPTED_KEY, None)  # replaced by this submission (the queue cancelled them)
    if tickets and tickets[0].replaced:
        st.info("Your earlier run, still waiting or running, was replaced by this one: each visitor "
                "has one run at a time, so everyone gets a turn.")
    return list(zip((name for name, _ in runs), tickets))


def _wait_settled(ticket) -> None:
    """Up to ``POLL_S``, woken the moment the run settles: a sleep of ``POLL_S`` added 0.1 s to a
    click → result on average, up to 0.2 s (bench/bench_page_clicks.py: 0.25 s for a 0.05 s run)."""
    try:
        ticket.result(timeout=POLL_S)
    except (TimeoutError, RunFailed):
        pass


def run_configs(service: ProfileService, runs: list[tuple[str, RunConfig]], *,
                force_fresh: bool = False) -> list[RunResult] | None:
    """Submit ``runs`` (name, config) in order and wait, showing one status line per run; None on failure."""
    tickets = _submit(service, runs, force_fresh)
    if tickets is None:
        return None
    what = " and ".join(name for name, _ in runs)
    started = time.monotonic()
    with st.status(f"Profiling {what}…", expanded=True) as box:
        if service.device_info() is None:
            st.caption(FIRST_RUN_NOTE)
        lines = [st.empty() for _ in tickets]
        cancel_slot = st.empty()
        cancel_slot.button("Cancel", key="cancel_run", on_click=_cancel, args=([t for _, t in tickets],),
                           help="Stop this run (a running one's worker is restarted) and free the queue.")
        try:
            while True:
                for (name, ticket), line in zip(tickets, lines):
                    reused = " (reused a run of the same config)" if ticket.reused else ""
                    line.text(describe(ticket.poll(), name) + reused)
                waiting = [ticket for _, ticket in tickets if not ticket.done()]
                if not waiting:
                    break
                _wait_settled(waiting[0])
            cancel_slot.empty()
            results = [ticket.result(timeout=0) for _, ticket in tickets]
        except RunFailed as exc:
            box.update(label=f"Profiling {what} did not finish", state="error", expanded=True)
            messages.error(access.run_failure(exc))
            return None
        finally:
            # A click stops this script: if it submits again, the new run replaces these (in their
            # place in line); otherwise settle_interrupted withdraws the waiting ones at the end of
            # that page run. A closed tab's are dropped by the queue (nobody polls them).
            unsettled = [ticket for _, ticket in tickets if not ticket.done()]
            if unsettled:
                st.session_state[INTERRUPTED_KEY] = unsettled
        # Wall time as the visitor waited it: queue, worker and transfer included.
        box.update(label=f"Profiled {what} in {time.monotonic() - started:.1f} s", state="complete",
                   expanded=False)
    return results


def settle_interrupted() -> None:
    """At the end of a page run that submitted nothing: withdraw this session's runs still waiting
    from an interrupted page run (a running one finishes; only Cancel kills its worker)."""
    for ticket in st.session_state.pop(INTERRUPTED_KEY, None) or []:
        ticket.withdraw()


@st.cache_resource(show_spinner=False)
def settle_heap() -> bool:
    """Once per server, at the end of its first page run with a warm worker: what the imports and
    the set-up left (streamlit, pandas, altair, the pools) moved out of the cyclic collector's
    sight, as each reader does after its warm-up. Until then every full collection traversed them:
    a 0.17 s pause inside a visitor's first click on an H100 host (BENCHMARKS "Click → result
    after the page holds outlines"). Objects freed by reference counting are still freed."""
    gc.collect()
    gc.freeze()
    return True


def await_worker(service: ProfileService, timeout_s: float = WORKER_START_TIMEOUT_S) -> None:
    """Wait (at the end of a page run) until a worker has warmed up, then rerun the page once.

    The wait touches a placeholder every half second: each Streamlit call is a point where a
    click interrupts this run at once, so nothing the visitor does waits for the worker. (A
    ``st.fragment(run_every=…)`` poll was tried and dropped: its timer keeps firing during a
    long run and its queued rerun carries the widget values of before a click, which lost
    the click or reverted the view the run had opened.)
    """
    tick = st.empty()
    deadline = time.monotonic() + timeout_s
    while service.device_info() is None and time.monotonic() < deadline:
        if service.health().last_error:  # a worker failed to start: "Server status" says why
            return
        time.sleep(0.5)
        tick.empty()
    if service.device_info() is not None:
        st.rerun()


def run_submitted(service: ProfileService, settings: HostSettings, device: DeviceInfo | None,
                  submitted: RunConfig | ConfigError, *, limiter: RateLimiter, readers: ReaderPool,
                  name: str | None = None, view: str = "Summary") -> None:
    """The form's "Run profile" (and the Table's "Replay here"): refuse with one message, or run
    and show the result's ``view`` under ``name`` in "Showing"."""
    if isinstance(submitted, ConfigError):
        messages.error(str(submitted))
        return
    try:
        check_limits(submitted, settings)
        if device is not None:  # before the worker is up, it checks the device itself
            check_device(submitted, kind=device.kind, compute_capability=device.compute_capability)
        if device is not None and (device.kind == "cpu" or submitted.device != "cpu"):
            # What cannot fit is said before what takes too long (the worker checks again, with
            # the memory free then).
            where = "this machine's RAM" if device.kind == "cpu" else f"the GPU ({device.name})"
            check_memory(submitted, device.free_memory_bytes, where)
        check_estimate(submitted, device, settings)  # arithmetic only: refused in microseconds
    except ConfigError as exc:
        messages.error(str(exc))
        return
    if (why := access.refusal("run", settings, limiter)) is not None:  # counted once it would run
        messages.error(why)
        return
    c = submitted
    results = run_configs(service, [(name or f"{c.workload} {c.shape_text} {c.dtype}", submitted)],
                          force_fresh=bool(st.session_state.get(FORCE_FRESH_KEY)))
    if results:
        state.add_run(results[0], name=name)
        st.session_state["view"] = view
        open_job(results[0], settings, readers)


def open_job(result: RunResult, settings: HostSettings, readers: ReaderPool) -> None:
    """A distributed run's rank traces opened as one job, in its Ranks view (as an uploaded job
    opens); a one-process run has none."""
    if result.rank_traces and (why := upload.open_job_traces(result.rank_traces, settings, readers)) is not None:
        messages.error(why)


def run_lesson(service: ProfileService, device: DeviceInfo | None, lesson_key: str, *, settings: HostSettings,
               limiter: RateLimiter, readers: ReaderPool) -> None:
    """A lesson's "Run lesson": one run opens its Summary, a pair opens Compare with A and B set."""
    lesson = LESSONS[lesson_key]
    try:
        runs = lesson_configs(lesson, device.kind if device else "cpu")
    except ConfigError as exc:
        messages.error(str(exc))
        return
    if (why := access.refusal("run", settings, limiter)) is not None:  # a lesson's click counts once
        messages.error(why)
        return
    results = run_configs(service, list(runs))
    if not results:
        return
    added = [state.add_run(r, name=f"{lesson.title} — {name}") for (name, _), r in zip(runs, results)]
    for result in results:  # a job's ranks first: the lesson stays the latest thing opened
        open_job(result, settings, readers)
    open_lesson(lesson_key, [s.key for s in added])


def open_recording(lesson_key: str) -> None:
    """A lesson's "Open the H200 recording": show its bundled samples as if just run."""
    samples = lesson_samples(LESSONS[lesson_key].runs) or []
    open_lesson(lesson_key, [f"sample:{s.file}" for s in samples])


def open_lesson(lesson_key: str, subject_keys: list[str]) -> None:
    """Open a lesson's results: a pair in Compare (A, B set), one run in Summary; check its signals."""
    st.session_state["lesson_check"] = {"lesson": lesson_key, "subjects": subject_keys, "arrivals": state.arrivals()}
    st.session_state["subject"] = subject_keys[-1]
    if len(subject_keys) == 2:
        st.session_state["cmp_a"], st.session_state["cmp_b"] = subject_keys
        # Compare puts a newer run of the session against the previous one (ui.views.compare_view):
        # the runs there are now older than this pair, which stays.
        runs = st.session_state.get("runs", [])
        st.session_state["_cmp_newest_run"] = runs[-1].key if runs else None
        st.session_state["view"] = "Compare"
    else:
        st.session_state["view"] = "Summary"

"""Submitting runs to the worker service and showing their progress."""

from __future__ import annotations

import time

import streamlit as st

from lab.config import RunConfig
from lab.result import RunResult
from lab.service import ProfileService, RunFailed, ServiceBusy, TicketStatus

POLL_S = 0.2
STAGE_TEXT = {
    "checking": "checking the config against the device",
    "allocating": "allocating random inputs",
    "compiling": "compiling with torch.compile (timed apart, not profiled)",
    "warming up": "warming up",
    "profiling": "profiling",
    "exporting": "exporting the Chrome trace",
    "timing": "timing the same step without the profiler",
    "summarizing": "building key_averages tables",
}
FIRST_RUN_NOTE = (
    "The profiling worker is still starting. The first profile in a process is slow — about "
    "1 s on a CPU, about 7 s on a GPU while CUPTI initializes — so the server warms its workers "
    "up once at start; later runs skip that cost."
)


def _describe(status: TicketStatus, name: str) -> str:
    if status.state == "queued":
        eta = f", about {status.estimate_s:.0f} s" if status.estimate_s is not None else ""
        return f"{name}: queued — position {status.queue_position}{eta}"
    if status.state == "running":
        stage = STAGE_TEXT.get(status.stage or "", status.stage or "starting")
        where = f" on {status.device}" if status.device else ""
        return f"{name}: {stage}{where} · {status.elapsed_s:.1f} s"
    return f"{name}: {status.state} · {status.elapsed_s:.1f} s"


def run_configs(service: ProfileService, runs: list[tuple[str, RunConfig]]) -> list[RunResult] | None:
    """Submit ``runs`` (name, config) in order and wait, showing a status box; None on failure."""
    try:
        tickets = [(name, service.submit(config)) for name, config in runs]
    except ServiceBusy as exc:
        st.warning(f"The lab is busy: {exc}")
        return None
    results: list[RunResult] = []
    label = "Running " + " and ".join(name for name, _ in runs)
    with st.status(label, expanded=True) as box:
        if service.device_info() is None:
            st.caption(FIRST_RUN_NOTE)
        line = st.empty()
        try:
            for name, ticket in tickets:
                while not ticket.done():
                    line.markdown(_describe(ticket.poll(), name))
                    time.sleep(POLL_S)
                result = ticket.result(timeout=0)
                results.append(result)
                line.markdown(_describe(ticket.poll(), name) + (" (reused)" if ticket.reused else ""))
        except RunFailed as exc:
            box.update(label="The run did not finish", state="error", expanded=True)
            st.error(str(exc))
            return None
        finally:
            # A rerun or a closed tab stops this script: don't leave runs queued for nobody.
            for _, ticket in tickets:
                if not ticket.done():
                    ticket.cancel()
        total = sum(r.stage_s.get("total", sum(r.stage_s.values())) for r in results)
        box.update(label=f"{label}: done in {total:.1f} s", state="complete", expanded=False)
    return results

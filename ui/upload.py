"""Opening a trace file: size check, parse once, and only a readable trace joins the session.

A file that cannot be read is refused with one message and never enters the "Showing" list,
so the rest of the page keeps showing what it showed. The uploader hands the same file back
on every rerun; refusals are remembered per session by digest so a bad (or bomb) file is
parsed once, not on every click.
"""

from __future__ import annotations

import streamlit as st

from lab.run import HostSettings
from ui import cache, messages, state

UPLOADER_KEY = "upload"
_REJECTED = "rejected_uploads"  # session_state: digest → message
MAX_REMEMBERED_REFUSALS = 16


def upload_box(settings: HostSettings) -> None:
    """The "open your own trace" expander; adds a readable upload to the session and selects it."""
    with st.expander("Open your own trace (.json or .json.gz from torch.profiler)", expanded=False):
        upload = st.file_uploader(
            "Trace file", type=["json", "gz"], key=UPLOADER_KEY, max_upload_size=settings.max_upload_mb,
            help="export_chrome_trace() output or a tensorboard_trace_handler file, up to "
                 f"{settings.max_upload_mb} MB. Parsed in memory, never executed, kept in your session only.")
        if upload is None:
            return
        refusal = accept_upload(upload.name, upload.getvalue(), settings)
        if refusal:
            messages.error(refusal)


def accept_upload(name: str, data: bytes, settings: HostSettings) -> str | None:
    """Add ``data`` to the session's uploads if it is a readable trace; else the reason (for the user)."""
    limit_bytes = settings.max_upload_mb * 2**20
    if len(data) > limit_bytes:
        return (f"{name} is {len(data) / 2**20:.1f} MB; this host accepts traces up to {settings.max_upload_mb} MB. "
                "Profile fewer steps (a smaller schedule 'active'), or upload the .json.gz instead of the .json.")
    digest = state.digest_of(data)
    rejected: dict[str, str] = st.session_state.setdefault(_REJECTED, {})
    if digest in rejected:
        return rejected[digest]
    if state.has_upload(digest):
        return None
    reason = cache.check_readable(digest, data, settings)
    if reason:
        rejected[digest] = f"{name} cannot be opened: {reason}"
        while len(rejected) > MAX_REMEMBERED_REFUSALS:
            rejected.pop(next(iter(rejected)))
        return rejected[digest]
    state.add_upload(name, data)
    return None

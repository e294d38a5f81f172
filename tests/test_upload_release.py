"""An opened upload's bytes leave Streamlit's file store (``ui.upload.forget_uploaded_file``).

Streamlit has no public call for it; the page uses the one its own chat_input and audio_input
use. This runs it in a real Streamlit script run (AppTest: a real ScriptRunContext and the
same ``MemoryUploadedFileManager`` class the server uses) and fails when an upgrade moves,
renames or changes it, or when the bytes stop being freed.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = [pytest.mark.apptest]

FILE_BYTES = 3_000_000


def _page():
    import streamlit as st
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    from streamlit.runtime.stats import CACHE_MEMORY_FAMILY
    from streamlit.runtime.uploaded_file_manager import UploadedFileRec

    from ui.upload import forget_uploaded_file

    ctx = get_script_run_ctx()
    files = ctx.uploaded_file_mgr

    def held() -> tuple[int, int]:
        stats = files.get_stats([CACHE_MEMORY_FAMILY]).get(CACHE_MEMORY_FAMILY, [])
        return len(files.get_files(ctx.session_id, ["trace-1"])), sum(s.byte_length for s in stats)

    files.add_file(ctx.session_id, UploadedFileRec(file_id="trace-1", name="trace.json", type="application/json",
                                                   data=b"x" * 3_000_000))  # FILE_BYTES: the script runs alone
    before = held()
    dropped = forget_uploaded_file("trace-1")
    st.session_state["result"] = (before, dropped, held(), forget_uploaded_file("trace-1"))


def test_an_opened_upload_is_freed_from_streamlits_file_store():
    at = AppTest.from_function(_page, default_timeout=30).run()
    assert not at.exception
    before, dropped, after, again = at.session_state["result"]
    assert before == (1, FILE_BYTES)  # the store held the file and counted its bytes
    assert dropped is True
    assert after == (0, 0)  # gone, and its bytes no longer counted
    assert again is True  # removing it twice is harmless


def test_outside_a_script_run_nothing_is_dropped_and_it_is_logged(caplog):
    from ui.upload import forget_uploaded_file

    with caplog.at_level("WARNING", logger="ui.upload"):
        assert forget_uploaded_file("trace-1") is False
    assert "stays in memory" in caplog.text

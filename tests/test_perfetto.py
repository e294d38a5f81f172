"""lab/views/perfetto.py: the *Open in Perfetto* snippet carries the trace's exact bytes, speaks the
documented protocol to the origin it was given, and cannot be broken out of by a trace's title.
The handshake itself runs in a real browser in tests/test_browser.py (against a local stand-in)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from lab.views.perfetto import PERFETTO_INLINE_MAX_BYTES, PERFETTO_ORIGIN, perfetto_button_html

SAMPLE = Path(__file__).resolve().parents[1] / "lab" / "samples" / "matmul_add_4096_bf16.json.gz"


def test_snippet_holds_the_trace_bytes_and_the_protocol():
    data = SAMPLE.read_bytes()
    html = perfetto_button_html(data, title="Sample: x", file_name="x.pt.trace.json.gz")
    (b64,) = re.findall(r'const TRACE_B64 = "([A-Za-z0-9+/=]*)";', html)
    assert base64.b64decode(b64) == data
    assert f'const ORIGIN = "{PERFETTO_ORIGIN}";' in html
    assert "window.open(ORIGIN)" in html and 'postMessage("PING", ORIGIN)' in html
    assert 'event.data !== "PONG"' in html
    assert "{perfetto: {buffer: traceBuffer(), title: TITLE, fileName: FILE_NAME}}" in html
    local = perfetto_button_html(data, title="t", file_name="f", origin="http://127.0.0.1:8123/")
    assert 'const ORIGIN = "http://127.0.0.1:8123";' in local


def test_title_cannot_close_the_script_and_limits_are_explained():
    html = perfetto_button_html(b"{}", title='</script><img src=x onerror=alert(1)>"', file_name="a")
    assert html.count("</script>") == 1 and "<img" not in html
    with pytest.raises(ValueError, match="download it"):
        perfetto_button_html(b"x" * (PERFETTO_INLINE_MAX_BYTES + 1), title="t", file_name="f")
    with pytest.raises(ValueError, match="http"):
        perfetto_button_html(b"{}", title="t", file_name="f", origin="javascript:alert(1)")

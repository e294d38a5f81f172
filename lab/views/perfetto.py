"""*Open in Perfetto*: a button (an HTML snippet with its script) that opens the Perfetto UI in a
new tab and hands it the trace through Perfetto's documented postMessage protocol
(perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui): ``window.open(origin)``, post
``'PING'`` until the tab answers ``'PONG'`` (its listener is not there at once, and the channel
is not buffered), then post ``{perfetto: {buffer: ArrayBuffer, title, fileName}}``.

The trace goes as stored: the Perfetto UI opens gzipped JSON as it opens plain JSON. Nothing on
the page loads from the internet: the snippet is inline, and only the visitor's click opens
the new tab. ``origin`` is a host setting (``perfetto_origin``) so a test can point the button at
a local stand-in that speaks the same protocol.
"""

from __future__ import annotations

import base64
import json

__all__ = ["PERFETTO_BUTTON_LABEL", "PERFETTO_HEIGHT_PX", "PERFETTO_INLINE_MAX_BYTES", "PERFETTO_ORIGIN",
           "PING_INTERVAL_MS", "PONG_TIMEOUT_S", "perfetto_button_html"]

PERFETTO_ORIGIN = "https://ui.perfetto.dev"
PERFETTO_BUTTON_LABEL = "Open in Perfetto"
# The snippet's frame: one button and one status line.
PERFETTO_HEIGHT_PX = 64
# The trace rides in the page as base64 (4/3 of its size), so very large traces are better
# downloaded and opened by hand; a gzipped run trace of this lab is ~5 KB–2 MB.
PERFETTO_INLINE_MAX_BYTES = 32 * 1024 * 1024
# Perfetto's own example pings every 50 ms; a cold load of ui.perfetto.dev takes 2–10 s.
PING_INTERVAL_MS = 50
PONG_TIMEOUT_S = 60

_TEMPLATE = """<!doctype html>
<html><head><meta charset="utf-8"><style>
body {{ margin: 0; font-family: "Source Sans", "Source Sans Pro", system-ui, sans-serif; font-size: 14px;
  color: #31333f; }}
button {{ font: inherit; min-height: 2.5rem; padding: 0.25rem 0.75rem; border: 1px solid rgba(49,51,63,0.2);
  border-radius: 0.5rem; background: #fff; cursor: pointer; }}
button:hover {{ border-color: #ff4b4b; color: #ff4b4b; }}
#status {{ margin-left: 0.6rem; color: #808495; }}
</style></head><body>
<button id="open" type="button">{label}</button><span id="status" role="status"></span>
<script>{match_page}
const ORIGIN = {origin};
const TITLE = {title};
const FILE_NAME = {file_name};
const TRACE_B64 = "{data}";
const status = document.getElementById("status");
function traceBuffer() {{
  const text = atob(TRACE_B64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes.buffer;
}}
document.getElementById("open").addEventListener("click", () => {{
  const tab = window.open(ORIGIN);
  if (!tab) {{
    status.textContent = "The browser blocked the new tab: allow pop-ups for this page and click again.";
    return;
  }}
  status.textContent = "Waiting for Perfetto to load…";
  const ping = setInterval(() => tab.postMessage("PING", ORIGIN), {ping_ms});
  const giveUp = setTimeout(() => {{
    clearInterval(ping);
    window.removeEventListener("message", onMessage);
    status.textContent = "Perfetto did not answer in {timeout_s} s: download the trace and open it there.";
  }}, {timeout_s} * 1000);
  function onMessage(event) {{
    if (event.source !== tab || event.data !== "PONG") return;
    clearInterval(ping);
    clearTimeout(giveUp);
    window.removeEventListener("message", onMessage);
    tab.postMessage({{perfetto: {{buffer: traceBuffer(), title: TITLE, fileName: FILE_NAME}}}}, ORIGIN);
    status.textContent = "Sent to Perfetto (the new tab).";
  }}
  window.addEventListener("message", onMessage);
}});
</script></body></html>
"""


# The frame is a document of its own: Streamlit's fonts (@font-face in the page's stylesheets)
# are not in it, so the button fell back to the system's sans-serif, in another size than the
# Download buttons beside it. This copies the page's @font-face rules (URLs made
# absolute) and a Streamlit button's font, size, weight, radius and padding (same origin).
_MATCH_PAGE_JS = r"""
(() => {
  let top;
  try { top = window.parent.document; } catch (e) { return; }
  const faces = [];
  for (const sheet of top.styleSheets) {
    let rules;
    try { rules = sheet.cssRules; } catch (e) { continue; }
    const base = sheet.href || top.baseURI;
    for (const rule of rules) {
      if (rule.type !== CSSRule.FONT_FACE_RULE) continue;
      faces.push(rule.cssText.replace(/url\(["']?([^"')]+)["']?\)/g,
                                      (m, u) => 'url("' + new URL(u, base).href + '")'));
    }
  }
  const style = document.createElement("style");
  style.textContent = faces.join("\n");
  document.head.appendChild(style);
  const ref = top.querySelector('[data-testid="stDownloadButton"] button[kind="secondary"]')
    || top.querySelector('[data-testid="stDownloadButton"] button, [data-testid="stBaseButton-secondary"]');
  if (!ref) return;
  const look = getComputedStyle(ref);
  const button = document.getElementById("open");
  for (const p of ["fontFamily", "fontSize", "fontWeight", "lineHeight", "borderRadius", "padding", "minHeight",
                   "color", "backgroundColor", "borderColor", "borderWidth", "borderStyle"]) {
    button.style[p] = look[p];
  }
  document.body.style.fontFamily = look.fontFamily;
})();
"""


def _js_string(text: str) -> str:
    """A JavaScript string literal that cannot close the script element it sits in."""
    return json.dumps(text).replace("<", "\\u003c").replace(">", "\\u003e")


def perfetto_button_html(trace_bytes: bytes, *, title: str, file_name: str,
                         origin: str = PERFETTO_ORIGIN) -> str:
    """The button's HTML document, holding ``trace_bytes`` (gzipped or plain Chrome JSON) as base64."""
    if len(trace_bytes) > PERFETTO_INLINE_MAX_BYTES:
        raise ValueError(f"trace of {len(trace_bytes):,} bytes is over {PERFETTO_INLINE_MAX_BYTES:,}: "
                         "download it and open it in Perfetto by hand")
    if not origin.startswith(("https://", "http://")):
        raise ValueError(f"perfetto origin {origin!r} must be an http(s) origin, e.g. {PERFETTO_ORIGIN}")
    return _TEMPLATE.format(
        label=PERFETTO_BUTTON_LABEL, origin=_js_string(origin.rstrip("/")), title=_js_string(title),
        file_name=_js_string(file_name), data=base64.b64encode(trace_bytes).decode("ascii"),
        ping_ms=PING_INTERVAL_MS, timeout_s=PONG_TIMEOUT_S, match_page=_MATCH_PAGE_JS,
    )

"""Page layout that Streamlit's options do not cover: the sidebar on a narrow window, and text
that wraps instead of being cut at 800 px (``PAGE_CSS``).

``initial_sidebar_state="auto"`` collapses the sidebar only at or below Streamlit's ``md``
breakpoint, 768 px (``rx(…, breakpoints.md, innerWidth)`` in its frontend, 1.67): at 800 px the
form took ~330 px and left the chart ~450 px. So once per browser tab, a window narrower than
``COLLAPSE_BELOW_PX`` gets its sidebar collapsed as if the visitor had clicked its « button;
they can open it again, and it is not collapsed a second time in that tab.
"""

from __future__ import annotations

import streamlit as st

__all__ = ["COLLAPSE_BELOW_PX", "PAGE_CSS", "collapse_sidebar_when_narrow", "page_styles"]

# At 1,000 px the sidebar (~300 px) still leaves a ~650 px chart; below it the page reads better
# with the form folded away.
COLLAPSE_BELOW_PX = 1000

_SCRIPT = """<script>
(() => {
  const top = window.parent;
  const flag = "profilerLabSidebarFolded";
  if (top.innerWidth >= %(below)d || top.sessionStorage.getItem(flag)) return;
  top.sessionStorage.setItem(flag, "1");
  let tries = 50;  // the sidebar is drawn after the first script run: up to 10 s
  const fold = () => {
    const bar = top.document.querySelector('[data-testid="stSidebar"]');
    const button = top.document.querySelector('[data-testid="stSidebarCollapseButton"] button');
    if (bar && button && bar.dataset.collapsed === "false") { button.click(); return; }
    if (bar && bar.dataset.collapsed === "true") return;
    if (--tries > 0) setTimeout(fold, 200);
  };
  fold();
})();
</script>"""


def collapse_sidebar_when_narrow() -> None:
    """The script above, in a 1 px frame (put it last in the sidebar: no visible gap)."""
    st.iframe(_SCRIPT % {"below": COLLAPSE_BELOW_PX}, height=1)


# What no Streamlit option sets, for an 800 px window with the sidebar open (~468 px of main
# column; each measured in Chromium by tests/test_browser_overflow.py):
# - the view tabs wrap onto a second line instead of scrolling: 8 tabs need ~506 px, and the
#   last one was behind a scroll arrow ("Compa…");
# - a widget label (a toggle's too: "Show record_function labels" needed 167 px of 115) wraps
#   instead of ending in an ellipsis or running out of its box;
# - the sidebar's plain text (Server status values) wraps instead of running past the sidebar.
PAGE_CSS = """<style>
[data-testid="stTabs"] [role="tablist"] { flex-wrap: wrap; }
[data-testid="stTabs"] [role="tablist"] + div[data-testid="stTabsScrollArrow"] { display: none; }
[data-testid="stWidgetLabel"] p, [data-testid="stWidgetLabel"] .stMarkdownEllipsis,
[data-testid="stCheckbox"] [data-testid="stMarkdownContainer"],
[data-testid="stCheckbox"] [data-testid="stMarkdownContainer"] p {
  white-space: normal; overflow-wrap: anywhere; text-overflow: clip; }
[data-testid="stSidebar"] [data-testid="stText"] { white-space: pre-wrap; overflow-wrap: anywhere; }
</style>"""


def page_styles() -> None:
    """``PAGE_CSS`` on the page (a style element takes no room)."""
    st.html(PAGE_CSS)

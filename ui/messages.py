"""Showing text that may hold user input (labels, file names, exact sizes) without markup.

Streamlit renders markdown in st.error/st.info/st.caption/st.markdown. A file named
``[x](http://evil)`` or a label with ``**`` would become a link or bold text, so every
string that did not come from our own code goes through ``md_escape`` first. HTML is never
enabled anywhere (no unsafe_allow_html).
"""

from __future__ import annotations

import streamlit as st

# Every character with a meaning in CommonMark or Streamlit's markdown extensions
# (``:material/…:`` icons and ``:red[…]`` colours start with a colon, ``$`` starts LaTeX).
_MARKDOWN_CHARS = frozenset("\\`*_{}[]()#+-.!|<>~$:=")


def md_escape(text: str) -> str:
    """``text`` with every markdown character backslash-escaped, so it shows as typed."""
    return "".join("\\" + ch if ch in _MARKDOWN_CHARS else ch for ch in str(text))


def error(message: str) -> None:
    """One st.error with ``message`` shown verbatim (it may quote what the user typed)."""
    st.error(md_escape(message), icon=":material/error:")

"""Typed helpers for Streamlit's choice widgets.

``st.selectbox`` and ``st.radio`` are typed ``T | None`` because ``index=None`` may leave them
empty; a widget with options and a default never is. ``chosen`` says so once, instead of a
``None`` check at every call; ``labels_from`` turns a {value: label} dict into the
``format_func`` Streamlit expects (``dict.get`` may return None).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["chosen", "labels_from"]


def chosen(value: T | None) -> T:
    """The value of a choice widget that has options and a default index."""
    if value is None:
        raise RuntimeError("a choice widget with options and a default index returned no choice")
    return value


def labels_from(labels: Mapping[Any, str]) -> Callable[[Any], str]:
    """``format_func`` for a choice widget: its label, or the value itself if it has none."""
    return lambda value: labels.get(value, str(value))

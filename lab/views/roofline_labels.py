"""Where the roofline's words go: each point's shape label and the region names, placed so that
no two overlap and none covers a point (labels of near points and the region names
were drawn over each other).

The chart's height is fixed (``ROOFLINE_HEIGHT_PX``) and its width is the container's, so
positions are worked out in pixels for the narrowest plot the page draws (``MIN_PLOT_WIDTH_PX``:
an 800 px window with the sidebar open): a label is anchored at its point with a fixed pixel
offset, so on a wider plot the anchors only move apart and what did not overlap still does not.
A label with no free place is left out (the point keeps its tooltip).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

__all__ = ["LABEL_FONT_PX", "LABEL_PLACES", "MIN_PLOT_WIDTH_PX", "NAME_FONT_PX", "ROOFLINE_HEIGHT_PX", "place_labels"]

ROOFLINE_HEIGHT_PX = 380
MIN_PLOT_WIDTH_PX = 330  # an 800 px window, sidebar open: ~420 px of chart less its y axis
LABEL_FONT_PX = 11
NAME_FONT_PX = 13
# Average glyph width of the chart's sans-serif per font pixel ("2048×2048×16" at 11 px: ~70 px).
GLYPH_EM = 0.62
# A text's box is taller than its font: ascent and descent (an 11 px label measures 15 px in Chromium).
LINE_EM = 1.45
POINT_RADIUS_PX = 7  # mark_circle(size=110): ~5.9 px, and its stroke
GAP_PX = 4
# Candidate places, tried in order: (align, dx, dy) in pixels from the point (dy < 0: above).
LABEL_PLACES = (("center", 0, -16), ("center", 0, 16), ("left", 10, 0), ("right", -10, 0),
                ("left", 8, -14), ("right", -8, -14), ("left", 8, 14), ("right", -8, 14))


@dataclass(frozen=True)
class _Box:
    x0: float
    y0: float
    x1: float
    y1: float

    def hits(self, other: _Box) -> bool:
        return not (self.x1 + GAP_PX <= other.x0 or other.x1 + GAP_PX <= self.x0
                    or self.y1 + GAP_PX <= other.y0 or other.y1 + GAP_PX <= self.y0)

    def inside(self, width: float, height: float) -> bool:
        return self.x0 >= 0 and self.y0 >= 0 and self.x1 <= width and self.y1 <= height


def _text_box(x: float, y: float, text: str, font_px: float, align: str) -> _Box:
    w, h = len(text) * font_px * GLYPH_EM, font_px * LINE_EM
    x0 = x - w / 2 if align == "center" else x if align == "left" else x - w
    return _Box(x0, y - h / 2, x0 + w, y + h / 2)


def _pixels(x: float, y: float, domain: pd.DataFrame) -> tuple[float, float]:
    lx = [math.log10(float(v)) for v in domain["x"]]
    ly = [math.log10(float(v)) for v in domain["y"]]
    px = (math.log10(x) - lx[0]) / (lx[1] - lx[0]) * MIN_PLOT_WIDTH_PX
    py = (ly[1] - math.log10(y)) / (ly[1] - ly[0]) * ROOFLINE_HEIGHT_PX
    return px, py


def place_labels(points: pd.DataFrame, names: pd.DataFrame, domain: pd.DataFrame) -> pd.DataFrame:
    """The labelled points (columns of ``points`` + ``align``, ``dx``, ``dy``), placed clear of
    each other, of every point and of the region names (``names``: ``cx``, ``y``, ``region``,
    drawn from the plot's bottom edge up)."""
    taken = []
    for _, name in names.iterrows():
        x, _ = _pixels(float(name["cx"]), float(domain["y"].min()), domain)
        taken.append(_text_box(x, ROOFLINE_HEIGHT_PX - 4 - NAME_FONT_PX / 2, str(name["region"]), NAME_FONT_PX,
                               "center"))
    centres = [_pixels(float(p["intensity_flops_per_byte"]), float(p["tflops"]), domain) for _, p in points.iterrows()]
    circles = [_Box(x - POINT_RADIUS_PX, y - POINT_RADIUS_PX, x + POINT_RADIUS_PX, y + POINT_RADIUS_PX)
               for x, y in centres]
    rows = []
    for i, ((_, point), (x, y)) in enumerate(zip(points.iterrows(), centres)):
        others = taken + circles[:i] + circles[i + 1:]  # its own point: the places are offset from it
        for align, dx, dy in LABEL_PLACES:
            box = _text_box(x + dx, y + dy, str(point["shape"]), LABEL_FONT_PX, align)
            if box.inside(MIN_PLOT_WIDTH_PX, ROOFLINE_HEIGHT_PX) and not any(box.hits(t) for t in others):
                taken.append(box)
                rows.append({**point.to_dict(), "align": align, "dx": dx, "dy": dy})
                break
    return pd.DataFrame(rows, columns=[*points.columns, "align", "dx", "dy"])

"""Replace one ``## Section`` of BENCHMARKS.md, leaving the others as they are."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = "# Benchmarks\n\nMeasured figures, one section per bench, with command and method.\n"


def write_section(text: str, path: Path = ROOT / "BENCHMARKS.md") -> None:
    """``text`` starts with its ``## Title`` line; that section is replaced, or appended if new."""
    title = text.split("\n", 1)[0].strip()
    old = path.read_text() if path.exists() else HEADER
    lines = old.split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip() == title), None)
    if start is None:
        new = old.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        new = "\n".join(lines[:start] + text.rstrip("\n").split("\n") + [""] + lines[end:]).rstrip("\n") + "\n"
    path.write_text(new)

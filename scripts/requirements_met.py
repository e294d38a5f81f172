"""Exit 0 when every requirement in the given files (``-r`` includes followed) is pinned with
``==`` and installed at that version, else 1: ``scripts/test.sh`` then runs pip. pip's resolver
takes ~6 s on a 2-core box even when nothing is missing; this check takes a tenth of that.

    python3 scripts/requirements_met.py requirements-dev.txt
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;#]+)\s*(?:#.*)?$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(path: Path) -> list[str]:
    """The requirement lines of ``path`` and the files it includes with ``-r``."""
    lines = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            lines += requirements(path.parent / line.split(maxsplit=1)[1])
        else:
            lines.append(line)
    return lines


def unmet(lines: list[str]) -> list[str]:
    """The lines not known to be met: not pinned with ``==``, not installed, or another version."""
    installed = {_canonical(d.metadata["Name"] or ""): d.version for d in metadata.distributions()}
    out = []
    for line in lines:
        pinned = _PINNED.match(line)
        have = installed.get(_canonical(pinned[1])) if pinned else None
        # PEP 440: a pin without a local label matches any (2.13.0 is met by 2.13.0+cpu)
        if have is None or (have != pinned[2] and ("+" in pinned[2] or have.split("+")[0] != pinned[2])):
            out.append(line)
    return out


def main(argv: list[str]) -> int:
    missing = unmet([line for name in argv for line in requirements(Path(name))])
    for line in missing:
        print(f"requirements_met: not installed as pinned: {line}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The repository's Python sources parsed once per test process, for the house-rule tests that scan
them (``test_layout.py``, ``test_measures.py``): each of them walked every file's syntax tree again,
about 1–2.7 s a test on a 2-core box. The trees are shared: a test walks them and never changes one
(a test that plants code parses its own string)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

__all__ = ["tree"]


@functools.cache
def tree(path: Path) -> ast.Module:
    return ast.parse(Path(path).read_text(), str(path))

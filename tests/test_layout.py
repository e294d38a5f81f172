"""The house rules of the code, read from the source with ``ast`` (nothing is imported):

- ``lab/`` never imports streamlit, and its modules import each other without a circle;
- ``app.py`` and ``ui/`` reach ``lab`` only through the package ``__init__``s;
- no module in ``lab/`` over 500 lines, no function in ``lab/`` or ``ui/`` over 60 lines;
- every module named in the README's layout table exists.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "lab"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
# What the page may import: the stage packages (their __init__s), the samples package, the
# trace readers (``lab.read``), who may do what (``lab.access``), teaching (``lab.teach``), and
# ``lab`` itself (``from lab import views``).
PAGE_IMPORTS = {"lab", "lab.access", "lab.run", "lab.read", "lab.trace", "lab.analysis", "lab.views", "lab.samples",
                "lab.teach", "lab.tracedir"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _lab_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in LAB.rglob("*.py")}


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    """Modules ``path`` imports (``from a.b import c`` counts as ``a.b`` and ``a.b.c``)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _import_graph() -> dict[str, set[str]]:
    modules = _lab_modules()
    graph = {}
    for name, path in modules.items():
        deps = {m for m in _imports(path, top_level_only=True) if m in modules and m != name}
        # Importing a.b.c runs a/__init__ and a/b/__init__ first.
        for dep in list(deps):
            parts = dep.split(".")
            deps.update(".".join(parts[:i]) for i in range(2, len(parts)) if ".".join(parts[:i]) in modules)
        graph[name] = deps - {name} - {p for p in _parents(name)}
    return graph


def _parents(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_lab_never_imports_streamlit():
    offenders = [name for name, path in _lab_modules().items()
                 if any(m == "streamlit" or m.startswith("streamlit.") for m in _imports(path, top_level_only=False))]
    assert not offenders


def test_no_import_circle_in_lab():
    assert _find_cycle(_import_graph()) is None


def test_the_cycle_finder_finds_a_cycle():
    # The check above must be able to fail.
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_page_imports_lab_only_through_package_inits():
    page_files = [ROOT / "app.py", *sorted((ROOT / "ui").glob("*.py"))]
    bad = {}
    for path in page_files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "lab":
                if node.module not in PAGE_IMPORTS:
                    bad.setdefault(path.name, []).append(node.module)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "lab" and alias.name not in PAGE_IMPORTS:
                        bad.setdefault(path.name, []).append(alias.name)
    assert not bad


def test_no_lab_module_over_500_lines():
    long = {name: n for name, path in _lab_modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long


def _long_functions(paths) -> dict[str, int]:
    long = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = n
    return long


def test_no_function_over_60_lines_in_lab_or_ui():
    paths = [*LAB.rglob("*.py"), *(ROOT / "ui").rglob("*.py"), ROOT / "app.py"]
    assert not _long_functions(paths)


def test_readme_layout_table_names_real_paths():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Layout"):]
    paths = re.findall(r"^\| `([^`]+)`", table, flags=re.M)
    paths += re.findall(r"^\| `[^`]+`, `([^`]+)`", table, flags=re.M)
    assert paths
    missing = [p for p in paths if not (ROOT / p.rstrip("/")).exists()]
    assert not missing


@pytest.mark.parametrize("doc", ["docs/architecture.md"])
def test_architecture_doc_names_real_paths(doc):
    text = (ROOT / doc).read_text()
    paths = set(re.findall(r"`((?:lab|ui|tests|bench|scripts)/[\w/.]+)`", text))
    assert paths
    missing = sorted(p for p in paths if not (ROOT / p.rstrip("/")).exists())
    assert not missing

"""The house rules of the code, read from the source with ``ast`` (nothing is imported):

- ``lab/`` never imports streamlit, and its modules import each other without a circle;
- its packages import only downward (``LAYERS``: ``lab.core`` below everything, the trace below
  the analyses, no runner in a reader), counting every import: lazy, ``TYPE_CHECKING``-only
  and ``importlib.import_module("lab....")`` ones too;
- no flat group of prefixed modules (``diag_*.py``) in ``lab/analysis``: a concern with several
  modules is a sub-package;
- no run of six lines (the same, or the same shape with other names) stands in both the
  workers' and the readers' code (``lab/run`` and ``lab/read``): the pool is written once;
- ``app.py`` and ``ui/`` reach ``lab`` only through the package ``__init__``s;
- no module in ``lab/`` over 500 lines, no function in ``lab/`` or ``ui/`` over 60 lines;
- every module named in the README's layout table exists.
- no .py file in ``lab/``, ``ui/``, ``tests/``, ``scripts/``, ``bench/`` or ``app.py`` names an issue by
  its number: code says what it does or checks and why, never which request asked for it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import sources

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "lab"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
# What the page may import: the stage packages (their __init__s), the shared types
# (``lab.core``), the samples package, the trace readers (``lab.read``), who may do what
# (``lab.access``), the lessons (``lab.lessons``), teaching (``lab.teach``), the host's trace directories
# (``lab.tracedir``), and ``lab`` itself (``from lab import views``).
PAGE_IMPORTS = {"lab", "lab.access", "lab.core", "lab.run", "lab.read", "lab.trace", "lab.analysis", "lab.views",
                "lab.samples", "lab.lessons", "lab.teach", "lab.tracedir"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _lab_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in LAB.rglob("*.py")}


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    """Modules ``path`` imports (``from a.b import c`` counts as ``a.b`` and ``a.b.c``)."""
    tree = sources.tree(path)
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
        tree = sources.tree(path)
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
        for node in ast.walk(sources.tree(path)):
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


# --- layers ----------------------------------------------------------------------------------
# What each part of lab/ may import (besides itself), lowest first. A part is a package
# (lab/core/) or a top-level module (lab/vocab.py). The leaf modules import no other part.
_LEAVES = frozenset({"vocab", "units", "stats"})
LAYERS: dict[str, frozenset[str]] = {
    "vocab": frozenset(), "units": frozenset(), "stats": frozenset(),
    "core": _LEAVES,  # the shared types: settings, configs, device peaks, column contracts
    "samples": _LEAVES,
    "trace": _LEAVES | {"core"},
    "analysis": _LEAVES | {"core", "trace"},
    "measure": _LEAVES | {"core", "trace", "analysis"},  # every figure of a trace once: Measures
    # Where each step's time went and each op against its roof, read from the trace's Measures.
    "explain": _LEAVES | {"core", "trace", "analysis", "measure"},
    "judge": _LEAVES | {"core", "trace", "analysis", "measure", "explain"},  # findings with their savings, the verdict
    "pool": _LEAVES | {"core"},  # one process pool for workers and readers (branch "pool")
    "run": _LEAVES | {"core", "pool"},
    # Lesson code reaches the readers in the job the page hands them (lab.read.Job.code).
    "read": _LEAVES | {"core", "pool", "trace", "analysis", "measure", "explain", "judge", "samples"},
    # The Table's "Replay here" reads the replay's rows and side by side (lab.views.replay).
    "views": _LEAVES | {"core", "trace", "analysis", "measure", "explain", "judge", "replay"},
    # One op row of a trace → a spec, a script, a child run; its rates by explain's op model.
    "replay": _LEAVES | {"core", "trace", "analysis", "explain"},
    # One module per lesson: its text, runs, check, questions and claims; checks read the measures.
    "lessons": _LEAVES | {"core", "trace", "analysis", "measure", "explain", "judge"},
    "teach": _LEAVES | {"core", "trace", "analysis", "samples", "lessons"},  # giveaway reads the recordings' titles
    "access": _LEAVES | {"core", "run", "read"},
    "tracedir": _LEAVES | {"core"},  # the host's trace directories: names, listing, safe paths
    "serve": _LEAVES | {"core"},  # `profiler-lab serve`: streamlit run of the installed page
    "cli": _LEAVES | {"core", "trace", "analysis", "measure", "explain", "judge", "run", "read", "views", "tracedir",
            "serve", "replay"},
    "__main__": frozenset({"cli"}),
}  # fmt: skip
# Imports across layers that stand until the pool layer lands (``lab/pool``): the
# readers start their processes with the workers' spawn and pipe code. Named module by module,
# so that no other import of lab.run from lab.read gets in meanwhile.
PENDING_POOL: set[tuple[str, str]] = set()  # the pool layer landed: lab/read starts its readers through lab/pool


def _part(module: str) -> str:
    return module.split(".")[1]


def _all_imports(path: Path) -> set[str]:
    """Every lab module ``path`` imports anywhere: top level, in a function, under TYPE_CHECKING,
    or by name through ``importlib.import_module``."""
    found = _imports(path, top_level_only=False)
    for node in ast.walk(sources.tree(path)):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    return {m for m in found if m.startswith("lab.")}


def _layer_violations(imports: dict[str, set[str]], layers: dict[str, frozenset[str]],
                      pending: set[tuple[str, str]]) -> list[str]:
    bad = []
    for module, deps in sorted(imports.items()):
        me = _part(module)
        for dep in sorted(deps):
            other = _part(dep)
            waiting = any(me == part and (dep == m or dep.startswith(m + ".")) for part, m in pending)
            if other != me and other not in layers.get(me, frozenset()) and not waiting:
                bad.append(f"{module} imports {dep}")
    return bad


def test_every_part_of_lab_has_a_layer():
    parts = {_part(name) for name in _lab_modules() if name != "lab"}
    assert parts <= set(LAYERS), sorted(parts - set(LAYERS))


def test_lab_packages_import_only_downward():
    imports = {name: _all_imports(path) for name, path in _lab_modules().items() if name != "lab"}
    assert not _layer_violations(imports, LAYERS, PENDING_POOL)


def test_the_layer_check_finds_an_upward_import():
    layers = {"core": frozenset(), "analysis": frozenset({"core"}), "run": frozenset({"core"})}
    imports = {"lab.analysis.gemm": {"lab.core.devices", "lab.run.config"}, "lab.core.x": {"lab.core.y"}}
    assert _layer_violations(imports, layers, set()) == ["lab.analysis.gemm imports lab.run.config"]
    assert _layer_violations(imports, layers, {("analysis", "lab.run.config")}) == []


def _prefix_groups(folder: Path) -> dict[str, list[str]]:
    """Modules of ``folder`` (not below it) that share a ``prefix_``, by prefix: ``diag_host.py``
    and ``diag_steps.py``, or ``memory.py`` and ``memory_insights.py``."""
    stems = sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
    groups: dict[str, list[str]] = {}
    for stem in stems:
        groups.setdefault(stem.split("_")[0], []).append(stem)
    return {prefix: names for prefix, names in groups.items()
            if len(names) > 1 and any("_" in n for n in names)}


def test_no_flat_groups_of_prefixed_modules_in_analysis():
    folders = [LAB / "analysis", *(p.parent for p in (LAB / "analysis").glob("*/__init__.py"))]
    assert {str(f.relative_to(ROOT)): g for f in folders if (g := _prefix_groups(f))} == {}
    subpackages = {p.parent.name for p in (LAB / "analysis").glob("*/__init__.py")}
    assert {"table", "diagnoses", "ranks", "memory", "gemm"} <= subpackages


def test_the_prefix_check_finds_a_group(tmp_path):
    for name in ("diag_host", "diag_steps", "gemm", "gpu", "memory", "memory_insights", "key_averages"):
        (tmp_path / f"{name}.py").write_text("")
    assert _prefix_groups(tmp_path) == {"diag": ["diag_host", "diag_steps"], "memory": ["memory", "memory_insights"]}


# --- one finding record --------------------------------------------------------------------------
# A trace's sentences are lab.judge.Finding: a dataclass carrying a suggestion beside a title or
# evidence is a second finding record. The records it replaced are gone and may not come back under
# their names either (the older Insight, with the insight, diagnosis, GEMM, memory and rank rules).
_FINDING_FIELDS = frozenset({"title", "evidence", "suggestion"})
_THE_RECORD = "lab.judge.finding.Finding"
_REPLACED_RECORDS = frozenset({"Insight"})


def _finding_records(path: Path, module: str) -> set[str]:
    """The dataclasses in ``path`` whose annotated fields hold "suggestion" and a title or evidence."""
    found = set()
    for node in ast.walk(sources.tree(path)):
        if not isinstance(node, ast.ClassDef):
            continue
        decorators = {ast.unparse(d).split("(")[0] for d in node.decorator_list}
        if not decorators & {"dataclass", "dataclasses.dataclass"}:
            continue
        fields = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        if "suggestion" in fields and len(fields & _FINDING_FIELDS) >= 2:
            found.add(f"{module}.{node.name}")
    return found


def test_one_finding_record_in_lab():
    records = set().union(*(_finding_records(path, name) for name, path in _lab_modules().items()))
    assert records == {_THE_RECORD}


def test_the_replaced_records_never_return():
    """No class in lab/, ui/ or app.py is named like a record Finding replaced, whatever its fields."""
    paths = [*_lab_modules().values(), *ROOT.glob("ui/*.py"), ROOT / "app.py"]
    named = {f"{path}: {node.name}" for path in paths for node in ast.walk(sources.tree(path))
             if isinstance(node, ast.ClassDef) and node.name in _REPLACED_RECORDS}
    assert not named, f"{sorted(named)}: a trace's sentences are lab.judge.Finding"


def test_the_record_check_finds_a_second_record(tmp_path):
    path = tmp_path / "advice.py"
    path.write_text("from dataclasses import dataclass\n\n\n@dataclass(frozen=True)\nclass Advice:\n"
                    "    title: str\n    suggestion: str\n\n\nclass Plain:\n    title: str\n    suggestion: str\n")
    assert _finding_records(path, "lab.advice") == {"lab.advice.Advice"}


# --- names say what code does, never when it was written ------------------------------------------
# A comment, docstring or string says what the code checks or why, never which issue asked for it.
# The pattern is put together here so that this file does not match it.
_ISSUE_NUMBER = re.compile(r"\b" + "issue" + r" #?[0-9]+", re.IGNORECASE)
_CODE_FOLDERS = ("lab", "ui", "tests", "scripts", "bench")


def _issue_numbers(paths) -> list[str]:
    """Each line of ``paths`` that names an issue by its number, as ``path:line: text``."""
    return [f"{path}:{n}: {line.strip()}" for path in paths
            for n, line in enumerate(path.read_text().splitlines(), start=1) if _ISSUE_NUMBER.search(line)]


def test_no_code_names_an_issue_by_its_number():
    paths = [ROOT / "app.py", *(p for folder in _CODE_FOLDERS for p in sorted((ROOT / folder).rglob("*.py")))]
    found = _issue_numbers(paths)
    assert not found, "say what the code checks or why, not which issue asked:\n" + "\n".join(found)


def test_the_issue_check_finds_a_number(tmp_path):
    path = tmp_path / "check.py"
    word = "issue"
    path.write_text(f"X = 1  # {word} 7's bound\n# {word.title()} #12: a list\n# an {word} tracker, #7\nY = 2\n")
    assert [hit.split(": ")[0] for hit in _issue_numbers([path])] == [f"{path}:1", f"{path}:2"]


# Streamlit calls that render their text as markdown: a finding's words (premise, evidence, advice)
# quote op names such as __next__ or aten::_to_copy, which markdown would turn into bold or italics.
_MARKDOWN_CALLS = frozenset({"markdown", "caption", "info", "warning", "error", "success"})
# A URL is left to markdown, which makes it a link (escaped, it would not be one).
_LINK_FIELDS = frozenset({"learn_more"})


def _unescaped_finding_text(tree: ast.AST) -> list[str]:
    """Each ``finding.<field>`` put straight into an f-string that a markdown call renders."""
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MARKDOWN_CALLS and node.args and isinstance(node.args[0], ast.JoinedStr)):
            continue
        for part in node.args[0].values:
            if not isinstance(part, ast.FormattedValue):
                continue
            base = part.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if (isinstance(part.value, ast.Attribute) and isinstance(base, ast.Name) and base.id == "finding"
                    and part.value.attr not in _LINK_FIELDS):
                out.append(ast.unparse(part.value))
    return out


def test_the_page_shows_a_findings_words_as_typed():
    paths = [ROOT / "app.py", *sorted((ROOT / "ui").glob("*.py"))]
    bad = {p.name: found for p in paths if (found := _unescaped_finding_text(sources.tree(p)))}
    assert not bad


def test_the_markdown_check_finds_a_raw_premise():
    tree = ast.parse('st.caption(f"Premise: {finding.premise}")\nst.caption(f"Premise: {md_escape(finding.premise)}")')
    assert _unescaped_finding_text(tree) == ["finding.premise"]

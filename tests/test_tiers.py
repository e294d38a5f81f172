"""The fast tier (``bash scripts/test.sh fast``) leaves out the slow groups by marker, so a test
of a group must carry its marker: this reads every test file and holds that rule.

A test is in a group when its own source, or that of a function or fixture it uses (in its file,
or imported from another test file), does what the group is named for: ``AppTest`` → apptest,
a ``ReaderPool``/``ProfileService`` started → pool, Playwright → browser, ``subprocess`` or a
replay that runs →
subprocess, PostgreSQL's ``initdb`` → rooms, a Ray cluster → ray. Its marker may come from the
module's ``pytestmark``, the test's decorators, or a parameter of a fixture it uses
(``pytest.param(..., marks=...)``). The markers themselves are pyproject's, and scripts/test.sh's
``FAST`` line deselects every one of them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# marker → what in a test's (or its helpers') source puts it in the group
GROUPS = {
    "apptest": re.compile(r"\bAppTest\b"),
    "pool": re.compile(r"\b(ReaderPool|ProfileService|EarlyReads)\("),
    "browser": re.compile(r"\bsync_api\(|\bplaywright\b|\bchromium\("),
    # a replay that runs (``lab.replay.run_replay``, or the CLI's replay on a device) is a fresh interpreter
    "subprocess": re.compile(r"\bsubprocess\.(run|Popen|check_output|check_call)\(|\brun_replay\("
                             r"|main\(\[\"replay\",[^\]]*\"--device\", \"cpu\""),
    "rooms": re.compile(r"\binitdb\b"),
    "ray": re.compile(r"\bray_cluster\b|\bstart_cluster\("),
}


class _Module:
    def __init__(self, path: Path):
        self.source = path.read_text()
        self.tree = ast.parse(self.source)
        self.functions = {n.name: n for n in self.tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        self.imported = {}  # name → the test module it comes from
        for node in self.tree.body:
            stem = node.module.split(".")[-1] if isinstance(node, ast.ImportFrom) and node.module else ""
            if stem and (TESTS / f"{stem}.py").exists():
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = stem
        lines = self.source.splitlines(keepends=True)
        # Per function: its source, its decorators' marks, the names it uses (computed once).
        self.facts = {name: ("".join(lines[fn.lineno - 1:fn.end_lineno]),
                             set().union(*(_marks_in(d) for d in fn.decorator_list)), _used(fn))
                      for name, fn in self.functions.items()}
        self.marks = set()
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
                self.marks |= _marks_in(node.value)


def _marks_in(node: ast.AST) -> set[str]:
    """The X of every ``pytest.mark.X`` under ``node``."""
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)
            and n.value.attr == "mark"}


def _used(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names a function refers to: its parameters (fixtures), the names it loads and does not
    assign itself (helpers), and getfixturevalue's."""
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    loaded, stored = set(), set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Name):
            (stored if isinstance(n.ctx, ast.Store) else loaded).add(n.id)
        elif (isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "getfixturevalue" and n.args
              and isinstance(n.args[0], ast.Constant)):
            params.add(str(n.args[0].value))
    return params | (loaded - stored)


def _closure(modules: dict[str, _Module], stem: str, name: str) -> tuple[str, set[str]]:
    """The source of ``name`` and of every function it uses, transitively; the marks they carry
    (decorators: the test's own, and a fixture's params' ``marks=``)."""
    seen, texts, marks = set(), [], set()
    todo = [(stem, name)]
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        module = modules[key[0]]
        if key[1] not in module.facts:
            if key[1] in module.imported and module.imported[key[1]] in modules:
                todo.append((module.imported[key[1]], key[1]))
            continue
        text, own_marks, used = module.facts[key[1]]
        texts.append(text)
        marks |= own_marks
        todo.extend((key[0], n) for n in used)
    return "\n".join(texts), marks


def _modules() -> dict[str, _Module]:
    return {p.stem: _Module(p) for p in sorted(TESTS.glob("*.py"))}


def test_every_test_of_a_slow_group_carries_its_marker():
    modules = _modules()
    unmarked = []
    for stem, module in modules.items():
        if not stem.startswith("test_") or stem == "test_tiers":  # this file's probe names the groups' words
            continue
        for name in module.functions:
            if not name.startswith("test_"):
                continue
            text, marks = _closure(modules, stem, name)
            marks |= module.marks
            unmarked += [f"{stem}.py::{name}: {group}" for group, pattern in GROUPS.items()
                         if pattern.search(text) and group not in marks]
    assert not unmarked, "mark these (pytestmark = pytest.mark.X in the file, or on the test):\n" + "\n".join(unmarked)


def _fast_deselects() -> set[str]:
    line = next(x for x in (ROOT / "scripts" / "test.sh").read_text().splitlines() if x.startswith("FAST="))
    return set(re.findall(r"\b([a-z_]+)\b", line.split("=", 1)[1])) - {"not", "or", "and"}


def test_the_fast_tier_deselects_every_declared_marker():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = {m.split(":")[0].strip() for m in pyproject["tool"]["pytest"]["ini_options"]["markers"]}
    assert set(GROUPS) <= declared
    assert _fast_deselects() == declared


def test_the_rule_sees_a_group_through_a_helper_and_a_fixture(tmp_path):
    # The rule itself: a test that starts a page through a helper, or a pool through a fixture, is in the group.
    source = '''
import pytest
def _page():
    return AppTest.from_file("app.py")
@pytest.fixture
def readers():
    return ReaderPool(settings=None)
def test_helper():
    _page()
@pytest.mark.pool
def test_fixture_marked(readers):
    pass
def test_fixture_unmarked(readers):
    pass
'''
    path = tmp_path / "test_probe.py"
    path.write_text(source)
    modules = {"test_probe": _Module(path)}
    found = {name: {g for g, p in GROUPS.items() if p.search(_closure(modules, "test_probe", name)[0])
                    and g not in _closure(modules, "test_probe", name)[1]}
             for name in ("test_helper", "test_fixture_marked", "test_fixture_unmarked")}
    assert found == {"test_helper": {"apptest"}, "test_fixture_marked": set(), "test_fixture_unmarked": {"pool"}}

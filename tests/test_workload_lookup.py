"""A module's own workloads: ``WORKLOADS["<module>.<name>"]`` finds them by importing that module,
refuses names outside ``lab.`` without importing anything, and iterating lists the built-in ones."""

from __future__ import annotations

import sys
import types

import pytest

from lab.core.config import ConfigError, RunConfig
from lab.core.workloads import WORKLOADS, Rows, Workload
from lab.core.workloads.host import build_row_loop, row_bytes, row_flops


@pytest.fixture
def own_module(monkeypatch):
    module = types.ModuleType("lab.own_workloads_for_test")
    module.WORKLOADS = (Workload(name="lab.own_workloads_for_test.rows", title="own rows", formula="x",
                                 build=build_row_loop, estimate_bytes=row_bytes, flops=row_flops, sizes=Rows),)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_a_modules_own_workload_is_found_by_its_qualified_name(own_module):
    name = "lab.own_workloads_for_test.rows"
    assert WORKLOADS[name] is own_module.WORKLOADS[0]
    assert name in WORKLOADS and name not in list(WORKLOADS)
    config = RunConfig(workload=name, m=4, k=8, n=1, device="cpu")
    assert config.estimated_bytes == row_bytes(config)


def test_names_it_does_not_know_are_refused(own_module):
    for name in ("lab.own_workloads_for_test.other", "lab.no_such_module.rows", "os.path.join", "Lab.x.y", "rows"):
        assert name not in WORKLOADS
        with pytest.raises(ConfigError, match="unknown workload"):
            RunConfig(workload=name, device="cpu")


def test_iterating_lists_the_builtin_workloads_only():
    names = list(WORKLOADS)
    assert names and all("." not in n for n in names)
    assert all(WORKLOADS[n].name == n for n in names)


def test_the_form_offers_every_lessons_workload_so_fill_the_form_can_show_it():
    from lab.lessons import LESSONS
    from ui.controls import WORKLOAD_CHOICES

    wanted = {r.gpu.workload for lesson in LESSONS.values() for r in lesson.runs}
    wanted |= {r.cpu.workload for lesson in LESSONS.values() for r in lesson.runs if r.cpu is not None}
    assert wanted <= set(WORKLOAD_CHOICES) and set(WORKLOADS) <= set(WORKLOAD_CHOICES)

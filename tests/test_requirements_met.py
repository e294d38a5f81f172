"""scripts/requirements_met.py: scripts/test.sh skips pip only when every pin is installed as pinned."""

from __future__ import annotations

import importlib.util
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("requirements_met", ROOT / "scripts" / "requirements_met.py")
rm = importlib.util.module_from_spec(_spec)
sys.modules["requirements_met"] = rm
_spec.loader.exec_module(rm)


def test_installed_pins_are_met_and_anything_else_is_not(tmp_path):
    pytest_version = metadata.version("pytest")
    base = metadata.version("torch").split("+")[0]  # 2.13.0+cpu here: a pin without the label is met
    (tmp_path / "base.txt").write_text(f"# a comment\n\ntorch=={base}\n")
    (tmp_path / "dev.txt").write_text(f"-r base.txt\npytest=={pytest_version}  # the runner\n")
    assert rm.main([str(tmp_path / "dev.txt")]) == 0
    missing = ["pytest==0.0.1", "no-such-package-here==1.0", "pytest>=1", f"torch=={base}+otherlabel"]
    (tmp_path / "more.txt").write_text("-r dev.txt\n" + "\n".join(missing) + "\n")
    assert rm.unmet(rm.requirements(tmp_path / "more.txt")) == missing
    assert rm.main([str(tmp_path / "more.txt")]) == 1


def test_the_repositorys_requirements_are_all_pinned():
    """An unpinned line is never "met", so pip would run on every test run: keep them pinned."""
    lines = rm.requirements(ROOT / "requirements-dev.txt")
    assert lines and all(rm._PINNED.match(line) for line in lines), lines

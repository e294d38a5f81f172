"""``profiler-lab serve [DIR ...]``: the page, as ``streamlit run app.py`` starts it, on trace directories.

The installed package holds ``app.py`` beside ``lab/`` and ``ui/`` (pyproject.toml's
``py-modules``), so the page's script is found next to this package, in a checkout and in
site-packages alike. Streamlit reads ``.streamlit/config.toml`` from the current directory,
which an installed lab does not have: its settings travel as ``--section.key=value`` flags
instead (``STREAMLIT_OPTIONS``, equal to the checkout's file: tests/test_install.py checks).
Each DIR becomes ``PROFILER_LAB_TRACE_DIR`` (absolute, ``os.pathsep``-separated): the host's
choice of directories, which the page lists (``lab.tracedir``). Nothing here imports streamlit;
the page runs in the process this one becomes (``os.execve``), so stopping it stops the page.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["STREAMLIT_OPTIONS", "TRACE_DIR_ENV", "ServeError", "app_path", "serve", "serve_command"]

TRACE_DIR_ENV = "PROFILER_LAB_TRACE_DIR"
# The checkout's .streamlit/config.toml, as flags (why: see the module doc).
STREAMLIT_OPTIONS: dict[str, object] = {
    "server.headless": True,
    "server.maxUploadSize": 200,
    "server.enableXsrfProtection": True,
    "server.runOnSave": False,
    "server.fileWatcherType": "none",
    "runner.postScriptGC": False,  # 0.43 s after every page run otherwise (.streamlit/config.toml says why)
    "browser.gatherUsageStats": False,
    "client.toolbarMode": "minimal",
    "theme.base": "light",
    "theme.primaryColor": "#3b6ea5",
    "theme.backgroundColor": "#fbfbfa",
    "theme.secondaryBackgroundColor": "#f0f2f5",
    "theme.textColor": "#1f2933",
    "theme.font": "sans serif",
}


class ServeError(ValueError):
    """``serve`` cannot start the page as asked; the message says what to change."""


def app_path() -> Path:
    """The page's script: ``app.py`` beside the ``lab`` package (checkout or site-packages)."""
    path = Path(__file__).resolve().parent.parent / "app.py"
    if not path.is_file():
        raise ServeError(f"the page's script is missing ({path}): reinstall profiler-lab (pip install .)")
    return path


def _flag(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def serve_command(dirs: Sequence[str], *, port: int | None = None, address: str | None = None,
                  environ: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of the page's process: ``python -m streamlit run app.py`` with the lab's
    options, and each of ``dirs`` (checked: existing directories) in ``PROFILER_LAB_TRACE_DIR``."""
    env = dict(os.environ if environ is None else environ)
    if dirs:
        resolved = []
        for d in dirs:
            path = Path(d).expanduser()
            if not path.is_dir():
                raise ServeError(f"{d} is not a directory: give the folder torch.profiler's "
                                 "tensorboard_trace_handler writes to (or its parent)")
            resolved.append(str(path.resolve()))
        env[TRACE_DIR_ENV] = os.pathsep.join(resolved)
    argv = [sys.executable, "-m", "streamlit", "run", str(app_path())]
    options = dict(STREAMLIT_OPTIONS)
    if port is not None:
        options["server.port"] = port
    if address is not None:
        options["server.address"] = address
    argv += [f"--{key}={_flag(value)}" for key, value in options.items()]
    return argv, env


def serve(dirs: Sequence[str], *, port: int | None = None, address: str | None = None) -> int:
    """Become the page's server (never returns unless the exec fails)."""
    argv, env = serve_command(dirs, port=port, address=address)
    os.execve(argv[0], argv, env)
    return 1  # pragma: no cover - execve returned: it raises instead

"""What the browser test and the load test share: the system Chromium, a real
`streamlit run app.py` in its own process group, and the page's "script run is over" check.

Imported by ``bench/load_test.py`` (bench/ is on ``sys.path`` when a bench script runs) and by
``tests/test_browser.py`` / ``tests/test_load_quick.py`` (which put bench/ on ``sys.path``).
Chromium comes from the system (/usr/bin/chromium, Debian's package); Playwright never
downloads a browser here.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "CHROMIUM", "CHROMIUM_ARGS", "IDLE_JS", "IN_CI", "ROOT", "SERVER_START_S", "ServerFailed", "browser_missing",
    "free_port", "health", "require_browser", "start_server", "stop_server", "streamlit_server", "wait_healthy",
    "wait_page_idle",
]

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking"]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Generous on 2 shared cores: streamlit imports torch and the app before it answers.
SERVER_START_S = 180
# Seconds streamlit gets to stop after SIGTERM (its atexit stops the profiling workers).
STOP_GRACE_S = 30

# True once the page's script run is over and every widget is drawn: no loading skeletons
# (widget code loads lazily, slowly on a busy machine).
IDLE_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return app && app.dataset.testScriptState === "notRunning"
        && !document.querySelector('[data-testid="stSkeleton"]');
}"""


def wait_page_idle(page, timeout_s: float) -> None:
    """Playwright's sync API: until the script run is over and every widget is drawn (IDLE_JS),
    with a short settle before and after (a rerun a click set off may not have started yet)."""
    page.wait_for_timeout(300)
    page.wait_for_function(IDLE_JS, timeout=timeout_s * 1000)
    page.wait_for_timeout(300)


class ServerFailed(RuntimeError):
    """streamlit exited, or did not answer its health check in time (the message has its log's tail)."""


def browser_missing() -> str | None:
    """Why a real-browser check cannot run here (Chromium or Playwright missing), or None."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (apt-get install chromium; Playwright never downloads one here)"
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -r requirements-dev.txt)"
    return None


def require_browser() -> None:
    """In a test: skip with the reason when the browser is missing; in CI (CI=true) fail instead,
    so that the browser checks cannot silently disappear there."""
    import pytest

    reason = browser_missing()
    if reason is None:
        return
    if IN_CI:
        pytest.fail(f"CI=true but {reason}; .ci/run installs it")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, log: Path, env: dict[str, str] | None = None, script: str = "app.py") -> subprocess.Popen:
    """`streamlit run app.py` (or ``script``) in its own process group (its profiling workers go
    with it); ``env`` adds variables (e.g. PROFILER_LAB_PASSCODE) to this process's environment."""
    env = {**os.environ, **(env or {}), "KINETO_LOG_LEVEL": "6", "PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port),
             "--server.headless", "true", "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def health(url: str) -> str | None:
    """The body of GET /_stcore/health ("ok" when the server is up), or None."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=10) as response:
            return response.read().decode().strip() if response.status == 200 else None
    except OSError:
        return None


def wait_healthy(url: str, process: subprocess.Popen, log: Path, timeout_s: float = SERVER_START_S) -> None:
    """Until the server answers "ok"; ServerFailed if it exits or stays silent for ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerFailed(f"streamlit exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        if health(url) == "ok":
            return
        time.sleep(0.5)
    raise ServerFailed(f"streamlit did not answer within {timeout_s:g} s:\n{log.read_text()[-3000:]}")


def stop_server(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL whatever is left of the process group we created."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # streamlit stops; the service's atexit stops workers
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    try:  # a worker that did not exit
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if process.poll() is None:
        process.wait(timeout=10)


@contextmanager
def streamlit_server(log: Path, port: int | None = None, env: dict[str, str] | None = None,
                     script: str = "app.py") -> Iterator[tuple[str, subprocess.Popen]]:
    """A healthy server on ``port`` (default: a free one), with ``env`` added to its environment:
    yields (url, process); stopped whatever happens."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    process = start_server(port, log, env, script)
    try:
        wait_healthy(url, process, log)
        yield url, process
    finally:
        stop_server(process)

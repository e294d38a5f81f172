"""The page's access through AppTest: the sign-in page and nothing else, the host role, the rate
limits (the N+1th run refused with its wait, the next window works: the page's rate clock is
stepped, never slept on), and a login=oidc host without a provider told what to put in
secrets.toml. Each test sets its PROFILER_LAB_* variables before its first page run (the page
keys its settings by them) and gets a session of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from lab.access import AUTH_KEYS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TIMEOUT_S = 300  # a script run that profiles: the worker may still be importing torch on 2 busy cores
PASSCODE, TOKEN = "blue-otter-42", "host-tok-XYZ"
SERVER_STATUS = "Server status (for the host)"
OPEN_ROOM = "Open a room (instructor)"
SMALL_TRACE = ROOT / "tests" / "data" / "matmul_add_4096_bf16.json.gz"

pytestmark = [pytest.mark.apptest, pytest.mark.timeout(900)]


@pytest.fixture(autouse=True)
def _restore_error_details():
    """A hosted page sets client.showErrorDetails to "none" for the server (this process)."""
    from streamlit import config

    before = config.get_option("client.showErrorDetails")
    yield
    config.set_option("client.showErrorDetails", before)


def page(monkeypatch, **env: str) -> AppTest:
    for key, value in env.items():
        monkeypatch.setenv(f"PROFILER_LAB_{key.upper()}", value)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def plain(markdown: str) -> str:
    return re.sub(r"\\(.)", r"\1", markdown)


def errors(at) -> list[str]:
    return [plain(e.value) for e in at.error]


def every_text(at) -> str:
    """Every string the page sent: element values, labels, the expanders' titles."""
    out = []
    for node in (*_walk(at.main), *_walk(at.sidebar)):
        for attr in ("value", "label", "body"):
            value = getattr(node, attr, None)
            if isinstance(value, str):
                out.append(value)
    return "\n".join(out)


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def expanders(at) -> list[str]:
    return [e.label for e in at.expander]


def sign_in(at, text: str, key: str = "access_passcode_box") -> None:
    at.text_input(key=key).input(text)
    (button,) = [b for b in at.button if b.label in ("Sign in", "Sign in as host")]
    button.click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]


# ------------------------------------------------------------------------------ sign-in and host


def test_passcode_page_shows_nothing_else_until_the_passcode(monkeypatch):
    at = page(monkeypatch, passcode=PASSCODE, host_token=TOKEN)
    # Only the title, the form's password box and its button: no sidebar, no tabs, no status.
    assert [t.value for t in at.title] == ["Profiler Lab"]
    assert [(w.key, w.proto.type) for w in at.text_input] == [("access_passcode_box", 1)]  # TextInput.PASSWORD
    assert [b.label for b in at.button] == ["Sign in"]
    assert len(list(_walk(at.sidebar))) == 1 and not at.tabs and not at.selectbox and not at.expander

    sign_in(at, "blue-otter-41")
    assert errors(at) == ["That is not the passcode."]  # no detail: same words for any wrong entry
    assert not at.tabs and not at.sidebar.children

    sign_in(at, PASSCODE)
    assert errors(at) == []
    assert [t.label for t in at.tabs][:1] == ["Summary"]
    assert SERVER_STATUS not in expanders(at)  # an attendee
    assert "Host sign-in" in expanders(at)
    text = every_text(at)
    assert PASSCODE not in text and TOKEN not in text and "workers alive" not in text
    from streamlit import config

    assert config.get_option("client.showErrorDetails") == "none"  # no tracebacks with host paths

    # The host token, in the sidebar's form (never a URL): the status appears, secrets as "set".
    sign_in(at, "wrong", key="access_host_token_box")
    assert errors(at) == ["That is not the host token."] and SERVER_STATUS not in expanders(at)
    sign_in(at, TOKEN, key="access_host_token_box")
    assert SERVER_STATUS in expanders(at) and "Host sign-in" not in expanders(at)
    status = "\n".join(t.value for t in at.sidebar.text)
    assert "workers alive" in status
    assert "PROFILER_LAB_PASSCODE=set" in status and "PROFILER_LAB_HOST_TOKEN=set" in status
    text = every_text(at)
    assert "workers alive" in text  # every_text sees the sidebar's status: its "not in" checks can fail
    assert PASSCODE not in text and TOKEN not in text


def test_the_host_token_on_the_sign_in_page_signs_the_host_in(monkeypatch):
    at = page(monkeypatch, passcode=PASSCODE, host_token=TOKEN)
    sign_in(at, TOKEN)
    assert [t.label for t in at.tabs][:1] == ["Summary"] and SERVER_STATUS in expanders(at)
    assert OPEN_ROOM in [b.label for b in at.button]  # the host opens rooms (the instructor view)


def test_a_passcode_in_secrets_toml_counts_as_the_variable(monkeypatch):
    monkeypatch.delenv("PROFILER_LAB_PASSCODE", raising=False)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.secrets["PROFILER_LAB_PASSCODE"] = PASSCODE  # a root-level entry of .streamlit/secrets.toml
    at.run()
    assert [b.label for b in at.button] == ["Sign in"] and not at.tabs
    sign_in(at, PASSCODE)
    assert [t.label for t in at.tabs][:1] == ["Summary"]
    assert SERVER_STATUS not in expanders(at)  # signed in, but no host token given: an attendee
    assert OPEN_ROOM not in [b.label for b in at.button]  # and attendees join rooms, never open one


def test_sign_in_attempts_are_limited(monkeypatch):
    at = page(monkeypatch, passcode=PASSCODE)
    for _ in range(5):  # lab.access.SIGN_IN_ATTEMPTS_PER_MIN
        sign_in(at, "guess")
        assert errors(at) == ["That is not the passcode."]
    sign_in(at, PASSCODE)  # even the right one waits out the minute
    (refusal,) = errors(at)
    assert re.fullmatch(r"You have made 5 sign-in attempts in the last minute; try again in \d+ s\.", refusal)
    assert not at.tabs


def test_oidc_hosts_list(monkeypatch):
    auth = dict.fromkeys(AUTH_KEYS, "x") | {"redirect_uri": "http://localhost:8501/oauth2callback"}
    monkeypatch.setenv("PROFILER_LAB_LOGIN", "oidc")
    monkeypatch.setenv("PROFILER_LAB_HOSTS", "ana@lab.org")
    monkeypatch.setattr("ui.access.authlib_installed", lambda: True)  # st.login is never called here
    for user, host in (({"is_logged_in": True, "email": "ana@lab.org", "email_verified": True}, True),
                       ({"is_logged_in": True, "email": "bo@lab.org", "email_verified": True}, False)):
        at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
        at.secrets["auth"] = auth
        at.user = user
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert (SERVER_STATUS in expanders(at)) is host
        assert "Sign out" in [b.label for b in at.button]
    stranger = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    stranger.secrets["auth"] = auth
    stranger.user = {"is_logged_in": False}
    stranger.run()
    assert [b.label for b in stranger.button] == ["Sign in"] and not stranger.tabs


def test_login_oidc_without_a_provider_fails_at_start_saying_what_to_put_in_secrets_toml(monkeypatch):
    at = page(monkeypatch, login="oidc")
    (message,) = errors(at)
    assert "PROFILER_LAB_LOGIN=oidc" in message and ".streamlit/secrets.toml has no [auth] section" in message
    (toml,) = at.code
    assert toml.value.startswith("[auth]\n")
    assert [line.split(" = ")[0] for line in toml.value.splitlines()[1:]] == list(AUTH_KEYS)
    assert not at.tabs and not at.button and not at.text_input  # nobody gets in, nothing runs


# ------------------------------------------------------------------------------ rate limits


FORM = {"cfg_device": "cpu", "cfg_exact": "", "cfg_step_label": "limits", "cfg_dtype": "float32",
        "cfg_active": 1, "cfg_repeat": 1, "cfg_m": 16, "cfg_k": 16, "cfg_n": 16}


def submit(at) -> None:
    for key, value in FORM.items():
        (widget,) = [w for kind in ("select_slider", "text_input", "radio", "number_input", "selectbox")
                     for w in at.get(kind) if w.key == key]
        widget.set_value(value)
    next(b for b in at.form_submit_button if b.label == "Run profile").click()  # not the own-trace form
    at.run()
    assert not at.exception, [e.value for e in at.exception]


def test_runs_per_minute_refuse_the_next_with_its_wait_and_the_next_window_works(monkeypatch):
    clock = {"now": 5000.0}
    monkeypatch.setattr("ui.access.limiter_clock", lambda: clock["now"])
    at = page(monkeypatch, runs_per_min="2")
    submit(at)  # at 5000
    clock["now"] = 5012.0
    submit(at)  # at 5012
    assert len(at.session_state["runs"]) == 2 and errors(at) == []
    clock["now"] = 5037.5
    submit(at)
    # The first run leaves the window at 5060: 22.5 s from now, said as 23 s.
    assert errors(at) == ["You have started 2 runs in the last minute; try again in 23 s."]
    assert len(at.session_state["runs"]) == 2  # refused before it reached the queue
    clock["now"] = 5060.0
    submit(at)
    assert errors(at) == [] and len(at.session_state["runs"]) == 3
    clock["now"] = 5065.0  # 5012 and 5060 in the window: refused again, until 5072
    submit(at)
    assert errors(at) == ["You have started 2 runs in the last minute; try again in 7 s."]


def test_uploads_per_minute(monkeypatch):
    clock = {"now": 9000.0}
    monkeypatch.setattr("ui.access.limiter_clock", lambda: clock["now"])
    at = page(monkeypatch, uploads_per_min="1")
    at.file_uploader(key="upload").set_value(("one.json.gz", SMALL_TRACE.read_bytes(), "application/gzip"))
    at.run()
    assert errors(at) == [] and at.session_state["subject"].startswith("upload:")
    clock["now"] = 9030.0
    at.file_uploader(key="upload").set_value(("two.json", b'{"traceEvents": []}', "application/json"))
    at.run()
    assert errors(at) == ["You have opened 1 trace in the last minute; try again in 30 s."]

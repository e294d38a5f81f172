"""Who may use the page: the sign-in page, the host role, the per-visitor rate limits.

What is decided lives in ``lab/access`` (pure); here are the page's ends of it: reading
``st.secrets`` and ``st.user``, the sign-in page (then ``st.stop()``: nothing else is drawn),
the "Host sign-in" form, and the refusals. Per session, ``st.session_state`` holds whether
this visitor signed in, passed the host token and is the host; never a secret itself.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import time
from collections.abc import Callable

import streamlit as st

from lab.access import (
    SIGN_IN_ATTEMPTS_PER_MIN,
    Identity,
    RateLimiter,
    Visitor,
    check_login_setup,
    read_failure_text,
    run_failure_text,
    secret_matches,
)
from lab.access import is_host as host_by
from lab.core import ENV_PREFIX, HostSettings, SettingsError, host_environment
from lab.read import ReadFailed
from lab.run import RunFailed
from ui import messages, state

__all__ = ["authlib_installed", "checked_settings", "environment", "gate", "host_sign_in", "is_host", "limiter_clock",
           "read_failure", "refusal", "run_failure"]

_LOG = logging.getLogger(__name__)
_SIGNED_IN = "_access_signed_in"  # session_state: passed the passcode (or the host token) on the sign-in page
_TOKEN_PASSED = "_access_host_token"  # session_state: entered the host token (True; the token is not kept)
_HOST = "_access_is_host"  # session_state: this run's role, set by gate()
_IDENTITY = "_access_identity"  # session_state: the OIDC identity's key for the rate limits
WRONG_PASSCODE = "That is not the passcode."  # the same words whatever was typed: no detail
WRONG_TOKEN = "That is not the host token."
TITLE = "Profiler Lab"


def limiter_clock() -> float:
    """The rate limits' clock. A seam: a test replaces it to step over a window without sleeping."""
    return time.monotonic()


@functools.cache  # checked on every page run (checked_settings); the answer is the process's
def authlib_installed() -> bool:
    """Whether st.login can work here (it needs Authlib); a seam for tests, like the clock."""
    return importlib.util.find_spec("authlib") is not None


def environment() -> tuple[tuple[str, str], ...]:
    """The ``PROFILER_LAB_*`` settings: the environment's, with the root-level entries of
    ``.streamlit/secrets.toml`` over them (as Streamlit itself exports those to the environment)."""
    merged = dict(host_environment())
    for key, value in _secrets().items():
        if key.startswith(ENV_PREFIX) and isinstance(value, (str, int, float)) and not isinstance(value, bool):
            merged[key] = str(value)
    return tuple(sorted(merged.items()))


def checked_settings(get_settings: Callable[[tuple[tuple[str, str], ...]], HostSettings]) -> HostSettings:
    """The host's settings (``get_settings(environment())``), or, when they cannot work, a page
    that says what to set and ``st.stop()``: before any worker starts or any visitor gets in."""
    try:
        settings = get_settings(environment())
        auth = _secrets().get("auth")
        check_login_setup(settings, auth=auth if isinstance(auth, dict) else None,
                          authlib_installed=authlib_installed())
    except SettingsError as exc:
        _LOG.error("Profiler Lab cannot start: %s", exc)  # names variables and keys, never their values
        # "what is wrong\n\n[auth] …toml…\n\nthe other way": the toml as a block to copy.
        intro, *example = str(exc).split("\n\n")
        st.title(TITLE)
        messages.error(intro)
        if example:
            st.code(example[0], language="toml")
            st.caption(messages.md_escape(" ".join(example[1:])))
        st.stop()
    if not settings.open_access:
        # An uncaught exception's traceback names the host's paths: on a hosted lab the page says
        # only that an error happened (Streamlit logs the whole of it to the server's terminal).
        # A server-wide option, the same for every session, so set before anyone is let in.
        st.set_option("client.showErrorDetails", "none")
    return settings


def gate(settings: HostSettings, limiter: RateLimiter) -> None:
    """Let this visitor in, or draw only the sign-in page and stop the script; set their role."""
    identity = None
    if settings.login_mode == "passcode" and not st.session_state.get(_SIGNED_IN):
        _passcode_page(settings, limiter)
    if settings.login_mode == "oidc":
        identity = _oidc_identity()
        if identity is None:
            _oidc_page()
    st.session_state[_IDENTITY] = identity.key if identity else None
    st.session_state[_HOST] = host_by(settings, token_passed=bool(st.session_state.get(_TOKEN_PASSED)),
                                      identity=identity)


def is_host() -> bool:
    """Whether this visitor is the host (``gate`` decided it this page run): only the host sees
    Server status, error details and, later, the instructor view."""
    return st.session_state.get(_HOST) is True


def host_sign_in(settings: HostSettings, limiter: RateLimiter) -> None:
    """The sidebar's "Host sign-in" (a form: the token never goes into a URL), for a visitor who
    is not the host while a host token is set; and "Sign out" when signed in with OIDC."""
    if settings.login_mode == "oidc" and st.session_state.get(_IDENTITY):
        st.button("Sign out", key="access_sign_out", on_click=st.logout)
    if is_host() or not settings.host_token:
        return
    with st.expander("Host sign-in", expanded=False):
        with st.form("host_sign_in_form", clear_on_submit=True, border=False):
            token = st.text_input("Host token", type="password", key="access_host_token_box")
            clicked = st.form_submit_button("Sign in as host")
        if clicked:
            if (why := refusal("sign_in", settings, limiter, limit=SIGN_IN_ATTEMPTS_PER_MIN)) is not None:
                messages.error(why)
            elif secret_matches(token, settings.host_token):
                st.session_state[_TOKEN_PASSED] = True
                st.rerun()
            else:
                messages.error(WRONG_TOKEN)


def refusal(action: str, settings: HostSettings, limiter: RateLimiter, *, limit: int | None = None) -> str | None:
    """None, counting one ``action`` ("run", "upload", "sign_in") for this visitor; or, past the
    host's limit per minute, the words that say when to try again (nothing counted)."""
    if limit is None:
        limit = {"run": settings.runs_per_min, "upload": settings.uploads_per_min}[action]
    visitor = Visitor(session=state.owner(), identity=st.session_state.get(_IDENTITY))
    decision = limiter.allow(action, visitor, limit=limit, now=limiter_clock())
    return None if decision.allowed else decision.refusal()


def run_failure(error: RunFailed) -> str:
    """A failed run's message for this visitor: the details for the host, plain words for attendees."""
    return run_failure_text(error, host=is_host())


def read_failure(error: ReadFailed) -> str:
    return read_failure_text(error, host=is_host())


# ------------------------------------------------------------------------------ the sign-in pages


def _passcode_page(settings: HostSettings, limiter: RateLimiter) -> None:
    """Title, one password box in a form, a button; nothing else of the page, then stop."""
    st.title(TITLE)
    with st.form("sign_in_form", clear_on_submit=True):
        entered = st.text_input("Workshop passcode", type="password", key="access_passcode_box")
        clicked = st.form_submit_button("Sign in")
    if clicked:
        if (why := refusal("sign_in", settings, limiter, limit=SIGN_IN_ATTEMPTS_PER_MIN)) is not None:
            messages.error(why)
        elif secret_matches(entered, settings.passcode) or secret_matches(entered, settings.host_token):
            st.session_state[_SIGNED_IN] = True
            # The host may enter the host token here instead of the passcode.
            st.session_state[_TOKEN_PASSED] = secret_matches(entered, settings.host_token)
            st.rerun()
        else:
            messages.error(WRONG_PASSCODE)
    st.stop()


def _oidc_page() -> None:
    st.title(TITLE)
    st.caption("Sign in with your organisation's account to use the lab.")
    st.button("Sign in", key="access_oidc_sign_in", type="primary", on_click=st.login)
    st.stop()


def _oidc_identity() -> Identity | None:
    """Who st.user says is signed in, or None. (AppTest's default user has an email and no
    ``is_logged_in``: only ``is_logged_in`` counts.)"""
    user = st.user.to_dict()
    if user.get("is_logged_in") is not True:
        return None
    verified = user.get("email_verified")
    return Identity(email=_text(user.get("email")), subject=_text(user.get("sub")),
                    email_verified=None if verified is None else verified in (True, "true", "True"))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _secrets() -> dict:
    """``st.secrets`` as a dict ({} without a secrets.toml)."""
    try:
        return st.secrets.to_dict() if st.secrets.load_if_toml_exists() else {}
    except Exception:  # noqa: BLE001 - an unreadable secrets.toml: Streamlit logs why at start
        return {}

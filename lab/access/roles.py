"""Who may use the page and who is the host: the passcode and host-token checks, the host
list, the OIDC setup check, and failure messages worded for attendees.

Pure functions of the host's settings and what the visitor entered or who the provider says
they are; the page (``ui/access.py``) reads ``st.secrets`` and ``st.user`` and passes them in
as plain data. Nothing here keeps or returns a secret.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from lab.core.settings import ENV_PREFIX, HostSettings, SettingsError
from lab.read.protocol import ReadFailed, ReadFailureKind
from lab.run.protocol import FailureKind, RunFailed

__all__ = [
    "AUTH_KEYS", "SECRETS_TOML_EXAMPLE", "SIGN_IN_ATTEMPTS_PER_MIN", "Identity", "check_login_setup", "is_host",
    "read_failure_text", "run_failure_text", "secret_matches",
]  # fmt: skip

# Wrong passcodes one session may try in a minute (lab.access.RATE_WINDOW_S): a person who
# mistypes needs two or three; 5 a minute makes guessing a 4-word passcode take centuries.
# A new tab is a new session: this slows guessing by hand, it is no wall (OIDC is).
SIGN_IN_ATTEMPTS_PER_MIN = 5
# What st.login() (no provider argument) reads from .streamlit/secrets.toml's [auth] section.
AUTH_KEYS = ("redirect_uri", "cookie_secret", "client_id", "client_secret", "server_metadata_url")
SECRETS_TOML_EXAMPLE = """\
[auth]
redirect_uri = "https://lab.example.org/oauth2callback"   # this server's URL + /oauth2callback
cookie_secret = "paste the output of: python -c 'import secrets; print(secrets.token_hex(32))'"
client_id = "from your provider's app registration"
client_secret = "from your provider's app registration"
server_metadata_url = "https://accounts.google.com/.well-known/openid-configuration"
"""
# Failures whose message is already for the visitor (it says what to change, and nothing of
# the host's); the others (a crash, an unexpected exception's text) are the host's to read.
_RUN_KINDS_FOR_ATTENDEES = frozenset({FailureKind.CONFIG, FailureKind.TIMEOUT, FailureKind.CANCELLED,
                                      FailureKind.SHUTDOWN})
# A worker's expected failures (ConfigError, RunError: "out of memory … choose smaller sizes").
_RUN_ERRORS_FOR_ATTENDEES = frozenset({"ConfigError", "RunError"})
_READ_KINDS_FOR_ATTENDEES = frozenset({ReadFailureKind.TRACE, ReadFailureKind.MEMORY, ReadFailureKind.TIMEOUT,
                                       ReadFailureKind.CANCELLED, ReadFailureKind.SHUTDOWN,
                                       ReadFailureKind.TOO_BIG_TO_KEEP})


@dataclass(frozen=True, kw_only=True)
class Identity:
    """A visitor signed in with the OIDC provider, as ``st.user`` gave it."""

    email: str | None = None
    email_verified: bool | None = None  # None: the provider did not say
    subject: str | None = None  # the provider's "sub": stable, unique per provider

    @property
    def key(self) -> str | None:
        """What the rate limits count this person by (all their tabs share it)."""
        return self.subject or (self.email.lower() if self.email else None)

    def names(self) -> frozenset[str]:
        """The names a host list may use for this person: the sub, and the email unless the
        provider said it is not verified (anyone can type an unverified address)."""
        found = {self.subject.lower()} if self.subject else set()
        if self.email and self.email_verified is not False:
            found.add(self.email.lower())
        return frozenset(found)


def secret_matches(entered: str, secret: str) -> bool:
    """``entered`` is ``secret`` (surrounding spaces ignored); never true for an unset secret.

    Compared in constant time on SHA-256 digests (``hmac.compare_digest``), so neither the
    time taken nor a length difference tells a guesser how close they were.
    """
    if not secret:
        return False

    def digest(text: str) -> bytes:
        return hashlib.sha256(text.strip().encode()).digest()

    return hmac.compare_digest(digest(entered), digest(secret))


def is_host(settings: HostSettings, *, token_passed: bool = False, identity: Identity | None = None) -> bool:
    """The host: whoever entered the host token, or an OIDC identity in the host list; with
    nothing set (``open_access``, one's own box) every visitor, as before there were hosts."""
    if settings.open_access:
        return True
    if token_passed and settings.host_token:
        return True
    return identity is not None and bool(identity.names() & set(settings.hosts))


def check_login_setup(settings: HostSettings, *, auth: Mapping[str, object] | None, authlib_installed: bool) -> None:
    """For ``login=oidc``: raise SettingsError, saying what to put in secrets.toml, unless its
    ``[auth]`` section (``auth``) has every key st.login needs and Authlib is installed."""
    if settings.login_mode != "oidc":
        return
    missing = [key for key in AUTH_KEYS if not (auth or {}).get(key)]
    if missing:
        where = "has no [auth] section" if not auth else f"[auth] lacks {', '.join(missing)}"
        raise SettingsError(
            f"{ENV_PREFIX}LOGIN=oidc signs visitors in with an OpenID Connect provider, and .streamlit/secrets.toml "
            f"{where}. Put this in .streamlit/secrets.toml (every key: {', '.join(AUTH_KEYS)}), register the "
            f"redirect_uri with your provider, and restart the server:\n\n{SECRETS_TOML_EXAMPLE}\n"
            f"Or sign visitors in with a shared passcode instead: {ENV_PREFIX}PASSCODE=… (and no {ENV_PREFIX}LOGIN).")
    if not authlib_installed:
        raise SettingsError(f"{ENV_PREFIX}LOGIN=oidc uses Streamlit's st.login, which needs Authlib: "
                            "pip install 'Authlib>=1.3.2' (or streamlit[auth]), then restart the server.")


def run_failure_text(error: RunFailed, *, host: bool) -> str:
    """A failed run's message: the whole text for the host; for an attendee, the text when it
    is already theirs (a refusal, a timeout, out of memory), else what happened in their words."""
    if host or error.kind in _RUN_KINDS_FOR_ATTENDEES or (
            error.kind == FailureKind.RUN and error.error_type in _RUN_ERRORS_FOR_ATTENDEES):
        return error.message
    if error.kind == FailureKind.CRASH:
        return ("The profiling worker stopped while running your profile; it has been restarted. Run it again, "
                "or choose a smaller size if it happens twice.")
    return ("Your run failed inside the profiling worker, which has been restarted. Run it again; if it fails "
            "twice, tell the host (they can see the error).")


def read_failure_text(error: ReadFailed, *, host: bool) -> str:
    """A failed read's message, on the same rule as ``run_failure_text``."""
    if host or error.kind in _READ_KINDS_FOR_ATTENDEES:
        return error.message
    if error.kind == ReadFailureKind.CRASH:
        return "the trace reader stopped while reading it; it has been restarted — open the file again"
    return ("the lab could not analyse it; the file may be from an unusual profiler setup (the host can see the "
            "error)")

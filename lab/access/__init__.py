"""Who may use a hosted lab: attendee sign-in, the host role, per-visitor limits.

``roles`` holds the pure checks (the passcode and host token in constant time, the OIDC host
list, the ``[auth]`` setup a ``login=oidc`` host needs, failure messages worded for
attendees); ``limiter`` the per-server sliding-window ``RateLimiter`` (runs and uploads per
minute, per session and per signed-in identity) and its ``RateDecision``. The page reads
``st.secrets``/``st.user`` itself (``ui/access.py``) and passes plain data in.
"""

from lab.access.limiter import RATE_ACTIONS, RATE_WINDOW_S, RateDecision, RateLimiter, Visitor
from lab.access.roles import (
    AUTH_KEYS,
    SECRETS_TOML_EXAMPLE,
    SIGN_IN_ATTEMPTS_PER_MIN,
    Identity,
    check_login_setup,
    is_host,
    read_failure_text,
    run_failure_text,
    secret_matches,
)

__all__ = [
    "AUTH_KEYS", "RATE_ACTIONS", "RATE_WINDOW_S", "SECRETS_TOML_EXAMPLE", "SIGN_IN_ATTEMPTS_PER_MIN", "Identity",
    "RateDecision", "RateLimiter", "Visitor", "check_login_setup", "is_host", "read_failure_text",
    "run_failure_text", "secret_matches",
]  # fmt: skip

"""lab/access without a page: the rate limiter's window edges (an injected clock, no sleeps),
the passcode and host checks, the sign-in settings, the OIDC setup check, attendee wording."""

from __future__ import annotations

import random
import threading

import pytest

from lab.access import (
    AUTH_KEYS,
    Identity,
    RateLimiter,
    Visitor,
    check_login_setup,
    is_host,
    read_failure_text,
    run_failure_text,
    secret_matches,
)
from lab.core import HostSettings, SettingsError
from lab.read import ReadFailed, ReadFailureKind
from lab.run import FailureKind, RunFailed

ANA = Visitor(session="s-ana")
BO = Visitor(session="s-bo")


# ------------------------------------------------------------------------------ the limiter


def test_limit_refuses_the_n_plus_first_in_the_window_and_says_when():
    limiter = RateLimiter(window_s=60)
    for at in (100.0, 110.0, 120.0):
        assert limiter.allow("run", ANA, limit=3, now=at).allowed
    refused = limiter.allow("run", ANA, limit=3, now=130.0)
    assert not refused.allowed
    assert (refused.count, refused.limit, refused.retry_after_s) == (3, 3, pytest.approx(30.0))  # 100 + 60 − 130
    assert refused.refusal() == "You have started 3 runs in the last minute; try again in 30 s."
    assert limiter.count("run", ANA, now=130.0) == 3  # a refusal is not counted


def test_window_edges_exactly():
    limiter = RateLimiter(window_s=60)
    assert limiter.allow("run", ANA, limit=1, now=0.0).allowed
    just_before = limiter.allow("run", ANA, limit=1, now=59.75)
    assert not just_before.allowed and just_before.retry_after_s == pytest.approx(0.25)
    assert just_before.wait_s == 1  # rounded up, never "0 s"
    assert limiter.allow("run", ANA, limit=1, now=60.0).allowed  # the event at 0 left at 60 exactly
    assert not limiter.allow("run", ANA, limit=1, now=119.9).allowed
    assert limiter.allow("run", ANA, limit=1, now=120.0).allowed


def test_sliding_never_lets_more_than_limit_into_any_window():
    # Brute force: random arrivals over 10 min; every allowed set checked against every window.
    rng = random.Random(19)
    limiter = RateLimiter(window_s=60)
    times = sorted(rng.uniform(0, 600) for _ in range(400))
    allowed = [t for t in times if limiter.allow("upload", ANA, limit=6, now=t).allowed]
    for t in allowed:
        assert sum(1 for u in allowed if t <= u < t + 60) <= 6
    # and every refusal was right: 6 allowed in the 60 s before it
    refused = sorted(set(times) - set(allowed))
    for t in refused:
        assert sum(1 for u in allowed if t - 60 < u <= t) == 6


def test_sessions_actions_are_counted_apart_and_limit_zero_is_off():
    limiter = RateLimiter(window_s=60)
    assert limiter.allow("run", ANA, limit=1, now=0.0).allowed
    assert limiter.allow("run", BO, limit=1, now=0.0).allowed  # another session
    assert limiter.allow("upload", ANA, limit=1, now=0.0).allowed  # another action
    assert not limiter.allow("run", ANA, limit=1, now=1.0).allowed
    assert all(limiter.allow("run", ANA, limit=0, now=2.0 + i).allowed for i in range(50))
    with pytest.raises(ValueError, match="unknown action"):
        limiter.allow("delete", ANA, limit=1, now=0.0)


def test_an_identity_shares_its_budget_over_tabs():
    limiter = RateLimiter(window_s=60)
    tab1, tab2 = Visitor(session="t1", identity="ana@lab.org"), Visitor(session="t2", identity="ana@lab.org")
    assert limiter.allow("run", tab1, limit=2, now=0.0).allowed
    assert limiter.allow("run", tab2, limit=2, now=10.0).allowed
    refused = limiter.allow("run", Visitor(session="t3", identity="ana@lab.org"), limit=2, now=20.0)
    assert not refused.allowed and refused.by_identity and refused.retry_after_s == pytest.approx(40.0)
    assert refused.refusal() == ("You have started 2 runs in the last minute (in all your tabs together); "
                                 "try again in 40 s.")
    assert limiter.allow("run", Visitor(session="t4", identity="bo@lab.org"), limit=2, now=20.0).allowed


def test_refusal_words_for_one_and_for_uploads():
    limiter = RateLimiter(window_s=60)
    limiter.allow("upload", ANA, limit=1, now=0.0)
    assert limiter.allow("upload", ANA, limit=1, now=36.6).refusal() == (
        "You have opened 1 trace in the last minute; try again in 24 s.")  # 23.4 s, rounded up


def test_idle_keys_are_swept_so_the_state_stays_bounded():
    limiter = RateLimiter(window_s=60)
    for i in range(100):
        limiter.allow("run", Visitor(session=f"s{i}"), limit=5, now=float(i) / 10)
    assert limiter.tracked_keys() == 100
    limiter.allow("run", ANA, limit=5, now=200.0)  # a window later: only the new key is left
    assert limiter.tracked_keys() == 1


def test_concurrent_sessions_never_overrun_the_limit():
    limiter = RateLimiter(window_s=60)
    visitor = Visitor(session="shared-tab", identity="x")
    results: list[bool] = []
    lock = threading.Lock()

    def hammer():
        for _ in range(200):
            ok = limiter.allow("run", visitor, limit=7, now=5.0).allowed
            with lock:
                results.append(ok)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 1600 and sum(results) == 7


# ------------------------------------------------------------------------------ passcode and host


def test_secret_matches_only_the_secret():
    assert secret_matches("blue-otter-42", "blue-otter-42")
    assert secret_matches("  blue-otter-42 ", "blue-otter-42")  # a phone keyboard's trailing space
    for wrong in ("blue-otter-4", "blue-otter-420", "BLUE-OTTER-42", ""):
        assert not secret_matches(wrong, "blue-otter-42")
    assert not secret_matches("", "")  # an unset secret lets nobody in


def test_host_role():
    open_box = HostSettings()
    assert is_host(open_box)  # nothing set: as before, everyone is the host
    workshop = HostSettings(passcode="pc", host_token="tok")
    assert not is_host(workshop)
    assert is_host(workshop, token_passed=True)
    assert not is_host(HostSettings(passcode="pc"), token_passed=True)  # no token set: nobody passed it
    token_only = HostSettings(host_token="tok")  # no sign-in, but a host token: the rest are attendees
    assert not is_host(token_only) and is_host(token_only, token_passed=True)
    oidc = HostSettings(login="oidc", hosts=("ana@lab.org", "sub-123"))
    assert is_host(oidc, identity=Identity(email="Ana@Lab.org", email_verified=True))
    assert is_host(oidc, identity=Identity(email="x@y.z", subject="sub-123"))
    assert not is_host(oidc, identity=Identity(email="ana@lab.org", email_verified=False))  # unverified
    assert not is_host(oidc, identity=Identity(email="bo@lab.org"))
    assert not is_host(oidc)


def test_sign_in_settings_from_the_environment():
    env = {"PROFILER_LAB_PASSCODE": " blue-otter ", "PROFILER_LAB_HOST_TOKEN": "tok",
           "PROFILER_LAB_RUNS_PER_MIN": "3", "PROFILER_LAB_UPLOADS_PER_MIN": "0"}
    s = HostSettings.from_env(env)
    assert (s.login_mode, s.passcode, s.host_token, s.runs_per_min, s.uploads_per_min) == (
        "passcode", "blue-otter", "tok", 3, 0)
    assert HostSettings.from_env({}).login_mode == "off"
    assert HostSettings.from_env({"PROFILER_LAB_PASSCODE": "x", "PROFILER_LAB_LOGIN": "off"}).login_mode == "off"
    oidc = HostSettings.from_env({"PROFILER_LAB_LOGIN": " OIDC", "PROFILER_LAB_HOSTS": "Ana@lab.org, ,sub-1"})
    assert (oidc.login_mode, oidc.hosts) == ("oidc", ("ana@lab.org", "sub-1"))


@pytest.mark.parametrize("env, says", [
    ({"PROFILER_LAB_LOGIN": "sso"}, "is not a sign-in mode; use one of off, passcode, oidc"),
    ({"PROFILER_LAB_LOGIN": "passcode"}, "needs the passcode too: set PROFILER_LAB_PASSCODE"),
    ({"PROFILER_LAB_LOGIN": "oidc", "PROFILER_LAB_PASSCODE": "x"}, "unset one of them"),
    ({"PROFILER_LAB_HOSTS": "ana@lab.org"}, "set PROFILER_LAB_LOGIN=oidc"),
    ({"PROFILER_LAB_RUNS_PER_MIN": "-1"}, "is negative"),
])
def test_sign_in_settings_that_cannot_work_say_what_to_set(env, says):
    with pytest.raises(SettingsError, match=says):
        HostSettings.from_env(env)


def test_secrets_never_shown():
    s = HostSettings(passcode="blue-otter", host_token="tok-XYZ", runs_per_min=4)
    shown = dict(s.shown())
    assert shown["PROFILER_LAB_PASSCODE"] == "set" and shown["PROFILER_LAB_HOST_TOKEN"] == "set"
    assert shown["PROFILER_LAB_LOGIN"] == "passcode" and shown["PROFILER_LAB_RUNS_PER_MIN"] == "4"
    assert dict(HostSettings().shown())["PROFILER_LAB_HOST_TOKEN"] == "not set"
    assert dict(HostSettings(login="oidc", hosts=("a@b.c",)).shown())["PROFILER_LAB_HOSTS"] == "1 listed"
    for text in (repr(s), str(s), " ".join(v for _, v in s.shown())):
        assert "blue-otter" not in text and "tok-XYZ" not in text


# ------------------------------------------------------------------------------ OIDC setup


def test_oidc_without_auth_says_what_to_put_in_secrets_toml():
    oidc = HostSettings(login="oidc")
    with pytest.raises(SettingsError) as no_section:
        check_login_setup(oidc, auth=None, authlib_installed=True)
    text = str(no_section.value)
    assert ".streamlit/secrets.toml has no [auth] section" in text
    assert all(f"\n{key} = " in text for key in AUTH_KEYS)  # the keys, as lines of a toml to paste
    partial = dict.fromkeys(AUTH_KEYS, "x") | {"client_secret": ""}
    with pytest.raises(SettingsError, match=r"\[auth\] lacks client_secret"):
        check_login_setup(oidc, auth=partial, authlib_installed=True)
    with pytest.raises(SettingsError, match="needs Authlib"):
        check_login_setup(oidc, auth=dict.fromkeys(AUTH_KEYS, "x"), authlib_installed=False)
    check_login_setup(oidc, auth=dict.fromkeys(AUTH_KEYS, "x"), authlib_installed=True)
    check_login_setup(HostSettings(passcode="p"), auth=None, authlib_installed=False)  # not oidc: nothing needed


# ------------------------------------------------------------------------------ attendee wording


def test_failures_show_details_to_the_host_only():
    leak = "OSError: [Errno 2] /home/host/.cache/torch/kernels: No such file"
    unexpected = RunFailed(leak, kind=FailureKind.RUN, error_type="OSError")
    assert run_failure_text(unexpected, host=True) == leak
    attendee = run_failure_text(unexpected, host=False)
    assert "/home/host" not in attendee and "OSError" not in attendee and "Run it again" in attendee
    crash = RunFailed("the profiling worker crashed (killed by SIGKILL) while running …", kind=FailureKind.CRASH)
    assert "SIGKILL" not in run_failure_text(crash, host=False) and "restarted" in run_failure_text(crash, host=False)
    # Messages already for the visitor pass as they are.
    for kind, error_type in ((FailureKind.TIMEOUT, None), (FailureKind.RUN, "RunError"),
                             (FailureKind.CONFIG, "ConfigError")):
        mine = RunFailed("choose a smaller size", kind=kind, error_type=error_type)
        assert run_failure_text(mine, host=False) == "choose a smaller size"
    analysis = ReadFailed("the lab could not analyse it (KeyError: 'ts' in /srv/lab/x.py)",
                          kind=ReadFailureKind.ANALYSIS)
    assert "/srv" not in read_failure_text(analysis, host=False) and "/srv" in read_failure_text(analysis, host=True)
    bad = ReadFailed("not JSON text", kind=ReadFailureKind.TRACE)
    assert read_failure_text(bad, host=False) == "not JSON text"

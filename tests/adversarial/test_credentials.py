"""No Redis credential escapes: redaction of any URL text, and every surface that shows a URL.

A password may hold ``#``, ``?``, ``/``, ``'``, ``@``, ``:`` or ``%``: raw, those characters end
the authority for `urllib.parse` (and redis-py), so a redaction that splits the URL the same
way leaves the password in the "path", "query" or "fragment". The surfaces: `redact_url` and
`redact_text`, `ConfigError` (text, repr and ``value``) from `RedisFleet` and `RedisStore`,
`StoreError`, the log line of a store failing mid-call, ``retrymw demo`` output, and the
command lines of ``retrymw demo --fleet``'s client processes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import string
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrymw import ConfigError, Retrier, RetryPolicy, resume
from retrymw._core.redact import REDACTED, redact_text, redact_url, safe_repr
from retrymw.cli.demo._redis_server import free_port
from retrymw.fleet import RedisFleet
from retrymw.stores import RedisStore, StoreError
from retrymw.testing import FakeClock
from tests.redis_server import redis_server
from tests.system import require_binary

REPO = Path(__file__).resolve().parents[2]
WAIT = 120.0  # the longest a subprocess may take; these take a few seconds

# A password made of distinct chunks, so that any piece a wrong split leaves behind is found.
CHUNKS = ("Zq9", "Wv7", "Xk5", "Yj3", "Ub1")
SPECIAL = "Zq9#Wv7?Xk5/Yj3'Ub1"  # every character urllib splits a URL at, and a quote
QUOTED = "Zq9'Wv7@Xk5:Yj3%Ub1"  # what urllib accepts raw: a quote, "@", ":" and "%"
SECRET_OK = f"{REDACTED}:{REDACTED}@"

# Printable text with the troublesome characters drawn often.
_PRINTABLE = string.ascii_letters + string.digits + string.punctuation
passwords = st.text(alphabet=st.sampled_from(_PRINTABLE + "#?/'@:%" * 8), min_size=1)
with_spaces = st.text(alphabet=st.sampled_from(_PRINTABLE + " \t#?/'@:%" * 4), min_size=1)
users = st.sampled_from(["", "user", "svc.payments", "default"])
places = st.sampled_from(
    [
        ("redis", "127.0.0.1:6379/0"),
        ("rediss", "cache.internal:6380/2"),
        ("redis", "[::1]:6379"),
        ("redis", "valkey"),
        ("unix", "/run/redis/redis.sock?db=1"),
    ]
)


def leaked(text: str) -> list[str]:
    """The chunks of the test passwords found in ``text``."""
    return [chunk for chunk in CHUNKS if chunk in text]


# -- redact_url and redact_text ----------------------------------------------------------------


@settings(deadline=None, max_examples=300)
@given(users, passwords, places, st.booleans())
def test_redact_url_hides_any_password_and_keeps_the_rest(
    user: str, password: str, place: tuple[str, str], encode: bool
) -> None:
    """Raw or percent-encoded, the whole userinfo goes; scheme, host, port and path stay."""
    scheme, rest = place
    secret = quote(password, safe="") if encode else password
    url = f"{scheme}://{user}:{secret}@{rest}"
    assert redact_url(url) == f"{scheme}://{SECRET_OK}{rest}"


@settings(deadline=None, max_examples=100)
@given(with_spaces, places)
def test_redact_url_takes_the_whole_text_as_the_url(password: str, place: tuple[str, str]) -> None:
    """Given a URL alone, even whitespace in its password is redacted."""
    scheme, rest = place
    assert redact_url(f"{scheme}://:{password}@{rest}") == f"{scheme}://{SECRET_OK}{rest}"


FRAMES = [
    "Error connecting to {url}. Connection refused.",
    "got {url!r}, expected e.g. 'redis://127.0.0.1:6379/0'",
    "<Redis<ConnectionPool<Connection<url={url!r}>>>>",
    "({url})",
    "{url}",
]


@settings(deadline=None, max_examples=300)
@given(users, passwords, places, st.sampled_from(FRAMES))
def test_redact_text_hides_any_password_inside_a_message(
    user: str, password: str, place: tuple[str, str], frame: str
) -> None:
    """A URL inside free text (bare, or quoted by repr) loses its whole userinfo."""
    scheme, rest = place
    url = f"{scheme}://{user}:{password}@{rest}"
    shown, redacted = (url, f"{scheme}://{SECRET_OK}{rest}")
    if "!r" in frame:  # repr quotes it, with '"' when it holds "'", and escapes what it must
        quote_mark = repr(url)[0]
        shown, redacted = repr(url), f"{quote_mark}{redacted}{quote_mark}"
    text = frame.format(url=url)
    assert redact_text(text) == text.replace(shown, redacted)


def test_web_urls_keep_an_at_sign_in_their_path_but_not_a_broken_password() -> None:
    """http(s) paths and queries carry "@" (/@user, ?email=a@b): those stay as they are."""
    assert redact_url(f"https://user:{SPECIAL}@api.test/v1") == f"https://{SECRET_OK}api.test/v1"
    assert redact_url(f"http://:{SPECIAL}@[::1]:8080/") == f"http://{SECRET_OK}[::1]:8080/"
    for kept in (
        "https://mastodon.social/@alice/1?x=1",
        "https://api.test:8443/users?email=a@b.test#top",
        "https://registry.test/@scope%2fpkg",
        "http://localhost/@me",
    ):
        assert redact_url(kept) == kept
        assert redact_text(f"GET '{kept}' failed") == f"GET '{kept}' failed"


def test_safe_repr_redacts_a_url_value_as_a_whole() -> None:
    """A string value that is a URL (a ConfigError's value) is redacted before its repr."""
    for password in (SPECIAL, "Zq9 Wv7\tXk5", "Zq9\nWv7"):
        shown = safe_repr(f"redis://:{password}@127.0.0.1:6379/0")
        assert shown == f"'redis://{SECRET_OK}127.0.0.1:6379/0'"
        error = ConfigError("fleet.url", f"redis://u:{password}@h/0", "is wrong", '"redis://h"')
        assert not leaked(str(error) + repr(error)), str(error)


def _process_seconds(function: object, text: str) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        function(text)  # type: ignore[operator]
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize(
    "unit",
    [
        "a://'",  # one scheme after another, each cut short by a quote
        "redis://x'",
        "\\'http://h/x ",
        "redis://u:p@",
        "@redis://#?/",
        "https://h/@x'",
        "?",  # each "?" may start a "key=value"; the " =" at the end is none
        "ab",  # each letter may start a scheme; the "://" is after a blank
    ],
)
def test_redact_text_is_linear_and_hides_credentials_in_huge_text(unit: str) -> None:
    """Huge adversarial text: the credential URLs in it are redacted, in linear time."""
    url = f"redis://u:{SPECIAL}@127.0.0.1:6379/0?password=Ub1"
    small = f"{unit * 2_000} {url} {unit * 2_000} ="
    large = f"{unit * 20_000} {url} {unit * 20_000} ="
    for text in (small, large):
        assert not leaked(redact_text(text))
    # Ten times the input may take ten times the work; a quadratic scan would take a hundred.
    ratio = _process_seconds(redact_text, large) / max(_process_seconds(redact_text, small), 1e-3)
    assert ratio < 40, ratio


# -- ConfigError and StoreError ----------------------------------------------------------------


BROKEN_URLS = [
    f"redis://user:{SPECIAL}@127.0.0.1:6379/0",
    f"rediss://:{SPECIAL}@cache.internal:6380/0",
    f"unix://user:{SPECIAL}@/run/redis.sock?db=0",
    "redis://:Zq9Wv7Xk5#Yj3Ub1@127.0.0.1:6379/0",
    "redis://user:12345#Zq9Wv7Xk5Yj3Ub1@127.0.0.1:6379/0",  # would connect to host "user"
    "redis://:Zq9Wv7Xk5Yj3Ub1/@127.0.0.1:6379/0",
]


@pytest.mark.parametrize("url", BROKEN_URLS)
def test_a_password_that_is_not_percent_encoded_is_refused_without_showing_it(url: str) -> None:
    """redis-py would take part of such a password for the host or port: refused, redacted."""
    for make in (
        lambda: RedisFleet(url, namespace="shop", start=False),
        lambda: RedisStore(url, timeout="1s"),
    ):
        with pytest.raises(ConfigError) as raised:
            make()
        error = raised.value
        shown = f"{error} {error!r} {error.value!r} {error.problem}"
        assert not leaked(shown), shown
        assert error.field == "url"
        assert "percent-encode" in error.problem
        assert "%23" in error.example


@pytest.mark.parametrize(
    "url",
    [
        "redis:/user:Zq9Wv7Xk5Yj3Ub1@127.0.0.1:6379/0",
        "user:Zq9Wv7Xk5Yj3Ub1@127.0.0.1:6379",
        "http://user:12345#Zq9Wv7Xk5Yj3Ub1@127.0.0.1:6379",
    ],
)
def test_a_value_that_is_no_redis_url_is_refused_without_showing_it(url: str) -> None:
    """What precedes an "@" in a Redis URL field is credentials, whatever the rest looks like."""
    with pytest.raises(ConfigError) as raised:
        RedisFleet(url, namespace="shop", start=False)
    shown = f"{raised.value} {raised.value!r} {raised.value.value!r}"
    assert not leaked(shown), shown
    assert "must be a redis://, rediss:// or unix:// URL" in shown
    assert f"{SECRET_OK}127.0.0.1:6379" in shown


def _closed_port() -> int:
    return free_port()  # nothing listens there once the probe socket is closed


def test_store_error_never_shows_the_password() -> None:
    """A RedisStore that cannot reach its server names the URL redacted, scheme and host kept."""
    port = _closed_port()
    for url, where in (
        (f"redis://:{QUOTED}@127.0.0.1:{port}/0", f"redis://{SECRET_OK}127.0.0.1:{port}/0"),
        (f"rediss://u:{QUOTED}@127.0.0.1:{port}/0", f"rediss://{SECRET_OK}127.0.0.1:{port}/0"),
        (f"unix://:{QUOTED}@/nonexistent/r.sock", f"unix://{SECRET_OK}/nonexistent/r.sock"),
        (f"redis://u:{quote(SPECIAL, safe='')}@[::1]:{port}", f"redis://{SECRET_OK}[::1]:{port}"),
    ):
        with pytest.raises(StoreError) as raised:
            RedisStore(url, timeout="2s")
        shown = f"{raised.value} {raised.value!r}"
        assert not leaked(shown), shown
        assert f"cannot reach {where}:" in shown


def test_a_store_failing_mid_call_logs_no_password(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The log line of a store that fails mid-call shows the store's URL redacted."""
    import redis

    require_binary("redis-server")
    with redis_server(tmp_path) as server:
        with redis.Redis.from_url(server.url) as admin:
            admin.config_set("requirepass", QUOTED)
        url = f"redis://:{QUOTED}@127.0.0.1:{server.port}/0"
        store = RedisStore(url, timeout="2s")
        assert not leaked(repr(store))
    # The server is gone: its port is closed, and every store operation fails.
    try:
        retrier = Retrier(RetryPolicy(attempts=1), store=store, clock=FakeClock(), instruments=())
        with caplog.at_level(logging.WARNING, "retrymw"), resume("job-7"):
            assert retrier.call_sync(lambda: "ok") == "ok"
    finally:
        store.close()
    messages = [record.getMessage() for record in caplog.records]
    assert any("resume store" in message for message in messages), messages
    for message in messages:
        assert not leaked(message), message
        assert "job-7" not in message


# -- the CLI -----------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RETRYMW_"))}
    return {**env, "PYTHONIOENCODING": "utf-8"}


def test_demo_never_prints_the_password() -> None:
    """``retrymw demo --redis URL``: a refused URL is one redacted line; a good one is redacted."""
    common = ["--duration", "1s", "--outage", "none", "--metrics-port", "0", "--traces", "none"]
    port = _closed_port()
    for url, more, code in (
        (f"redis://user:{SPECIAL}@127.0.0.1:{port}/0", [], 2),
        (f"redis://user:{SPECIAL}@127.0.0.1:{port}/0", ["--fleet", "1"], 2),
        (f"redis://:{QUOTED}@127.0.0.1:{port}/0", [], 0),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "retrymw", "demo", "--redis", url, *more, *common],
            capture_output=True, text=True, timeout=WAIT, cwd=REPO, env=_env(), check=False,
        )  # fmt: skip
        out = done.stdout + done.stderr
        assert done.returncode == code, out
        assert not leaked(out), out
        assert f"redis://{SECRET_OK}127.0.0.1:{port}/0" in out


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _proc_text(pid: int, name: str) -> str:
    """``/proc/<pid>/<name>`` (cmdline, environ) as text, or "" once the process is gone."""
    with contextlib.suppress(OSError):
        data = (Path("/proc") / str(pid) / name).read_bytes()
        return data.replace(b"\0", b" ").decode("utf-8", "replace")
    return ""


@contextlib.contextmanager
def _running(command: list[str]) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=_env()
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=WAIT)


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_fleet_clients_get_the_url_off_their_command_line() -> None:
    """``demo --fleet``: the clients' command lines (``ps``) never carry the Redis URL."""
    url = f"redis://:{QUOTED}@127.0.0.1:{_closed_port()}/0"  # degraded clients run all the same
    command = [sys.executable, "-m", "retrymw", "demo", "--fleet", "1", "--redis", url,
               "--duration", "30s", "--outage", "none", "--rate", "2"]  # fmt: skip
    with _running(command) as process:
        assert process.stdout is not None
        seen = []
        for line in process.stdout:  # bounded: the run ends after 30 s anyway
            seen.append(line)
            if line.startswith("clients:"):
                break
        children = _children(process.pid)
        lines = [_proc_text(child, "cmdline") for child in children]
        environments = [_proc_text(child, "environ") for child in children]
        os.kill(process.pid, signal.SIGINT)  # the clients stop and report; the demo ends
        rest, errors = process.communicate(timeout=WAIT)
    out = "".join(seen) + rest + errors
    assert process.returncode == 0, out
    assert len(children) == 2, (children, out)
    assert all("retrymw" in line for line in lines), lines
    for line in lines + environments:
        assert not leaked(line), line
        assert "redis://" not in line, line
    assert not leaked(out), out
    assert re.search(rf"redis: redis://{re.escape(SECRET_OK)}127\.0\.0\.1:\d+/0", out), out


def test_the_demo_takes_the_redis_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``RETRYMW_REDIS_URL`` keeps the password off the demo's own command line too."""
    from retrymw.cli import build_parser

    url = f"redis://:{QUOTED}@127.0.0.1:6379/0"
    monkeypatch.setenv("RETRYMW_REDIS_URL", url)
    assert build_parser().parse_args(["demo"]).redis == url
    assert build_parser().parse_args(["demo", "--redis", "redis://h/0"]).redis == "redis://h/0"
    monkeypatch.setenv("RETRYMW_REDIS_URL", "")
    assert build_parser().parse_args(["demo"]).redis is None

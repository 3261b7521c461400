"""HTTP rules without httpx (`retrymw._http.rules` and its neighbours): Retry-After, idempotency,
URLs."""

from __future__ import annotations

import logging
import ssl
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrymw import ConfigError, Outcome, RetryPolicy, on_status
from retrymw._core.redact import redact_url
from retrymw._http.body import content_length
from retrymw._http.hints import parse_retry_after
from retrymw._http.hosts import format_target
from retrymw._http.limits import attempt_limit, cut_timeouts
from retrymw._http.overrides import MAX_POLICY_NAMES, PolicyResolver
from retrymw._http.rules import HTTP_RETRY_ON, SERVER_SAYS_RETRY, http_policy, is_idempotent
from retrymw.testing import FakeClock

# 2023-11-14 22:13:20 UTC, a Tuesday: FakeClock's default wall time.
NOW = FakeClock().wall()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("120", 120.0, id="seconds"),
        pytest.param("  7  ", 7.0, id="seconds-padded-spaces"),
        pytest.param("\t3\t", 3.0, id="seconds-padded-tabs"),
        pytest.param("00012", 12.0, id="seconds-leading-zeros"),
        pytest.param("99999999999999999999999", 1e23, id="seconds-huge"),
        pytest.param("0", None, id="zero-means-backoff"),
        pytest.param("000", None, id="zeros-mean-backoff"),
        pytest.param("-1", None, id="negative"),
        pytest.param("+5", None, id="plus-sign"),
        pytest.param("1.5", None, id="fraction"),
        pytest.param("1e3", None, id="exponent"),
        pytest.param("\u0663", None, id="arabic-indic-digit"),
        pytest.param("\uff11\uff12", None, id="fullwidth-digits"),
        pytest.param("", None, id="empty"),
        pytest.param("   ", None, id="blank"),
        pytest.param("soon", None, id="word"),
        pytest.param("Tue, 14 Nov 2023 22:14:00 GMT", 40.0, id="imf-fixdate"),
        pytest.param("Tue, 14 Nov 2023 22:14:00", 40.0, id="imf-fixdate-naive-is-utc"),
        pytest.param("tue, 14 nov 2023 22:14:00 gmt", 40.0, id="imf-fixdate-lower-case"),
        pytest.param("Tue, 14 Nov 2023 23:14:00 +0100", 40.0, id="imf-fixdate-offset"),
        pytest.param("Tue, 14 Nov 2023 22:13:60 GMT", 39.0, id="imf-fixdate-leap-second"),
        pytest.param("Tue, 14 Nov 2023 22:13:20 GMT", None, id="imf-fixdate-now"),
        pytest.param("Tue, 14 Nov 2023 22:13:00 GMT", None, id="imf-fixdate-past"),
        pytest.param("Tuesday, 14-Nov-23 22:15:20 GMT", 120.0, id="rfc850"),
        pytest.param("Sunday, 06-Nov-94 08:49:37 GMT", None, id="rfc850-1994-past"),
        pytest.param("Wednesday, 14-Nov-74 22:13:20 GMT", None, id="rfc850-over-50-years-is-past"),
        pytest.param("Friday, 14-Nov-25 22:13:20 GMT", 63_158_400.0, id="rfc850-two-years-ahead"),
        pytest.param("Tue Nov 14 22:13:50 2023", 30.0, id="asctime"),
        pytest.param("Fri Dec  1 22:13:20 2023", 1_468_800.0, id="asctime-padded-day"),
        pytest.param("Thu, 30 Feb 2023 10:00:00 GMT", None, id="no-such-day"),
        pytest.param("Tue, 14 Nov 2023 25:00:00 GMT", None, id="no-such-hour"),
        pytest.param("Tue, 14 Foo 2023 22:14:00 GMT", None, id="no-such-month"),
        pytest.param("Tue, \u0661\u0664 Nov 2023 22:14:00 GMT", None, id="date-non-ascii-digits"),
        pytest.param("Tue, 14 Nov 2023 22:14:00 GMT trailing", None, id="date-trailing-garbage"),
    ],
)
def test_retry_after_values(value: str, expected: float | None) -> None:
    """Each Retry-After value gives the expected delay against a fixed wall-clock "now"."""
    assert parse_retry_after(value, NOW) == expected


@given(st.text(max_size=60))
def test_retry_after_never_raises(value: str) -> None:
    """Any text parses to None or a positive delay, never an exception."""
    delay = parse_retry_after(value, NOW)
    assert delay is None or delay > 0.0


def test_retry_after_survives_odd_inputs() -> None:
    """A non-string value or an absurd clock gives None rather than an exception."""
    assert parse_retry_after(b"5", NOW) is None  # type: ignore[arg-type]
    assert parse_retry_after("Tuesday, 14-Nov-23 22:15:20 GMT", 1e300) is None


@pytest.mark.parametrize(
    "value",
    [pytest.param("-1", id="negative"), pytest.param("", id="empty"), pytest.param("x", id="word")],
)
def test_garbage_retry_after_is_logged_at_debug(
    value: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An unparseable Retry-After is reported at DEBUG on the "retrymw" logger."""
    with caplog.at_level(logging.DEBUG, logger="retrymw"):
        assert parse_retry_after(value, NOW) is None
    assert [record.levelno for record in caplog.records] == [logging.DEBUG]
    assert "Retry-After" in caplog.records[0].getMessage()


def test_valid_retry_after_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A valid value, or 0 and past dates, log nothing."""
    with caplog.at_level(logging.DEBUG, logger="retrymw"):
        parse_retry_after("5", NOW)
        parse_retry_after("0", NOW)
        parse_retry_after("Tue, 14 Nov 2023 22:13:00 GMT", NOW)
    assert caplog.records == []


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        pytest.param("GET", True, id="GET"),
        pytest.param("HEAD", True, id="HEAD"),
        pytest.param("PUT", True, id="PUT"),
        pytest.param("DELETE", True, id="DELETE"),
        pytest.param("OPTIONS", True, id="OPTIONS"),
        pytest.param("TRACE", True, id="TRACE"),
        pytest.param("get", True, id="get-lower-case"),
        pytest.param("Delete", True, id="Delete-mixed-case"),
        pytest.param("POST", False, id="POST"),
        pytest.param("PATCH", False, id="PATCH"),
        pytest.param("post", False, id="post-lower-case"),
        pytest.param("CONNECT", False, id="CONNECT"),
        pytest.param("PURGE", False, id="unknown-method"),
    ],
)
def test_idempotent_methods(method: str, expected: bool) -> None:
    """Exactly the RFC 9110 idempotent methods are idempotent, whatever their case."""
    assert is_idempotent(method) is expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param(
            "https://user:secret@example.com:8443/a/b?token=x#top",
            "https://REDACTED:REDACTED@example.com:8443/a/b?token=REDACTED#top",
            id="everything",
        ),
        pytest.param("http://example.com", "http://example.com", id="bare-host"),
        pytest.param("http://example.com/?", "http://example.com/?", id="empty-query"),
        pytest.param(
            "http://example.com?sig=1", "http://example.com?sig=REDACTED", id="query-no-path"
        ),
        pytest.param(
            "http://a@b@example.com/p",
            "http://REDACTED:REDACTED@example.com/p",
            id="at-in-userinfo",
        ),
        pytest.param(
            "http://user@example.com/", "http://REDACTED:REDACTED@example.com/", id="user"
        ),
        pytest.param(
            "http://u:p@[::1]:8080/p?q", "http://REDACTED:REDACTED@[::1]:8080/p?q", id="ipv6"
        ),
        pytest.param("http://example.com/a@b", "http://example.com/a@b", id="at-in-path"),
        pytest.param(
            "https://s3.test/o?AWSAccessKeyId=A&Signature=S&Expires=9&X-Goog-Signature=G",
            "https://s3.test/o?AWSAccessKeyId=REDACTED&Signature=REDACTED&Expires=9"
            "&X-Goog-Signature=REDACTED",
            id="otel-keys-keep-the-rest",
        ),
        pytest.param(
            "https://h/p?API_KEY=1&apikey=2&key=3&password=4&secret=5&code=6&auth=7&access_token=8",
            "https://h/p?API_KEY=REDACTED&apikey=REDACTED&key=REDACTED&password=REDACTED"
            "&secret=REDACTED&code=REDACTED&auth=REDACTED&access_token=REDACTED",
            id="common-token-names-any-case",
        ),
        pytest.param(
            "https://h/p?my_refresh_token=1&db-password=2&X-Auth=3&private_key=4&page=5",
            "https://h/p?my_refresh_token=REDACTED&db-password=REDACTED&X-Auth=REDACTED"
            "&private_key=REDACTED&page=5",
            id="keys-containing-a-credential-name",
        ),
        pytest.param("https://h/p?to%6Ben=1", "https://h/p?to%6Ben=REDACTED", id="encoded-key"),
        pytest.param("https://h/p?token=&flag", "https://h/p?token=&flag", id="no-value"),
        pytest.param(
            "https://h/cb#access_token=t&state=s",
            "https://h/cb#access_token=REDACTED&state=s",
            id="fragment",
        ),
        pytest.param("/relative?x=1&token=2", "/relative?x=1&token=REDACTED", id="relative"),
        pytest.param("", "", id="empty"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    """Userinfo and sensitive query values are REDACTED (OTel); everything else stays readable."""
    assert redact_url(url) == expected


@given(st.text(max_size=80))
def test_redact_url_never_raises(url: str) -> None:
    """Any text redacts without raising."""
    assert isinstance(redact_url(url), str)


@given(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._~!$'()*+,;:", min_size=8, max_size=40),
    st.sampled_from(["token", "Signature", "api_key", "password", "sig", "code"]),
)
def test_redact_url_never_keeps_a_secret(secret: str, key: str) -> None:
    """A password in the userinfo or a sensitive query value never survives redaction."""
    url = f"https://alice:{secret}@host.test:8443/path?page=2&{key}={secret}"
    redacted = redact_url(url)
    assert secret not in redacted
    assert "page=2" in redacted
    assert redacted.startswith("https://REDACTED:REDACTED@host.test:8443/path?")


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        pytest.param("example.com", None, "example.com", id="default-port"),
        pytest.param("example.com", 8080, "example.com:8080", id="other-port"),
        pytest.param("::1", 8080, "[::1]:8080", id="ipv6"),
    ],
)
def test_format_target(host: str, port: int | None, expected: str) -> None:
    """The target is the host, with the port only when it is not the scheme's default."""
    assert format_target(host, port) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("12", 12, id="digits"),
        pytest.param(" 7 ", 7, id="padded"),
        pytest.param(None, None, id="absent"),
        pytest.param("-1", None, id="negative"),
        pytest.param("1, 1", None, id="list"),
        pytest.param("\u0663", None, id="non-ascii"),
        pytest.param("9" * 40, None, id="absurd"),
    ],
)
def test_content_length(value: str | None, expected: int | None) -> None:
    """Only a plain ASCII number is a usable Content-Length."""
    assert content_length(value) == expected


@pytest.mark.parametrize(
    ("current", "limit", "expected"),
    [
        pytest.param(
            None, 2.0, dict.fromkeys(("connect", "read", "write", "pool"), 2.0), id="none"
        ),
        pytest.param(
            {"connect": 5.0, "read": 1.0, "write": None, "pool": 10},
            2.0,
            {"connect": 2.0, "read": 1.0, "write": 2.0, "pool": 2.0},
            id="capped",
        ),
        pytest.param(
            {}, 0.0, dict.fromkeys(("connect", "read", "write", "pool"), 0.001), id="zero"
        ),
    ],
)
def test_cut_timeouts(current: object, limit: float, expected: dict[str, float]) -> None:
    """Every phase of httpx's timeout extension is capped at the attempt's limit."""
    assert cut_timeouts(current, limit) == expected


@pytest.mark.parametrize(
    ("fields", "elapsed", "expected"),
    [
        pytest.param({}, 0.0, None, id="unlimited"),
        pytest.param({"timeout": 2.0}, 50.0, 2.0, id="timeout"),
        pytest.param({"deadline": 10.0}, 4.0, 6.0, id="deadline-left"),
        pytest.param({"timeout": 2.0, "deadline": 10.0}, 9.0, 1.0, id="deadline-cuts-timeout"),
        pytest.param({"deadline": 10.0}, 12.0, 0.0, id="deadline-passed"),
    ],
)
def test_attempt_limit(fields: dict[str, Any], elapsed: float, expected: float | None) -> None:
    """An attempt may take the policy's timeout, cut by what the deadline leaves."""
    assert attempt_limit(RetryPolicy(**fields), elapsed) == expected


def rejected_certificate(*, implicit: bool = False) -> httpx.ConnectError:
    """A ConnectError as httpx raises it for an untrusted certificate (cause, or context)."""
    root = ssl.SSLCertVerificationError(1, "certificate verify failed: self-signed certificate")
    middle = ConnectionError("handshake failed")  # httpcore's own error sits in between
    middle.__cause__ = root
    error = httpx.ConnectError(str(root))
    if implicit:
        error.__context__ = middle
    else:
        error.__cause__ = middle
    return error


def looping_chain() -> httpx.ConnectError:
    """A ConnectError whose cause chain loops back on itself, with no certificate in it."""
    error = httpx.ConnectError("reset")
    other = ConnectionResetError()
    error.__cause__, other.__cause__ = other, error
    return error


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        pytest.param(Outcome(1, exception=httpx.ConnectError("x")), True, id="connect-error"),
        pytest.param(Outcome(1, exception=httpx.ConnectTimeout("x")), True, id="connect-timeout"),
        pytest.param(Outcome(1, exception=httpx.ReadTimeout("x")), True, id="read-timeout"),
        pytest.param(Outcome(1, exception=httpx.RemoteProtocolError("x")), True, id="protocol"),
        pytest.param(Outcome(1, exception=TimeoutError()), True, id="attempt-timeout"),
        pytest.param(Outcome(1, exception=ConnectionResetError()), True, id="os-network"),
        pytest.param(Outcome(1, exception=httpx.UnsupportedProtocol("x")), False, id="unsupported"),
        pytest.param(Outcome(1, exception=rejected_certificate()), False, id="certificate"),
        pytest.param(
            Outcome(1, exception=rejected_certificate(implicit=True)), False, id="certificate-ctx"
        ),
        pytest.param(Outcome(1, exception=looping_chain()), True, id="looping-chain"),
        pytest.param(Outcome(1, exception=ValueError()), False, id="value-error"),
        pytest.param(Outcome(1, status=429), True, id="429"),
        pytest.param(Outcome(1, status=502), True, id="502"),
        pytest.param(Outcome(1, status=503), True, id="503"),
        pytest.param(Outcome(1, status=504), True, id="504"),
        pytest.param(Outcome(1, status=500), False, id="500"),
        pytest.param(Outcome(1, status=200), False, id="200"),
    ],
)
def test_http_retry_on(outcome: Outcome, expected: bool) -> None:
    """The HTTP default retries connect errors, timeouts, network errors and 429/502/503/504.

    A rejected certificate is deterministic: no network error, wherever it is in the chain.
    """
    assert HTTP_RETRY_ON(outcome) is expected


def test_http_policy_fills_in_retry_on_only_when_missing() -> None:
    """A policy without retry_on gets the HTTP default; its own retry_on gains x-should-retry."""
    assert http_policy().retry_on == HTTP_RETRY_ON
    filled = http_policy(RetryPolicy(attempts=5))
    assert (filled.attempts, filled.retry_on) == (5, HTTP_RETRY_ON)
    own = RetryPolicy(retry_on=[500])
    extended = http_policy(own)
    assert extended.retry_on == on_status(500) | SERVER_SAYS_RETRY
    assert http_policy(extended) is extended


def test_http_policy_refuses_on_failure_continue() -> None:
    """A transport must return a response or raise, so on_failure="continue" is refused."""
    with pytest.raises(ConfigError, match="on_failure"):
        http_policy(RetryPolicy(on_failure="continue"))


def test_resolver_selects_named_and_given_policies() -> None:
    """A name picks a configured policy; a RetryPolicy is used as given (with HTTP defaults)."""
    fast = http_policy(RetryPolicy(name="fast", attempts=2, retry_on=[503]))
    resolver = PolicyResolver(http_policy(), {"fast": fast, "bare": RetryPolicy(name="bare")})
    assert resolver.resolve(None) is resolver.default
    assert resolver.resolve("fast") is fast
    own = RetryPolicy(name="own", retry_on=[503])  # gains x-should-retry, once
    assert resolver.resolve(own).retry_on == on_status(503) | SERVER_SAYS_RETRY
    assert resolver.resolve(own) is resolver.resolve(own)
    assert resolver.resolve("bare").retry_on == HTTP_RETRY_ON
    given = RetryPolicy(attempts=7)
    assert resolver.resolve(given).retry_on == HTTP_RETRY_ON
    assert resolver.resolve(given) is resolver.resolve(given)  # built once
    assert resolver.resolve(fast) is fast


def test_resolver_caches_field_overrides() -> None:
    """A dict of fields is applied over the default once, then served from the cache."""
    resolver = PolicyResolver(http_policy(RetryPolicy(attempts=5, name="api")))
    first = resolver.resolve({"attempts": 1})
    assert (first.attempts, first.name, first.retry_on) == (1, "api", HTTP_RETRY_ON)
    assert resolver.resolve({"attempts": 1}) is first
    unhashable = resolver.resolve({"retry_on": [503, "timeout"]})
    assert unhashable.matches(Outcome(1, status=503))


def test_resolver_cache_is_bounded() -> None:
    """Past MAX_CACHED distinct overrides, new ones are built each time but still correct."""
    resolver = PolicyResolver(http_policy())
    for delay in range(PolicyResolver.MAX_CACHED + 5):
        assert resolver.resolve({"initial_delay": delay / 1000}).initial_delay == delay / 1000
    assert len(resolver._cache) == PolicyResolver.MAX_CACHED


def test_override_policy_names_are_a_bounded_label() -> None:
    """2 000 per-request names: at most MAX_POLICY_NAMES of them reach telemetry, then _other.

    Configured names always pass; the cap is process-wide, shared by every resolver.
    """
    resolver = PolicyResolver(http_policy(RetryPolicy(name="api")), {"fast": RetryPolicy()})
    other = PolicyResolver(http_policy())
    names = {resolver.resolve({"name": f"tenant-{n}"}).name for n in range(1000)}
    names |= {
        other.resolve(RetryPolicy(name=f"user-{n}", retry_on=[503])).name for n in range(1000)
    }
    assert "_other" in names
    assert len(names) <= MAX_POLICY_NAMES + 1
    assert resolver.resolve({"name": "api", "attempts": 1}).name == "api"  # configured
    assert resolver.resolve("fast").name == "default"
    given = RetryPolicy(name="user-0", retry_on=[503])
    assert other.resolve(given).name in {"user-0", "_other"}
    overflowing = other.resolve(RetryPolicy(name="user-999", attempts=7, retry_on=[503]))
    assert (overflowing.name, overflowing.attempts) == ("_other", 7)  # only the name changes


@pytest.mark.parametrize(
    ("override", "match"),
    [
        pytest.param("nope", r"unknown policy \(known: fast\)", id="unknown-name"),
        pytest.param({"attempts": 0}, r'extensions\["retrymw"\]\.attempts', id="bad-value"),
        pytest.param({"attempts": True}, r"attempts", id="bool-not-cached-as-int"),
        pytest.param({"tries": 2}, r"unknown policy field", id="unknown-field"),
        pytest.param(3, r"policy name, a RetryPolicy or a dict", id="wrong-type"),
    ],
)
def test_resolver_rejects_bad_overrides(override: object, match: str) -> None:
    """Bad overrides raise ConfigError naming the extension and the problem."""
    resolver = PolicyResolver(http_policy(), {"fast": RetryPolicy(retry_on=[503])})
    resolver.resolve({"attempts": 1})
    with pytest.raises(ConfigError, match=match):
        resolver.resolve(override)


@pytest.mark.parametrize(
    ("policies", "match"),
    [
        pytest.param({"x": {"attempts": 2}}, r"^policies\.x: must be a RetryPolicy", id="value"),
        pytest.param({2: RetryPolicy()}, r"^policies: names must be strings; got 2", id="name"),
        pytest.param([RetryPolicy()], r"^policies: must be a mapping", id="list"),
        pytest.param((), r"^policies: must be a mapping", id="empty-tuple"),
    ],
)
def test_resolver_rejects_non_policies(policies: Any, match: str) -> None:
    """The policies argument is a mapping of names to RetryPolicy objects, or None."""
    with pytest.raises(ConfigError, match=match):
        PolicyResolver(http_policy(), policies)


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param("fast", id="name"),
        pytest.param({"attempts": 2}, id="fields"),
        pytest.param(RetryPolicy, id="class"),
    ],
)
def test_http_policy_refuses_what_is_not_a_policy(policy: Any) -> None:
    """http_policy (behind the transports and helpers) names the field and an example."""
    with pytest.raises(
        ConfigError, match=r"^policy: must be a RetryPolicy or None; got "
    ) as caught:
        http_policy(policy)
    assert caught.value.example == "RetryPolicy(attempts=3)"


def test_status_matcher_composes_with_http_default() -> None:
    """The HTTP default composes like any matcher (here: also retry 500)."""
    policy = http_policy(RetryPolicy(retry_on=HTTP_RETRY_ON | on_status(500)))
    assert policy.matches(Outcome(1, status=500))
    assert policy.matches(Outcome(1, status=503))

"""The server-hint conformance corpus (`retrymw._http.hints`), against a fixed "now".

Each vector is one response (status and headers) as a real API sends it, with the delay the
hint engine must derive, the header that set it, and ``x-should-retry``'s verdict. "Now" is
`FakeClock`'s wall time, so dates and Unix times read the same on every run.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrymw._http.hints import (
    EPOCH_THRESHOLD,
    NO_HINTS,
    ServerHints,
    parse_duration,
    parse_rfc3339,
    read_hints,
)
from retrymw.testing import FakeClock

# 2023-11-14 22:13:20 UTC: FakeClock's default wall time.
NOW = FakeClock().wall()
EPOCH = int(NOW)

# (id, status, headers, delay, header that set it, x-should-retry verdict)
Vector = tuple[str, int, dict[str, str], float | None, str | None, bool | None]
# fmt: off
CORPUS: list[Vector] = [
    # x-should-retry (OpenAI, Anthropic)
    ("should-retry-false", 503, {"x-should-retry": "false"}, None, None, False),
    ("should-retry-true", 500, {"x-should-retry": "true"}, None, None, True),
    ("should-retry-any-case", 409, {"X-Should-Retry": " TRUE "}, None, None, True),
    ("should-retry-garbage", 503, {"x-should-retry": "maybe"}, None, None, None),
    ("should-retry-false-with-delay", 429, {"x-should-retry": "false", "retry-after": "2"},
     2.0, "retry-after", False),
    # retry-after-ms (OpenAI, Azure OpenAI)
    ("retry-after-ms", 429, {"retry-after-ms": "1500"}, 1.5, "retry-after-ms", None),
    ("retry-after-ms-fraction", 429, {"retry-after-ms": "12.5"}, 0.0125, "retry-after-ms", None),
    ("retry-after-ms-zero", 429, {"retry-after-ms": "0"}, None, None, None),
    ("retry-after-ms-negative", 429, {"retry-after-ms": "-5"}, None, None, None),
    ("retry-after-ms-garbage", 429, {"retry-after-ms": "soon"}, None, None, None),
    ("retry-after-ms-beats-shorter-retry-after", 429,
     {"retry-after-ms": "2500", "retry-after": "2"}, 2.5, "retry-after-ms", None),
    ("retry-after-beats-shorter-ms", 429,
     {"retry-after-ms": "900", "retry-after": "1"}, 1.0, "retry-after", None),
    # Retry-After: delta-seconds and HTTP-date (RFC 9110)
    ("retry-after-seconds", 503, {"Retry-After": "120"}, 120.0, "retry-after", None),
    ("retry-after-imf-date", 503, {"Retry-After": "Tue, 14 Nov 2023 22:14:00 GMT"},
     40.0, "retry-after", None),
    ("retry-after-past-date", 503, {"Retry-After": "Tue, 14 Nov 2023 22:13:00 GMT"},
     None, None, None),
    ("retry-after-fraction-is-garbage", 503, {"Retry-After": "1.5"}, None, None, None),
    ("retry-after-on-500", 500, {"Retry-After": "3"}, 3.0, "retry-after", None),
    # x-amz-retry-after (AWS, milliseconds)
    ("amz-retry-after", 503, {"x-amz-retry-after": "2500"}, 2.5, "x-amz-retry-after", None),
    ("amz-retry-after-garbage", 503, {"x-amz-retry-after": "2.5s"}, None, None, None),
    # RateLimit (draft-ietf-httpapi-ratelimit-headers, structured field)
    ("ratelimit-item", 429, {"RateLimit": '"default";r=0;t=30'}, 30.0, "ratelimit", None),
    ("ratelimit-items-longest-exhausted", 429,
     {"RateLimit": '"burst";r=0;t=5, "day";r=0;t=3600'}, 3600.0, "ratelimit", None),
    ("ratelimit-item-not-exhausted", 429,
     {"RateLimit": '"burst";r=0;t=5, "day";r=40;t=3600'}, 5.0, "ratelimit", None),
    ("ratelimit-item-no-remaining-on-429", 429, {"RateLimit": '"default";t=9'},
     9.0, "ratelimit", None),
    ("ratelimit-item-no-remaining-on-503", 503, {"RateLimit": '"default";t=9'},
     None, None, None),
    ("ratelimit-legacy-dictionary", 429, {"RateLimit": "limit=10, remaining=0, reset=12"},
     12.0, "ratelimit", None),
    ("ratelimit-garbage", 429, {"RateLimit": ";;;=,,t=x"}, None, None, None),
    # RateLimit-Reset (the draft's earlier separate fields)
    ("ratelimit-reset", 429, {"RateLimit-Reset": "17"}, 17.0, "ratelimit-reset", None),
    ("ratelimit-reset-remaining-left", 429,
     {"RateLimit-Reset": "17", "RateLimit-Remaining": "3"}, None, None, None),
    ("ratelimit-reset-remaining-zero-503", 503,
     {"RateLimit-Reset": "17", "RateLimit-Remaining": "0"}, 17.0, "ratelimit-reset", None),
    # X-RateLimit-Reset: delta-seconds below EPOCH_THRESHOLD, Unix seconds above, ms from 1e12
    ("x-ratelimit-reset-delta", 429, {"X-RateLimit-Reset": "42"}, 42.0, "x-ratelimit-reset", None),
    ("x-ratelimit-reset-epoch", 429, {"X-RateLimit-Reset": str(EPOCH + 60)},
     60.0, "x-ratelimit-reset", None),
    ("x-ratelimit-reset-epoch-ms", 429, {"X-RateLimit-Reset": str((EPOCH + 7) * 1000)},
     7.0, "x-ratelimit-reset", None),
    ("x-ratelimit-reset-epoch-past", 429, {"X-RateLimit-Reset": str(EPOCH - 5)},
     None, None, None),
    ("x-ratelimit-reset-github-403", 403,
     {"X-RateLimit-Reset": str(EPOCH + 90), "X-RateLimit-Remaining": "0"},
     90.0, "x-ratelimit-reset", None),
    ("x-ratelimit-reset-remaining-left", 429,
     {"X-RateLimit-Reset": str(EPOCH + 90), "X-RateLimit-Remaining": "12"}, None, None, None),
    # x-ratelimit-reset-requests / -tokens (OpenAI durations)
    ("openai-reset-requests", 429,
     {"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-remaining-requests": "0"},
     360.0, "x-ratelimit-reset-requests", None),
    ("openai-reset-tokens-ms", 429,
     {"x-ratelimit-reset-tokens": "12ms", "x-ratelimit-remaining-tokens": "0"},
     0.012, "x-ratelimit-reset-tokens", None),
    ("openai-reset-fraction", 429, {"x-ratelimit-reset-tokens": "1.5s"},
     1.5, "x-ratelimit-reset-tokens", None),
    ("openai-reset-hours", 429, {"x-ratelimit-reset-requests": "1h2m3.5s"},
     3723.5, "x-ratelimit-reset-requests", None),
    ("openai-only-the-exhausted-limit", 429,
     {
         "x-ratelimit-reset-requests": "6m0s",
         "x-ratelimit-remaining-requests": "59",
         "x-ratelimit-reset-tokens": "2s",
         "x-ratelimit-remaining-tokens": "0",
         "retry-after-ms": "800",
     },
     2.0, "x-ratelimit-reset-tokens", None),
    ("openai-reset-garbage", 429, {"x-ratelimit-reset-requests": "6 minutes"}, None, None, None),
    ("openai-reset-on-500-without-remaining", 500, {"x-ratelimit-reset-requests": "6m0s"},
     None, None, None),
    # anthropic-ratelimit-*-reset (RFC 3339)
    ("anthropic-requests-reset", 429,
     {
         "anthropic-ratelimit-requests-reset": "2023-11-14T22:13:50Z",
         "anthropic-ratelimit-requests-remaining": "0",
     },
     30.0, "anthropic-ratelimit-requests-reset", None),
    ("anthropic-tokens-reset-offset", 429,
     {"anthropic-ratelimit-tokens-reset": "2023-11-14T23:14:20+01:00"},
     60.0, "anthropic-ratelimit-tokens-reset", None),
    ("anthropic-output-tokens-fraction", 429,
     {"anthropic-ratelimit-output-tokens-reset": "2023-11-14T22:13:22.5Z"},
     2.5, "anthropic-ratelimit-output-tokens-reset", None),
    ("anthropic-input-tokens-past", 429,
     {"anthropic-ratelimit-input-tokens-reset": "2023-11-14T22:13:00Z"}, None, None, None),
    ("anthropic-reset-not-exhausted", 429,
     {
         "anthropic-ratelimit-requests-reset": "2023-11-14T22:14:20Z",
         "anthropic-ratelimit-requests-remaining": "49",
         "retry-after": "5",
     },
     5.0, "retry-after", None),
    ("anthropic-reset-garbage-date", 429,
     {"anthropic-ratelimit-requests-reset": "2023-02-30T10:00:00Z"}, None, None, None),
    ("anthropic-529-overloaded", 529, {"x-should-retry": "true", "retry-after": "4"},
     4.0, "retry-after", True),
    # the longest of several dialects wins
    ("longest-of-all", 429,
     {
         "retry-after": "1",
         "retry-after-ms": "1200",
         "x-amz-retry-after": "900",
         "RateLimit": '"q";r=0;t=2',
         "x-ratelimit-reset-requests": "3s",
     },
     3.0, "x-ratelimit-reset-requests", None),
    ("no-hints", 503, {"content-type": "text/plain"}, None, None, None),
]
# fmt: on


def test_corpus_covers_enough_dialects() -> None:
    """At least 40 vectors across at least 10 header dialects."""
    dialects = {
        # Anthropic's four resets count as one dialect (anthropic-ratelimit-*-reset).
        re.sub(r"^anthropic-ratelimit-.*-reset$", "anthropic-ratelimit-*-reset", name)
        for _, _, headers, *_ in CORPUS
        for name in (key.lower() for key in headers)
        if "remaining" not in name and name != "content-type"
    }
    assert len(CORPUS) >= 40
    assert len(dialects) >= 10, dialects


@pytest.mark.parametrize(
    ("status", "headers", "delay", "header", "verdict"),
    [pytest.param(*vector[1:], id=vector[0]) for vector in CORPUS],
)
def test_conformance(
    status: int,
    headers: dict[str, str],
    delay: float | None,
    header: str | None,
    verdict: bool | None,
) -> None:
    """Each response gives the expected delay, the header that set it, and the verdict."""
    hints = read_hints(httpx.Headers(headers), status, NOW)
    assert hints.delay == pytest.approx(delay)
    assert (hints.header, hints.should_retry) == (header, verdict)


def test_no_hint_is_the_shared_empty_value() -> None:
    """A response without hints costs no allocation: the shared NO_HINTS comes back."""
    assert read_hints(httpx.Headers({"content-length": "3"}), 503, NOW) is NO_HINTS
    assert ServerHints(None, None, None) == NO_HINTS


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("6m0s", 360.0),
        ("12ms", 0.012),
        ("1.5s", 1.5),
        ("2h", 7200.0),
        ("250us", 0.00025),
        ("250µs", 0.00025),
        ("10ns", 1e-8),
        ("7", 7.0),
        (" 3s ", 3.0),
        ("", None),
        ("s", None),
        ("1x", None),
        ("1s2", None),
        ("-1s", None),
        ("1s 2m", None),
    ],
)
def test_durations(value: str, expected: float | None) -> None:
    """Go-style durations as OpenAI sends them; anything else is None."""
    assert parse_duration(value) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2023-11-14T22:13:30Z", 10.0),
        ("2023-11-14t22:13:30z", 10.0),
        ("2023-11-14 22:13:30Z", 10.0),
        ("2023-11-14T22:13:30.250Z", 10.25),
        ("2023-11-14T17:13:30-05:00", 10.0),
        ("2023-11-14T22:13:30", None),  # RFC 3339 requires a zone
        ("2023-13-14T22:13:30Z", None),
        ("2023-11-14T24:00:00Z", None),
        ("yesterday", None),
    ],
)
def test_rfc3339(value: str, expected: float | None) -> None:
    """RFC 3339 times as Anthropic sends them, read against the fixed now."""
    assert parse_rfc3339(value, NOW) == pytest.approx(expected)


def test_epoch_threshold_is_documented_rule() -> None:
    """Below the threshold a value is a delay, from it on a Unix time."""
    delta = str(int(EPOCH_THRESHOLD) - 1)
    below = read_hints(httpx.Headers({"x-ratelimit-reset": delta}), 429, NOW)
    assert below.delay == EPOCH_THRESHOLD - 1
    at = read_hints(httpx.Headers({"x-ratelimit-reset": str(int(EPOCH_THRESHOLD))}), 429, NOW)
    assert at.delay is None  # a Unix time in 2001: past


class _HostileHeaders:
    def get(self, name: str) -> Any:
        if name == "retry-after-ms":
            return "1500"
        if name == "retry-after":
            return b"5"
        raise RuntimeError("boom")


def test_hostile_headers_never_raise() -> None:
    """A headers object that raises or holds bytes keeps what was read; nothing raises."""
    hints = read_hints(_HostileHeaders(), 429, NOW)
    assert (hints.delay, hints.header, hints.should_retry) == (1.5, "retry-after-ms", None)


def test_garbage_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    """An unparseable hint is reported at DEBUG on the "retrymw" logger, cut to 100 chars."""
    with caplog.at_level(logging.DEBUG, logger="retrymw"):
        read_hints(httpx.Headers({"retry-after-ms": "x" * 500}), 429, NOW)
    (record,) = caplog.records
    assert "retry-after-ms" in record.getMessage()
    assert "x" * 101 not in record.getMessage()


_HEADER_NAMES = st.sampled_from(
    [
        "retry-after",
        "retry-after-ms",
        "x-amz-retry-after",
        "ratelimit",
        "ratelimit-reset",
        "x-ratelimit-reset",
        "x-ratelimit-reset-tokens",
        "anthropic-ratelimit-requests-reset",
        "x-should-retry",
    ]
)


@given(st.dictionaries(_HEADER_NAMES, st.text(max_size=40), max_size=6), st.integers(400, 599))
def test_garbage_never_raises(headers: dict[str, str], status: int) -> None:
    """Any text in any hint header gives a positive delay or none, and a verdict or none."""
    try:
        built = httpx.Headers(headers)
    except UnicodeEncodeError:
        return
    hints = read_hints(built, status, NOW)
    assert hints.delay is None or hints.delay > 0.0
    assert (hints.delay is None) == (hints.header is None)

"""Parsers of outside input: each returns its documented result in linear time, never more.

Covered: every server-hint dialect (`retrymw._http.hints`), configuration durations
(`retrymw.parse_duration`), the attempt header the server companion reads
(`retrymw.server.attempt_number`), an SDK's retry-count header as the transport reads it, and a
Redis resume record (`retrymw.stores._redis`). The fleet's script replies are read inline by its
links (``apply``), with no parsing function of their own to test here.

Linear time is checked without a wall-clock bound (`assert_linear`): the CPU time, best of a
few runs, of an input ten times longer may be at most 30 times that of the shorter one, plus a
few milliseconds for noise. A quadratic parser takes 100 times as long there, so it fails however
loaded the machine is; a linear one passes by a wide margin. The regression tests compare the
attack's cost with a harmless response's in the same way.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import retrymw
from retrymw import RetryPolicy, RetryScheduled
from retrymw._core.durations import MAX_DURATION
from retrymw._http.hints import (
    MAX_HINT_LENGTH,
    ServerHints,
    parse_delta_seconds,
    parse_duration,
    parse_milliseconds,
    parse_ratelimit,
    parse_reset,
    parse_retry_after,
    parse_rfc3339,
    read_hints,
    should_retry,
)
from retrymw._http.sdk import parse_count
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.server import attempt_number
from retrymw.testing import FakeClock, RecordingInstrument

# 2023-11-14 22:13:20 UTC: FakeClock's default wall time.
NOW = FakeClock().wall()
URL = "http://api.example.test/items"

#: The shorter input of a linear-time check; the longer one is ten times this.
SMALL = 2_000
#: CPU seconds allowed on top of the 30x ratio, for timer resolution and noise.
SLACK = 0.02
#: The attack: a rate-limit reset of 8 000 digits, then a character no unit starts with.
ATTACK = "1" * 8_000 + "x"

PROPERTY = settings(deadline=None, max_examples=15)


def cpu_time(run: Callable[[], object], repeat: int) -> float:
    """The least CPU time ``run`` takes over ``repeat`` runs (the least is the least noisy)."""
    best = math.inf
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def assert_linear(parse: Callable[[str], object], build: Callable[[int], str]) -> None:
    """``parse`` costs at most ~linearly more on ``build(10 * SMALL)`` than on ``build(SMALL)``."""
    small, large = build(SMALL), build(10 * SMALL)
    short = cpu_time(lambda: parse(small), 5)
    long = cpu_time(lambda: parse(large), 3)
    assert long <= 30 * short + SLACK, (
        f"{len(large)} characters took {long:.4f}s of CPU, {len(small)} took {short:.6f}s: "
        f"not linear (input starts {large[:40]!r})"
    )


def hostile(tokens: list[str]) -> st.SearchStrategy[Callable[[int], str]]:
    """Inputs of any length made of a parser's own tokens: a prefix, a unit repeated, a tail.

    The repeated unit is what drives a backtracking pattern into its worst case (a long run of
    digits, of separators, of ``1s`` parts...); the tail is often what makes it fail at the end.
    """
    token = st.sampled_from(tokens)
    part = st.lists(token, min_size=0, max_size=4).map("".join)
    unit = st.lists(token, min_size=1, max_size=4).map("".join)

    def builder(pieces: tuple[str, str, str]) -> Callable[[int], str]:
        prefix, repeated, tail = pieces

        def build(size: int) -> str:
            return prefix + repeated * (size // len(repeated) + 1) + tail

        return build

    return st.tuples(part, unit, part).map(builder)


HUGE_SIZES = st.sampled_from([10**4, 10**5, 10**6])

DIGITS = ["0", "1", "9", "00", "123"]
DURATION_TOKENS = [*DIGITS, ".", "h", "m", "s", "ms", "us", "µs", "ns", "x", " ", "-", "e"]
DECIMAL_TOKENS = [*DIGITS, ".", " ", "\t", "-", "+", "e", "x", "_"]
DATE_TOKENS = [
    *DIGITS,
    "Sun",
    "Sunday",
    "Nov",
    ",",
    " ",
    "-",
    ":",
    "GMT",
    "+0100",
    "T",
    "Z",
    ".",
    "+01:00",
    "x",
]
RATELIMIT_TOKENS = [
    *DIGITS,
    '"q"',
    ";",
    ",",
    "=",
    " ",
    "r=0",
    "t=30",
    "t=",
    "reset=",
    "remaining=0",
    "limit=",
    ".",
    "x",
]

DELAY_HEADERS = [
    "retry-after",
    "retry-after-ms",
    "x-amz-retry-after",
    "ratelimit",
    "ratelimit-reset",
    "x-ratelimit-reset",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-output-tokens-reset",
]
REMAINING_HEADERS = [
    "ratelimit-remaining",
    "x-ratelimit-remaining",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "anthropic-ratelimit-requests-remaining",
]


def no_nan(value: float | None) -> bool:
    return value is None or not math.isnan(value)


# -- the exact attack -----------------------------------------------------------------------


def test_the_8000_digit_reset_attack_is_ignored_at_no_cost() -> None:
    """8 000 digits then ``x`` in both OpenAI resets: ignored, and no dearer than a real hint."""
    attack = httpx.Headers(
        {
            "x-ratelimit-reset-requests": ATTACK,
            "x-ratelimit-reset-tokens": ATTACK,
            "retry-after": "2",
        }
    )
    harmless = httpx.Headers(
        {"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "1s", "retry-after": "2"}
    )
    assert read_hints(attack, 429, NOW) == ServerHints(2.0, "retry-after", None)
    attacked = cpu_time(lambda: read_hints(attack, 429, NOW), 3)
    normal = cpu_time(lambda: read_hints(harmless, 429, NOW), 3)
    assert attacked <= 30 * normal + SLACK, f"{attacked:.4f}s vs {normal:.6f}s of CPU"


def test_the_8000_digit_duration_parses_in_linear_time() -> None:
    """The parser itself, without the length guard, rejects the attack in linear time."""
    assert parse_duration(ATTACK) is None
    assert_linear(parse_duration, lambda size: "1" * size + "x")


class _TooManyThenOk:
    """A MockTransport handler: 429 with ``headers`` to the first request, 200 to the others."""

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers
        self.requests = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return (
            httpx.Response(429, headers=self.headers) if self.requests == 1 else httpx.Response(200)
        )


async def _retried_call(headers: dict[str, str]) -> tuple[list[float], list[RetryScheduled]]:
    """GET through AsyncRetryTransport in virtual time: the sleeps and RetryScheduled events."""
    clock, recorder = FakeClock(), RecordingInstrument()
    transport = AsyncRetryTransport(
        httpx.MockTransport(_TooManyThenOk(headers)),
        policy=RetryPolicy(deadline=1.0, initial_delay=0.1, jitter=False),
        clock=clock,
        instruments=(recorder,),
        budget=None,
    )
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get(URL)).status_code == 200
    return clock.sleeps, recorder.of_type(RetryScheduled)


async def _call_cpu_time(headers: dict[str, str]) -> float:
    best = math.inf
    for _ in range(3):
        start = time.process_time()
        await _retried_call(headers)
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.anyio
async def test_the_attack_on_a_retried_call_costs_nothing() -> None:
    """A 429 carrying the attack is retried after the backoff, as cheaply as a harmless 429."""
    attack = {"x-ratelimit-reset-requests": ATTACK, "x-ratelimit-reset-tokens": ATTACK}
    sleeps, (scheduled,) = await _retried_call(attack)
    assert sleeps == [0.1]  # the backoff: the attack asked for nothing
    assert (scheduled.retry_after, scheduled.retry_after_header) == (None, None)
    attacked = await _call_cpu_time(attack)
    normal = await _call_cpu_time({"x-ratelimit-reset-tokens": "50ms"})
    assert attacked <= 30 * normal + SLACK, f"{attacked:.4f}s vs {normal:.6f}s of CPU"


# -- the length guard -----------------------------------------------------------------------


def test_a_hint_at_the_length_limit_is_read() -> None:
    """A value of exactly MAX_HINT_LENGTH characters is still a hint."""
    value = "0" * (MAX_HINT_LENGTH - 3) + "120"
    assert read_hints(httpx.Headers({"retry-after": value}), 503, NOW).delay == 120.0


def _padded(header: str, size: int) -> str:
    """A hint ``header`` honours, padded to ``size`` characters (spaces or zeros)."""
    if header == "x-should-retry":
        return "true".rjust(size)
    if header == "ratelimit":
        return '"q";r=0;t=' + "120".rjust(size - 10, "0")
    if header.startswith("anthropic-"):
        return "2023-11-14T22:13:50.".ljust(size - 1, "0") + "Z"
    return "120".rjust(size, "0")


@pytest.mark.parametrize("header", [*DELAY_HEADERS, "x-should-retry"])
def test_a_longer_hint_is_ignored_and_logged_cut_short(
    header: str, caplog: pytest.LogCaptureFixture
) -> None:
    """One character more than MAX_HINT_LENGTH and a hint is ignored, logged at DEBUG with a
    short repr."""
    assert read_hints({header: _padded(header, MAX_HINT_LENGTH)}, 429, NOW) != ServerHints()
    with caplog.at_level(logging.DEBUG, logger="retrymw"):
        hints = read_hints({header: _padded(header, MAX_HINT_LENGTH + 1)}, 429, NOW)
    assert hints == ServerHints()
    (record,) = caplog.records
    message = record.getMessage()
    assert record.levelno == logging.DEBUG
    assert header in message
    assert str(MAX_HINT_LENGTH + 1) in message
    assert "0" * 50 not in message
    assert " " * 50 not in message


def test_a_long_remaining_counter_is_garbage_not_absence() -> None:
    """A too-long ``remaining`` counter does not read as absent (which would apply the reset)."""
    headers = {"x-ratelimit-reset": "30", "x-ratelimit-remaining": "0" * (MAX_HINT_LENGTH + 1)}
    assert read_hints(httpx.Headers(headers), 429, NOW).delay is None


class _BytesCounter:
    """Headers whose ``get`` answers bytes for a remaining counter (a hostile mapping)."""

    def get(self, name: str) -> Any:
        if name == "x-ratelimit-remaining":
            return b"0"
        return {"x-ratelimit-reset": "30", "x-ratelimit-reset-tokens": "7s"}.get(name)


def test_a_remaining_counter_of_another_type_skips_its_own_hint_only() -> None:
    """A counter that is not text makes its reset garbage; the hints after it are still read."""
    assert read_hints(_BytesCounter(), 429, NOW) == ServerHints(
        7.0, "x-ratelimit-reset-tokens", None
    )


# -- every hint dialect ---------------------------------------------------------------------


@PROPERTY
@given(hostile(DURATION_TOKENS), HUGE_SIZES)
@example(lambda size: "1" * size + "x", 10**4)
@example(lambda size: "1s" * (size // 2) + "x", 10**6)
@example(lambda size: "1." * (size // 2), 10**5)
def test_durations_of_hints(build: Callable[[int], str], size: int) -> None:
    """``6m0s``-style resets: a non-negative number of seconds or None, in linear time."""
    assert_linear(parse_duration, build)
    found = parse_duration(build(size))
    assert found is None or found >= 0.0


@PROPERTY
@given(hostile(DATE_TOKENS + DECIMAL_TOKENS), HUGE_SIZES)
@example(lambda size: "Sun," + " " * size + "x", 10**5)
@example(lambda size: "Sun, 06 Nov 1994 08:49:37" + " " * size + "x", 10**5)
@example(lambda size: "9" * size, 10**6)
def test_retry_after(build: Callable[[int], str], size: int) -> None:
    """Retry-After: a positive delay or None (never raises), in linear time."""
    assert_linear(lambda text: parse_retry_after(text, NOW), build)
    found = parse_retry_after(build(size), NOW)
    assert found is None or found > 0.0


@PROPERTY
@given(hostile(DATE_TOKENS), HUGE_SIZES)
@example(lambda size: "2023-11-14T22:13:30." + "5" * size + "Z", 10**6)
@example(lambda size: "2023-11-14T22:13:30." + "5" * size, 10**5)
def test_rfc3339(build: Callable[[int], str], size: int) -> None:
    """RFC 3339 resets: a finite delay or None (never raises), in linear time."""
    assert_linear(lambda text: parse_rfc3339(text, NOW), build)
    found = parse_rfc3339(build(size), NOW)
    assert found is None or math.isfinite(found)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("0000-01-01T00:00:00Z", id="year-zero"),
        pytest.param("2023-11-14T22:13:30-24:00", id="offset-hour-24"),
        pytest.param("2023-11-14T22:13:30-00:60", id="offset-minute-60"),
    ],
)
def test_rfc3339_out_of_range(value: str) -> None:
    """A date or offset out of range is None, not an error nor a guess."""
    assert parse_rfc3339(value, NOW) is None


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("Tue, 14 Nov 2023 22:14:00 -2400", id="offset-hour-24"),
        pytest.param("Tue, 14 Nov 2023 22:14:00 -0060", id="offset-minute-60"),
    ],
)
def test_http_date_out_of_range(value: str) -> None:
    """An HTTP-date whose offset is out of range is None, not a delay of a day or an hour."""
    assert parse_retry_after(value, NOW) is None


DECIMAL_PARSERS = [
    pytest.param(parse_milliseconds, id="milliseconds"),
    pytest.param(parse_delta_seconds, id="delta-seconds"),
    pytest.param(parse_reset, id="reset-or-epoch"),
]


@pytest.mark.parametrize("parse", DECIMAL_PARSERS)
@PROPERTY
@given(build=hostile(DECIMAL_TOKENS), size=HUGE_SIZES)
@example(build=lambda size: "1" * size + ".", size=10**6)
@example(build=lambda size: "1" * size + "." + "1" * size + "x", size=10**5)
def test_decimals(
    parse: Callable[[str, float], float | None], build: Callable[[int], str], size: int
) -> None:
    """Millisecond, second and epoch hints: a number or None (never raises), in linear time."""
    assert_linear(lambda text: parse(text, NOW), build)
    assert no_nan(parse(build(size), NOW))


@PROPERTY
@given(hostile(RATELIMIT_TOKENS), HUGE_SIZES, st.sampled_from([429, 503]))
@example(lambda size: '"q";r=0;t=1,' * (size // 12), 10**6, 429)
@example(lambda size: ";" * size, 10**6, 429)
@example(lambda size: "," * size, 10**6, 429)
@example(lambda size: "t=" + "1" * size + "x", 10**5, 429)
def test_ratelimit_field(build: Callable[[int], str], size: int, status: int) -> None:
    """The RateLimit field, many ``,``/``;`` members included: a delay or None, linear."""
    assert_linear(lambda text: parse_ratelimit(text, NOW, status), build)
    found = parse_ratelimit(build(size), NOW, status)
    assert found is None or found >= 0.0


ANY_HINT_TEXT = hostile(DURATION_TOKENS + DATE_TOKENS + RATELIMIT_TOKENS)


@PROPERTY
@given(
    st.dictionaries(
        st.sampled_from([*DELAY_HEADERS, *REMAINING_HEADERS, "x-should-retry"]),
        st.one_of(st.text(max_size=40), st.tuples(ANY_HINT_TEXT, HUGE_SIZES)),
        max_size=8,
    ),
    st.integers(400, 599),
)
def test_read_hints_with_hostile_headers(
    headers: dict[str, str | tuple[Callable[[int], str], int]], status: int
) -> None:
    """Any value, huge ones included, in any hint header: a positive delay and its header, or
    none; a verdict or none; never an error, and no dearer on ten times longer values.

    The headers are a plain mapping with lower-case names (`read_hints` needs only ``get``), so
    that values httpx would refuse to encode (``µs``) are tried too.
    """

    def built(size: int | None) -> dict[str, str]:
        return {
            name: value if isinstance(value, str) else value[0](size or value[1])
            for name, value in headers.items()
        }

    every = built(None)
    hints = read_hints(every, status, NOW)
    assert hints.delay is None or hints.delay > 0.0
    assert (hints.delay is None) == (hints.header is None)
    assert should_retry(every) == hints.should_retry
    small, large = built(SMALL), built(10 * SMALL)
    short = cpu_time(lambda: read_hints(small, status, NOW), 5)
    long = cpu_time(lambda: read_hints(large, status, NOW), 3)
    assert long <= 30 * short + SLACK, f"{long:.4f}s vs {short:.6f}s of CPU"


# -- configuration durations ----------------------------------------------------------------


def _duration_or_error(text: str) -> float | retrymw.ConfigError:
    try:
        return retrymw.parse_duration(text, field="timeout")
    except retrymw.ConfigError as error:
        return error


@PROPERTY
@given(hostile(DURATION_TOKENS), HUGE_SIZES)
@example(lambda size: "1" * size + "x", 10**5)
@example(lambda size: "1h" + "0" * size + "m", 10**5)
@example(lambda size: "1" * size + "s", 10**6)
def test_configuration_durations(build: Callable[[int], str], size: int) -> None:
    """`retrymw.parse_duration`: seconds within MAX_DURATION or a ConfigError, in linear time."""
    assert_linear(_duration_or_error, build)
    seconds = _duration_or_error(build(size))
    if isinstance(seconds, retrymw.ConfigError):
        assert seconds.field == "timeout"
        assert len(str(seconds)) < 1_000  # the value is shown cut short
    else:
        assert 0.0 <= seconds <= MAX_DURATION


def test_a_rejected_duration_that_looks_like_a_url_is_reported_in_linear_time() -> None:
    """The error for a long word followed by ``://`` costs linear time to build."""
    assert_linear(_duration_or_error, lambda size: "a" * size + " ://")


# -- the server companion's attempt header --------------------------------------------------


@PROPERTY
@given(
    hostile([*DIGITS, " ", "\t", "+", "-", "x", "\x85", "٣"]),
    HUGE_SIZES,
    st.booleans(),
)
@example(lambda size: " " * size + "1", 10**6, False)
@example(lambda size: "1" * size, 10**6, True)
def test_attempt_header(build: Callable[[int], str], size: int, as_bytes: bool) -> None:
    """`attempt_number`: 1 to 999 999 for 1 to 6 ASCII digits, else None; linear."""

    def parse(text: str) -> int | None:
        return attempt_number(text.encode("utf-8") if as_bytes else text)

    assert_linear(parse, build)
    text = build(size)
    number = parse(text)
    digits = (text.encode("utf-8").decode("latin-1") if as_bytes else text).strip()
    if 0 < len(digits) <= 6 and digits.isascii() and digits.isdigit() and int(digits) >= 1:
        assert number == int(digits)
    else:
        assert number is None


@given(st.one_of(st.none(), st.text(max_size=12), st.binary(max_size=12)))
def test_attempt_header_short_values(value: str | bytes | None) -> None:
    """Any short header value: a number from 1 up, or None."""
    number = attempt_number(value)
    assert number is None or 1 <= number <= 999_999


# -- an SDK's retry-count header, as the transport reads it ---------------------------------

SDK_HEADER = "x-stainless-retry-count"


@PROPERTY
@given(hostile([*DIGITS, " ", "\t", "+", "-", "x", "٣"]), HUGE_SIZES)
@example(lambda size: "1" * size, 10**6)
@example(lambda size: "0" * size + "1", 10**5)
def test_sdk_retry_count_value(build: Callable[[int], str], size: int) -> None:
    """`parse_count`: 0 to 99 999 for 1 to 5 ASCII digits, else None (never raises); linear."""
    assert_linear(parse_count, build)
    text = build(size)
    expected = int(text) if 0 < len(text) < 6 and text.isascii() and text.isdigit() else None
    assert parse_count(text) == expected


def _sdk_call(count: str) -> tuple[list[str | None], list[float]]:
    """GET with ``count`` in the SDK header, through a fresh transport, from a server answering
    503, 503, 200: the header each attempt carried, and the sleeps between them."""
    sent: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers.get(SDK_HEADER))
        return httpx.Response(503 if len(sent) < 3 else 200)

    clock = FakeClock()
    transport = RetryTransport(httpx.MockTransport(handler), clock=clock, budget=None)
    with httpx.Client(transport=transport) as client:
        assert client.get(URL, headers={SDK_HEADER: count}).status_code == 200
    return sent, clock.sleeps


@settings(deadline=None, max_examples=30)
@given(
    st.one_of(
        st.integers(0, 10**8).map(str),
        st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
        st.tuples(hostile([*DIGITS, " ", "x", "-"]), HUGE_SIZES).map(lambda pair: pair[0](pair[1])),
    )
)
@example("0")
@example("1")
@example("99999")
@example("100000")
@example(" 1")
def test_sdk_retry_count_on_arrival(count: str) -> None:
    """A request that arrives with any count and no failed SDK attempt before it is retried as
    usual: a count (1 to 5 digits) is renumbered 0, 1, 2; anything else passes untouched."""
    sent, sleeps = _sdk_call(count)
    assert len(sleeps) == 2
    if parse_count(count) is None:
        assert sent == [count] * 3
    else:
        assert sent == ["0", "1", "2"]


def test_sdk_retry_count_is_read_in_linear_time() -> None:
    """A huge count costs the transport linear time."""
    assert_linear(_sdk_call, lambda size: "1" * size + "x")


# -- Redis resume records -------------------------------------------------------------------

REPLY_VALUE = st.one_of(
    st.none(),
    st.binary(max_size=12),
    st.sampled_from([b"1", b"0", b"-1", b"2.5", b"nan", b"inf", b"-inf", b"1e400", b" 3 "]),
    st.tuples(hostile([*DIGITS, ".", "-", "e", "x"]), HUGE_SIZES).map(
        lambda pair: pair[0](pair[1]).encode()
    ),
)


@PROPERTY
@given(st.lists(REPLY_VALUE, min_size=4, max_size=4))
def test_redis_resume_record_reply(values: list[bytes | None]) -> None:
    """A resume record's HMGET reply: a record, None, or ValueError for a value that is not a
    number (the store is then set aside for the call, which goes on in memory). Linear."""
    from retrymw.stores._redis import _record

    try:
        record = _record(values)
    except ValueError:
        return
    assert record is None or isinstance(record.attempts, int)


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([b"1", b"nan", None, None], id="nan-delay"),
        pytest.param([b"-3", b"0", None, None], id="negative-attempts"),
        pytest.param([b"1", b"0", None, b"inf"], id="infinite-next-at"),
    ],
)
def test_redis_resume_record_reply_is_validated(values: list[bytes | None]) -> None:
    """A corrupt record is refused (None or an error), never handed to the engine."""
    from retrymw.stores._redis import _record

    try:
        record = _record(values)
    except ValueError:
        return
    assert record is None


def test_redis_resume_record_reply_is_read_in_linear_time() -> None:
    """A huge number in a reply costs linear time."""
    from retrymw.stores._redis import _record

    def parse(text: str) -> object:
        try:
            return _record([b"1", text.encode(), None, None])
        except ValueError:
            return None

    assert_linear(parse, lambda size: "1" * size + ".5")

"""The openai and anthropic SDKs, unchanged, on `retrymw.httpx2` against a loopback fake API.

Each test gives the SDK ``http_client=httpx2.(Async)Client(transport=...)`` and points it at a
script of `tests.http_server.FlakyServer` on 127.0.0.1 (`tests.sdk.fake_api`), which counts
and records every request: attempts are counted where they land, at the server. Backoff runs
on a `FakeClock`, so a test never sleeps for a hint.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from retrymw import RetryDenied, RetryPolicy, RetryScheduled
from retrymw.httpx2 import AsyncRetryTransport, RetryTransport
from retrymw.testing import FakeClock, RecordingInstrument
from tests.http_server import FlakyServer
from tests.sdk.fake_api import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
    anthropic_error,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    openai_error,
    openai_stream,
)

pytestmark = pytest.mark.anyio

MESSAGES: list[Any] = [{"role": "user", "content": "ping"}]


_OPEN: list[Any] = []


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    """The fake API on 127.0.0.1, stopped at teardown, with every sync SDK client closed."""
    flaky = FlakyServer()
    yield flaky
    while _OPEN:
        _OPEN.pop().close()
    flaky.stop()


def _transport(clock: FakeClock, recorder: RecordingInstrument, **policy: Any) -> RetryTransport:
    return RetryTransport(
        policy=RetryPolicy(attempts=policy.pop("attempts", 3), **policy),
        budget=None,
        clock=clock,
        instruments=[recorder],
    )


def _openai(url: str, transport: RetryTransport, **options: Any) -> openai.OpenAI:
    options.setdefault("max_retries", 0)
    client = openai.OpenAI(
        api_key=OPENAI_KEY,
        base_url=url,
        http_client=httpx2.Client(transport=transport),
        **options,
    )
    _OPEN.append(client)
    return client


def _anthropic(url: str, transport: RetryTransport, **options: Any) -> anthropic.Anthropic:
    options.setdefault("max_retries", 0)
    client = anthropic.Anthropic(
        api_key=ANTHROPIC_KEY,
        base_url=url,
        http_client=httpx2.Client(transport=transport),
        **options,
    )
    _OPEN.append(client)
    return client


def _counts(server: FlakyServer, url: str) -> list[str]:
    return [
        received.headers.get("x-stainless-retry-count", "-") for received in server.received(url)
    ]


def _idempotent() -> dict[str, str]:
    return {"Idempotency-Key": "key-1"}


# -- OpenAI ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "delay"),
    [
        pytest.param({"retry-after-ms": "1500"}, 1.5, id="retry-after-ms"),
        pytest.param({"retry-after": "3"}, 3.0, id="retry-after"),
        pytest.param(
            {"x-ratelimit-reset-requests": "6s", "x-ratelimit-remaining-requests": "0"},
            6.0,
            id="reset-requests",
        ),
        pytest.param(
            {
                "x-ratelimit-reset-tokens": "2.5s",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-requests": "6m0s",
                "x-ratelimit-remaining-requests": "10",
            },
            2.5,
            id="reset-tokens",
        ),
    ],
)
def test_openai_429_waits_for_each_hint(
    server: FlakyServer,
    clock: FakeClock,
    recorder: RecordingInstrument,
    headers: dict[str, str],
    delay: float,
) -> None:
    """A 429 with each OpenAI hint header waits that long, then the completion succeeds."""
    url = server.script(openai_error(429, headers), openai_completion("after 429"))
    client = _openai(url, _transport(clock, recorder, initial_delay=0.1))
    completion = client.chat.completions.create(
        model="gpt-test", messages=MESSAGES, extra_headers=_idempotent()
    )
    assert completion.choices[0].message.content == "after 429"
    assert server.served(url) == 2
    assert clock.sleeps == [delay]
    (scheduled,) = recorder.of_type(RetryScheduled)
    assert (scheduled.retry_after, scheduled.retry_after_header) == (
        delay,
        next(iter(sorted(headers, key=lambda h: "remaining" in h))),
    )


def test_openai_503_retries_with_the_true_retry_count(
    server: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """Two 503s, then success: three requests, numbered 0, 1, 2 in x-stainless-retry-count."""
    url = server.script(openai_error(503), openai_error(503), openai_completion())
    client = _openai(url, _transport(clock, recorder))
    client.chat.completions.create(model="gpt-test", messages=MESSAGES, extra_headers=_idempotent())
    assert _counts(server, url) == ["0", "1", "2"]


def test_openai_post_without_idempotency_key_is_sent_once(
    server: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A completion is a POST: without an Idempotency-Key a 503 is not resent."""
    url = server.script(openai_error(503), openai_completion())
    client = _openai(url, _transport(clock, recorder))
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert server.served(url) == 1
    assert [event.reason for event in recorder.of_type(RetryDenied)] == ["not_idempotent"]


def test_openai_should_retry_false_is_final(
    server: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """x-should-retry: false on a 503 gives up at once (reason server_said_no)."""
    url = server.script(openai_error(503, {"x-should-retry": "false"}), openai_completion())
    client = _openai(url, _transport(clock, recorder))
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(
            model="gpt-test", messages=MESSAGES, extra_headers=_idempotent()
        )
    assert server.served(url) == 1
    assert [event.reason for event in recorder.of_type(RetryDenied)] == ["server_said_no"]


def test_openai_should_retry_true_retries_a_status_the_policy_does_not(
    server: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """x-should-retry: true on a 409 is retried (the default policy does not list 409)."""
    url = server.script(openai_error(409, {"x-should-retry": "true"}), openai_completion("ok"))
    client = _openai(url, _transport(clock, recorder))
    completion = client.chat.completions.create(
        model="gpt-test", messages=MESSAGES, extra_headers=_idempotent()
    )
    assert completion.choices[0].message.content == "ok"
    assert server.served(url) == 2


def test_openai_stream_after_a_retry(
    server: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A streamed completion whose first attempt got a 503 streams every chunk after the retry."""
    url = server.script(openai_error(503), openai_stream("po", "ng"))
    client = _openai(url, _transport(clock, recorder))
    stream = client.chat.completions.create(
        model="gpt-test", messages=MESSAGES, stream=True, extra_headers=_idempotent()
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
    assert text == "pong"
    assert _counts(server, url) == ["0", "1"]


def test_sdk_retries_on_top_are_detected_and_not_multiplied(
    server: FlakyServer,
    clock: FakeClock,
    recorder: RecordingInstrument,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An SDK left at max_retries=2: its retries run once each, 5 requests instead of 9.

    retrymw makes 3 attempts of the SDK's first request; the SDK's two retries (retry count 1
    and 2 on arrival) are sent once each, and the first of them is warned about once.
    """
    url = server.script(openai_error(503))
    client = _openai(url, _transport(clock, recorder), max_retries=2)
    with (
        caplog.at_level(logging.WARNING, logger="retrymw"),
        pytest.raises(openai.InternalServerError),
    ):
        client.chat.completions.create(
            model="gpt-test", messages=MESSAGES, extra_headers=_idempotent()
        )
    assert _counts(server, url) == ["0", "1", "2", "1", "2"]
    warnings = [r for r in caplog.records if "SDK above this transport" in r.getMessage()]
    assert len(warnings) == 1


# -- Anthropic ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "delay"),
    [
        pytest.param({"retry-after": "4"}, 4.0, id="retry-after"),
        pytest.param(
            {
                "anthropic-ratelimit-requests-reset": "2023-11-14T22:13:50Z",
                "anthropic-ratelimit-requests-remaining": "0",
            },
            30.0,
            id="requests-reset",
        ),
        pytest.param(
            {
                "anthropic-ratelimit-output-tokens-reset": "2023-11-14T22:13:27Z",
                "anthropic-ratelimit-output-tokens-remaining": "0",
                "retry-after": "2",
            },
            7.0,
            id="output-tokens-reset",
        ),
    ],
)
def test_anthropic_429_waits_for_each_hint(
    server: FlakyServer,
    clock: FakeClock,
    recorder: RecordingInstrument,
    headers: dict[str, str],
    delay: float,
) -> None:
    """A 429 with each Anthropic hint waits that long (RFC 3339 times against the fake clock)."""
    url = server.script(anthropic_error(429, headers), anthropic_message("after 429"))
    client = _anthropic(url, _transport(clock, recorder, initial_delay=0.1))
    message = client.messages.create(
        model="claude-test", max_tokens=8, messages=MESSAGES, extra_headers=_idempotent()
    )
    assert message.content[0].text == "after 429"  # type: ignore[union-attr]
    assert clock.sleeps == [delay]


def test_anthropic_529_is_retried_through_x_should_retry(
    server: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """529 overloaded with x-should-retry: true (as the API sends it) is retried."""
    url = server.script(
        anthropic_error(529, {"x-should-retry": "true"}), anthropic_message("after 529")
    )
    client = _anthropic(url, _transport(clock, recorder))
    message = client.messages.create(
        model="claude-test", max_tokens=8, messages=MESSAGES, extra_headers=_idempotent()
    )
    assert message.content[0].text == "after 529"  # type: ignore[union-attr]
    assert _counts(server, url) == ["0", "1"]


def test_anthropic_529_without_a_hint_needs_it_in_retry_on(
    server: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A bare 529 is final by default, and retried once retry_on lists it."""
    url = server.script(anthropic_error(529), anthropic_message())
    client = _anthropic(url, _transport(clock, recorder))
    with pytest.raises(anthropic.APIStatusError):
        client.messages.create(
            model="claude-test", max_tokens=8, messages=MESSAGES, extra_headers=_idempotent()
        )
    assert server.served(url) == 1
    url = server.script(anthropic_error(529), anthropic_message("ok"))
    with_529 = _transport(clock, recorder, retry_on=[429, 502, 503, 504, 529, "network", "timeout"])
    message = _anthropic(url, with_529).messages.create(
        model="claude-test", max_tokens=8, messages=MESSAGES, extra_headers=_idempotent()
    )
    assert message.content[0].text == "ok"  # type: ignore[union-attr]
    assert server.served(url) == 2


def test_anthropic_should_retry_false_and_post_without_key(
    server: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """x-should-retry: false is final; so is a 503 on a POST without an Idempotency-Key."""
    url = server.script(anthropic_error(503, {"x-should-retry": "false"}), anthropic_message())
    client = _anthropic(url, _transport(clock, recorder))
    with pytest.raises(anthropic.InternalServerError):
        client.messages.create(
            model="claude-test", max_tokens=8, messages=MESSAGES, extra_headers=_idempotent()
        )
    url_2 = server.script(anthropic_error(503), anthropic_message())
    with pytest.raises(anthropic.InternalServerError):
        _anthropic(url_2, _transport(clock, recorder)).messages.create(
            model="claude-test", max_tokens=8, messages=MESSAGES
        )
    assert (server.served(url), server.served(url_2)) == (1, 1)
    reasons = [event.reason for event in recorder.of_type(RetryDenied)]
    assert reasons == ["server_said_no", "not_idempotent"]


async def test_anthropic_async_stream_after_a_retry(
    server: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """The async client streams a message after a 503, the retry count true on each attempt."""
    url = server.script(anthropic_error(503), anthropic_stream("po", "ng"))
    transport = AsyncRetryTransport(
        policy=RetryPolicy(attempts=3), budget=None, clock=clock, instruments=[recorder]
    )
    client = anthropic.AsyncAnthropic(
        api_key=ANTHROPIC_KEY,
        base_url=url,
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )
    async with client.messages.stream(
        model="claude-test", max_tokens=8, messages=MESSAGES, extra_headers=_idempotent()
    ) as stream:
        text = "".join([piece async for piece in stream.text_stream])
    await client.close()
    assert text == "pong"
    assert _counts(server, url) == ["0", "1"]


async def test_openai_async_client(
    server: FlakyServer, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """AsyncOpenAI on AsyncRetryTransport: a 429 with retry-after-ms, then the completion."""
    url = server.script(openai_error(429, {"retry-after-ms": "250"}), openai_completion("async"))
    transport = AsyncRetryTransport(
        policy=RetryPolicy(attempts=3, initial_delay=0.1),
        budget=None,
        clock=clock,
        instruments=[recorder],
    )
    client = openai.AsyncOpenAI(
        api_key=OPENAI_KEY,
        base_url=url,
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )
    completion = await client.chat.completions.create(
        model="gpt-test", messages=MESSAGES, extra_headers=_idempotent()
    )
    await client.close()
    assert completion.choices[0].message.content == "async"
    assert clock.sleeps == [0.25]

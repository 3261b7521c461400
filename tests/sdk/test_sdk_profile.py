"""The SDK recipe rescues at least what the SDK alone does, and never outlives its deadline.

The real openai and anthropic SDKs, with ``max_retries=0``, on ``profile="sdk"`` transports,
against loopback servers, without an ``Idempotency-Key``: a 429 with ``Retry-After``, a refused
connection and a 500 are each rescued by one resend, as the SDK alone rescues them (both SDKs'
``_should_retry`` retry 408, 409, 429 and every status from 500, whatever the method). What may
have been processed (a read timeout after the request was sent) is still sent once. An SDK left
at ``max_retries=2`` never sends a retry past the deadline of the call it belongs to.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from retrymw import RetryDenied, RetryPolicy
from retrymw.httpx2 import RetryTransport
from retrymw.testing import FakeClock, RecordingInstrument
from tests.http_server import FlakyServer, Step
from tests.sdk.fake_api import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
    anthropic_error,
    anthropic_message,
    openai_completion,
    openai_error,
)

MESSAGES: list[Any] = [{"role": "user", "content": "ping"}]
_OPEN: list[Any] = []


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    """The fake API on 127.0.0.1, stopped at teardown, with every SDK client closed."""
    flaky = FlakyServer()
    yield flaky
    while _OPEN:
        _OPEN.pop().close()
    flaky.stop()


def _transport(clock: FakeClock, recorder: RecordingInstrument, **kw: Any) -> RetryTransport:
    if kw.get("profile") == "http":
        del kw["profile"]  # the default
    return RetryTransport(
        policy=kw.pop("policy", RetryPolicy(attempts=3, initial_delay=0.1)),
        budget=None,
        clock=clock,
        instruments=[recorder],
        **kw,
    )


def _http_client(transport: RetryTransport, **kw: Any) -> httpx2.Client:
    client = httpx2.Client(transport=transport, **kw)
    _OPEN.append(client)
    return client


def _ask_openai(url: str, transport: RetryTransport, **options: Any) -> str | None:
    client = openai.OpenAI(
        api_key=OPENAI_KEY,
        base_url=url,
        http_client=_http_client(transport, **options.pop("client", {})),
        **{"max_retries": 0, **options},
    )
    completion = client.chat.completions.create(model="gpt-test", messages=MESSAGES)
    return completion.choices[0].message.content


def _ask_anthropic(url: str, transport: RetryTransport, **options: Any) -> str | None:
    client = anthropic.Anthropic(
        api_key=ANTHROPIC_KEY,
        base_url=url,
        http_client=_http_client(transport, **options.pop("client", {})),
        **{"max_retries": 0, **options},
    )
    message = client.messages.create(model="claude-test", max_tokens=8, messages=MESSAGES)
    return message.content[0].text  # type: ignore[union-attr]


SDKS = [
    pytest.param((_ask_openai, openai_error, openai_completion), id="openai"),
    pytest.param((_ask_anthropic, anthropic_error, anthropic_message), id="anthropic"),
]
Sdk = tuple[Callable[..., str | None], Callable[..., Step], Callable[..., Step]]


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("profile", ["http", "sdk"])
def test_a_429_with_retry_after_is_rescued_once(
    server: FlakyServer, sdk: Sdk, profile: str, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A POST answered 429 with Retry-After is resent once, after the hint, by either profile."""
    ask, error, answer = sdk
    url = server.script(error(429, {"retry-after": "2"}), answer("after 429"))
    assert ask(url, _transport(clock, recorder, profile=profile)) == "after 429"
    assert server.served(url) == 2
    assert clock.sleeps == [2.0]


@pytest.mark.parametrize("sdk", SDKS)
def test_a_500_once_is_rescued_by_the_sdk_profile(
    server: FlakyServer, sdk: Sdk, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """A POST answered 500 once is resent under profile="sdk" (as both SDKs retry it)."""
    ask, error, answer = sdk
    url = server.script(error(500), answer("after 500"))
    assert ask(url, _transport(clock, recorder, profile="sdk")) == "after 500"
    assert server.served(url) == 2


@pytest.mark.parametrize("sdk", SDKS)
def test_the_http_profile_does_not_retry_a_500(
    server: FlakyServer, sdk: Sdk, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """The default profile leaves a 500 alone: it is not in the HTTP defaults."""
    ask, error, answer = sdk
    url = server.script(error(500), answer())
    with pytest.raises((openai.InternalServerError, anthropic.InternalServerError)):
        ask(url, _transport(clock, recorder))
    assert server.served(url) == 1


class LateListener:
    """A port on 127.0.0.1 that refuses connections until `open` is called, then answers one
    request with ``step`` (a plain HTTP/1.1 response) and closes."""

    def __init__(self, step: Step) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))  # bound, not listening: a connect is refused
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/s/late"
        self._step = step
        self._thread: threading.Thread | None = None
        self.requests = 0

    def open(self) -> None:
        if self._thread is None:
            self._socket.listen(1)
            self._socket.settimeout(30)
            self._thread = threading.Thread(target=self._answer_one, daemon=True)
            self._thread.start()

    def _answer_one(self) -> None:
        connection, _ = self._socket.accept()
        with connection:
            connection.settimeout(30)
            data = b""
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(body) < length:
                body += connection.recv(65536)
            self.requests += 1
            step = self._step
            lines = [f"HTTP/1.1 {step.status} OK"]
            lines += [f"{name}: {value}" for name, value in step.headers.items()]
            lines += [f"Content-Length: {len(step.body)}", "Connection: close", "", ""]
            connection.sendall("\r\n".join(lines).encode() + step.body)

    def close(self) -> None:
        self._socket.close()
        if self._thread is not None:
            self._thread.join(timeout=30)


class OpeningClock(FakeClock):
    """A fake clock that opens the listener at the first backoff sleep."""

    def __init__(self, listener: LateListener) -> None:
        super().__init__()
        self.listener = listener

    def sleep_sync(self, seconds: float) -> None:
        super().sleep_sync(seconds)
        self.listener.open()


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("profile", ["http", "sdk"])
def test_a_refused_connection_is_rescued_once(
    sdk: Sdk, profile: str, recorder: RecordingInstrument
) -> None:
    """Connection refused (nothing sent), then the server is up: one resend of the POST."""
    ask, _, answer = sdk
    listener = LateListener(answer("after refusal"))
    try:
        clock = OpeningClock(listener)
        assert ask(listener.url, _transport(clock, recorder, profile=profile)) == "after refusal"
        assert listener.requests == 1
        assert len(clock.sleeps) == 1
    finally:
        listener.close()


@pytest.mark.parametrize("sdk", SDKS)
def test_a_read_timeout_after_sending_is_not_resent(
    server: FlakyServer, sdk: Sdk, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """The SDK profile still sends a POST once when it may have been processed."""
    ask, _, answer = sdk
    url = server.script(Step(delay=10.0), answer())
    with pytest.raises((openai.APITimeoutError, anthropic.APITimeoutError)):
        ask(url, _transport(clock, recorder, profile="sdk"), client={"timeout": 0.5})
    assert server.served(url) == 1
    assert [event.reason for event in recorder.of_type(RetryDenied)] == ["not_idempotent"]


# -- an SDK left retrying never outlives the deadline -------------------------------------------


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_retries_past_the_deadline_are_refused(
    server: FlakyServer, sdk: Sdk, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """max_retries=2 left on: once the first call's 60 s are spent, the SDK's retries are
    refused without being sent (each SDK attempt costs 30 virtual seconds here)."""
    ask, error, _ = sdk
    url = server.script(error(503, {"retry-after-ms": "1"}), cycle=True)
    policy = RetryPolicy(attempts=3, initial_delay=10, deadline=60, jitter=False)
    hooks = {"request": [lambda request: clock.advance(30)]}  # once per SDK attempt
    transport = _transport(clock, recorder, policy=policy)
    with pytest.raises((openai.APITimeoutError, anthropic.APITimeoutError)):
        ask(url, transport, max_retries=2, client={"event_hooks": hooks})
    # The first SDK attempt starts at t=30 (deadline t=90): attempts at 30, 40 and 60. Its
    # retries arrive at t=90 and t=120: out of time, neither is sent.
    assert server.served(url) == 3
    assert clock.now() >= 120


@pytest.mark.parametrize("sdk", SDKS)
def test_an_sdk_retry_in_time_runs_within_what_is_left(
    server: FlakyServer, sdk: Sdk, clock: FakeClock, recorder: RecordingInstrument
) -> None:
    """An SDK retry that arrives in time is sent once, with the call's remaining time."""
    ask, error, answer = sdk
    url = server.script(error(503, {"retry-after-ms": "1"}), answer("second"))
    policy = RetryPolicy(attempts=1, deadline=60)
    transport = _transport(clock, recorder, policy=policy)
    assert ask(url, transport, max_retries=1) == "second"
    assert server.served(url) == 2

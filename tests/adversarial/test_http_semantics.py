"""HTTP semantics: what the server says it did not process is resent whatever the method.

Attack (issue 29): a POST without an ``Idempotency-Key`` answered 429, or 503 with
``Retry-After``, or refused at connect, was never resent, though the server says it did not
process it (RFC 9110 §15.6.4 and §10.2.3, RFC 6585 §4). What may have been processed stays
sent once: a 503 without ``Retry-After`` (or with one that cannot be read, issue 30's review),
a read timeout or a reset after the request was sent.
And an explicit policy on a transport kept no jitter: its retries ran in lockstep, exactly
1.00 s and 2.00 s after each failure, across every client.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrymw import RetryDenied, RetryPolicy, load_config
from retrymw._core.durations import MAX_DURATION
from retrymw._http.hints import MAX_HINT_LENGTH, parse_retry_after
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.testing import FakeClock, RecordingInstrument
from tests.http_server import FlakyServer, Step

pytestmark = pytest.mark.anyio


class Script:
    """A MockTransport handler answering each request with the next step (the last repeats)."""

    def __init__(self, *steps: int | tuple[int, dict[str, str]] | Exception) -> None:
        self.steps = steps
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        step = self.steps[min(self.calls, len(self.steps) - 1)]
        self.calls += 1
        if isinstance(step, Exception):
            raise step
        status, headers = step if isinstance(step, tuple) else (step, {})
        return httpx.Response(status, headers=headers)


def _transport(
    script: Script, clock: FakeClock, recorder: RecordingInstrument | None = None, **kw: Any
) -> RetryTransport:
    return RetryTransport(
        httpx.MockTransport(script),
        policy=kw.pop("policy", RetryPolicy(attempts=3, initial_delay=0.1)),
        budget=None,
        clock=clock,
        instruments=[recorder] if recorder is not None else (),
        **kw,
    )


def _reasons(recorder: RecordingInstrument) -> list[str]:
    return [event.reason for event in recorder.events if isinstance(event, RetryDenied)]


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(429, id="429"),
        pytest.param((429, {"retry-after": "1"}), id="429-retry-after"),
        pytest.param((503, {"retry-after": "1"}), id="503-retry-after"),
        pytest.param((503, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), id="503-date"),
        pytest.param(httpx.ConnectError("refused"), id="refused"),
    ],
)
def test_a_post_the_server_did_not_process_is_resent(first: Any, clock: FakeClock) -> None:
    """A POST without Idempotency-Key is resent after what says it was not processed."""
    script = Script(first, 200)
    with httpx.Client(transport=_transport(script, clock)) as client:
        assert client.post("http://api.test/v1/charge", content=b"{}").status_code == 200
    assert script.calls == 2


@pytest.mark.parametrize(
    ("first", "reason"),
    [
        pytest.param(503, "not_idempotent", id="503-no-retry-after"),
        pytest.param(502, "not_idempotent", id="502"),
        pytest.param(httpx.ReadTimeout("slow"), "not_idempotent", id="read-timeout"),
        pytest.param(httpx.RemoteProtocolError("reset"), "not_idempotent", id="reset-after-send"),
        pytest.param(httpx.ReadError("reset"), "not_idempotent", id="read-error"),
    ],
)
def test_a_post_that_may_have_been_processed_is_sent_once(
    first: Any, reason: str, clock: FakeClock
) -> None:
    """What may have been processed is never sent twice (a POST without Idempotency-Key)."""
    script = Script(first, 200)
    recorder = RecordingInstrument()
    with httpx.Client(transport=_transport(script, clock, recorder)) as client:
        if isinstance(first, Exception):
            with pytest.raises(type(first)):
                client.post("http://api.test/v1/charge", content=b"{}")
        else:
            assert client.post("http://api.test/v1/charge", content=b"{}").status_code == first
    assert script.calls == 1
    assert _reasons(recorder) == [reason]


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"Retry-After": "soon"}, id="words"),
        pytest.param({"Retry-After": "-1"}, id="negative"),
        pytest.param({"Retry-After": "1.5"}, id="fraction"),
        pytest.param({"Retry-After": ""}, id="empty"),
        pytest.param({"Retry-After": "1" * 5000}, id="too-long"),
        pytest.param({"retry-after-ms": "Wed, 21 Oct 2015 07:28:00 GMT"}, id="ms-date"),
        pytest.param({"x-amz-retry-after": "1000"}, id="other-header"),
    ],
)
def test_a_post_answered_503_with_an_unreadable_retry_after_is_sent_once(
    headers: dict[str, str], clock: FakeClock
) -> None:
    """A 503 says the request was not processed only with a ``Retry-After`` (or
    ``retry-after-ms``) that says, readably, when to send it again: a value it cannot read (a
    garbled proxy header, a misconfigured server) says nothing, and the POST stays sent once.
    Issue 30's review: any such header, readable or not, let the POST be resent."""
    script = Script((503, headers), 200)
    recorder = RecordingInstrument()
    with httpx.Client(transport=_transport(script, clock, recorder)) as client:
        assert client.post("http://api.test/v1/charge", content=b"{}").status_code == 503
    assert script.calls == 1
    assert _reasons(recorder) == ["not_idempotent"]


#: What an httpx header value can hold: visible ASCII, spaces and tabs.
HEADER_TEXT = st.characters(min_codepoint=32, max_codepoint=126) | st.just("\t")


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(HEADER_TEXT, max_size=64),
        st.from_regex(r"\A[0-9]{1,40}\Z"),
        st.text(HEADER_TEXT, min_size=2000, max_size=20_000),
    )
)
def test_a_post_answered_503_is_resent_only_after_a_retry_after_it_can_read(value: str) -> None:
    """Whatever the ``Retry-After`` value, huge ones included: the POST is resent exactly when
    the value is well-formed (delta-seconds or an HTTP-date) and the wait it asks for is within
    the policy's cap; a value that is neither digits nor a date never resends it."""
    clock = FakeClock()
    script = Script((503, {"Retry-After": value}), 200)
    policy = RetryPolicy(attempts=2, initial_delay=0.1, max_delay=MAX_DURATION)
    with httpx.Client(transport=_transport(script, clock, policy=policy)) as client:
        client.post("http://api.test/v1/charge", content=b"{}")
    text = value.strip(" \t")
    # Well-formed: delta-seconds, or an HTTP-date (read against 1970, any date is ahead), and
    # no longer than any hint is read (past it, a value is garbage).
    well_formed = len(value) <= MAX_HINT_LENGTH and (
        text.isdigit() or parse_retry_after(value, 0.0) is not None
    )
    asked = parse_retry_after(value, clock.wall()) if well_formed else None  # None: backoff's
    resent = well_formed and (asked is None or asked <= MAX_DURATION)
    assert script.calls == (2 if resent else 1)


def test_a_429_with_a_body_that_cannot_be_replayed_is_not_resent(clock: FakeClock) -> None:
    """Unprocessed or not, a body that cannot be sent again is not resent."""
    script = Script(429, 200)
    recorder = RecordingInstrument()
    transport = _transport(script, clock, recorder)
    transport.max_replay_body = 4

    def body() -> Iterator[bytes]:
        yield b"0123456789"

    with httpx.Client(transport=transport) as client:
        assert client.post("http://api.test/", content=body()).status_code == 429
    assert script.calls == 1
    assert _reasons(recorder) == ["body_not_replayable"]


def test_x_should_retry_false_still_forbids_resending_a_429(clock: FakeClock) -> None:
    """The server's veto wins over the rule."""
    script = Script((429, {"x-should-retry": "false"}), 200)
    with httpx.Client(transport=_transport(script, clock)) as client:
        assert client.post("http://api.test/", content=b"{}").status_code == 429
    assert script.calls == 1


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    """A loopback server, stopped at teardown."""
    flaky = FlakyServer()
    yield flaky
    flaky.stop()


def test_loopback_post_429_and_503_retry_after_are_resent(server: FlakyServer) -> None:
    """Against a real server: 429, then 503 with Retry-After, then 200: three POSTs, one call."""
    clock = FakeClock()
    url = server.script(Step(429, {"retry-after": "1"}), Step(503, {"retry-after": "1"}), Step(200))
    transport = RetryTransport(
        policy=RetryPolicy(attempts=3), budget=None, clock=clock, instruments=()
    )
    with httpx.Client(transport=transport, timeout=30) as client:
        assert client.post(url, content=b'{"n": 1}').status_code == 200
    assert [r.body for r in server.received(url)] == [b'{"n": 1}'] * 3


def test_loopback_refused_connection_post_is_resent(server: FlakyServer) -> None:
    """A refused connection (nothing listens) is retried for a POST: every attempt is made."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    clock = FakeClock()
    recorder = RecordingInstrument()
    transport = RetryTransport(
        policy=RetryPolicy(attempts=3), budget=None, clock=clock, instruments=[recorder]
    )
    with httpx.Client(transport=transport, timeout=30) as client, pytest.raises(httpx.ConnectError):
        client.post(f"http://127.0.0.1:{port}/", content=b"{}")
    assert _reasons(recorder) == ["max_attempts"]
    assert len(clock.sleeps) == 2


# -- jitter of an explicit policy ---------------------------------------------------------------


def _sleeps(clock: FakeClock, **kw: Any) -> list[float]:
    script = Script(503, 503, 200)
    with httpx.Client(transport=_transport(script, clock, **kw)) as client:
        assert client.get("http://api.test/").status_code == 200
    return clock.sleeps


def test_an_explicit_policy_keeps_the_transports_full_jitter() -> None:
    """RetryPolicy(attempts=3) on a transport: delays drawn in [0, 1] and [0, 2], not 1.0, 2.0."""
    draws = [_sleeps(FakeClock(), policy=RetryPolicy(attempts=3)) for _ in range(20)]
    assert all(0 <= first <= 1.0 and 0 <= second <= 2.0 for first, second in draws)
    assert len({tuple(pair) for pair in draws}) > 1  # not in lockstep across clients
    assert [1.0, 2.0] not in draws


@pytest.mark.parametrize(
    ("jitter", "check"),
    [
        pytest.param(False, lambda s: s == [1.0, 2.0], id="off"),
        pytest.param("equal", lambda s: 0.5 <= s[0] <= 1.0 and 1.0 <= s[1] <= 2.0, id="equal"),
    ],
)
def test_a_policy_that_sets_jitter_keeps_its_own(jitter: Any, check: Any) -> None:
    """jitter=False is no jitter; a kind set is that kind."""
    assert check(_sleeps(FakeClock(), policy=RetryPolicy(attempts=3, jitter=jitter)))


def test_a_per_request_policy_and_a_config_policy_keep_full_jitter_too() -> None:
    """A RetryPolicy selected per request, and a config's policy without jitter, jitter fully."""
    clock = FakeClock()
    transport = _transport(Script(503, 503, 200), clock)
    with httpx.Client(transport=transport) as client:
        extensions = {"retrymw": RetryPolicy(attempts=3, name="override")}
        assert client.get("http://api.test/", extensions=extensions).status_code == 200
    assert clock.sleeps != [1.0, 2.0]
    assert all(0 <= delay <= 2.0 for delay in clock.sleeps)
    config = load_config({"policies": {"api": {"attempts": 3}}})
    assert config.transport("api").retrier.policy.jitter == "full"
    assert config.retrier("api").policy.jitter is None  # a Retrier's default: no jitter


def test_unset_jitter_is_no_jitter_for_a_retrier_and_equal_as_data() -> None:
    """An unset jitter reads as no jitter and compares equal to jitter=False."""
    assert RetryPolicy().jitter is None
    assert RetryPolicy() == RetryPolicy(jitter=False)
    assert "jitter=None" in repr(RetryPolicy())
    assert RetryPolicy().with_default_jitter("full").jitter == "full"
    assert RetryPolicy(jitter=False).with_default_jitter("full").jitter is None
    assert RetryPolicy().replace(attempts=5).with_default_jitter("full").jitter == "full"
    set_off = RetryPolicy().replace(jitter=False)
    assert set_off.replace(attempts=5).with_default_jitter("full").jitter is None


async def test_the_async_transport_keeps_full_jitter(clock: FakeClock) -> None:
    """The async transport's explicit policy jitters as well."""
    transport = AsyncRetryTransport(
        httpx.MockTransport(Script(503, 503, 200)),
        policy=RetryPolicy(attempts=3),
        budget=None,
        clock=clock,
        instruments=(),
    )
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get("http://api.test/")).status_code == 200
    assert transport.retrier.policy.jitter == "full"

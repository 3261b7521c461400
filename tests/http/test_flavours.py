"""httpx and httpx2 side by side: each transport refuses the other flavour's objects."""

from __future__ import annotations

import httpx
import httpx2
import pytest

import retrymw.httpx
import retrymw.httpx2
from retrymw import ConfigError, RetryPolicy
from retrymw.testing import FakeClock

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("face", "inner", "other"),
    [
        pytest.param(retrymw.httpx.AsyncRetryTransport, httpx2.AsyncHTTPTransport, "httpx2"),
        pytest.param(retrymw.httpx.RetryTransport, httpx2.HTTPTransport, "httpx2"),
        pytest.param(retrymw.httpx2.AsyncRetryTransport, httpx.AsyncHTTPTransport, "httpx"),
        pytest.param(retrymw.httpx2.RetryTransport, httpx.HTTPTransport, "httpx"),
    ],
)
def test_an_inner_transport_of_the_other_flavour_is_refused(
    face: type, inner: type, other: str
) -> None:
    """The ConfigError names the field, both flavours and an accepted example."""
    transport = inner()
    with pytest.raises(ConfigError) as caught:
        face(transport)
    error = caught.value
    own = face.__module__.rpartition(".")[2]
    assert error.field == "transport"
    assert f"an {other} transport needs retrymw.{other}'s transports" in error.problem
    assert error.example.startswith(f"{own}.")


async def test_an_async_request_of_the_other_flavour_is_refused() -> None:
    """httpx2's request handed to retrymw.httpx's transport fails at once, naming both."""
    transport = retrymw.httpx.AsyncRetryTransport(
        httpx.MockTransport(lambda request: httpx.Response(200)), clock=FakeClock()
    )
    with pytest.raises(ConfigError) as caught:
        await transport.handle_async_request(httpx2.Request("GET", "http://x.test/"))
    assert caught.value.field == "request"
    assert "is an httpx2 request, but this is retrymw.httpx's transport" in caught.value.problem


def test_a_sync_request_of_the_other_flavour_is_refused() -> None:
    """httpx's request handed to retrymw.httpx2's transport fails at once, naming both."""
    transport = retrymw.httpx2.RetryTransport(
        httpx2.MockTransport(lambda request: httpx2.Response(200)), clock=FakeClock()
    )
    with pytest.raises(ConfigError) as caught:
        transport.handle_request(httpx.Request("GET", "http://x.test/"))
    assert "is an httpx request, but this is retrymw.httpx2's transport" in caught.value.problem
    with pytest.raises(ConfigError, match=r"is not an httpx2\.Request"):
        transport.handle_request(object())


def test_the_helpers_take_either_flavour_and_refuse_other_clients() -> None:
    """request_sync reads the flavour from the client; anything else names the field."""
    calls: list[str] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        calls.append(request.headers["x-stainless-retry-count"])
        return httpx2.Response(503 if len(calls) < 3 else 200)

    with httpx2.Client(transport=httpx2.MockTransport(answer)) as client:
        response = retrymw.httpx.request_sync(
            client,
            "GET",
            "http://x.test/",
            policy=RetryPolicy(attempts=3, initial_delay=0.001, max_delay=0.001),
            headers={"x-stainless-retry-count": "0"},
        )
    assert (response.status_code, calls) == (200, ["0", "1", "2"])
    with pytest.raises(ConfigError) as caught:
        retrymw.httpx2.request_sync(object(), "GET", "http://x.test/")
    assert caught.value.field == "client"

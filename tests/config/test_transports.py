"""`RetryConfig.transport` / `async_transport`: a config's policy, protection and named policies."""

from __future__ import annotations

import sys
from collections.abc import Callable

import httpx
import pytest

from retrymw import PerTarget
from retrymw._config.loader import RetryConfig, load_config
from retrymw._core.errors import ConfigError
from retrymw.httpx import (
    ATTEMPTS_EXTENSION,
    AsyncRetryTransport,
    RetryTransport,
    TransportCircuitOpenError,
)
from retrymw.testing import instant

pytestmark = pytest.mark.anyio

CONFIG = {
    "retry_defaults": {"attempts": 2, "delay": "1ms", "retry_on": [503]},
    "policies": {
        "payments": {"attempts": 4},
        "once": {"attempts": 1},
    },
    "breakers": {"payments": {"failure_threshold": 5, "failure_rate_threshold": None}},
    "budgets": {"payments": {"min_capacity": 50}},
}


def failing(statuses: list[int]) -> Callable[[httpx.Request], httpx.Response]:
    """A handler that answers 503 and records each request's status in ``statuses``."""

    def handle(request: httpx.Request) -> httpx.Response:
        statuses.append(503)
        return httpx.Response(503, request=request)

    return handle


@pytest.fixture
def config() -> RetryConfig:
    return load_config(CONFIG)


def test_the_sync_transport_runs_the_named_policy(config: RetryConfig) -> None:
    """``config.transport("payments")`` makes the policy's attempts, then returns the response."""
    sent: list[int] = []
    transport = config.transport("payments", httpx.MockTransport(failing(sent)))
    assert isinstance(transport, RetryTransport)
    with instant(), httpx.Client(transport=transport) as client:
        response = client.get("http://127.0.0.1/pay")
    assert response.status_code == 503
    assert response.extensions[ATTEMPTS_EXTENSION] == 4
    assert len(sent) == 4


async def test_the_async_transport_runs_the_named_policy(config: RetryConfig) -> None:
    """``config.async_transport("payments")`` behaves like its sync twin."""
    sent: list[int] = []
    transport = config.async_transport("payments", httpx.MockTransport(failing(sent)))
    assert isinstance(transport, AsyncRetryTransport)
    with instant():
        async with httpx.AsyncClient(transport=transport) as client:
            response = await client.get("http://127.0.0.1/pay")
    assert response.extensions[ATTEMPTS_EXTENSION] == 4
    assert len(sent) == 4


def test_without_a_name_the_transport_runs_the_defaults(config: RetryConfig) -> None:
    """No name means the defaults, as with ``config.retrier()``."""
    sent: list[int] = []
    with (
        instant(),
        httpx.Client(
            transport=config.transport(None, httpx.MockTransport(failing(sent)))
        ) as client,
    ):
        assert client.get("http://127.0.0.1/").extensions[ATTEMPTS_EXTENSION] == 2


@pytest.mark.parametrize(
    ("override", "attempts"),
    [
        pytest.param("once", 1, id="once"),
        pytest.param("payments", 4, id="payments"),
        pytest.param(None, 2, id="the-transports-own"),
    ],
)
def test_a_request_selects_a_named_policy_of_the_config(
    config: RetryConfig, override: str | None, attempts: int
) -> None:
    """``extensions={"retrymw": name}`` picks any policy of the config, per request."""
    sent: list[int] = []
    transport = config.transport(None, httpx.MockTransport(failing(sent)))
    extensions = {} if override is None else {"retrymw": override}
    with instant(), httpx.Client(transport=transport) as client:
        response = client.get("http://127.0.0.1/", extensions=extensions)
    assert response.extensions[ATTEMPTS_EXTENSION] == attempts
    assert len(sent) == attempts


def test_an_unknown_policy_name_lists_the_config_policies(config: RetryConfig) -> None:
    """A request naming no policy of the config gets an error listing the known ones."""
    transport = config.transport(None, httpx.MockTransport(failing([])))
    with httpx.Client(transport=transport) as client, pytest.raises(ConfigError) as caught:
        client.get("http://127.0.0.1/", extensions={"retrymw": "nope"})
    assert "known: once, payments" in caught.value.problem


def test_the_transport_shares_the_configured_budget(config: RetryConfig) -> None:
    """The budget is the config's object: the transport's retries show in its statistics."""
    transport = config.transport("payments", httpx.MockTransport(failing([])))
    assert transport.retrier.budget is config.budget("payments")
    assert transport.retrier.budget is config.retrier("payments").budget
    before = config.budget("payments").statistics().acquired
    with instant(), httpx.Client(transport=transport) as client:
        client.get("http://127.0.0.1/")
    assert config.budget("payments").statistics().acquired == before + 3


def test_the_transport_uses_the_configured_breaker(config: RetryConfig) -> None:
    """The breaker configured for the policy is the template of the transport's per-host
    circuits (DESIGN §15), shared by every transport the config builds for the name."""
    sent: list[int] = []
    transport = config.transport("payments", httpx.MockTransport(failing(sent)))
    circuits = transport.retrier.breaker
    assert isinstance(circuits, PerTarget)
    assert circuits.template is config.breaker("payments")
    assert config.transport("payments").retrier.breaker is circuits
    with instant(), httpx.Client(transport=transport) as client:
        assert client.get("http://127.0.0.1/").status_code == 503  # 4 failed attempts
        # failure_threshold 5: the fifth failure opens the host's circuit mid-call ...
        assert client.get("http://127.0.0.1/").status_code == 503
        assert len(sent) == 5
        # ... and the next request is refused before it is sent.
        with pytest.raises(TransportCircuitOpenError):
            client.get("http://127.0.0.1/")
    assert len(sent) == 5
    circuit = circuits.get("127.0.0.1")
    assert circuit is not None
    assert circuit.statistics().state == "open"
    assert circuit.name == "payments:127.0.0.1"


def test_a_policy_without_protection_gets_the_transport_defaults(config: RetryConfig) -> None:
    """No breaker and the transport's default: a fresh budget per host."""
    transport = config.transport("once", httpx.MockTransport(failing([])))
    assert transport.retrier.breaker is None
    assert isinstance(transport.retrier.budget, PerTarget)
    assert transport.retrier.budget is not config.retrier("once").budget


def test_each_call_builds_a_new_transport(config: RetryConfig) -> None:
    """A transport owns its inner transport, so it is not cached like a retrier."""
    assert config.transport("payments") is not config.transport("payments")


def test_an_unknown_name_is_a_key_error(config: RetryConfig) -> None:
    """As with ``config.policy``, the error lists the known policies."""
    with pytest.raises(KeyError, match="known policies: once, payments"):
        config.async_transport("nope")


def test_without_httpx_the_error_names_the_extra(
    config: RetryConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx is imported only when a transport is built; without it the error says what to do."""
    monkeypatch.setitem(sys.modules, "httpx", None)
    monkeypatch.delitem(sys.modules, "retrymw.httpx")
    with pytest.raises(ImportError, match=r"pip install 'retrymw\[httpx\]'"):
        config.transport("payments")
    assert config.retrier("payments").policy.attempts == 4  # the rest of the config works

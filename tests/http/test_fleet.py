"""``fleet=`` on the four transports: two transports (two members) spend one host budget.

Each transport stands for one process: its own `RedisFleet` member on a real redis-server, in
one namespace. The upstream is an `httpx.MockTransport` (an `httpx2.MockTransport` for httpx2)
answering 503 to everything, an outage; the test counts the attempts it receives.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest

import retrymw.httpx
import retrymw.httpx2
from retrymw import RetryPolicy
from retrymw.fleet import FleetStatistics, RedisFleet
from retrymw.testing import FakeClock
from tests.redis_server import RedisServer, redis_server

FACES = [
    pytest.param(retrymw.httpx.RetryTransport, httpx, id="httpx-sync"),
    pytest.param(retrymw.httpx.AsyncRetryTransport, httpx, id="httpx-async"),
    pytest.param(retrymw.httpx2.RetryTransport, httpx2, id="httpx2-sync"),
    pytest.param(retrymw.httpx2.AsyncRetryTransport, httpx2, id="httpx2-async"),
]
URL = "http://api.test/orders"
MIN_CAPACITY = 10  # RetryBudget's default: one bucket's floor


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    directory: Path = tmp_path_factory.mktemp("redis")
    with redis_server(directory) as running:
        yield running


class Upstream:
    """An outage: every request gets a 503, and is counted."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, request: Any) -> Any:
        self.requests += 1
        return httpx.Response(503) if isinstance(request, httpx.Request) else httpx2.Response(503)


def _send(transport: Any, library: Any, calls: int) -> None:
    """``calls`` GETs through ``transport`` with the client of its colour."""
    if isinstance(transport, (retrymw.httpx.RetryTransport, retrymw.httpx2.RetryTransport)):
        with library.Client(transport=transport) as client:
            for _ in range(calls):
                assert client.get(URL).status_code == 503
        return

    async def run() -> None:
        async with library.AsyncClient(transport=transport) as client:
            for _ in range(calls):
                assert (await client.get(URL)).status_code == 503

    anyio.run(run)


def _outage(
    face: Any, library: Any, fleets: list[RedisFleet | None]
) -> tuple[int, list[FleetStatistics]]:
    """Retries the transports made in an outage, members syncing between rounds of calls.

    The fleets' statistics are read while the transports live: a fleet holds them weakly.
    """
    upstream = Upstream()
    policy = RetryPolicy(attempts=4, initial_delay=0.0, jitter=False)
    transports = [
        face(
            library.MockTransport(upstream),
            policy=policy,
            clock=FakeClock(),
            **({} if fleet is None else {"fleet": fleet}),
        )
        for fleet in fleets
    ]
    calls = 0
    for _ in range(10):
        for transport, fleet in zip(transports, fleets, strict=True):
            _send(transport, library, 5)
            calls += 5
            if fleet is not None:
                assert fleet.sync()
    stats = [fleet.statistics() for fleet in fleets if fleet is not None]
    return upstream.requests - calls, stats


@pytest.mark.parametrize(("face", "library"), FACES)
def test_two_transports_share_one_host_budget(
    server: RedisServer, request: pytest.FixtureRequest, face: Any, library: Any
) -> None:
    """Two members retry one bucket's worth, where two unshared transports retry two."""
    namespace = request.node.callspec.id
    fleets = [
        RedisFleet(server.url, namespace=namespace, sync_interval="100ms", start=False)
        for _ in range(2)
    ]
    try:
        shared, stats = _outage(face, library, list(fleets))
    finally:
        for fleet in fleets:
            fleet.close()
    alone, _ = _outage(face, library, [None, None])

    assert alone == 2 * MIN_CAPACITY  # each transport's own budget for api.test, spent whole
    # One fleet bucket, plus each member's local share before its first step (one token).
    assert MIN_CAPACITY <= shared <= MIN_CAPACITY + 2
    assert [s.members for s in stats] == [2, 2]
    assert [s.targets for s in stats] == [1, 1]  # the PerTarget's budget for api.test
    assert not any(s.degraded for s in stats)
    assert sum(s.tokens_leased for s in stats) == shared - 2

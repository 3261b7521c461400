"""The transports and helpers against a real server on 127.0.0.1 that misbehaves on purpose.

Each test reproduces an attack from issue 12: a body or head trickled byte by byte, a body that
stalls, a stream with long gaps, a retry predicate that raises, a certificate nobody trusts.
Wall time is the behaviour under test here, so the calls run on the system clock and each
bound is asserted with a generous margin around small deadlines; the server's own trickles are
a few seconds long, so a test that regresses fails on its bound instead of hanging.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from retrymw import Outcome, RetryPolicy, on_predicate
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.testing import RecordingInstrument
from tests.http_server import FlakyServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    """A scripted HTTP server on 127.0.0.1, stopped at teardown (which ends its trickles)."""
    flaky = FlakyServer()
    yield flaky
    flaky.stop()


# -- a retry_on predicate that raises ------------------------------------------------------------


class PredicateFailed(Exception):
    """Raised by the test's retry_on predicate."""


def judge(outcome: Outcome) -> bool:
    """A retry_on predicate that fails on every response it is shown."""
    if outcome.result is not None:
        raise PredicateFailed("cannot judge")
    return False


@pytest.mark.parametrize("instruments", [(), (RecordingInstrument(),)], ids=["plain", "engine"])
async def test_raising_predicate_closes_the_response_it_judged(
    server: FlakyServer, instruments: tuple[RecordingInstrument, ...]
) -> None:
    """The predicate's error propagates and the pool of one connection is free for the next."""
    url = server.script(200)
    policy = RetryPolicy(retry_on=on_predicate(judge))
    transport = AsyncRetryTransport(
        httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=1)),
        policy=policy,
        instruments=instruments,
        budget=None,
    )
    async with httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(2, pool=0.5)) as client:
        for _ in range(3):  # a leaked connection makes the second call a PoolTimeout
            with pytest.raises(PredicateFailed):
                await client.send(client.build_request("GET", url), stream=True)
    assert server.served(url) == 3


@pytest.mark.parametrize("instruments", [(), (RecordingInstrument(),)], ids=["plain", "engine"])
def test_sync_raising_predicate_closes_the_response_it_judged(
    server: FlakyServer, instruments: tuple[RecordingInstrument, ...]
) -> None:
    """Sync twin: the predicate's error propagates and the single connection is reused."""
    url = server.script(200)
    transport = RetryTransport(
        httpx.HTTPTransport(limits=httpx.Limits(max_connections=1)),
        policy=RetryPolicy(retry_on=on_predicate(judge)),
        instruments=instruments,
        budget=None,
    )
    with httpx.Client(transport=transport, timeout=httpx.Timeout(2, pool=0.5)) as client:
        for _ in range(3):
            with pytest.raises(PredicateFailed):
                client.send(client.build_request("GET", url), stream=True)
    assert server.served(url) == 3

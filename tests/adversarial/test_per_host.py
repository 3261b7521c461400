"""One circuit per host on a transport, whatever breaker it is given (issue 29, DESIGN §15).

Attack: one transport, five hosts, one of them dead, and the README's own form
``breaker=CircuitBreaker(...)``. A circuit shared by every host opens on the dead host's
failures and then refuses the calls to the four healthy ones. Each host must have its own
circuit, named ``"<breaker>:<host>"`` in the events, and a healthy host must never be refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest

from retrymw import BreakerStateChanged, CircuitBreaker, PerTarget, RetryPolicy, load_config
from retrymw import httpx as rhttpx
from retrymw import httpx2 as rhttpx2
from retrymw.testing import FakeClock, RecordingInstrument
from tests.http_server import FlakyServer

pytestmark = pytest.mark.anyio

HOSTS = [f"h{i}.test" for i in range(5)]
DEAD = "h2.test"
POLICY = RetryPolicy(attempts=2, initial_delay=0, jitter=False)


def _breaker(clock: FakeClock) -> CircuitBreaker:
    return CircuitBreaker(name="api", failure_threshold=3, failure_rate_threshold=None, clock=clock)


def _state(circuits: PerTarget[CircuitBreaker], target: str) -> str:
    circuit = circuits.get(target)
    assert circuit is not None
    return circuit.state


def _mock(request: Any) -> Any:
    module = httpx if isinstance(request, httpx.Request) else httpx2
    return module.Response(503 if request.url.host == DEAD else 200)


def _refused(get: Any, url: str, refused: type[Exception]) -> bool:
    try:
        get(url)
    except refused:
        return True
    return False


def _healthy_refused_sync(client: Any, rounds: int, refused: type[Exception]) -> int:
    """Call every host (the dead one too) ``rounds`` times; count the healthy ones refused."""
    refusals = [
        (host, _refused(client.get, f"http://{host}/", refused))
        for _ in range(rounds)
        for host in HOSTS
    ]
    return sum(was_refused for host, was_refused in refusals if host != DEAD)


@pytest.mark.parametrize(
    "face",
    [pytest.param(rhttpx, id="httpx"), pytest.param(rhttpx2, id="httpx2")],
)
def test_one_dead_host_of_five_refuses_no_healthy_call(face: Any) -> None:
    """A plain CircuitBreaker on a transport is one circuit per host: 0 healthy calls refused."""
    module = httpx if face is rhttpx else httpx2
    clock = FakeClock()
    recorder = RecordingInstrument()
    transport = face.RetryTransport(
        module.MockTransport(_mock),
        policy=POLICY,
        breaker=_breaker(clock),
        budget=None,
        clock=clock,
        instruments=[recorder],
    )
    with module.Client(transport=transport) as client:
        refused = _healthy_refused_sync(client, 10, face.TransportCircuitOpenError)
        with pytest.raises(face.TransportCircuitOpenError):  # the dead host's circuit is open
            client.get(f"http://{DEAD}/")
    assert refused == 0
    circuits = transport.retrier.breaker
    assert isinstance(circuits, PerTarget)
    states = {target: _state(circuits, target) for target in circuits}
    assert states == {host: ("open" if host == DEAD else "closed") for host in HOSTS}
    opened = [
        event.circuit
        for event in recorder.events
        if isinstance(event, BreakerStateChanged) and event.state == "open"
    ]
    assert opened == [f"api:{DEAD}"]


async def test_async_transport_keeps_hosts_apart_too(clock: FakeClock) -> None:
    """The async transport does the same."""
    transport = rhttpx.AsyncRetryTransport(
        httpx.MockTransport(_mock),
        policy=POLICY,
        breaker=_breaker(clock),
        budget=None,
        clock=clock,
        instruments=(),
    )
    refused: list[str] = []
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(10):
            for host in HOSTS:
                with contextlib.suppress(rhttpx.TransportCircuitOpenError):
                    await client.get(f"http://{host}/")
                    continue
                refused.append(host)
    assert set(refused) == {DEAD}


@pytest.fixture
def servers() -> Iterator[list[FlakyServer]]:
    """Five loopback servers (five hosts: 127.0.0.1 on five ports), stopped at teardown."""
    started = [FlakyServer() for _ in range(5)]
    yield started
    for server in started:
        server.stop()


def test_one_dead_loopback_server_of_five(servers: list[FlakyServer]) -> None:
    """Against real servers: the dead one's circuit opens, the four healthy ones never refuse."""
    clock = FakeClock()
    urls = [server.script(200) for server in servers]
    urls[2] = servers[2].script(503, cycle=True)
    transport = rhttpx.RetryTransport(
        policy=POLICY, breaker=_breaker(clock), budget=None, clock=clock, instruments=()
    )
    refused = dict.fromkeys(urls, 0)
    with httpx.Client(transport=transport, timeout=30) as client:
        for _ in range(6):
            for url in urls:
                refused[url] += _refused(client.get, url, rhttpx.TransportCircuitOpenError)
    assert [refused[url] for url in urls] == [0, 0, refused[urls[2]], 0, 0]
    assert refused[urls[2]] > 0
    for url in (urls[0], urls[1], urls[3], urls[4]):
        assert servers[urls.index(url)].served(url) == 6
    circuits = transport.retrier.breaker
    assert isinstance(circuits, PerTarget)
    dead = f"127.0.0.1:{servers[2].base_url.rsplit(':', 1)[1]}"
    assert _state(circuits, dead) == "open"
    circuit = circuits.get(dead)
    assert circuit is not None
    assert circuit.name == f"api:{dead}"


def test_the_same_breaker_on_two_transports_shares_each_hosts_circuit() -> None:
    """Two transports given one breaker share its per-host circuits, as they shared it."""
    clock = FakeClock()
    breaker = _breaker(clock)
    first = rhttpx.RetryTransport(httpx.MockTransport(_mock), breaker=breaker, clock=clock)
    second = rhttpx.RetryTransport(httpx.MockTransport(_mock), breaker=breaker, clock=clock)
    assert first.retrier.breaker is second.retrier.breaker
    scoped = PerTarget(breaker)
    third = rhttpx.RetryTransport(httpx.MockTransport(_mock), breaker=scoped, clock=clock)
    assert third.retrier.breaker is scoped  # a PerTarget is used as it is


def test_a_config_transport_has_one_circuit_per_host() -> None:
    """load_config(...).transport(name) with a breakers section: one circuit per host."""
    config = load_config(
        {
            "policies": {"api": {"attempts": 2, "delay": "0s", "backoff": "fixed"}},
            "breakers": {"api": {"failure_threshold": 3, "failure_rate_threshold": None}},
        }
    )
    transport = config.transport("api", httpx.MockTransport(_mock))
    with httpx.Client(transport=transport) as client:
        refused = _healthy_refused_sync(client, 10, rhttpx.TransportCircuitOpenError)
    assert refused == 0
    circuits = transport.retrier.breaker
    assert isinstance(circuits, PerTarget)
    assert circuits.template is config.breaker("api")
    assert sorted(circuits) == sorted(HOSTS)


def test_a_default_breaker_hammered_by_a_dead_host_refuses_no_healthy_call() -> None:
    """breaker=CircuitBreaker() (its defaults): the dead host called 20 times a round opens
    its own circuit; the healthy hosts, called once a round, are never refused (a shared
    circuit refused all 200 of them)."""
    clock = FakeClock()
    transport = rhttpx.RetryTransport(
        httpx.MockTransport(_mock),
        policy=POLICY,
        breaker=CircuitBreaker(clock=clock),
        budget=None,
        clock=clock,
        instruments=(),
    )
    healthy = [host for host in HOSTS if host != DEAD]
    refused = dict.fromkeys(HOSTS, 0)
    with httpx.Client(transport=transport) as client:
        for _ in range(50):
            for host in [DEAD] * 20 + healthy:
                refused[host] += _refused(
                    client.get, f"http://{host}/", rhttpx.TransportCircuitOpenError
                )
            clock.advance(0.1)
    assert [refused[host] for host in healthy] == [0, 0, 0, 0]
    assert refused[DEAD] > 900  # its own circuit is open: the dead host fails fast

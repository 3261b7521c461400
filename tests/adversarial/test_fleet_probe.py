"""A store fault never fails a call: the half-open probe's lease (issue 28, fleet).

The lease is the one store command on the request path. A garbage reply to it must not raise
into the call, and the request must not run while the breaker's lock is held (every other
caller of the breaker would wait on the store).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from retrymw import CircuitBreaker
from retrymw.fleet import RedisFleet
from tests.fleet.conftest import RedisServer, redis_server
from tests.fleet.faults import proxy, wait_for
from tests.resp_server import DEFAULT, Command, Forward, Simple

__all__ = ["redis_server"]


class ProbeTamper:
    """Answers the probe lease's script (``EVALSHA`` with 2 keys) through ``answer``."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.on = False
        self.leases = 0

    def __call__(self, command: Command) -> Any:
        if not self.on or command.name != "EVALSHA" or not _is_probe(command):
            return DEFAULT
        self.leases += 1
        return self.answer(command)


def _is_probe(command: Command) -> bool:
    """The probe lease's script: two keys, the second its circuit's ``probes``."""
    return command.args[1:2] == (b"2",) and b"probes" in command.args[3]


def _half_open(server_url: str, *, probe_timeout: str = "2s") -> tuple[list[RedisFleet], Any]:
    """Two members of one circuit, tripped by both, past its (short) open period."""
    fleets = [
        RedisFleet(
            server_url, namespace="lease", timeout="2s", probe_timeout=probe_timeout, start=False
        )
        for _ in range(2)
    ]
    breakers = []
    for fleet in fleets:
        breaker = CircuitBreaker(name="api", failure_threshold=2, recovery_timeout="200ms")
        fleet.attach(breaker)
        breakers.append(breaker)
    for fleet in fleets:
        assert fleet.sync()
    for breaker in breakers:
        for _ in range(2):
            assert breaker.allow_request()
            breaker.record_failure()
    for _ in range(2):
        for fleet in fleets:
            assert fleet.sync()
    assert fleets[0].statistics().open_circuits == 1
    assert wait_for(lambda: breakers[0].state == "half_open", 5.0)
    return fleets, breakers[0]


GARBAGE = [
    pytest.param(lambda command: b"garbage", id="string"),
    pytest.param(lambda command: [], id="empty-array"),
    pytest.param(lambda command: [b"yes", b"v1"], id="words"),
    pytest.param(lambda command: [1], id="short"),
    pytest.param(lambda command: [1, 10**30, 0, 0], id="huge-version"),
    pytest.param(lambda command: [1, -5, 0, 0], id="negative-version"),
    pytest.param(lambda command: Simple("OK"), id="status"),
]


@pytest.mark.parametrize("answer", GARBAGE)
def test_a_garbage_lease_reply_never_raises_into_the_call(
    redis_server: RedisServer, answer: Any
) -> None:
    """The breaker decides locally (one probe) and the fleet says it is degraded."""
    tamper = ProbeTamper(answer)
    with proxy(redis_server, tamper) as front:
        fleets, breaker = _half_open(front.url)
        try:
            tamper.on = True
            assert breaker.allow_request()  # the local probe: no exception
            assert tamper.leases == 1
            assert not breaker.allow_request()  # one probe at a time, as without a fleet
            breaker.record_success()
            assert fleets[0].statistics().degraded
        finally:
            for fleet in fleets:
                fleet.close()


def test_the_lease_request_never_holds_the_breakers_lock(redis_server: RedisServer) -> None:
    """While the store sits on the lease, other callers of the breaker are answered at once."""
    answered = threading.Event()
    release = threading.Event()
    breaker_box: list[CircuitBreaker] = []
    others_done: list[bool] = []

    def stall(command: Command) -> Any:
        # Another thread reads the breaker while this lease request is in flight.
        def read() -> None:
            breaker_box[0].statistics()
            answered.set()

        other = threading.Thread(target=read)
        other.start()
        others_done.append(answered.wait(3.0))
        release.set()
        return Forward()

    tamper = ProbeTamper(stall)
    with proxy(redis_server, tamper) as front:
        fleets, breaker = _half_open(front.url, probe_timeout="10s")
        breaker_box.append(breaker)
        try:
            tamper.on = True
            breaker.allow_request()
            assert release.is_set()
            assert others_done, "no lease was asked"
            assert all(others_done), "statistics() waited for the store's lease reply"
        finally:
            for fleet in fleets:
                fleet.close()

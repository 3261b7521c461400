"""Time limits for blocking attempts (`retrymw._http.limits`), below the transports.

The bounded network backend is checked on httpcore's in-memory ``MockBackend``; the transports
against real servers are in ``test_misbehaving_server.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpcore
import httpx
import pytest

from retrymw import RetryPolicy
from retrymw._engine.time_limits import within
from retrymw._http.limits import bound_transport, time_left
from retrymw.httpx import ATTEMPTS_EXTENSION, RetryTransport
from retrymw.testing import FakeClock
from tests.http.flavours import bind

FLAVOUR = bind(globals())


def test_time_left_cuts_timeouts_to_the_deadline_and_raises_once_it_passed() -> None:
    """Outside `within` a timeout is kept; inside it is cut, and past the deadline it raises."""
    assert time_left(5.0, httpcore.ReadTimeout) == 5.0
    assert time_left(None, httpcore.ReadTimeout) is None
    with within(10.0):
        assert time_left(None, httpcore.ReadTimeout) == pytest.approx(10.0, abs=0.5)
        assert time_left(0.5, httpcore.ReadTimeout) == 0.5
        with within(0.2):  # an inner limit that ends sooner wins
            assert time_left(5.0, httpcore.ReadTimeout) == pytest.approx(0.2, abs=0.1)
        with within(60.0):  # and one that ends later does not extend the outer
            assert time_left(None, httpcore.ReadTimeout) == pytest.approx(10.0, abs=0.5)
    with within(0.0), pytest.raises(httpcore.WriteTimeout, match="time limit"):
        time_left(1.0, httpcore.WriteTimeout)


def test_bounded_backend_streams_honour_the_deadline() -> None:
    """Every connect, TLS start, read and write goes through `time_left`."""
    pool = httpcore.ConnectionPool(network_backend=httpcore.MockBackend([b"ab"], http2=True))
    transport = httpx.HTTPTransport()
    transport._pool = pool
    assert bound_transport(transport)
    assert bound_transport(transport)  # idempotent: wrapped once
    backend = pool._network_backend
    assert isinstance(getattr(backend, "backend", None), httpcore.MockBackend)
    stream = backend.connect_unix_socket("/nowhere", timeout=1.0)
    stream = stream.start_tls(None, "example.test", timeout=1.0)  # type: ignore[arg-type]
    assert stream.get_extra_info("ssl_object").selected_alpn_protocol() == "h2"  # passed on
    stream.write(b"x" * 200_000, timeout=1.0)  # split into pieces, each bounded
    assert stream.read(10, timeout=1.0) == b"ab"
    backend.sleep(0.0)
    with within(0.0):
        for operation in (
            lambda: backend.connect_tcp("127.0.0.1", 1),
            lambda: stream.read(10),
            lambda: stream.write(b"x"),
        ):
            with pytest.raises(
                (httpcore.ConnectTimeout, httpcore.ReadTimeout, httpcore.WriteTimeout)
            ):
                operation()
    stream.close()


def test_other_transports_are_left_alone() -> None:
    """A transport without an httpcore pool cannot be bounded; nothing is changed on it."""
    mock = httpx.MockTransport(lambda request: httpx.Response(200))
    assert not bound_transport(mock)
    assert not bound_transport(None)


class SlowBody(httpx.SyncByteStream):
    """A 503 body of ten chunks 30 ms apart, from a transport `within` cannot reach."""

    def __init__(self) -> None:
        self.sent = 0

    def __iter__(self) -> Iterator[bytes]:
        for _ in range(10):
            time.sleep(0.03)
            self.sent += 1
            yield b"x"


def test_sync_drain_stops_between_chunks_beyond_the_backends_reach() -> None:
    """With an inner transport that is not httpx's, the drain still stops by its limit."""
    bodies: list[SlowBody] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if bodies:
            return httpx.Response(200)
        bodies.append(SlowBody())
        return httpx.Response(503, headers={"content-length": "10"}, stream=bodies[0])

    transport = RetryTransport(
        httpx.MockTransport(handler),
        policy=RetryPolicy(attempts=2, initial_delay=0.05),
        clock=FakeClock(),
        instruments=(),
        budget=None,
    )
    with httpx.Client(transport=transport) as client:
        response = client.get("http://api.example.test/")
    assert response.extensions[ATTEMPTS_EXTENSION] == 2
    assert 1 <= bodies[0].sent < 10

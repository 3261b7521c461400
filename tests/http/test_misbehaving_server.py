"""The transports and helpers against a real server on 127.0.0.1 that misbehaves on purpose.

Each test reproduces an attack from issue 12: a body or head trickled byte by byte, a body that
stalls, a stream with long gaps, a retry predicate that raises, a certificate nobody trusts.
Wall time is the behaviour under test here, so the calls run on the system clock and each
bound is asserted with a generous margin around small deadlines; the server's own trickles are
a few seconds long, so a test that regresses fails on its bound instead of hanging.
"""

from __future__ import annotations

import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from retrymw import AttemptStarted, ConfigError, Outcome, Retrier, RetryPolicy, on_predicate
from retrymw._http.responses import DRAIN_TIMEOUT
from retrymw.httpx import (
    ATTEMPTS_EXTENSION,
    AsyncRetryTransport,
    RetryTransport,
    request,
    request_sync,
)
from retrymw.testing import FakeClock, RecordingInstrument
from tests.http.flavours import bind
from tests.http_server import FlakyServer, Step

FLAVOUR = bind(globals())
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


# -- deadlines and timeouts are bounds ------------------------------------------------------------

# Every wall-time bound below is the policy's limit plus this: generous for a machine whose
# CPUs are busy with other work (0.3 s was overrun there), yet well below the 3 s or more each
# misbehaving server would otherwise hold a call.
MARGIN = 1.0
DEADLINE = 0.5
# A 503 whose 30-byte body takes 3 s to arrive, or arrives after a 3 s stall.
TRICKLED_503 = Step(503, body=b"x" * 30, pace=0.1)
STALLED_503 = Step(503, body=b"x" * 30, stall=3.0)
# Headers sent one byte every 50 ms (about 3 s for the whole head).
TRICKLED_HEAD = Step(200, head_pace=0.05)
# A 200 whose body takes 3 s.
TRICKLED_200 = Step(200, body=b"y" * 30, pace=0.1)


def quick(**fields: Any) -> RetryPolicy:
    """A policy retrying every 50 ms, with ``fields`` on top."""
    return RetryPolicy(**{"attempts": 5, "backoff": "fixed", "initial_delay": 0.05, **fields})


class Stopwatch:
    """Measures the wall time of the block it wraps (``time.monotonic``)."""

    def __enter__(self) -> Stopwatch:
        self.started = time.monotonic()
        self.seconds = float("inf")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.seconds = time.monotonic() - self.started


superseded_bodies = pytest.mark.parametrize(
    "step", [pytest.param(TRICKLED_503, id="trickled"), pytest.param(STALLED_503, id="stalled")]
)


@superseded_bodies
async def test_slow_superseded_body_cannot_outlast_the_deadline(
    server: FlakyServer, step: Step
) -> None:
    """A 503 whose body trickles or stalls: retries go on, and by the deadline the last 503 is
    returned (open, as promised), not an AttemptTimeoutError."""
    url = server.script(step)
    transport = AsyncRetryTransport(policy=quick(deadline=DEADLINE), instruments=(), budget=None)
    async with httpx.AsyncClient(transport=transport) as client:
        request = client.build_request("GET", url)
        with Stopwatch() as watch:
            response = await client.send(request, stream=True)
        await response.aclose()
    assert watch.seconds < DEADLINE + MARGIN
    assert response.status_code == 503
    assert response.extensions[ATTEMPTS_EXTENSION] >= 2


@superseded_bodies
def test_sync_slow_superseded_body_cannot_outlast_the_deadline(
    server: FlakyServer, step: Step
) -> None:
    """Sync twin: the drain of a slow superseded body ends with the backoff delay."""
    url = server.script(step)
    transport = RetryTransport(policy=quick(deadline=DEADLINE), instruments=(), budget=None)
    with httpx.Client(transport=transport) as client:
        request = client.build_request("GET", url)
        with Stopwatch() as watch:
            response = client.send(request, stream=True)
        response.close()
    assert watch.seconds < DEADLINE + MARGIN
    assert response.status_code == 503
    assert response.extensions[ATTEMPTS_EXTENSION] >= 2


@superseded_bodies
def test_sync_slow_superseded_body_without_limits_is_capped(
    server: FlakyServer, step: Step
) -> None:
    """No deadline, no timeout and a 5 s backoff (virtual): the drain stops at DRAIN_TIMEOUT."""
    clock = FakeClock()
    url = server.script(step, 200)
    transport = RetryTransport(
        policy=RetryPolicy(attempts=2, initial_delay=5, jitter=False),
        clock=clock,
        instruments=(),
        budget=None,
    )
    with httpx.Client(transport=transport) as client, Stopwatch() as watch:
        response = client.get(url)
    assert watch.seconds < DRAIN_TIMEOUT + MARGIN
    assert (response.status_code, clock.sleeps) == (200, [5.0])  # the wait itself is unchanged


async def test_slow_superseded_body_without_limits_is_capped(server: FlakyServer) -> None:
    """Async twin, with a real 50 ms backoff: the drain takes that delay, not the trickle."""
    url = server.script(TRICKLED_503, 200)
    transport = AsyncRetryTransport(policy=quick(), instruments=(), budget=None)
    async with httpx.AsyncClient(transport=transport) as client:
        with Stopwatch() as watch:
            response = await client.get(url)
    assert watch.seconds < 0.05 + MARGIN
    assert (response.status_code, response.extensions[ATTEMPTS_EXTENSION]) == (200, 2)


@pytest.mark.parametrize(
    ("fields", "bound"),
    [
        pytest.param({"deadline": DEADLINE}, DEADLINE, id="deadline"),
        pytest.param({"timeout": 0.2, "attempts": 2}, 2 * 0.2 + 0.05, id="timeout"),
    ],
)
def test_sync_trickled_head_is_bounded(
    server: FlakyServer, fields: dict[str, Any], bound: float
) -> None:
    """Headers trickled byte by byte never trip a per-read timeout, yet the attempt ends.

    With its time limit: a read timeout, or, on a machine so busy that the last attempt's limit
    passes before its request is written, a write timeout.
    """
    url = server.script(TRICKLED_HEAD)
    transport = RetryTransport(policy=quick(**fields), instruments=(), budget=None)
    with (
        httpx.Client(transport=transport) as client,
        Stopwatch() as watch,
        pytest.raises((httpx.ReadTimeout, httpx.WriteTimeout)),
    ):
        client.get(url)
    assert watch.seconds < bound + MARGIN


@pytest.mark.parametrize(
    "step", [pytest.param(TRICKLED_HEAD, id="head"), pytest.param(TRICKLED_200, id="body")]
)
def test_sync_helper_is_bounded_by_its_deadline(server: FlakyServer, step: Step) -> None:
    """request_sync reads the body inside the attempt: a trickle anywhere ends by the deadline."""
    url = server.script(step)
    retrier = Retrier(quick(deadline=DEADLINE), instruments=(), budget=None)
    with httpx.Client() as client, Stopwatch() as watch, pytest.raises(httpx.TimeoutException):
        request_sync(client, "GET", url, retrier=retrier)
    assert watch.seconds < DEADLINE + MARGIN


async def test_helper_is_bounded_by_its_deadline(server: FlakyServer) -> None:
    """request (asyncio and trio): a trickled body ends with the deadline too."""
    url = server.script(TRICKLED_200)
    retrier = Retrier(quick(deadline=DEADLINE), instruments=(), budget=None)
    async with httpx.AsyncClient() as client:
        with Stopwatch() as watch, pytest.raises(httpx.TimeoutException):
            await request(client, "GET", url, retrier=retrier)
    assert watch.seconds < DEADLINE + MARGIN


# A streamed 200: three chunks 0.4 s apart, longer than the policy's per-attempt timeout.
GAPS = Step(200, body=b"abc", chunked=True, pace=0.4)


def test_sync_attempt_limit_ends_with_the_attempt(server: FlakyServer) -> None:
    """The per-attempt timeout bounds the attempt, not the stream the caller reads after it."""
    url = server.script(GAPS)
    transport = RetryTransport(policy=quick(timeout=0.25), instruments=(), budget=None)
    with httpx.Client(transport=transport) as client, client.stream("GET", url) as response:
        assert b"".join(response.iter_raw()) == b"abc"


async def test_attempt_limit_ends_with_the_attempt(server: FlakyServer) -> None:
    """Async twin: the same stream reads to its end, as the sync transport's now does."""
    url = server.script(GAPS)
    transport = AsyncRetryTransport(policy=quick(timeout=0.25), instruments=(), budget=None)
    async with (
        httpx.AsyncClient(transport=transport) as client,
        client.stream("GET", url) as response,
    ):
        assert b"".join([chunk async for chunk in response.aiter_raw()]) == b"abc"


# -- the client helpers honour extensions["retrymw"] ---------------------------------------------


async def test_helper_honours_the_policy_extension(server: FlakyServer) -> None:
    """{"attempts": 1} on the request makes request() try once; a name is refused loudly."""
    retrier = Retrier(quick(), instruments=(), budget=None)
    url = server.script(503)
    async with httpx.AsyncClient() as client:
        once = {"retrymw": {"attempts": 1}}
        response = await request(client, "GET", url, retrier=retrier, extensions=once)
        assert (response.status_code, server.served(url)) == (503, 1)
        with pytest.raises(ConfigError, match="unknown policy"):
            await request(client, "GET", url, retrier=retrier, extensions={"retrymw": "fast"})


def test_sync_helper_honours_the_policy_extension(server: FlakyServer) -> None:
    """request_sync: a RetryPolicy on the request replaces the retrier's for that request."""
    retrier = Retrier(quick(), instruments=(), budget=None)
    url = server.script(503)
    with httpx.Client() as client:
        twice = {"retrymw": quick(attempts=2)}
        response = request_sync(client, "GET", url, retrier=retrier, extensions=twice)
    assert (response.status_code, server.served(url)) == (503, 2)


# -- a certificate nobody trusts ------------------------------------------------------------------


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made with openssl."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"),
            *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return cert, key


@pytest.fixture
def tls_server(certificate: tuple[Path, Path]) -> Iterator[FlakyServer]:
    """The scripted server over HTTPS, with the self-signed certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    flaky = FlakyServer(tls=context)
    yield flaky
    flaky.stop()


def certificate_rejected(error: BaseException) -> bool:
    """Whether an ssl.SSLCertVerificationError is in ``error``'s cause or context chain."""
    cause: BaseException | None = error
    for _ in range(10):
        if isinstance(cause, ssl.SSLCertVerificationError):
            return True
        cause = None if cause is None else cause.__cause__ or cause.__context__
    return False


def handshakes_failed(server: FlakyServer) -> int:
    """The server's failed handshakes, once its thread has seen the client's refusal (bounded)."""
    for _ in range(100):
        if server.handshakes_failed:
            break
        time.sleep(0.01)
    time.sleep(0.05)  # a second handshake (a retry) would be counted by now
    return server.handshakes_failed


async def test_rejected_certificate_is_not_retried(
    tls_server: FlakyServer, certificate: tuple[Path, Path]
) -> None:
    """A client that verifies refuses the certificate once: one attempt, ConnectError raised."""
    url = tls_server.script(200)
    recorder = RecordingInstrument()
    transport = AsyncRetryTransport(policy=quick(), instruments=(recorder,), budget=None)
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await client.get(url)
    assert certificate_rejected(caught.value)
    assert len(recorder.of_type(AttemptStarted)) == 1
    assert handshakes_failed(tls_server) == 1
    # The control: a client trusting the certificate is served by the same server.
    trusting = httpx.AsyncHTTPTransport(verify=ssl.create_default_context(cafile=certificate[0]))
    async with httpx.AsyncClient(transport=AsyncRetryTransport(trusting)) as client:
        assert (await client.get(url)).status_code == 200


def test_sync_rejected_certificate_is_not_retried(
    tls_server: FlakyServer, certificate: tuple[Path, Path]
) -> None:
    """Sync twin, through request_sync and an explicit "network" matcher: one attempt."""
    url = tls_server.script(200)
    recorder = RecordingInstrument()
    retrier = Retrier(quick(retry_on=["network"]), instruments=(recorder,), budget=None)
    with httpx.Client() as client, pytest.raises(httpx.ConnectError) as caught:
        request_sync(client, "GET", url, retrier=retrier)
    assert certificate_rejected(caught.value)
    assert len(recorder.of_type(AttemptStarted)) == 1
    assert handshakes_failed(tls_server) == 1
    # The control, over bounded sockets (a deadline): a trusting client is served.
    trusting = httpx.HTTPTransport(verify=ssl.create_default_context(cafile=certificate[0]))
    transport = RetryTransport(trusting, policy=quick(deadline=5), instruments=(), budget=None)
    with httpx.Client(transport=transport) as client:
        assert client.get(url).status_code == 200

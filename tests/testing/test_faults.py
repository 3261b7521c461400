"""FaultTransport: scripted and seeded faults, latency and hangs in virtual time, both flavours.

The retry transports' own contract (idempotency, Retry-After, closing superseded responses) is
exercised here too, through FaultTransport: each case is a script instead of a handler.
"""

from __future__ import annotations

import contextlib
import importlib
from collections import Counter
from random import Random

import httpx
import httpx2
import pytest

from retrymw import ConfigError, RetryPolicy
from retrymw._http.flavour import flavour_named, flavour_of
from retrymw.httpx import AsyncRetryTransport, RetryTransport
from retrymw.testing import FakeClock, Fault, FaultTransport, Recorder
from retrymw.testing import httpx2 as testing_httpx2
from retrymw.testing._faults import FaultPlan

pytestmark = pytest.mark.anyio

URL = "http://upstream.test/items"


def _retrying(
    faults: object, clock: FakeClock, recorder: Recorder, **fields: object
) -> AsyncRetryTransport:
    policy = RetryPolicy(**{"attempts": 3, "initial_delay": 1.0, "jitter": False, **fields})  # type: ignore[arg-type]
    return AsyncRetryTransport(faults, policy=policy, clock=clock, instruments=(recorder,))  # type: ignore[arg-type]


async def test_a_script_comes_first_then_the_inner_transport_answers() -> None:
    """Scripted faults meet the first requests in order; later ones reach the inner transport."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(201, text="inner")

    clock, recorder = FakeClock(), Recorder()
    faults = FaultTransport(
        httpx.MockTransport(handler), script=[503, "connect_error"], clock=clock
    )
    async with httpx.AsyncClient(transport=_retrying(faults, clock, recorder)) as client:
        response = await client.get(URL)
    assert (response.status_code, response.text) == (201, "inner")
    assert faults.injected == ["503", "connect_error", "pass"]
    assert seen == ["/items"]
    recorder.assert_call(attempts=3, outcome="success", delays=[1.0, 2.0], status=201)


async def test_every_superseded_response_is_closed() -> None:
    """The retry transport closes each response it does not return; the last one stays open."""
    clock, recorder = FakeClock(), Recorder()
    faults = FaultTransport(script=[502, 503, 504], clock=clock)
    async with httpx.AsyncClient(transport=_retrying(faults, clock, recorder)) as client:
        response = await client.get(URL)
        assert response.status_code == 504
        assert [r.is_closed for r in faults.responses[:-1]] == [True, True]
    recorder.assert_call(attempts=3, outcome="exhausted", gave_up="max_attempts")


async def test_retry_after_sets_the_delay() -> None:
    """A Retry-After hint of 7 s becomes the wait before the next attempt."""
    clock, recorder = FakeClock(), Recorder()
    faults = FaultTransport(script=[Fault(status=503, retry_after=7)], clock=clock)
    async with httpx.AsyncClient(transport=_retrying(faults, clock, recorder)) as client:
        assert (await client.get(URL)).status_code == 200
    recorder.assert_call(attempts=2, delays=[7.0])
    assert clock.sleeps == [7.0]


@pytest.mark.parametrize(
    ("fault", "sent"),
    [
        pytest.param("reset", 1, id="reset-after-sending-never-resent"),
        pytest.param("timeout", 1, id="read-timeout-never-resent"),
        pytest.param("connect_error", 2, id="connect-error-resent"),
        pytest.param("connect_timeout", 2, id="connect-timeout-resent"),
    ],
)
async def test_a_post_is_resent_only_when_it_never_left(fault: str, sent: int) -> None:
    """A POST is retried after a connect failure, never after it may have reached the server."""
    clock, recorder = FakeClock(), Recorder()
    faults = FaultTransport(script=[fault], clock=clock)
    async with httpx.AsyncClient(transport=_retrying(faults, clock, recorder)) as client:
        if sent == 1:
            with pytest.raises(httpx.TransportError, match="fault injected"):
                await client.post(URL, content=b"order")
        else:
            assert (await client.post(URL, content=b"order")).status_code == 200
    assert len(faults.requests) == sent


async def test_latency_and_hangs_are_slept_on_the_clock() -> None:
    """Latency is drawn per request in its range, and a timeout hangs stall_for first."""
    clock = FakeClock()
    faults = FaultTransport(
        script=["pass", "pass", Fault(kind="timeout", stall_for=5.0)],
        latency=(0.1, 0.3),
        clock=clock,
    )
    async with httpx.AsyncClient(transport=faults) as client:
        await client.get(URL)
        await client.get(URL)
        with pytest.raises(httpx.ReadTimeout):
            await client.get(URL)
    assert len(clock.sleeps) == 4
    assert all(0.1 <= delay <= 0.3 for delay in clock.sleeps[:3])
    assert clock.sleeps[3] == 5.0


async def test_a_stalled_body_times_out_after_its_first_bytes() -> None:
    """Headers arrive, the body stops after its first bytes, and the read times out later."""
    clock = FakeClock()
    faults = FaultTransport(script=[Fault(kind="stall", status=200, body=b"par")], clock=clock)
    chunks: list[bytes] = []

    async def read(response: httpx.Response) -> None:
        async for chunk in response.aiter_raw():
            chunks.append(chunk)  # noqa: PERF401 - the chunks before the error count

    async with httpx.AsyncClient(transport=faults) as client, client.stream("GET", URL) as response:
        assert response.status_code == 200
        with pytest.raises(httpx.ReadTimeout, match="stalled for 30s"):
            await read(response)
    assert chunks == [b"par"]
    assert clock.now() == 30.0


def test_the_sync_path_meets_the_same_faults() -> None:
    """RetryTransport over FaultTransport: the same script, latency and stall, blocking."""
    clock, recorder = FakeClock(), Recorder()
    faults = FaultTransport(
        script=[Fault(status=429, retry_after_ms=1500), "timeout", Fault(kind="stall")],
        latency=0.5,
        clock=clock,
    )
    retrying = RetryTransport(
        faults, policy=RetryPolicy(attempts=3, jitter=False), clock=clock, instruments=(recorder,)
    )
    with (
        httpx.Client(transport=retrying) as client,
        client.stream("GET", URL) as response,
        pytest.raises(httpx.ReadTimeout),
    ):
        response.read()
    assert faults.injected == ["429", "timeout", "stall"]
    assert clock.sleeps[:2] == [0.5, 1.5]
    recorder.assert_call(attempts=3)


def test_the_sync_path_stalls_after_the_first_bytes_then_passes_to_the_inner_transport() -> None:
    """Blocking: a stall sends its first bytes and times out; the next request reaches inner."""
    clock = FakeClock()
    inner = httpx.MockTransport(lambda request: httpx.Response(201, text="inner"))
    faults = FaultTransport(inner, script=[Fault(kind="stall", body=b"par")], clock=clock)
    received: list[bytes] = []
    with httpx.Client(transport=faults) as client:
        with client.stream("GET", URL) as response, pytest.raises(httpx.ReadTimeout):
            received.extend(response.iter_raw())
        assert (received, clock.sleeps) == ([b"par"], [30.0])
        assert client.get(URL).text == "inner"
    assert faults.injected == ["stall", "pass"]
    assert [r.status_code for r in faults.responses] == [503, 201]  # a stall is a 503 unless told


def test_hints_become_headers() -> None:
    """Retry-After, retry-after-ms, x-should-retry and extra headers are all sent."""
    fault = Fault(
        status=429,
        retry_after="Wed, 21 Oct 2015 07:28:00 GMT",
        retry_after_ms=250,
        should_retry=False,
        headers=(("x-ratelimit-remaining", "0"),),
    )
    response = FaultTransport(script=[fault]).handle_request(httpx.Request("GET", URL))
    assert response.status_code == 429
    assert response.headers["retry-after"] == "Wed, 21 Oct 2015 07:28:00 GMT"
    assert response.headers["retry-after-ms"] == "250"
    assert response.headers["x-should-retry"] == "false"
    assert response.headers["x-ratelimit-remaining"] == "0"
    assert Fault(should_retry=True, retry_after=1.5).response_headers() == [
        ("Retry-After", "1.5"),
        ("x-should-retry", "true"),
    ]


def test_rates_are_seeded_and_reproducible() -> None:
    """The same seed gives the same faults; the draw follows the rates."""
    rates = {"connect_error": 0.1, "reset": 0.1, 503: 0.2}

    def run(seed: int) -> list[str]:
        faults = FaultTransport(rates=rates, seed=seed, clock=FakeClock())
        for _ in range(500):
            with contextlib.suppress(httpx.TransportError):
                faults.handle_request(httpx.Request("GET", URL))
        injected: list[str] = faults.injected
        return injected

    first = run(7)
    assert first == run(7)
    assert first != run(8)
    counts = Counter(first)
    assert 25 <= counts["connect_error"] <= 75
    assert 25 <= counts["reset"] <= 75
    assert 70 <= counts["503"] <= 130
    assert 200 <= counts["pass"] <= 400


async def test_closing_closes_the_inner_transport() -> None:
    """close() and aclose() reach the wrapped transport; alone, they do nothing."""
    inner = httpx.MockTransport(lambda request: httpx.Response(200))
    closed: list[str] = []
    inner.close = lambda: closed.append("sync")  # type: ignore[method-assign]

    async def aclose() -> None:
        closed.append("async")

    inner.aclose = aclose  # type: ignore[method-assign]
    FaultTransport(inner).close()
    await FaultTransport(inner).aclose()
    FaultTransport().close()
    await FaultTransport().aclose()
    assert closed == ["sync", "async"]
    assert "requests=0" in repr(FaultTransport())


def test_the_httpx2_flavour_speaks_httpx2() -> None:
    """retrymw.testing.httpx2.FaultTransport is an httpx2 transport with the same vocabulary."""
    faults = testing_httpx2.FaultTransport(script=[503, "reset"], clock=FakeClock())
    assert isinstance(faults, httpx2.BaseTransport)
    assert isinstance(faults, httpx2.AsyncBaseTransport)
    assert type(faults).__module__ == "retrymw.testing.httpx2"
    with httpx2.Client(transport=faults) as client:
        assert client.get(URL).status_code == 503
        with pytest.raises(httpx2.ReadError):
            client.get(URL)
        assert client.get(URL).text == "ok"


async def test_the_httpx2_retry_transport_over_httpx2_faults() -> None:
    """retrymw.httpx2's transport retries what retrymw.testing.httpx2.FaultTransport injects."""
    from retrymw.httpx2 import AsyncRetryTransport as Httpx2RetryTransport

    clock, recorder = FakeClock(), Recorder()
    faults = testing_httpx2.FaultTransport(script=["connect_error", 503], clock=clock)
    transport = Httpx2RetryTransport(
        faults, policy=RetryPolicy(attempts=3, jitter=False), clock=clock, instruments=(recorder,)
    )
    async with httpx2.AsyncClient(transport=transport) as client:
        assert (await client.get(URL)).status_code == 200
    recorder.assert_call(attempts=3, outcome="success", delays=[1.0, 2.0])


@pytest.mark.parametrize("library", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_each_library_has_one_flavour_seam(library: object) -> None:
    """The fault transport takes its classes from the same Flavour the retry transports bind."""
    name = library.__name__  # type: ignore[attr-defined]
    flavour = flavour_named(name)
    face = importlib.import_module(f"retrymw.{name}")
    assert face.AsyncRetryTransport._flavour is flavour
    assert flavour_of(library.Client(), "client") is flavour  # type: ignore[attr-defined]
    faults = importlib.import_module(f"retrymw.testing.{name}").FaultTransport(
        script=["connect_timeout"], clock=FakeClock()
    )
    with pytest.raises(flavour.never_sent):
        faults.handle_request(library.Request("GET", URL))  # type: ignore[attr-defined]


def test_plans_sharing_a_random_source_draw_one_sequence() -> None:
    """A FaultPlan given an rng draws from it, so two plans on one rng replay a seeded run."""

    def run(seed: int) -> list[tuple[str, float]]:
        rng = Random(seed)
        calm = FaultPlan(rates={503: 0.5}, latency=(0.1, 0.3), rng=rng)
        storm = FaultPlan(rates={503: 1.0}, latency=(0.1, 0.3), rng=rng)
        picks = [(calm if n % 3 else storm).next() for n in range(30)]
        return [(fault.describe(), latency) for fault, latency in picks]

    first = run(7)
    assert first == run(7)
    assert first != run(8)
    assert {what for what, _ in first[::3]} == {"503"}  # the storm plan always fails
    assert {what for what, _ in first} == {"503", "pass"}
    assert all(0.1 <= latency <= 0.3 for _, latency in first)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        pytest.param(lambda: Fault(kind="boom"), "kind", id="kind"),  # type: ignore[arg-type]
        pytest.param(lambda: Fault(status=700), "status", id="status"),
        pytest.param(lambda: Fault(latency=-1), "latency", id="latency"),
        pytest.param(lambda: FaultTransport(script=["nope"]), "script", id="script"),
        pytest.param(lambda: FaultTransport(rates={"reset": 1.5}), "rates['reset']", id="rate"),
        pytest.param(lambda: FaultTransport(rates={503: 0.6, 502: 0.6}), "rates", id="sum"),
        pytest.param(lambda: FaultTransport(latency=(0.3, 0.1)), "latency", id="range"),
    ],
)
def test_bad_faults_name_the_field(build: object, field: str) -> None:
    """Every unusable fault, rate or latency is a ConfigError naming its field."""
    with pytest.raises(ConfigError) as raised:
        build()  # type: ignore[operator]
    assert raised.value.field == field

"""Groups 3 and 4: httpx on `MockTransport`, and httpx against a loopback server.

The same two overheads are measured for httpx2 (`retrymw.httpx2` over a bare httpx2 client),
the fork the OpenAI and Anthropic SDKs use, in groups of their own next to httpx's.

Every retrying client is configured alike: 3 attempts (httpx-retries ``total=2``), zero backoff,
retry on 503. retrymw runs with ``instruments=()`` unless the case names an instrument. The
loopback clients share one connection-pool size (64 keep-alive connections) so that only the
retry layer differs.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from typing import Any

import httpx

from ._harness import Case, Group, Prepared, Unavailable
from ._instruments import Kind, telemetry
from ._server import LoopbackServer

__all__ = ["groups"]

URL = "http://bench.invalid/item"
TASKS = 50
QUICK_TASKS = 10
LIMITS = httpx.Limits(max_connections=64, max_keepalive_connections=64)


def _retrymw_transport(
    inner: Any,
    *,
    kind: Kind = "none",
    budget: bool = True,
    pacer: bool = False,
    flavour: str = "httpx",
) -> tuple[Any, Callable[[], None] | None]:
    try:
        face = importlib.import_module(f"retrymw.{flavour}")
    except ImportError as error:
        raise Unavailable(f"retrymw.{flavour} not importable ({error})") from None
    from retrymw import Pacer, RetryPolicy

    tel = telemetry(kind)
    policy = RetryPolicy(attempts=3, backoff="fixed", initial_delay=0)
    extra: dict[str, Any] = {} if budget else {"budget": None}
    if pacer:  # idle: the mock answers without rate-limit headers, so nothing is paced
        extra["pacer"] = Pacer()
    transport = face.AsyncRetryTransport(inner, policy=policy, instruments=tel.instruments, **extra)
    return transport, tel.reset


def _httpx_retries_transport(inner: Any) -> Any:
    from httpx_retries import Retry, RetryTransport

    transport: Any = RetryTransport(transport=inner, retry=Retry(total=2, backoff_factor=0.0))
    return transport


def _wrap(layer: str, inner: Any, kind: Kind, budget: bool, pacer: bool = False) -> tuple[Any, Any]:
    if layer == "retrymw":
        return _retrymw_transport(inner, kind=kind, budget=budget, pacer=pacer)
    if layer == "httpx-retries":
        return _httpx_retries_transport(inner), None
    return inner, None


# -- MockTransport ------------------------------------------------------------------------------


def _mock_case(
    name: str,
    layer: str,
    *,
    failures: int,
    kind: Kind = "none",
    budget: bool = True,
    pacer: bool = False,
) -> Case:
    def make() -> Prepared:
        seen = [0]
        cycle = failures + 1

        def handler(request: httpx.Request) -> httpx.Response:
            seen[0] += 1
            return httpx.Response(503 if seen[0] % cycle else 200)

        transport, reset = _wrap(layer, httpx.MockTransport(handler), kind, budget, pacer)
        client = httpx.AsyncClient(transport=transport, trust_env=False)
        expected = failures + 1

        def check(response: httpx.Response) -> None:
            if response.status_code != 200 or seen[0] != expected:
                raise AssertionError(f"{name}: status {response.status_code}, {seen[0]} sends")

        if layer == "bare" and failures:

            async def bare_retries(url: str) -> httpx.Response:
                # The bare client's cost of the same sends, with no retry logic at all.
                for _ in range(failures):
                    await client.get(url)
                return await client.get(url)

            return Prepared(
                op=bare_retries, args=(URL,), check=check, close=client.aclose, reset=reset
            )
        return Prepared(op=client.get, args=(URL,), check=check, close=client.aclose, reset=reset)

    return Case(name, layer, make, baseline=layer == "bare")


def _mock_groups() -> list[Group]:
    ok = [
        _mock_case("bare AsyncClient", "bare", failures=0),
        _mock_case("retrymw AsyncRetryTransport", "retrymw", failures=0),
        _mock_case("retrymw AsyncRetryTransport budget=None", "retrymw", failures=0, budget=False),
        _mock_case("retrymw AsyncRetryTransport + idle Pacer", "retrymw", failures=0, pacer=True),
        _mock_case(
            "retrymw AsyncRetryTransport + Prometheus", "retrymw", failures=0, kind="prometheus"
        ),
        _mock_case(
            "retrymw AsyncRetryTransport + OTel API, no SDK", "retrymw", failures=0, kind="otel-api"
        ),
        _mock_case(
            "retrymw AsyncRetryTransport + OTel SDK", "retrymw", failures=0, kind="otel-sdk"
        ),
        _mock_case("httpx-retries RetryTransport", "httpx-retries", failures=0),
    ]
    retried = [
        _mock_case("bare AsyncClient, 3 sends", "bare", failures=2),
        _mock_case("retrymw AsyncRetryTransport budget=None", "retrymw", failures=2, budget=False),
        _mock_case(
            "retrymw AsyncRetryTransport + Prometheus, budget=None",
            "retrymw",
            failures=2,
            kind="prometheus",
            budget=False,
        ),
        _mock_case("httpx-retries RetryTransport", "httpx-retries", failures=2),
    ]
    return [
        Group(
            "httpx-mock-200",
            "httpx on MockTransport, 200",
            "`AsyncClient.get` on `httpx.MockTransport` answering 200; the bare client has no "
            "retry layer. retrymw keeps its default cross-call budget unless `budget=None`.",
            ok,
            per="request",
        ),
        Group(
            "httpx-mock-503",
            "httpx on MockTransport, 503-503-200",
            "The mock answers 503, 503, 200 cyclically; zero backoff. The baseline is the bare "
            "client sending the same three requests with no retry logic; retrymw's budget is off "
            "(the default budget throttles a workload where every call retries twice).",
            retried,
            per="call",
        ),
    ]


# -- loopback server ----------------------------------------------------------------------------


def _loopback_groups(quick: bool) -> list[Group]:
    # One server per group, started by the group's setup and stopped by its teardown.
    seq_server, conc_server = LoopbackServer(), LoopbackServer()
    tasks = QUICK_TASKS if quick else TASKS

    def client(layer: str, kind: Kind) -> tuple[httpx.AsyncClient, Any]:
        inner = httpx.AsyncHTTPTransport(limits=LIMITS)
        transport, reset = _wrap(layer, inner, kind, True)
        return httpx.AsyncClient(transport=transport, trust_env=False), reset

    def check(response: httpx.Response) -> None:
        if response.status_code != 200 or response.content != b"ok":
            raise AssertionError(f"loopback: {response.status_code} {response.content!r}")

    def sequential(name: str, layer: str, kind: Kind = "none") -> Case:
        def make() -> Prepared:
            http, reset = client(layer, kind)
            return Prepared(
                op=http.get,
                args=(seq_server.url,),
                check=check,
                close=http.aclose,
                reset=reset,
                max_n=20_000,
            )

        return Case(name, layer, make, baseline=layer == "bare")

    def concurrent(name: str, layer: str) -> Case:
        def make() -> Prepared:
            http, reset = client(layer, "none")

            async def batch() -> httpx.Response:
                url = conc_server.url
                responses = await asyncio.gather(*(http.get(url) for _ in range(tasks)))
                return responses[-1]

            return Prepared(
                op=batch,
                per_op=tasks,
                check=check,
                close=http.aclose,
                reset=reset,
                max_n=200,
            )

        return Case(name, layer, make, baseline=layer == "bare")

    seq = Group(
        "httpx-loopback-seq",
        "httpx against a loopback server, sequential",
        "One task sends GETs one after another to a keep-alive HTTP/1.1 server on 127.0.0.1 "
        "(a raw asyncio protocol in a thread of the same process, so it shares the GIL).",
        [
            sequential("bare sequential", "bare"),
            sequential("retrymw sequential", "retrymw"),
            sequential("retrymw + Prometheus sequential", "retrymw", "prometheus"),
            sequential("httpx-retries sequential", "httpx-retries"),
        ],
        per="request",
        rate=True,
        clock="wall",
        max_repeats=15,
        setup=seq_server.start,
        teardown=seq_server.stop,
    )
    concurrent_group = Group(
        "httpx-loopback-concurrent",
        f"httpx against a loopback server, {tasks} concurrent tasks",
        f"{tasks} tasks each send one GET per operation on one client (pool of 64). "
        "httpcore's pool re-scans its connections for the queued requests whenever a request "
        "starts or ends (`_assign_requests_to_connections`), so CPU per request is higher "
        "than sequentially, for every client alike.",
        [
            concurrent("bare concurrent", "bare"),
            concurrent("retrymw concurrent", "retrymw"),
            concurrent("httpx-retries concurrent", "httpx-retries"),
        ],
        per="request",
        rate=True,
        clock="wall",
        max_repeats=15,
        setup=conc_server.start,
        teardown=conc_server.stop,
    )
    return [seq, concurrent_group]


def groups(quick: bool) -> list[Group]:
    """The MockTransport and loopback groups."""
    return [*_mock_groups(), *_loopback_groups(quick), *_httpx2_groups()]


# -- httpx2 -------------------------------------------------------------------------------------


def _httpx2_groups() -> list[Group]:
    """retrymw.httpx2's overhead over a bare httpx2 client, on MockTransport and a loopback."""
    server = LoopbackServer()

    def library() -> Any:
        try:
            return importlib.import_module("httpx2")
        except ImportError as error:
            raise Unavailable(f"httpx2 not importable ({error})") from None

    def mock(name: str, layer: str) -> Case:
        def make() -> Prepared:
            lib = library()
            inner = lib.MockTransport(lambda request: lib.Response(200))
            transport = (
                _retrymw_transport(inner, flavour="httpx2")[0] if layer == "retrymw" else inner
            )
            client = lib.AsyncClient(transport=transport, trust_env=False)

            def check(response: Any) -> None:
                if response.status_code != 200:
                    raise AssertionError(f"{name}: status {response.status_code}")

            return Prepared(op=client.get, args=(URL,), check=check, close=client.aclose)

        return Case(name, layer, make, baseline=layer == "bare")

    def loopback(name: str, layer: str) -> Case:
        def make() -> Prepared:
            lib = library()
            limits = lib.Limits(max_connections=64, max_keepalive_connections=64)
            inner = lib.AsyncHTTPTransport(limits=limits)
            transport = (
                _retrymw_transport(inner, flavour="httpx2")[0] if layer == "retrymw" else inner
            )
            client = lib.AsyncClient(transport=transport, trust_env=False)

            def check(response: Any) -> None:
                if response.status_code != 200 or response.content != b"ok":
                    raise AssertionError(f"{name}: {response.status_code}")

            return Prepared(
                op=client.get, args=(server.url,), check=check, close=client.aclose, max_n=20_000
            )

        return Case(name, layer, make, baseline=layer == "bare")

    return [
        Group(
            "httpx2-mock-200",
            "httpx2 on MockTransport, 200",
            "`AsyncClient.get` on `httpx2.MockTransport` answering 200: retrymw.httpx2 over a "
            "bare httpx2 client, the same figure as httpx-mock-200 for httpx.",
            [
                mock("bare httpx2 AsyncClient", "bare"),
                mock("retrymw.httpx2 AsyncRetryTransport", "retrymw"),
            ],
            per="request",
        ),
        Group(
            "httpx2-loopback-seq",
            "httpx2 against a loopback server, sequential",
            "As httpx-loopback-seq, with httpx2 and retrymw.httpx2.",
            [
                loopback("bare httpx2 sequential", "bare"),
                loopback("retrymw.httpx2 sequential", "retrymw"),
            ],
            per="request",
            rate=True,
            clock="wall",
            max_repeats=15,
            setup=server.start,
            teardown=server.stop,
        ),
    ]

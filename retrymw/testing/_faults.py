"""`FaultTransport`: scripted and random faults for httpx and httpx2 clients, in virtual time.

One vocabulary of faults (`Fault`) and one place that decides which fault a request meets
(`FaultPlan`: a script, then seeded draws against rates, plus latency) serve every fault
injector: the transports built here for each client library, and the loopback upstream that
``retrymw demo`` drives (`retrymw.cli.demo._upstream`). A transport takes its library's classes
(responses, streams, exceptions, transport bases) from that library's one `Flavour`, the seam
the retry transports use too. The async and sync paths only differ in how they sleep and call
the inner transport.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from random import Random
from typing import TYPE_CHECKING, Any, Literal, get_args

from .._core.clock import SYSTEM_CLOCK, Clock
from .._core.errors import ConfigError

if TYPE_CHECKING:
    from .._http.flavour import Flavour

__all__ = ["Fault", "FaultKind", "FaultPlan", "fault_transport_class"]

FaultKind = Literal[
    "status", "connect_error", "connect_timeout", "timeout", "reset", "stall", "pass"
]
_KINDS: tuple[str, ...] = get_args(FaultKind)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One thing that goes wrong with one request.

    Scripts and rates also accept shorthands: an ``int`` is ``Fault(status=...)``, a kind name
    such as ``"reset"`` is ``Fault(kind="reset")``.

    Attributes:
        kind: ``status`` (answer with ``status``), ``connect_error`` (refused: never reached
            the server), ``connect_timeout``, ``timeout`` (the read timed out after the request
            was sent), ``reset`` (the connection was reset after the request was sent),
            ``stall`` (headers arrive, then the body stops after ``body`` and the read times
            out ``stall_for`` seconds later), ``pass`` (no fault: the inner transport answers).
        status: the status of a ``status`` or ``stall`` answer.
        retry_after: a ``Retry-After`` header: seconds, or an HTTP date as a string.
        retry_after_ms: a ``retry-after-ms`` header, in milliseconds.
        should_retry: an ``x-should-retry`` header (``true``/``false``).
        headers: more response headers.
        body: the body of a ``status`` answer, or what a ``stall`` sends before stopping.
        latency: seconds this fault takes to land (on top of the transport's latency).
        stall_for: how long a ``stall`` or ``timeout`` hangs before its timeout error.

    .. versionadded:: 0.2
    """

    kind: FaultKind = "status"
    status: int = 503
    retry_after: float | str | None = None
    retry_after_ms: float | None = None
    should_retry: bool | None = None
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    latency: float = 0.0
    stall_for: float = 30.0

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ConfigError("kind", self.kind, f"must be one of {', '.join(_KINDS)}", '"reset"')
        if isinstance(self.status, bool) or not 100 <= self.status <= 599:
            raise ConfigError("status", self.status, "must be an HTTP status", "503")
        for name in ("latency", "stall_for"):
            if not getattr(self, name) >= 0:
                raise ConfigError(name, getattr(self, name), "must be >= 0 seconds", "0.25")

    @classmethod
    def of(cls, spec: Fault | int | str, *, field: str = "fault") -> Fault:
        """Read a shorthand: a `Fault`, a status code, or a kind name."""
        if isinstance(spec, Fault):
            return spec
        if isinstance(spec, int) and not isinstance(spec, bool):
            return cls(status=spec)
        if isinstance(spec, str) and spec in _KINDS:
            return cls(kind=spec)  # type: ignore[arg-type]
        raise ConfigError(
            field, spec, f"must be a Fault, a status code or one of {', '.join(_KINDS)}", "503"
        )

    def response_headers(self) -> list[tuple[str, str]]:
        """The headers this fault's answer carries, hints first."""
        headers = []
        if self.retry_after is not None:
            value = self.retry_after
            headers.append(("Retry-After", value if isinstance(value, str) else f"{value:g}"))
        if self.retry_after_ms is not None:
            headers.append(("retry-after-ms", f"{self.retry_after_ms:g}"))
        if self.should_retry is not None:
            headers.append(("x-should-retry", "true" if self.should_retry else "false"))
        return [*headers, *self.headers]

    def describe(self) -> str:
        """``"503"`` for a status, the kind otherwise."""
        return str(self.status) if self.kind == "status" else self.kind


_PASS = Fault(kind="pass")


class FaultPlan:
    """Which fault each request meets, and its latency: seeded, thread-safe decisions.

    The one place that decides "this request fails with X", for the fault transports and the
    demo's upstream alike.

    Args:
        script: faults for the first requests, in order (`Fault`, a status, or a kind name).
        rates: fault → probability for the requests after the script.
        latency: seconds per request, or a ``(low, high)`` range drawn per request.
        seed: the random seed, when no ``rng`` is given.
        rng: the random source (shared with other plans that should draw from one sequence).

    Attributes:
        injected: what each request met, in order (``"503"``, ``"reset"``, ``"pass"`` ...).

    Raises:
        ConfigError: a fault, rate or latency that cannot be used, named with an example.
    """

    def __init__(
        self,
        script: Iterable[Fault | int | str] = (),
        rates: Mapping[Fault | int | str, float] | None = None,
        latency: float | tuple[float, float] = 0.0,
        *,
        seed: int | None = None,
        rng: Random | None = None,
    ) -> None:
        rates = rates or {}
        self.script = deque(Fault.of(spec, field="script") for spec in script)
        self.rates = [(Fault.of(spec, field="rates"), rate) for spec, rate in rates.items()]
        for fault, rate in self.rates:
            if not 0.0 <= rate <= 1.0:
                raise ConfigError(f"rates[{fault.describe()!r}]", rate, "must be in [0, 1]", "0.1")
        if sum(rate for _, rate in self.rates) > 1.0 + 1e-9:
            raise ConfigError("rates", dict(rates), "must add up to at most 1", '{"reset": 0.1}')
        low, high = latency if isinstance(latency, tuple) else (latency, latency)
        if not 0 <= low <= high:
            raise ConfigError("latency", latency, "must be >= 0 (or a (low, high) range)", "0.05")
        self.latency = (low, high)
        self.rng = rng if rng is not None else Random(seed)
        self.lock = threading.Lock()
        self.injected: list[str] = []

    def next(self) -> tuple[Fault, float]:
        """The next request's fault and its total latency."""
        with self.lock:
            fault = self.script.popleft() if self.script else self._draw()
            low, high = self.latency
            latency = (low if low == high else self.rng.uniform(low, high)) + fault.latency
            self.injected.append(fault.describe() if fault is not _PASS else "pass")
            return fault, latency

    def _draw(self) -> Fault:
        if not self.rates:
            return _PASS
        draw = self.rng.random()
        for fault, rate in self.rates:
            if draw < rate:
                return fault
            draw -= rate
        return _PASS


def fault_transport_class(flavour: Flavour, face: str) -> type[Any]:
    """Build the `FaultTransport` class of one client library, shown as ``face.FaultTransport``.

    Args:
        flavour: the library's `Flavour` (`retrymw._http.flavour.flavour_named`).
        face: the module that shows the class.
    """
    library = flavour.module

    class StalledStream(library.AsyncByteStream, library.SyncByteStream):  # type: ignore[misc,name-defined]
        """Sends ``body``, then hangs ``stall_for`` seconds and times out, like a stuck server."""

        def __init__(self, fault: Fault, clock: Clock, request: Any) -> None:
            self._fault, self._clock, self._request = fault, clock, request

        def _timeout(self) -> BaseException:
            message = f"fault injected: body stalled for {self._fault.stall_for:g}s"
            return library.ReadTimeout(message, request=self._request)  # type: ignore[no-any-return]

        async def __aiter__(self) -> AsyncIterator[bytes]:
            if self._fault.body:
                yield self._fault.body
            await self._clock.sleep(self._fault.stall_for)
            raise self._timeout()

        def __iter__(self) -> Iterator[bytes]:
            if self._fault.body:
                yield self._fault.body
            self._clock.sleep_sync(self._fault.stall_for)
            raise self._timeout()

    class FaultTransport(library.AsyncBaseTransport, library.BaseTransport):  # type: ignore[misc,name-defined]
        __doc__ = _DOC.format(name=flavour.name)

        def __init__(
            self,
            transport: Any = None,
            *,
            script: Iterable[Fault | int | str] = (),
            rates: Mapping[Fault | int | str, float] | None = None,
            latency: float | tuple[float, float] = 0.0,
            seed: int | None = 0,
            clock: Clock | None = None,
        ) -> None:
            self._inner = transport
            self._faults = FaultPlan(script, rates, latency, seed=seed)
            self._clock = clock if clock is not None else SYSTEM_CLOCK
            self.requests: list[Any] = []
            self.responses: list[Any] = []

        @property
        def injected(self) -> list[str]:
            """What each request met, in order: ``"503"``, ``"reset"``, ``"pass"`` ..."""
            return list(self._faults.injected)

        def _ok(self, request: Any) -> Any:
            response = library.Response(200, content=b"ok", request=request)
            self.responses.append(response)
            return response

        def _answer(self, fault: Fault, request: Any) -> Any:
            """The response a fault gives, or raise the error it is."""
            message = f"fault injected: {fault.kind.replace('_', ' ')}"
            if fault.kind == "connect_error":
                raise library.ConnectError(message, request=request)
            if fault.kind == "connect_timeout":
                raise library.ConnectTimeout(message, request=request)
            if fault.kind == "reset":
                raise library.ReadError("fault injected: connection reset by peer", request=request)
            headers = fault.response_headers()
            if fault.kind == "stall":
                stream = StalledStream(fault, self._clock, request)
                response = library.Response(
                    fault.status, headers=headers, stream=stream, request=request
                )
            else:
                response = library.Response(
                    fault.status, headers=headers, content=fault.body, request=request
                )
            self.responses.append(response)
            return response

        async def handle_async_request(self, request: Any) -> Any:
            """Meet the next fault, or pass the request to the inner transport."""
            self.requests.append(request)
            fault, latency = self._faults.next()
            if latency:
                await self._clock.sleep(latency)
            if fault.kind == "timeout":
                await self._clock.sleep(fault.stall_for)
                raise library.ReadTimeout("fault injected: read timeout", request=request)
            if fault.kind != "pass":
                return self._answer(fault, request)
            if self._inner is None:
                return self._ok(request)
            response = await self._inner.handle_async_request(request)
            self.responses.append(response)
            return response

        def handle_request(self, request: Any) -> Any:
            """Meet the next fault, or pass the request to the inner transport (blocking)."""
            self.requests.append(request)
            fault, latency = self._faults.next()
            if latency:
                self._clock.sleep_sync(latency)
            if fault.kind == "timeout":
                self._clock.sleep_sync(fault.stall_for)
                raise library.ReadTimeout("fault injected: read timeout", request=request)
            if fault.kind != "pass":
                return self._answer(fault, request)
            if self._inner is None:
                return self._ok(request)
            response = self._inner.handle_request(request)
            self.responses.append(response)
            return response

        async def aclose(self) -> None:
            """Close the inner transport."""
            if self._inner is not None:
                await self._inner.aclose()

        def close(self) -> None:
            """Close the inner transport."""
            if self._inner is not None:
                self._inner.close()

        def __repr__(self) -> str:
            return f"<FaultTransport requests={len(self.requests)} inner={self._inner!r}>"

    FaultTransport.__module__ = face
    FaultTransport.__qualname__ = "FaultTransport"
    return FaultTransport


_DOC = """A {name} transport that injects faults: for tests, chaos drills and the demo upstream.

    Each request meets the next fault of ``script``; once the script is spent, a seeded draw
    against ``rates`` picks one (or none); a request that meets no fault goes to ``transport``,
    or gets ``200 ok`` when there is none. Latency and hangs are slept on ``clock``, so under a
    `FakeClock` (or the pytest plugin's clocks) they cost no real time. Works for async and sync
    clients alike.

    Args:
        transport: the inner transport; ``None`` answers alone.
        script: faults for the first requests, in order (`Fault`, a status, or a kind name).
        rates: fault → probability for the requests after the script, e.g.
            ``{{"connect_error": 0.1, "reset": 0.05, 503: 0.2}}``.
        latency: seconds before each answer, or a ``(low, high)`` range drawn per request.
        seed: the random seed; the same seed gives the same faults and latencies.
        clock: where latency and hangs are slept; the default clock by default.

    Attributes:
        requests: every request received, in order.
        responses: every response handed out, in order (check ``is_closed`` for leaks).
        injected: what each request met (``"503"``, ``"reset"``, ``"pass"`` ...).

    Raises:
        ConfigError: a fault, rate or latency that cannot be used, named with an example.

    .. versionadded:: 0.2
    """

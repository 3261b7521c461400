"""httpx integration: `AsyncRetryTransport`, `RetryTransport`, and the `request` helpers.

::

    client = httpx.AsyncClient(transport=AsyncRetryTransport(policy=RetryPolicy(attempts=4)))

The transports only wrap: every attempt goes to the inner transport, and one `Retrier` decides.
The attempt count of the final response is in ``response.extensions["retrymw.attempts"]``
(`ATTEMPTS_EXTENSION`); a request selects another policy with
``extensions={"retrymw": "name" | RetryPolicy | {"attempts": 1}}`` (`POLICY_EXTENSION`).

A transport returns as soon as the headers arrive, so an error raised while the caller reads
the body cannot be retried there; `request` and `request_sync` retry the whole exchange instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, final

try:
    import httpx
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("retrymw.httpx needs httpx: pip install 'retrymw[httpx]'") from None

from ._core.clock import Clock
from ._core.errors import ConfigError
from ._core.exports import publish
from ._core.policy import RetryPolicy
from ._core.retrier import _DEFAULT, Retrier
from ._http.body import buffer_async, buffer_sync
from ._http.client import HELPER_EXTENSION, request, request_sync
from ._http.exchange import (
    ATTEMPTS_EXTENSION,
    AttemptTimeoutError,
    HttpCall,
    TransportCircuitOpenError,
    TransportRetryBudgetExhausted,
    drive_async,
    drive_sync,
)
from ._http.limits import bound_transport
from ._http.semantics import POLICY_EXTENSION, REPLAY_LIMIT, PolicyResolver, http_policy
from ._protect.budget import RetryBudget

if TYPE_CHECKING:
    from ._protect.breaker import CircuitBreaker

__all__ = [
    "ATTEMPTS_EXTENSION",
    "POLICY_EXTENSION",
    "AsyncRetryTransport",
    "AttemptTimeoutError",
    "RetryTransport",
    "TransportCircuitOpenError",
    "TransportRetryBudgetExhausted",
    "request",
    "request_sync",
]


class _Core:
    """What both transports share: the retrier and the policies."""

    __slots__ = ("resolver", "retrier")

    def __init__(
        self,
        policy: RetryPolicy | None,
        breaker: CircuitBreaker | None,
        budget: RetryBudget | None,
        instruments: Any,
        clock: Clock | None,
        policies: Mapping[str, RetryPolicy] | None,
    ) -> None:
        self.resolver = PolicyResolver(http_policy(policy), policies)
        self.retrier = Retrier(
            self.resolver.default,
            breaker=breaker,
            budget=budget,
            instruments=instruments,
            clock=clock,
        )

    def prepare(self, request: httpx.Request) -> RetryPolicy:
        """Return the request's policy; refuse a request from a client helper."""
        extensions = request.extensions
        if extensions.get(HELPER_EXTENSION):
            raise ConfigError(
                "client",
                request,
                "its transport already retries (AsyncRetryTransport/RetryTransport); "
                "retrymw.httpx.request would multiply the attempts",
                "a client with a plain transport",
            )
        return self.resolver.resolve(extensions.get(POLICY_EXTENSION))

    def describe(self, kind: str, transport: object) -> str:
        policy = self.resolver.default
        return f"<{kind} policy={policy.name!r} attempts={policy.attempts} transport={transport!r}>"


def _check_transport(transport: object, kind: type, twin: type, use: str, example: str) -> None:
    """Refuse an inner transport that is not an httpx ``kind`` (``twin`` is the other flavour)."""
    if transport is None or isinstance(transport, kind):
        return
    problem = f"must be an httpx.{kind.__name__} or None"
    if isinstance(transport, twin):
        problem += f" (an httpx.{twin.__name__} needs {use})"
    raise ConfigError("transport", transport, problem, example)


@final
class AsyncRetryTransport(httpx.AsyncBaseTransport):
    """An httpx transport that retries through a `Retrier`; wraps any async transport.

    Args:
        transport: the inner transport; ``httpx.AsyncHTTPTransport()`` by default.
        policy: the default policy. Without ``retry_on`` (the default policy too) it retries
            connect errors, timeouts, other network errors and the statuses 429, 502, 503, 504.
        breaker: a `CircuitBreaker` template, keyed per host (``host`` or ``host:port``).
        budget: the cross-call `RetryBudget`; a fresh one by default, ``None`` turns it off.
        instruments: instruments for the events; ``None`` for the process defaults.
        clock: the clock; its ``wall()`` reads ``Retry-After`` dates.
        policies: named policies a request selects with ``extensions={"retrymw": "name"}``.

    Only GET, HEAD, PUT, DELETE, OPTIONS, TRACE and requests with an ``Idempotency-Key`` header
    are resent once they may have reached the server; connect errors are retried for every
    method. Bodies up to `max_replay_body` bytes are buffered so they can be replayed; longer
    ones are sent once. ``Retry-After`` on 429 and 503 sets the least delay; a hint beyond the
    policy's limits returns that response at once. Superseded responses are closed before the
    backoff sleep. On give-up the last response is returned open, or the last error raised.

    Raises:
        TransportCircuitOpenError: the host's circuit is open.
        TransportRetryBudgetExhausted: the policy's ``retry_budget`` ran out.
        AttemptTimeoutError: the last attempt outlived the policy's ``timeout``.
        ConfigError: an invalid argument, or an invalid ``extensions["retrymw"]`` value; the
            message names the field, the value and an accepted example.

    .. versionadded:: 0.1
    """

    #: Streaming request bodies up to this size are buffered; larger ones are never resent.
    max_replay_body: int = REPLAY_LIMIT

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        policy: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        budget: RetryBudget | None = _DEFAULT,
        instruments: Any = None,
        clock: Clock | None = None,
        policies: Mapping[str, RetryPolicy] | None = None,
    ) -> None:
        _check_transport(
            transport,
            httpx.AsyncBaseTransport,
            httpx.BaseTransport,
            "RetryTransport and httpx.Client",
            "httpx.AsyncHTTPTransport()",
        )
        self._core = _Core(policy, breaker, budget, instruments, clock, policies)
        self._transport = transport if transport is not None else httpx.AsyncHTTPTransport()

    @property
    def retrier(self) -> Retrier:
        """The `Retrier` behind the transport (its budget and breakers hold the statistics)."""
        return self._core.retrier

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the inner transport, retrying per the policy."""
        core = self._core
        policy = core.prepare(request)
        replayable = await buffer_async(request, self.max_replay_body)
        call = HttpCall(core.retrier, request, policy, replayable)
        return await drive_async(call, self._transport.handle_async_request)

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._transport.aclose()

    async def __aenter__(self) -> AsyncRetryTransport:
        await self._transport.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self._transport.__aexit__(exc_type, exc_value, traceback)

    def __repr__(self) -> str:
        return self._core.describe("AsyncRetryTransport", self._transport)


@final
class RetryTransport(httpx.BaseTransport):
    """Sync twin of `AsyncRetryTransport`, for ``httpx.Client``; same arguments and behaviour.

    A blocking attempt cannot be cancelled, so the policy's ``timeout`` (cut by its
    ``deadline``) bounds every socket operation of an attempt to what is left of it, for an
    inner ``httpx.HTTPTransport`` (the default); any other inner transport gets it as httpx's
    ``timeout`` request extension, which caps each phase. Either way the limit ends with the
    attempt: the returned response streams under the client's own timeouts.

    .. versionadded:: 0.1
    """

    #: Streaming request bodies up to this size are buffered; larger ones are never resent.
    max_replay_body: int = REPLAY_LIMIT

    def __init__(
        self,
        transport: httpx.BaseTransport | None = None,
        *,
        policy: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        budget: RetryBudget | None = _DEFAULT,
        instruments: Any = None,
        clock: Clock | None = None,
        policies: Mapping[str, RetryPolicy] | None = None,
    ) -> None:
        _check_transport(
            transport,
            httpx.BaseTransport,
            httpx.AsyncBaseTransport,
            "AsyncRetryTransport and httpx.AsyncClient",
            "httpx.HTTPTransport()",
        )
        self._core = _Core(policy, breaker, budget, instruments, clock, policies)
        self._transport = transport if transport is not None else httpx.HTTPTransport()
        bound_transport(self._transport)  # its sockets honour each attempt's time limit

    @property
    def retrier(self) -> Retrier:
        """The `Retrier` behind the transport (its budget and breakers hold the statistics)."""
        return self._core.retrier

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the inner transport, retrying per the policy."""
        core = self._core
        policy = core.prepare(request)
        call = HttpCall(core.retrier, request, policy, buffer_sync(request, self.max_replay_body))
        return drive_sync(call, self._transport.handle_request)

    def close(self) -> None:
        """Close the inner transport."""
        self._transport.close()

    def __enter__(self) -> RetryTransport:
        self._transport.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        self._transport.__exit__(exc_type, exc_value, traceback)

    def __repr__(self) -> str:
        return self._core.describe("RetryTransport", self._transport)


publish(globals(), __all__, __name__)

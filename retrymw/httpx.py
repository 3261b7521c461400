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

import functools
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, final

try:
    import httpx
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("retrymw.httpx needs httpx: pip install 'retrymw[httpx]'") from None

from ._budget import RetryBudget
from ._clock import SYSTEM_CLOCK, Clock
from ._errors import ConfigError
from ._http import REPLAY_LIMIT, PolicyResolver, format_target, http_policy, limit_sync_attempt
from ._httpx_body import buffer_async, buffer_sync
from ._httpx_client import HELPER_EXTENSION, request, request_sync
from ._httpx_exchange import (
    ATTEMPTS_EXTENSION,
    AttemptTimeoutError,
    TransportCircuitOpenError,
    TransportRetryBudgetExhausted,
    build_exchange,
    checked,
    translate,
)
from ._policy import RetryPolicy
from ._retrier import _DEFAULT, _NOT_GIVEN, Retrier

if TYPE_CHECKING:
    from ._breaker import CircuitBreaker
    from ._http import HttpExchange

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

#: ``request.extensions`` key selecting a policy for one request.
POLICY_EXTENSION: Final = "retrymw"


class _Core:
    """What both transports share: the retrier, the policies and the clock."""

    __slots__ = ("clock", "resolver", "retrier")

    def __init__(
        self,
        policy: RetryPolicy | None,
        breaker: CircuitBreaker | None,
        budget: RetryBudget | None,
        instruments: Any,
        clock: Clock | None,
        policies: Mapping[str, RetryPolicy] | None,
    ) -> None:
        self.clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self.resolver = PolicyResolver(http_policy(policy), policies)
        self.retrier = Retrier(
            self.resolver.default,
            breaker=breaker,
            budget=budget,
            instruments=instruments,
            clock=self.clock,
        )

    def prepare(self, request: httpx.Request) -> tuple[RetryPolicy, str]:
        """Return the request's policy and target; refuse a request from a client helper."""
        extensions = request.extensions
        if extensions.get(HELPER_EXTENSION):
            raise ConfigError(
                "client",
                request,
                "its transport already retries (AsyncRetryTransport/RetryTransport); "
                "retrymw.httpx.request would multiply the attempts",
                "a client with a plain transport",
            )
        policy = self.resolver.resolve(extensions.get(POLICY_EXTENSION))
        return policy, format_target(request.url.host, request.url.port)

    def first_attempt(self, policy: RetryPolicy) -> bool:
        """Whether the first attempt may run outside the engine (Retrier.plain_first_attempt)."""
        return self.retrier.plain_first_attempt(policy)

    def succeeded(
        self, exchange: HttpExchange, response: httpx.Response, policy: RetryPolicy
    ) -> bool:
        """Settle a first attempt's response; True if it is final (the call succeeded)."""
        if policy.matches(exchange.outcome(1, 0.0, response, None)):
            return False
        budget = self.retrier.budget
        if budget is not None:
            budget.record_success()
        return True

    def describe(self, kind: str, transport: object) -> str:
        policy = self.resolver.default
        return f"<{kind} policy={policy.name!r} attempts={policy.attempts} transport={transport!r}>"


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
        ConfigError: an invalid ``extensions["retrymw"]`` value.

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
        self._transport = transport if transport is not None else httpx.AsyncHTTPTransport()
        self._core = _Core(policy, breaker, budget, instruments, clock, policies)

    @property
    def retrier(self) -> Retrier:
        """The `Retrier` behind the transport (its budget and breakers hold the statistics)."""
        return self._core.retrier

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the inner transport, retrying per the policy."""
        core = self._core
        policy, target = core.prepare(request)
        exchange = build_exchange(
            core.clock, request, await buffer_async(request, self.max_replay_body)
        )
        send = functools.partial(self._transport.handle_async_request, request)
        first_error = None
        first_result: object = _NOT_GIVEN
        if core.first_attempt(policy):
            try:
                response = await send()
            except Exception as error:
                first_error = error
            else:
                if core.succeeded(exchange, response, policy):
                    return response
                first_result = response
        try:
            response = await core.retrier.execute_async(
                send,
                operation=request.method,
                target=target,
                policy=policy,
                adapter=exchange,
                request=request,
                first_error=first_error,
                first_result=first_result,
            )
        except Exception as error:
            translated = translate(error, request, policy)
            if translated is None:
                raise
            raise translated from translated.__cause__
        return checked(response, policy)

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
    ``deadline``) caps each phase of an attempt through httpx's ``timeout`` request extension.

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
        self._transport = transport if transport is not None else httpx.HTTPTransport()
        self._core = _Core(policy, breaker, budget, instruments, clock, policies)

    @property
    def retrier(self) -> Retrier:
        """The `Retrier` behind the transport (its budget and breakers hold the statistics)."""
        return self._core.retrier

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the inner transport, retrying per the policy."""
        core = self._core
        policy, target = core.prepare(request)
        exchange = build_exchange(core.clock, request, buffer_sync(request, self.max_replay_body))
        extensions = request.extensions
        send = functools.partial(self._transport.handle_request, request)
        attempt = limit_sync_attempt(send, request, policy, core.clock)
        first_error = None
        first_result: object = _NOT_GIVEN
        if core.first_attempt(policy):
            try:
                response = send()
            except Exception as error:
                first_error = error
            else:
                if core.succeeded(exchange, response, policy):
                    return response
                first_result = response
        try:
            response = core.retrier.execute_sync(
                attempt,
                operation=request.method,
                target=target,
                policy=policy,
                adapter=exchange,
                request=request,
                first_error=first_error,
                first_result=first_result,
            )
        except Exception as error:
            translated = translate(error, request, policy)
            if translated is None:
                raise
            raise translated from translated.__cause__
        finally:
            request.extensions = extensions
        return checked(response, policy)

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


# Tracebacks, reprs and docs show `retrymw.httpx.request`, never the private module defining it.
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("retrymw._"):
        _obj.__module__ = "retrymw.httpx"
del _name, _obj

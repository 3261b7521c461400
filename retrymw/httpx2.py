"""httpx2 integration: `AsyncRetryTransport`, `RetryTransport`, and the `request` helpers.

::

    client = httpx2.AsyncClient(transport=AsyncRetryTransport(policy=RetryPolicy(attempts=4)))
    openai.AsyncOpenAI(http_client=client, max_retries=0)

The transports only wrap: every attempt goes to the inner transport, and one `Retrier` decides.
The attempt count of the final response is in ``response.extensions["retrymw.attempts"]``
(`ATTEMPTS_EXTENSION`); a request selects another policy with
``extensions={"retrymw": "name" | RetryPolicy | {"attempts": 1}}`` (`POLICY_EXTENSION`).

A transport returns as soon as the headers arrive, so an error raised while the caller reads
the body cannot be retried there; `request` and `request_sync` retry the whole exchange instead.

httpx2 is the maintained fork of httpx that the OpenAI and Anthropic SDKs use. This face binds
the one HTTP core (`retrymw._http`) to it: the classes, arguments and behaviour are those of
`retrymw.httpx`, and only the base classes, the errors and the default inner transports are
httpx2's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, final

try:
    import httpx2
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("retrymw.httpx2 needs httpx2: pip install 'retrymw[httpx2]'") from None

from ._core.clock import Clock
from ._core.exports import publish
from ._core.policy import RetryPolicy
from ._engine.retrier_args import DEFAULT, BreakerArg, BudgetArg, PacerArg, ThrottleArg
from ._http.client import request, request_sync
from ._http.exchange import ATTEMPTS_EXTENSION
from ._http.flavour import (
    CircuitOpenMixin,
    Flavour,
    LoadShedMixin,
    PacedMixin,
    RetryBudgetExhaustedMixin,
    register,
)
from ._http.origins import Origin
from ._http.overrides import POLICY_EXTENSION
from ._http.transport import AsyncShell, SyncShell

if TYPE_CHECKING:
    from ._protect.hedge import Hedge
    from .fleet import RedisFleet
    from .stores import Store

__all__ = [
    "ATTEMPTS_EXTENSION",
    "POLICY_EXTENSION",
    "AsyncRetryTransport",
    "AttemptTimeoutError",
    "RetryTransport",
    "TransportCircuitOpenError",
    "TransportLoadShedError",
    "TransportPacedError",
    "TransportRetryBudgetExhausted",
    "request",
    "request_sync",
]


class TransportCircuitOpenError(CircuitOpenMixin, httpx2.TransportError):
    """The breaker rejected a request: a `CircuitOpenError` that is also an httpx2 error."""


class TransportLoadShedError(LoadShedMixin, httpx2.TransportError):
    """The throttle shed a request: a `LoadShedError` that is also an httpx2 error."""


class TransportPacedError(PacedMixin, httpx2.TransportError):
    """A request's pacer slot lay past its deadline: a `PacedError` that is also an httpx2 error.

    .. versionadded:: 0.4
    """


class TransportRetryBudgetExhausted(RetryBudgetExhaustedMixin, httpx2.TransportError):
    """The policy's ``retry_budget`` ran out: a `RetryBudgetExhausted` that is an httpx2 error."""


class AttemptTimeoutError(httpx2.TimeoutException, TimeoutError):
    """An async attempt outlived the policy's ``timeout`` (or ``deadline``) and was cancelled."""


_FLAVOUR = register(
    Flavour(
        httpx2,
        TransportCircuitOpenError,
        TransportLoadShedError,
        TransportRetryBudgetExhausted,
        AttemptTimeoutError,
        TransportPacedError,
    )
)


@final
class AsyncRetryTransport(AsyncShell, httpx2.AsyncBaseTransport):
    """An httpx2 transport that retries through a `Retrier`; wraps any async transport.

    Args:
        transport: the inner transport; ``httpx2.AsyncHTTPTransport()`` by default.
        policy: the default policy. Without ``retry_on`` (the default policy too) it retries
            connect errors, timeouts, other network errors and the statuses 429, 502, 503, 504.
        breaker: a `CircuitBreaker`: the template of one circuit per host (``host`` or
            ``host:port``), each named ``"<name>:<host>"``, as ``PerTarget(CircuitBreaker(...))``
            gives (the live circuits are ``transport.retrier.breaker``); a ``PerTarget`` of one,
            used as it is; ``None`` (the default) for none.
        budget: the cross-call `RetryBudget`, used as it is (one for every host), or a
            ``PerTarget`` of one; by default ``PerTarget(RetryBudget())``, one per host;
            ``None`` turns it off.
        throttle: an `AdaptiveThrottle` or a ``PerTarget`` of one; a request shed before its
            first attempt raises `TransportLoadShedError` and is never retried, a shed retry
            returns the last response; ``None`` (the default) for none.
        instruments: instruments for the events; ``None`` for the process defaults.
        clock: the clock; its ``wall()`` reads ``Retry-After`` dates.
        policies: named policies a request selects with ``extensions={"retrymw": "name"}``.
        store: a `retrymw.stores.Store`: a request with an ``Idempotency-Key`` header keeps its
            attempts and retry-budget expiry there, and resumes them after a restart.
        fleet: a `retrymw.fleet.RedisFleet`: the breaker, budget, throttle and pacer (each
            host's, for a ``PerTarget``) become fleet-wide, shared with every process of the
            namespace.
        attempt_header: a header sending each attempt's number (``"1"``, ``"2"``...) to the
            server, such as ``"x-retrymw-attempt"`` (`retrymw.server` reads it); ``None`` (the
            default) sends none.
        stall_timeout: most seconds the body of a returned response may go without a byte
            (a stalled stream): past it, reading raises ``ReadTimeout`` and the attempt failed;
            ``None`` (the default) for no limit but the client's and the deadline.
        first_byte_timeout: most seconds from a returned response's head to its body's
            first byte; ``None`` (the default): `stall_timeout` bounds that wait too.
        profile: ``"http"`` (the default) or ``"sdk"``: for the OpenAI and Anthropic SDKs
            with ``max_retries=0``, a policy without ``retry_on`` retries what the SDKs retry
            (408, 409, 429, 5xx, connection errors, timeouts), and those statuses are resent
            whatever the method (docs/sdks.md).
        hedge: a `retrymw.Hedge`: an idempotent request that has not answered after its
            delay gets extra concurrent copies, the first usable answer winning, each copy
            paid from the host's retry budget (docs/hedging.md); ``None`` (the default) for
            none.
        failover: other origins (URLs ``"https://host[:port]"`` or `retrymw.Origin`), in
            order: an idempotent request whose own origin's circuit is open, or whose retries
            there ended on a retryable answer, is sent to the next one (same path and query;
            one circuit per origin), within the request's deadline; the answering origin is in
            ``response.extensions["retrymw.origin"]`` (docs/hedging.md). ``None`` (the
            default): none.
        pacer: a `Pacer`: the template of one pacer per host (``"<name>:<host>"``; the live
            ones are ``transport.retrier.pacer``), or a ``PerTarget`` of one, used as it is:
            every attempt waits for its host's slot, and the pacer learns the host's limit
            from its answers (docs/pacing.md); ``None`` (the default) for none.

    Only GET, HEAD, PUT, DELETE, OPTIONS, TRACE and requests with an ``Idempotency-Key`` header are
    resent once they may have been processed; what the server says it did not process (a connect
    error, a 429, a 503 with ``Retry-After``) is resent whatever the method. A policy that leaves
    ``jitter`` unset gets full jitter. Bodies up to `max_replay_body` bytes are buffered so they can
    be replayed; longer ones are sent once. The server's hints set the least delay (``Retry-After``,
    ``retry-after-ms``, the rate-limit resets: the longest wins) and ``x-should-retry`` allows or
    forbids a retry; a hint beyond the policy's limits returns that response at once. An SDK's
    ``x-stainless-retry-count`` is kept true to the real attempt; a request the SDK above itself
    retries (a count of 1 or more right after its failed attempt of the same request, in the same
    task or thread) is sent once, with a warning. A count that came from elsewhere (forwarded from
    an inbound request) is ignored (docs/layers.md). Superseded responses are closed before the
    backoff sleep. On give-up the last response is returned open, or the last error raised.

    Raises:
        TransportCircuitOpenError: the host's circuit is open.
        TransportLoadShedError: the throttle shed the request's first attempt.
        TransportPacedError: the host's pacer had no slot within the policy's deadline.
        TransportRetryBudgetExhausted: the policy's ``retry_budget`` ran out.
        AttemptTimeoutError: the last attempt outlived the policy's ``timeout``.
        ConfigError: an invalid argument, a request or transport of httpx (naming both), or
            an invalid ``extensions["retrymw"]`` value; the message names the field, the value
            and an accepted example.

    .. versionadded:: 0.1
    """

    _flavour = _FLAVOUR

    def __init__(
        self,
        transport: httpx2.AsyncBaseTransport | None = None,
        *,
        policy: RetryPolicy | None = None,
        breaker: BreakerArg = None,
        budget: BudgetArg = DEFAULT,
        throttle: ThrottleArg = None,
        instruments: Any = None,
        clock: Clock | None = None,
        policies: Mapping[str, RetryPolicy] | None = None,
        store: Store | None = None,
        fleet: RedisFleet | None = None,
        attempt_header: str | None = None,
        stall_timeout: float | None = None,
        first_byte_timeout: float | None = None,
        profile: Literal["http", "sdk"] = "http",
        hedge: Hedge | None = None,
        failover: list[str | Origin] | None = None,
        pacer: PacerArg = None,
    ) -> None:
        self._setup(
            transport,
            True,
            policy=policy,
            breaker=breaker,
            budget=budget,
            throttle=throttle,
            instruments=instruments,
            clock=clock,
            policies=policies,
            store=store,
            fleet=fleet,
            attempt_header=attempt_header,
            stall_timeout=stall_timeout,
            first_byte_timeout=first_byte_timeout,
            profile=profile,
            hedge=hedge,
            failover=failover,
            pacer=pacer,
        )


@final
class RetryTransport(SyncShell, httpx2.BaseTransport):
    """Sync twin of `AsyncRetryTransport`, for ``httpx2.Client``; same arguments and behaviour.

    A blocking attempt cannot be cancelled, so the policy's ``timeout`` (cut by its
    ``deadline``) bounds every socket operation of an attempt to what is left of it, for an
    inner ``httpx2.HTTPTransport`` (the default); any other inner transport gets it as httpx2's
    ``timeout`` request extension, which caps each phase. Either way the limit ends with the
    attempt: the returned response streams under the client's own timeouts.

    .. versionadded:: 0.1
    """

    _flavour = _FLAVOUR

    def __init__(
        self,
        transport: httpx2.BaseTransport | None = None,
        *,
        policy: RetryPolicy | None = None,
        breaker: BreakerArg = None,
        budget: BudgetArg = DEFAULT,
        throttle: ThrottleArg = None,
        instruments: Any = None,
        clock: Clock | None = None,
        policies: Mapping[str, RetryPolicy] | None = None,
        store: Store | None = None,
        fleet: RedisFleet | None = None,
        attempt_header: str | None = None,
        stall_timeout: float | None = None,
        first_byte_timeout: float | None = None,
        profile: Literal["http", "sdk"] = "http",
        failover: list[str | Origin] | None = None,
        pacer: PacerArg = None,
    ) -> None:
        self._setup(
            transport,
            False,
            policy=policy,
            breaker=breaker,
            budget=budget,
            throttle=throttle,
            instruments=instruments,
            clock=clock,
            policies=policies,
            store=store,
            fleet=fleet,
            attempt_header=attempt_header,
            stall_timeout=stall_timeout,
            first_byte_timeout=first_byte_timeout,
            profile=profile,
            failover=failover,
            pacer=pacer,
        )


publish(globals(), __all__, __name__)

"""The retrying transport, once for every flavour: `AsyncShell` and `SyncShell`.

`retrymw.httpx` and `retrymw.httpx2` each declare ``AsyncRetryTransport`` and ``RetryTransport``
as one of these shells plus their library's base transport class, and bind their `Flavour`
(the errors, the default inner transports). The arguments are declared once, by the shells,
and documented once, by `ASYNC_DOC` and `SYNC_DOC` (each face fills in its library's names with
`face_doc`). Everything a transport does is here and in `exchange`: the policy a request runs
under, the protection a transport is built with (in `TransportCore`, its one place), the SDK
retry-count checks (`sdk`), the body buffering and the drive.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from contextlib import AbstractContextManager
from string import Template
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, Literal, TypeVar

from .._core.clock import SYSTEM_CLOCK, Clock
from .._core.errors import ConfigError
from .._core.policy import RetryPolicy
from .._engine.resume import resume
from .._engine.retrier import Retrier
from .._engine.retrier_args import (
    DEFAULT,
    BreakerArg,
    BudgetArg,
    PacerArg,
    ThrottleArg,
    default_budget,
)
from .body import REPLAY_LIMIT, buffer_async, buffer_sync
from .exchange import HttpCall, drive_async, drive_sync
from .flavour import Flavour
from .hosts import per_host
from .limits import bound_transport
from .origins import FailoverRun, Origin, drive_origins_async, drive_origins_sync, origins
from .overrides import HELPER_EXTENSION, POLICY_EXTENSION, PolicyResolver
from .responses import NO_LIMITS, BodyLimits
from .rules import IDEMPOTENCY_KEY_HEADER, http_profile
from .sdk import SdkAttempt, SdkAttempts, sdk_retry_count

if TYPE_CHECKING:
    from .._protect.hedge import Hedge
    from ..fleet import RedisFleet
    from ..stores import Store

__all__ = ["ASYNC_DOC", "SYNC_DOC", "AsyncShell", "SyncShell", "TransportCore", "face_doc"]

logger = logging.getLogger("retrymw")

A = TypeVar("A", bound="AsyncShell[Any]")
S = TypeVar("S", bound="SyncShell[Any]")
#: The inner transport's type: the face's library's ``AsyncBaseTransport`` or ``BaseTransport``.
Inner = TypeVar("Inner")

#: The docstring of a face's ``AsyncRetryTransport``; ``$library`` is its library, ``$other``
#: the other flavour (`face_doc`).
ASYNC_DOC: Final = Template(
    """An ${library} transport that retries through a `Retrier`; wraps any async transport.

Args:
    transport: the inner transport; ``${library}.AsyncHTTPTransport()`` by default.
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
    ConfigError: an invalid argument, a request or transport of ${other} (naming both), or
        an invalid ``extensions["retrymw"]`` value; the message names the field, the value
        and an accepted example.

.. versionadded:: 0.1
"""
)

#: The docstring of a face's ``RetryTransport`` (`face_doc`).
SYNC_DOC: Final = Template(
    """Sync twin of `AsyncRetryTransport`, for ``${library}.Client``; same arguments (but
``hedge``: a blocking attempt cannot be raced) and behaviour.

A blocking attempt cannot be cancelled, so the policy's ``timeout`` (cut by its
``deadline``) bounds every socket operation of an attempt to what is left of it, for an
inner ``${library}.HTTPTransport`` (the default); any other inner transport gets it as ${library}'s
``timeout`` request extension, which caps each phase. Either way the limit ends with the
attempt: the returned response streams under the client's own timeouts.

.. versionadded:: 0.1
"""
)


def face_doc(template: Template, flavour: Flavour) -> str:
    """``template`` (`ASYNC_DOC`, `SYNC_DOC`) for the face binding ``flavour``."""
    library = flavour.name
    return template.substitute(library=library, other="httpx" if library == "httpx2" else "httpx2")


class TransportCore:
    """What every transport holds: the flavour, the retrier and the policies.

    The protection arguments are turned into the `Retrier`'s here, and nowhere else.
    """

    __slots__ = ("attempt_header", "flavour", "origins", "profile", "resolver", "retrier", "sdk")

    def __init__(
        self,
        flavour: Flavour,
        policy: RetryPolicy | None,
        breaker: BreakerArg,
        budget: BudgetArg,
        throttle: ThrottleArg,
        instruments: Any,
        clock: Clock | None,
        policies: Mapping[str, RetryPolicy] | None,
        store: Store | None = None,
        fleet: RedisFleet | None = None,
        attempt_header: str | None = None,
        profile: str = "http",
        hedge: Hedge | None = None,
        failover: list[str | Origin] | None = None,
        pacer: PacerArg = None,
    ) -> None:
        self.attempt_header = _check_attempt_header(attempt_header)
        # The origins after each request's own, in order (`FailoverRun`).
        self.origins = origins(failover)
        self.flavour = flavour
        self.profile = http_profile(profile)
        self.resolver = PolicyResolver(self.profile.policy(policy), policies, self.profile)
        if budget is DEFAULT:
            # One budget per host: a dead host's retries must not spend a healthy one's.
            budget = default_budget(clock if clock is not None else SYSTEM_CLOCK, per_target=True)
        self.retrier = Retrier(
            self.resolver.default,
            breaker=per_host(breaker),  # one circuit per host, whatever breaker is given
            budget=budget,
            throttle=throttle,
            instruments=instruments,
            clock=clock,
            store=store,
            fleet=fleet,
            hedge=hedge,  # one estimate per host, kept by the Hedge itself
            pacer=per_host(pacer),  # one pacer per host, as the circuits
        )
        self.sdk = SdkAttempts()

    def resume_scope(self, request: Any) -> AbstractContextManager[None] | None:
        """The request's ``Idempotency-Key`` as its resume key, when the transport has a store;
        ``None`` when the request has none (no scope to enter).

        The key is scoped by host, so two APIs' keys never share a record; a key `resume`
        refuses (empty, over 1024 characters) leaves the request without one.
        """
        if self.retrier.store is None or IDEMPOTENCY_KEY_HEADER not in request.headers:
            return None
        key = request.headers[IDEMPOTENCY_KEY_HEADER]
        if not key:
            return None
        try:
            return resume(f"idempotency-key {request.url.host} {key}")
        except ConfigError:
            return None

    def prepare(self, request: Any) -> tuple[RetryPolicy, SdkAttempt | None]:
        """Return the request's policy and SDK retry count (``x-stainless-retry-count``, or
        ``None``); refuse a foreign request or one from a client helper.

        A request that is the SDK above this transport retrying (`SdkAttempts.arrived`: its
        count is 1 or more and follows the SDK's failed attempt of the same request, sent
        here) runs once (``attempts=1``), so that the attempts do not multiply, and within
        what is left of the deadline of the SDK call's first request; out of time, it is
        refused (`AttemptTimeoutError`) without being sent. A count that
        arrived from elsewhere (forwarded from an inbound request) is not trusted: the request
        runs under its policy, its attempts numbered from 0.
        """
        self.flavour.check_request(request)
        extensions = request.extensions
        if extensions.get(HELPER_EXTENSION):
            name = self.flavour.name
            raise ConfigError(
                "client",
                "a client whose transport retries",
                "its transport already retries (AsyncRetryTransport/RetryTransport); "
                f"retrymw.{name}.request would multiply the attempts",
                "a client with a plain transport",
            )
        policy = self.resolver.resolve(extensions.get(POLICY_EXTENSION))
        value = sdk_retry_count(request.headers)
        if value is None:
            return policy, None
        now = self.retrier.clock.now()
        count = self.sdk.arrived(request, value, now, policy.deadline)
        if count is None or not count.sdk_retry:
            return policy, count
        left = count.time_left(now)
        if left is None:
            return self.resolver.once(policy), count
        if left <= 0:
            self.sdk.ended(request, count, None)  # the SDK's next retry is refused too
            raise self._out_of_time(request, policy)
        # The SDK's retry runs once, within what is left of the call it belongs to.
        return policy.replace(attempts=1, deadline=left), count

    def _out_of_time(self, request: Any, policy: RetryPolicy) -> Exception:
        """The error refusing an SDK retry that arrives after its call's deadline: the
        flavour's ``AttemptTimeoutError`` (a ``TimeoutException``), so the SDK raises its
        timeout error once its own retries are spent; nothing is sent."""
        message = (
            f"not sent: the SDK retried a call whose deadline (policy {policy.name!r}) has "
            "passed; create the SDK client with max_retries=0"
        )
        logger.warning("%s %s: %s", request.method, request.url.host, message)
        return self.flavour.attempt_timeout(message, request=request)

    def call(
        self,
        request: Any,
        policy: RetryPolicy,
        count: SdkAttempt | None,
        replayable: bool,
        limits: BodyLimits = NO_LIMITS,
    ) -> HttpCall:
        """The `HttpCall` of a prepared ``request`` (`prepare`) whose body is buffered;
        ``limits`` bound the reading of the body of the response it returns."""
        return HttpCall(
            self.retrier,
            request,
            policy,
            replayable,
            self.flavour,
            self.attempt_header,
            sdk_count=None if count is None else count.start,
            limits=limits,
            profile=self.profile,
        )

    def failover(
        self,
        request: Any,
        policy: RetryPolicy,
        count: SdkAttempt | None,
        replayable: bool,
        limits: BodyLimits = NO_LIMITS,
    ) -> FailoverRun | None:
        """The `FailoverRun` of a prepared ``request`` along the transport's origins, or
        ``None`` when it has none to go to (no ``failover``, or a body that cannot be resent)."""
        if not self.origins or not replayable:
            return None

        def call(aimed: Any, left: float | None) -> HttpCall:
            # Each origin gets what the request's deadline leaves (``None``: the policy's own).
            timed = policy if left is None else policy.replace(deadline=left)
            return self.call(aimed, timed, count, replayable, limits)

        return FailoverRun(
            call,
            request,
            self.origins,
            self.flavour.module,
            policy.deadline,
            self.retrier.clock.now,
        )

    def describe(self, kind: str, transport: object) -> str:
        policy = self.resolver.default
        return f"<{kind} policy={policy.name!r} attempts={policy.attempts} transport={transport!r}>"


_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _check_body_limit(field: str, value: object) -> float | None:
    """``value`` as a body limit in seconds (a positive number), or ``None``; refuse the rest."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(field, value, "must be a positive number of seconds or None", "30.0")
    return float(value)


def _check_attempt_header(name: object) -> str | None:
    """``attempt_header`` as a header name (lower case), or ``None``; refuse anything else."""
    if name is None:
        return None
    if not isinstance(name, str) or not name or not set(name) <= _TOKEN:
        raise ConfigError(
            "attempt_header", name, "must be a header name or None", '"x-retrymw-attempt"'
        )
    return name.lower()


class _Shell:
    """What both colours share: the core, the inner transport and their presentation."""

    #: The library the face binds; set by each face.
    _flavour: ClassVar[Flavour]
    #: Streaming request bodies up to this size are buffered; larger ones are never resent.
    max_replay_body: int = REPLAY_LIMIT

    _core: TransportCore
    _transport: Any
    # The transport's `BodyLimits` (`stall_timeout`, `first_byte_timeout`).
    _body_limits: BodyLimits

    @property
    def stall_timeout(self) -> float | None:
        """Most seconds the body of a returned response may go without a byte, or ``None``.

        Past it, reading the body raises the library's ``ReadTimeout``, and the attempt that
        produced the response is a failed one (its body ``stalled``). ``None`` (the default):
        no limit but the client's own read timeout and the policy's deadline.

        .. versionadded:: 0.4
        """
        return self._body_limits.stall

    @property
    def first_byte_timeout(self) -> float | None:
        """Most seconds from a returned response's head to its body's first byte; ``None``
        (the default): `stall_timeout` bounds that wait too.

        .. versionadded:: 0.4
        """
        return self._body_limits.first_byte

    def _setup(
        self,
        transport: Any,
        asynchronous: bool,
        *,
        stall_timeout: float | None,
        first_byte_timeout: float | None,
        **settings: Any,
    ) -> None:
        flavour = self._flavour
        flavour.check_transport(transport, asynchronous)
        limits = BodyLimits(
            _check_body_limit("stall_timeout", stall_timeout),
            _check_body_limit("first_byte_timeout", first_byte_timeout),
        )
        # `NO_LIMITS` itself when both are off: a request then checks it by identity.
        self._body_limits = NO_LIMITS if limits == NO_LIMITS else limits
        self._core = TransportCore(flavour, **settings)
        if transport is None:
            module = flavour.module
            transport = module.AsyncHTTPTransport() if asynchronous else module.HTTPTransport()
        self._transport = transport

    @property
    def retrier(self) -> Retrier:
        """The `Retrier` behind the transport (``.breaker``, ``.budget``, ``.throttle``)."""
        return self._core.retrier

    def __repr__(self) -> str:
        return self._core.describe(type(self).__name__, self._transport)


class AsyncShell(_Shell, Generic[Inner]):
    """An async retrying transport, but for its library's base class (see the faces); its
    arguments are documented by `ASYNC_DOC`."""

    def __init__(
        self,
        transport: Inner | None = None,
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

    async def handle_async_request(self, request: Any) -> Any:
        """Send ``request`` through the inner transport, retrying per the policy."""
        core = self._core
        policy, count = core.prepare(request)
        flavour = core.flavour
        replayable = await buffer_async(request, self.max_replay_body, flavour.module)
        call: HttpCall | FailoverRun | None = core.failover(
            request, policy, count, replayable, self._body_limits
        )
        if call is None:
            call = core.call(request, policy, count, replayable, self._body_limits)
        if count is None:
            return await self._drive(request, call)
        try:
            response = await self._drive(request, call)
        except Exception:
            core.sdk.ended(request, count, None)
            raise
        core.sdk.ended(request, count, response)
        return response

    async def _drive(self, request: Any, call: HttpCall | FailoverRun) -> Any:
        """Run ``call`` (or a `FailoverRun` along the origins) through the inner transport, in
        the request's resume scope if it has one."""
        scope = self._core.resume_scope(request)
        if scope is None:
            return await self._send(call)
        with scope:
            return await self._send(call)

    async def _send(self, call: HttpCall | FailoverRun) -> Any:
        send = self._transport.handle_async_request
        if isinstance(call, FailoverRun):
            return await drive_origins_async(call, send)
        return await drive_async(call, send)

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._transport.aclose()

    async def __aenter__(self: A) -> A:
        await self._transport.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self._transport.__aexit__(exc_type, exc_value, traceback)


class SyncShell(_Shell, Generic[Inner]):
    """A sync retrying transport, but for its library's base class (see the faces): the
    arguments of `AsyncShell` but ``hedge`` (a blocking attempt cannot be raced), documented
    by `SYNC_DOC`."""

    def __init__(
        self,
        transport: Inner | None = None,
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

    def _setup(self, transport: Any, asynchronous: bool, **settings: Any) -> None:
        super()._setup(transport, asynchronous, **settings)
        bound_transport(self._transport)  # its sockets honour each attempt's time limit

    def handle_request(self, request: Any) -> Any:
        """Send ``request`` through the inner transport, retrying per the policy."""
        core = self._core
        policy, count = core.prepare(request)
        flavour = core.flavour
        replayable = buffer_sync(request, self.max_replay_body, flavour.module)
        call: HttpCall | FailoverRun | None = core.failover(
            request, policy, count, replayable, self._body_limits
        )
        if call is None:
            call = core.call(request, policy, count, replayable, self._body_limits)
        if count is None:
            return self._drive(request, call)
        try:
            response = self._drive(request, call)
        except Exception:
            core.sdk.ended(request, count, None)
            raise
        core.sdk.ended(request, count, response)
        return response

    def _drive(self, request: Any, call: HttpCall | FailoverRun) -> Any:
        """Sync twin of `AsyncShell._drive`."""
        scope = self._core.resume_scope(request)
        if scope is None:
            return self._send(call)
        with scope:
            return self._send(call)

    def _send(self, call: HttpCall | FailoverRun) -> Any:
        send = self._transport.handle_request
        if isinstance(call, FailoverRun):
            return drive_origins_sync(call, send)
        return drive_sync(call, send)

    def close(self) -> None:
        """Close the inner transport."""
        self._transport.close()

    def __enter__(self: S) -> S:
        self._transport.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        self._transport.__exit__(exc_type, exc_value, traceback)

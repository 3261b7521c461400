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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, final

try:
    import httpx
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError("retrymw.httpx needs httpx: pip install 'retrymw[httpx]'") from None

from ._budget import RetryBudget
from ._clock import SYSTEM_CLOCK, Clock
from ._errors import CircuitOpenError, ConfigError, RetryBudgetExhausted, add_note
from ._http import (
    REPLAY_LIMIT,
    HttpExchange,
    PolicyResolver,
    content_length,
    format_target,
    http_policy,
    limit_sync_attempt,
)
from ._policy import RetryPolicy
from ._retrier import _DEFAULT, _NOT_GIVEN, Retrier

if TYPE_CHECKING:
    from ._breaker import CircuitBreaker

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

#: ``response.extensions`` key holding the number of attempts that produced the response.
ATTEMPTS_EXTENSION: Final = "retrymw.attempts"
#: ``request.extensions`` key selecting a policy for one request.
POLICY_EXTENSION: Final = "retrymw"
# Set by the client helpers on their requests, so that a retrying transport below refuses them.
_HELPER_EXTENSION: Final = "retrymw.client_helper"
# Errors proving that no byte of the request reached the server: safe to resend for any method.
_NEVER_SENT: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
)


class TransportCircuitOpenError(CircuitOpenError, httpx.TransportError):
    """The breaker rejected a request: a `CircuitOpenError` that is also an httpx error."""

    def __init__(
        self, circuit: str, *, retry_in: float | None = None, request: httpx.Request
    ) -> None:
        super().__init__(circuit, retry_in=retry_in)
        self.request = request


class TransportRetryBudgetExhausted(RetryBudgetExhausted, httpx.TransportError):
    """The policy's ``retry_budget`` ran out: a `RetryBudgetExhausted` that is an httpx error."""

    def __init__(
        self, message: str, *, attempts: int, delay_so_far: float, request: httpx.Request
    ) -> None:
        super().__init__(message, attempts=attempts, delay_so_far=delay_so_far)
        self.request = request


class AttemptTimeoutError(httpx.TimeoutException, TimeoutError):
    """An async attempt outlived the policy's ``timeout`` (or ``deadline``) and was cancelled."""


def _translate(error: Exception, request: httpx.Request, policy: RetryPolicy) -> Exception | None:
    """Make the engine's own errors httpx errors, so ``except httpx.HTTPError`` catches them.

    Returns ``None`` for every other error, which is re-raised unchanged.
    """
    new: Exception
    if isinstance(error, httpx.HTTPError):
        return None
    if isinstance(error, CircuitOpenError):
        new = TransportCircuitOpenError(error.circuit, retry_in=error.retry_in, request=request)
    elif isinstance(error, RetryBudgetExhausted):
        new = TransportRetryBudgetExhausted(
            str(error), attempts=error.attempts, delay_so_far=error.delay_so_far, request=request
        )
    elif type(error) is TimeoutError and (policy.timeout or policy.deadline):
        # anyio.fail_after's error, raised by the engine around the attempt.
        new = AttemptTimeoutError(
            f"attempt cancelled by the policy's timeout ({policy.timeout}s) "
            f"or deadline ({policy.deadline}s)",
            request=request,
        )
    else:
        return None
    new.__cause__ = error.__cause__ if isinstance(error, RetryBudgetExhausted) else error
    for note in getattr(error, "__notes__", ()):
        add_note(new, note)
    return new


def _checked(response: object, policy: RetryPolicy) -> httpx.Response:
    if not isinstance(response, httpx.Response):  # only a policy fallback can return this
        raise TypeError(
            f"policy {policy.name!r}: on_failure='fallback' must return an httpx.Response, "
            f"got {type(response).__qualname__}"
        )
    return response


def _exchange(clock: Clock, request: httpx.Request, replayable: bool) -> HttpExchange:
    return HttpExchange(
        clock,
        request,
        replayable=replayable,
        never_sent=_NEVER_SENT,
        attempts_key=ATTEMPTS_EXTENSION,
    )


# -- request bodies ----------------------------------------------------------------------------


def _replayable(request: httpx.Request, limit: int) -> bool | None:
    """True if the body is in memory already, False if too long to buffer, else ``None``."""
    try:
        _ = request.content
    except httpx.RequestNotRead:
        length = content_length(request.headers.get("content-length"))
        return None if length is None or length <= limit else False
    return True


class _Rest(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body read in part: the chunks read so far, then the rest or the reading error, once."""

    def __init__(self, head: list[bytes], rest: Any, error: Exception | None) -> None:
        self._head, self._rest, self._error = head, rest, error

    def __iter__(self) -> Iterator[bytes]:
        yield from self._head
        if self._error is not None:
            raise self._error
        yield from self._rest

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._head:
            yield chunk
        if self._error is not None:
            raise self._error
        async for chunk in self._rest:
            yield chunk


async def _buffer_async(request: httpx.Request, limit: int) -> bool:
    """Make the body replayable like `httpx.Request.aread`, but bounded; False if it is not.

    A body longer than ``limit``, or one whose reading fails, is sent once: the part already
    read, then the rest of the stream (or the reading error, raised by the attempt).
    """
    replayable = _replayable(request, limit)
    stream = request.stream
    if replayable is not None or not isinstance(stream, httpx.AsyncByteStream):
        return bool(replayable)
    chunks: list[bytes] = []
    size = 0
    iterator = stream.__aiter__()
    while True:
        try:
            chunk = await iterator.__anext__()
        except StopAsyncIteration:
            break
        except Exception as error:
            request.stream = _Rest(chunks, None, error)
            return False
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            request.stream = _Rest(chunks, iterator, None)
            return False
    request.stream = httpx.ByteStream(b"".join(chunks))
    await request.aread()
    return True


def _buffer_sync(request: httpx.Request, limit: int) -> bool:
    """Sync twin of `_buffer_async`."""
    replayable = _replayable(request, limit)
    stream = request.stream
    if replayable is not None or not isinstance(stream, httpx.SyncByteStream):
        return bool(replayable)
    chunks: list[bytes] = []
    size = 0
    iterator = iter(stream)
    while True:
        try:
            chunk = next(iterator)
        except StopIteration:
            break
        except Exception as error:
            request.stream = _Rest(chunks, None, error)
            return False
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            request.stream = _Rest(chunks, iterator, None)
            return False
    request.stream = httpx.ByteStream(b"".join(chunks))
    request.read()
    return True


# -- transports --------------------------------------------------------------------------------


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
        if extensions.get(_HELPER_EXTENSION):
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
        exchange = _exchange(
            core.clock, request, await _buffer_async(request, self.max_replay_body)
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
            translated = _translate(error, request, policy)
            if translated is None:
                raise
            raise translated from translated.__cause__
        return _checked(response, policy)

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
        exchange = _exchange(core.clock, request, _buffer_sync(request, self.max_replay_body))
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
            translated = _translate(error, request, policy)
            if translated is None:
                raise
            raise translated from translated.__cause__
        finally:
            request.extensions = extensions
        return _checked(response, policy)

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


# -- client-level helpers ----------------------------------------------------------------------

_helper_retrier: Retrier | None = None


def _helper_setup(
    client: httpx.AsyncClient | httpx.Client,
    method: str,
    url: httpx.URL | str,
    policy: RetryPolicy | None,
    retrier: Retrier | None,
    kwargs: dict[str, Any],
) -> tuple[httpx.Request, dict[str, Any], Retrier, RetryPolicy]:
    global _helper_retrier
    if retrier is None:
        if _helper_retrier is None:
            _helper_retrier = Retrier(http_policy())
        retrier = _helper_retrier
    send_kwargs: dict[str, Any] = {
        key: kwargs.pop(key) for key in ("auth", "follow_redirects") if key in kwargs
    }
    extensions = {**(kwargs.pop("extensions", None) or {}), _HELPER_EXTENSION: True}
    built = client.build_request(method, url, extensions=extensions, **kwargs)
    resolved = http_policy(policy if policy is not None else retrier.policy)
    return built, send_kwargs, retrier, resolved


async def request(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL | str,
    *,
    policy: RetryPolicy | None = None,
    retrier: Retrier | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """Send a request with ``client`` and read its body, retrying the whole exchange.

    Unlike the transport, this also retries errors raised while the body is read (a connection
    dropped mid-body, a read timeout after the headers). The idempotency, replay and
    ``Retry-After`` rules are the transport's.

    Args:
        client: an ``httpx.AsyncClient`` whose transport does not retry already.
        method: the HTTP method.
        url: the URL.
        policy: the policy; the retrier's (or the HTTP default) when omitted.
        retrier: the `Retrier` (budget, breaker, instruments, clock); a process-wide default
            when omitted.
        **kwargs: as for ``client.request`` (``content``, ``json``, ``headers``, ``auth``, ...).

    Returns:
        The final response, its body read.

    Raises:
        ConfigError: the client's transport already retries.

    .. versionadded:: 0.1
    """
    built, send_kwargs, retrier, resolved = _helper_setup(
        client, method, url, policy, retrier, kwargs
    )
    replayable = await _buffer_async(built, REPLAY_LIMIT)
    send: Callable[[], Awaitable[httpx.Response]] = functools.partial(
        client.send, built, **send_kwargs
    )
    try:
        response = await retrier.execute_async(
            send,
            operation=built.method,
            target=format_target(built.url.host, built.url.port),
            policy=resolved,
            adapter=_exchange(retrier.clock, built, replayable),
            request=built,
        )
    except Exception as error:
        translated = _translate(error, built, resolved)
        if translated is None:
            raise
        raise translated from translated.__cause__
    return _checked(response, resolved)


def request_sync(
    client: httpx.Client,
    method: str,
    url: httpx.URL | str,
    *,
    policy: RetryPolicy | None = None,
    retrier: Retrier | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """Sync twin of `request`, for ``httpx.Client``.

    .. versionadded:: 0.1
    """
    built, send_kwargs, retrier, resolved = _helper_setup(
        client, method, url, policy, retrier, kwargs
    )
    replayable = _buffer_sync(built, REPLAY_LIMIT)
    extensions = built.extensions
    send = functools.partial(client.send, built, **send_kwargs)
    try:
        response = retrier.execute_sync(
            limit_sync_attempt(send, built, resolved, retrier.clock),
            operation=built.method,
            target=format_target(built.url.host, built.url.port),
            policy=resolved,
            adapter=_exchange(retrier.clock, built, replayable),
            request=built,
        )
    except Exception as error:
        translated = _translate(error, built, resolved)
        if translated is None:
            raise
        raise translated from translated.__cause__
    finally:
        built.extensions = extensions
    return _checked(response, resolved)

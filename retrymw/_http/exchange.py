"""One HTTP request through the engine, as the transports and the client helpers all run it.

Every transport (httpx's and httpx2's, async and sync) and both client helpers run a request
the same way, whatever the flavour (`Flavour`: httpx or httpx2): prepare it (an `HttpCall`:
the request, its policy, its `Retrier`, and the engine's adapter for it), let the first attempt
run bare when the retrier allows it, settle that attempt's response, hand the call to the
engine if a retry is needed, and turn the engine's give-up errors into the flavour's errors
(`translate`, with the classes each face binds: `retrymw.httpx`, `retrymw.httpx2`).
`HttpCall` holds every step, down to the responses' disposal: a superseded one is drained
during the backoff wait and within it, the latest one is closed when the call ends in an error.
`drive_async` and `drive_sync` are the only two drivers and differ in their awaits alone (and
the sync one's time limits, which `limits` enforces on the sockets because a blocking attempt
cannot be cancelled). This lives apart from
`retrymw.httpx` so that `_httpx_client` can use it without importing the transports' module,
which re-exports the helpers.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio

from .._core.drivers import Plain
from .._core.errors import CircuitOpenError, LoadShedError, RetryBudgetExhausted, add_note
from .._core.instruments import NO_SCOPES, Dispatch
from .._core.layers import LAST_MARK, copy_mark
from .._core.policy import RetryPolicy
from .._core.retrier import _NOT_GIVEN
from .._protect.targets import PerTarget
from .flavour import Flavour
from .limits import limit_sync_attempt, within
from .semantics import (
    DRAIN_GRACE,
    DRAIN_TIMEOUT,
    RETRY_COUNT_HEADER,
    HttpExchange,
    drainable,
    format_target,
)

if TYPE_CHECKING:
    from .._core.retrier import Retrier

__all__ = [
    "ATTEMPTS_EXTENSION",
    "HttpCall",
    "drive_async",
    "drive_sync",
    "translate",
]

logger = logging.getLogger("retrymw")
T = TypeVar("T")

#: ``response.extensions`` key holding the number of attempts that produced the response.
ATTEMPTS_EXTENSION: Final = "retrymw.attempts"


def translate(
    error: Exception, request: Any, policy: RetryPolicy, flavour: Flavour
) -> Exception | None:
    """Make the engine's own errors the flavour's, so ``except httpx.HTTPError`` catches them.

    Returns ``None`` for every other error, which is re-raised unchanged.
    """
    new: Exception
    if isinstance(error, flavour.module.HTTPError):
        return None
    if isinstance(error, CircuitOpenError):
        new = flavour.circuit_open(error.circuit, retry_in=error.retry_in, request=request)
    elif isinstance(error, LoadShedError):
        new = flavour.load_shed(
            error.throttle, reject_probability=error.reject_probability, request=request
        )
    elif isinstance(error, RetryBudgetExhausted):
        new = flavour.budget_exhausted(
            str(error), attempts=error.attempts, delay_so_far=error.delay_so_far, request=request
        )
    elif type(error) is TimeoutError and (policy.timeout or policy.deadline):
        # anyio.fail_after's error, raised by the engine around the attempt.
        new = flavour.attempt_timeout(
            f"attempt cancelled by the policy's timeout ({policy.timeout}s) "
            f"or deadline ({policy.deadline}s)",
            request=request,
        )
    else:
        return None
    new.__cause__ = error.__cause__ if isinstance(error, RetryBudgetExhausted) else error
    for note in getattr(error, "__notes__", ()):
        add_note(new, note)
    copy_mark(error, new)  # final below stays final above (docs/layers.md)
    return new


class HttpCall(HttpExchange):
    """One request on its way through a `Retrier`: every step of a call but the attempts.

    It is the engine's adapter for the request (an `HttpExchange`: idempotency, replay and
    ``Retry-After`` rules, and the disposal of superseded responses); it also settles a bare
    first attempt, names the call's target, checks the engine's result, closes the latest
    response of a call that fails and turns the engine's give-up errors into the flavour's.

    An SDK's retry-count header (``x-stainless-retry-count``, `RETRY_COUNT_HEADER`) is kept
    true: every attempt sends its real number of earlier attempts (0, 1, 2...), counted from
    the value the SDK sent.

    Args:
        retrier: the retrier running the call (its clock reads ``Retry-After`` dates).
        request: the request; its body already buffered if it could be.
        policy: the request's policy, ready for HTTP (`http_policy`).
        replayable: whether the body can be sent again.
        flavour: the request's library (httpx or httpx2).
        attempt_header: a header that carries each attempt's number (1, 2, 3...) to the
            server, or ``None`` to send none (`retrymw.server` reads it).
        sdk_count: the request's `RETRY_COUNT_HEADER` as it arrived (`sdk_retry_count`).
    """

    __slots__ = (
        "_attempt_header",
        "_counted",
        "_sent",
        "_started_at",
        "flavour",
        "policy",
        "request",
        "retrier",
    )

    def __init__(
        self,
        retrier: Retrier,
        request: Any,
        policy: RetryPolicy,
        replayable: bool,
        flavour: Flavour,
        attempt_header: str | None = None,
        *,
        sdk_count: str | None,
    ) -> None:
        clock = retrier.clock
        super().__init__(
            clock,
            request,
            replayable=replayable,
            never_sent=flavour.never_sent,
            attempts_key=ATTEMPTS_EXTENSION,
        )
        self.retrier = retrier
        self.request = request
        self.policy = policy
        self.flavour = flavour
        # An SDK's count on arrival: its own earlier attempts, which ours are added to.
        count = sdk_count
        self._counted = count is not None and count.isascii() and count.isdigit() and len(count) < 6
        self._sent = int(count) if count is not None and self._counted else 0
        self._attempt_header = attempt_header
        # No later than the engine's own start: the deadline left is never overestimated.
        self._started_at = clock.now()

    def sender(self, send: Callable[[Any], T]) -> Callable[[], T]:
        """One attempt: ``send(request)``, the SDK's retry count first set to the real one, and
        the attempt header, if any, to this attempt's number."""
        header = self._attempt_header
        if not self._counted and header is None:
            return functools.partial(send, self.request)
        number = 0

        def attempt() -> T:
            nonlocal number
            number += 1
            headers = self.request.headers
            if header is not None:
                headers[header] = str(number)
            if self._counted:
                headers[RETRY_COUNT_HEADER] = str(self._sent)
                self._sent += 1
            return send(self.request)

        return attempt

    def settle(self, response: Any) -> bool:
        """Whether a bare first attempt's response is final: then the call has succeeded."""
        if self.policy.matches(self.outcome(1, 0.0, response, None)):
            return False
        budget = self.retrier.budget
        if isinstance(budget, PerTarget):  # the target is computed only when it keys something
            budget = budget.for_target(self.target)
        if budget is not None:
            budget.record_success()
        return True

    def abandon_plain(
        self, dispatch: Dispatch, since: int, started: float | None, error: BaseException
    ) -> None:
        """Report a call whose bare first attempt ended it with what is never retried
        (cancellation, ``SystemExit``), as the engine would (`Engine.abandon_plain`)."""
        self.retrier.abandon_plain(
            dispatch,
            NO_SCOPES,
            error,
            operation=self.request.method,
            since=since,
            started=started,
            policy=self.policy,
            target=self.target,
            request=self.request,
        )

    def report_success(self, hooks: tuple[Any, ...], started: float) -> None:
        """Report a bare first attempt that settled the call to metrics-only instruments."""
        self.retrier.report_first_success(hooks, self.policy.name, self.target, started)

    @property
    def target(self) -> str:
        """The telemetry target and `PerTarget` key: ``host``, or ``host:port`` if not the default.

        Computed only when the engine runs: a bare first attempt that succeeds never needs it.
        """
        url = self.request.url
        return format_target(url.host, url.port)

    def checked(self, result: object) -> Any:
        """Return the engine's result, raising `TypeError` if a fallback returned no response."""
        module = self.flavour.module
        if not isinstance(result, module.Response):  # only a policy fallback can return this
            raise TypeError(
                f"policy {self.policy.name!r}: on_failure='fallback' must return an "
                f"{module.__name__}.Response, got {type(result).__qualname__}"
            )
        return result

    async def discard(self, result: Any, limit: float) -> None:
        """Read a small superseded body so its connection is reused, then close the response.

        The read is part of the backoff wait: it stops after ``limit`` (the backoff delay,
        see `drain_limit`) and the response is then closed unread, costing its connection.
        """
        try:
            limit = self.drain_limit(limit)
            if limit > 0.0 and drainable(result):
                with anyio.move_on_after(limit):
                    await result.aread()
        except Exception:  # a superseded response: failing to drain only costs its connection
            logger.debug("retrymw: could not drain a superseded response", exc_info=True)
        finally:
            with anyio.CancelScope(shield=True):  # a cancelled call still frees the connection
                await result.aclose()

    def discard_sync(self, result: Any, limit: float) -> None:
        """Sync twin of `discard`: every socket read ends by the limit (`within`)."""
        try:
            limit = self.drain_limit(limit)
            if limit > 0.0 and drainable(result):
                ends = time.monotonic() + limit
                with within(limit):
                    for _ in result.iter_raw():
                        # A transport whose sockets `within` cannot reach stops between chunks.
                        if time.monotonic() >= ends:
                            break
        except Exception:
            logger.debug("retrymw: could not drain a superseded response", exc_info=True)
        finally:
            result.close()

    def drain_limit(self, delay: float) -> float:
        """How long reading a superseded body may take before a retry ``delay`` s away.

        The delay, but at least `DRAIN_GRACE` and at most `DRAIN_TIMEOUT`; and never what the
        policy's ``deadline`` leaves the next attempt.
        """
        limit = min(max(delay, DRAIN_GRACE), DRAIN_TIMEOUT)
        deadline = self.policy.deadline
        if deadline is not None:
            left = deadline - (self.retrier.clock.now() - self._started_at) - delay
            limit = min(limit, left)
        return limit

    async def abandon(self) -> None:
        """Close the latest response: the call ends in an error and will not return it.

        Shielded, so that a cancelled call still gives the connection back. Closing is
        idempotent: a superseded response already closed costs nothing.
        """
        latest, self._latest = self._latest, None
        if latest is not None:
            with anyio.CancelScope(shield=True):
                await latest.aclose()

    def abandon_sync(self) -> None:
        """Sync twin of `abandon`."""
        latest, self._latest = self._latest, None
        if latest is not None:
            latest.close()

    def engine_arguments(
        self,
        first_error: Exception | None,
        first_result: object,
        since: int | None,
        started: float | None,
        plain: Plain,
        dispatch: Dispatch,
    ) -> dict[str, Any]:
        """What the engine's async and sync drivers are told about this exchange (one place):
        a call whose first attempt ran bare (``plain`` not ``None``) goes on under ``dispatch``,
        the one that attempt ran under."""
        return {
            "operation": self.request.method,
            "target": self.target,
            "policy": self.policy,
            "adapter": self,
            "request": self.request,
            "first_error": first_error,
            "first_result": first_result,
            "since": since,
            "started": started,
            "plain_path": None if plain is None else (dispatch, NO_SCOPES),
        }

    def raise_translated(self, error: Exception) -> None:
        """Raise the httpx twin of an engine give-up ``error`` (see `translate`).

        Returns for any other error, which the caller re-raises as it is with a bare ``raise``
        (so that its traceback does not grow).
        """
        translated = translate(error, self.request, self.policy, self.flavour)
        if translated is not None:
            raise translated from translated.__cause__


async def drive_async(call: HttpCall, send: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``call`` with ``send`` (one attempt), retrying through the engine when needed.

    The first attempt runs bare when `Retrier.plain_first_attempt` allows it, and a final
    response returns at once; otherwise the engine runs the call, or resumes it from there.
    """
    try:
        return await _run_async(call, send)
    except BaseException:
        # No response is returned: the latest one (say, the one a raising retry_on predicate
        # was judging) must not keep its connection from the pool.
        await call.abandon()
        raise


async def _run_async(call: HttpCall, send: Callable[[Any], Awaitable[Any]]) -> Any:
    attempt = call.sender(send)
    first_error: Exception | None = None
    first_result: object = _NOT_GIVEN
    since = started = None
    dispatch, plain = call.retrier.plain_first_attempt(call.policy)
    if plain is not None:
        since = LAST_MARK[0]  # see Retrier.call
        started = call.retrier.clock.now() if plain else None
        try:
            response = await attempt()
        except Exception as error:
            first_error = error
        except BaseException as error:
            if plain:
                call.abandon_plain(dispatch, since, started, error)
            raise
        else:
            if call.settle(response):
                if started is not None:
                    call.report_success(plain, started)
                return response
            first_result = response
    resumed = call.retrier.execute_async(
        attempt, **call.engine_arguments(first_error, first_result, since, started, plain, dispatch)
    )
    # The first error's traceback holds this frame: not holding the error here too leaves no
    # reference cycle for the garbage collector after every retried request.
    del first_error
    try:
        result = await resumed
    except Exception as error:
        call.raise_translated(error)
        raise
    return call.checked(result)


def drive_sync(call: HttpCall, send: Callable[[Any], Any]) -> Any:
    """Sync twin of `drive_async`; each attempt's time limit is enforced by `limit_sync_attempt`."""
    try:
        return _run_sync(call, send)
    except BaseException:
        call.abandon_sync()
        raise


def _run_sync(call: HttpCall, send: Callable[[Any], Any]) -> Any:
    request = call.request
    single = call.sender(send)
    first_error: Exception | None = None
    first_result: object = _NOT_GIVEN
    since = started = None
    dispatch, plain = call.retrier.plain_first_attempt(call.policy)
    if plain is not None:
        since = LAST_MARK[0]  # see Retrier.call
        started = call.retrier.clock.now() if plain else None
        try:
            response = single()
        except Exception as error:
            first_error = error
        except BaseException as error:
            if plain:
                call.abandon_plain(dispatch, since, started, error)
            raise
        else:
            if call.settle(response):
                if started is not None:
                    call.report_success(plain, started)
                return response
            first_result = response
    extensions = request.extensions
    attempt = limit_sync_attempt(single, request, call.policy, call.retrier.clock)
    try:
        result = call.retrier.execute_sync(
            attempt,
            **call.engine_arguments(first_error, first_result, since, started, plain, dispatch),
        )
    except Exception as error:
        call.raise_translated(error)
        raise
    finally:
        request.extensions = extensions  # limit_sync_attempt sets each attempt's timeouts there
        first_error = None  # no reference cycle through this frame, as in `_run_async`
    return call.checked(result)

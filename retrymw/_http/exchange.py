"""One HTTP request through the engine, as the transports and the client helpers all run it.

Every transport (httpx's and httpx2's, async and sync) and both client helpers run a request
the same way, whatever the flavour (`Flavour`: httpx or httpx2): prepare it (an `HttpCall`:
the request, its policy, its `Retrier`, and the engine's adapter for it), let the first attempt
run bare when the retrier allows it, settle that attempt's response, hand the call to the
engine if a retry is needed, and turn the engine's give-up errors into the flavour's errors
(`translate`, with the classes each face binds: `retrymw.httpx`, `retrymw.httpx2`).
`HttpCall` holds every step, down to the responses' disposal (`responses`): a superseded one
is drained during the backoff wait and within it, the returned one keeps the call's deadline,
the latest one is closed when the call ends in an error. `drive_async` and `drive_sync` are the
only two drivers and differ in their awaits alone (and the sync one's time limits, which
`limits` enforces on the sockets because a blocking attempt cannot be cancelled). This lives
apart from `retrymw.httpx` so that the client helpers (`client`) can use it without importing
the transports' module, which re-exports the helpers.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio

from .._core.clock import Clock
from .._core.errors import (
    CircuitOpenError,
    LoadShedError,
    PacedError,
    RetryBudgetExhausted,
    add_note,
)
from .._core.events import Outcome, RetryReason
from .._core.policy import RetryPolicy
from .._engine.call import Call
from .._engine.layers import copy_mark
from .._engine.runtime import BodyEnding
from .flavour import Flavour
from .hints import NO_HINTS, read_hints
from .hosts import format_target
from .limits import cap_phase_timeouts
from .ratelimits import read_rate_limits
from .responses import NO_LIMITS, BodyLimits, body_open, drain_async, drain_sync, watch_body
from .rules import HTTP_PROFILE, IDEMPOTENCY_KEY_HEADER, HttpProfile, is_idempotent
from .sdk import RETRY_COUNT_HEADER
from .sse import terminal_for

if TYPE_CHECKING:
    from .._engine.retrier import Retrier
    from .._protect.pacer import Pacer

__all__ = [
    "ATTEMPTS_EXTENSION",
    "HttpCall",
    "HttpExchange",
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
    elif isinstance(error, PacedError):
        new = flavour.paced(
            error.pacer,
            wait=error.wait,
            deadline_left=error.deadline_left,
            room=error.room,
            request=request,
        )
    elif isinstance(error, RetryBudgetExhausted):
        new = flavour.budget_exhausted(
            str(error), attempts=error.attempts, delay_so_far=error.delay_so_far, request=request
        )
    elif type(error) is TimeoutError and (policy.timeout or policy.deadline):
        # anyio.fail_after's error around the attempt, which says nothing, or the engine's when
        # the deadline passed before a retry (`CallRun.out_of_time`).
        new = flavour.attempt_timeout(str(error) or _cancelled_by(policy), request=request)
    else:
        return None
    new.__cause__ = error.__cause__ if isinstance(error, RetryBudgetExhausted) else error
    for note in getattr(error, "__notes__", ()):
        add_note(new, note)
    copy_mark(error, new)  # final below stays final above (docs/layers.md)
    return new


def _cancelled_by(policy: RetryPolicy) -> str:
    """What cut an attempt short: the policy's ``timeout``, its ``deadline``, or either."""
    limits = [
        f"{name} ({limit:g}s)"
        for name, limit in (("timeout", policy.timeout), ("deadline", policy.deadline))
        if limit is not None
    ]
    return f"attempt cancelled by the policy's {' or '.join(limits)}"


class HttpExchange:
    """The engine's view of one HTTP request (its `AttemptAdapter`).

    It vetoes retries that would resend a non-idempotent request or a body that cannot be
    replayed, or that the server forbids (``x-should-retry: false``), reads the server's delay
    hints on error responses (`read_hints`: the longest wins), stamps ``response.extensions``
    with the attempt number, and keeps the latest response (a call that ends in an error closes it).
    It works on httpx's request and response objects by duck typing, so this module never
    imports httpx.

    Args:
        clock: the clock whose ``wall()`` dates are compared with.
        request: the ``httpx.Request``.
        replayable: whether the body can be sent again.
        never_sent: error types proving that no byte reached the server (connect errors): they
            are retried for every method.
        attempts_key: the ``response.extensions`` key for the attempt number.
        profile: which answers say the request was not processed (`HttpProfile`): those are
            resent whatever the method.
    """

    __slots__ = (
        "_attempts_key",
        "_clock",
        "_latest",
        "_never_sent",
        "_profile",
        "_veto_sent",
        "_veto_unsent",
        "hedgeable",
    )

    def __init__(
        self,
        clock: Clock,
        request: Any,
        *,
        replayable: bool,
        never_sent: tuple[type[Exception], ...],
        attempts_key: str,
        profile: HttpProfile = HTTP_PROFILE,
    ) -> None:
        self._clock = clock
        self._never_sent = never_sent
        self._profile = profile
        self._attempts_key = attempts_key
        self._latest: Any = None
        idempotent = is_idempotent(request.method) or IDEMPOTENCY_KEY_HEADER in request.headers
        self._veto_unsent: RetryReason | None = None if replayable else "body_not_replayable"
        self._veto_sent: RetryReason | None = self._veto_unsent if idempotent else "not_idempotent"
        #: Whether copies of the request may be in flight at once (a `Hedge`): the §4 rules.
        self.hedgeable = idempotent and replayable

    def outcome(
        self, attempt: int, elapsed: float, result: Any, error: Exception | None
    ) -> Outcome:
        """Describe one attempt: status, the server's hints and the veto that applies."""
        if error is not None:
            veto = self._veto_unsent if isinstance(error, self._never_sent) else self._veto_sent
            return Outcome(attempt=attempt, elapsed=elapsed, exception=error, veto=veto)
        # Kept so that a call ending in an error (a raising retry_on predicate) can close it.
        self._latest = result
        result.extensions[self._attempts_key] = attempt
        status: int = result.status_code
        if status < 400:  # the success path reads no header
            return Outcome(
                attempt=attempt, elapsed=elapsed, result=result, status=status, veto=self._veto_sent
            )
        headers = result.headers
        now_wall = self._clock.wall()
        veto = self._veto_sent
        if veto != self._veto_unsent and self._profile.says_unprocessed(status, headers, now_wall):
            veto = self._veto_unsent  # the server says it did not process it: any method
        hints = read_hints(headers, status, now_wall)
        if hints is NO_HINTS:
            return Outcome(
                attempt=attempt, elapsed=elapsed, result=result, status=status, veto=veto
            )
        said_no: RetryReason | None = "server_said_no" if hints.should_retry is False else veto
        return Outcome(
            attempt=attempt,
            elapsed=elapsed,
            result=result,
            status=status,
            retry_after=hints.delay,
            veto=said_no,
            retry_after_header=hints.header,
        )

    def teach(self, pacer: Pacer, result: Any, now: float) -> None:
        """Tell ``pacer`` what a response says: its status and rate-limit headers
        (`PacerTeacher`). An error (a refused connection) says nothing about the limit: the
        engine never passes one."""
        limits = read_rate_limits(result.headers.multi_items(), self._clock.wall())
        pacer.learn(now, status=result.status_code, limits=limits)


class HttpCall(HttpExchange):
    """One request on its way through a `Retrier`: every step of a call but the attempts.

    It is the engine's adapter for the request (an `HttpExchange`: idempotency, replay and
    ``Retry-After`` rules, and the disposal of superseded responses); it also settles a bare
    first attempt, names the call's target, checks the engine's result, closes the latest
    response of a call that fails and turns the engine's give-up errors into the flavour's.

    An SDK's retry-count header (``x-stainless-retry-count``, `RETRY_COUNT_HEADER`) is kept
    true: every attempt sends its real number of earlier attempts (0, 1, 2...), counted from
    ``sdk_count``: the SDK's own count when the SDK above is retrying, else 0 (`sdk`).

    Args:
        retrier: the retrier running the call (its clock reads ``Retry-After`` dates).
        request: the request; its body already buffered if it could be.
        policy: the request's policy, ready for HTTP (`http_policy`).
        replayable: whether the body can be sent again.
        flavour: the request's library (httpx or httpx2).
        attempt_header: a header that carries each attempt's number (1, 2, 3...) to the
            server, or ``None`` to send none (`retrymw.server` reads it).
        sdk_count: the number the attempts' `RETRY_COUNT_HEADER` counts from, or ``None`` to
            leave the header as it is (absent, or not a count).
        limits: the transport's limits on reading the returned response's body.
        profile: the transport's `HttpProfile` (which answers let any method be resent).
    """

    __slots__ = (
        "_attempt_header",
        "_counted",
        "_ending",
        "_number",
        "_sent",
        "failover",
        "flavour",
        "limits",
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
        sdk_count: int | None,
        limits: BodyLimits = NO_LIMITS,
        profile: HttpProfile = HTTP_PROFILE,
    ) -> None:
        clock = retrier.clock
        super().__init__(
            clock,
            request,
            replayable=replayable,
            never_sent=flavour.never_sent,
            attempts_key=ATTEMPTS_EXTENSION,
            profile=profile,
        )
        self.retrier = retrier
        self.request = request
        self.policy = policy
        self.flavour = flavour
        # The earlier attempts ours are added to: the SDK's own, when it is retrying (`sdk`).
        self._counted = sdk_count is not None
        self._sent = sdk_count or 0
        self._attempt_header = attempt_header
        # The attempt the engine runs next (`before_attempt`); a bare first attempt is 1.
        self._number = 1
        self.limits = limits
        # Told how the returned response's body was read (`follow_body`).
        self._ending: BodyEnding | None = None
        # Whether a give-up sends the request to the next origin (`FailoverRun`), if any.
        self.failover: Callable[[Any, Exception | None], bool] | None = None

    def before_attempt(self, attempt: int) -> None:
        """The engine's number for the attempt about to be sent, which the attempt header
        carries: after a resume it counts the earlier processes' attempts too."""
        self._number = attempt

    def sender(self, send: Callable[[Any], T]) -> Callable[[], T]:
        """One attempt: ``send(request)``, the SDK's retry count first set to the real one, and
        the attempt header, if any, to this attempt's number."""
        header = self._attempt_header
        if not self._counted and header is None:
            return functools.partial(send, self.request)

        def attempt() -> T:
            headers = self.request.headers
            if header is not None:
                headers[header] = str(self._number)
            if self._counted:
                headers[RETRY_COUNT_HEADER] = str(self._sent)
                self._sent += 1
            return send(self.request)

        return attempt

    def settles(self, response: Any) -> bool:
        """Whether a bare first attempt's response is final: the call has succeeded."""
        return not self.policy.matches(self.outcome(1, 0.0, response, None))

    def description(self) -> Call:
        """The call as the engine is told it: the request's method, policy and host."""
        request = self.request
        return Call(
            operation=request.method,
            policy=self.policy,
            target=self.target,
            adapter=self,
            request=request,
        )

    @property
    def target(self) -> str:
        """The telemetry target and `PerTarget` key: ``host``, or ``host:port`` if not the default.

        Computed only when the engine runs: a bare first attempt that succeeds never needs it.
        """
        url = self.request.url
        return format_target(url.host, url.port)

    def hands_on(self, result: Any, error: Exception | None) -> bool:
        """Whether the call, giving up with ``result`` or ``error``, fails over to the next
        origin (the engine's `HandsOn`: its outcome is then ``failover``)."""
        return self.failover is not None and self.failover(result, error)

    def checked(self, result: object) -> Any:
        """Return the engine's result, raising `TypeError` if a fallback returned no response."""
        module = self.flavour.module
        if not isinstance(result, module.Response):  # only a policy fallback can return this
            raise TypeError(
                f"policy {self.policy.name!r}: on_failure='fallback' must return an "
                f"{module.__name__}.Response, got {type(result).__qualname__}"
            )
        return result

    async def discard(self, result: Any, delay: float, deadline_left: float | None) -> None:
        """Drain a superseded response during the backoff wait, then close it (`drain_async`)."""
        await drain_async(result, delay, deadline_left)

    def discard_sync(self, result: Any, delay: float, deadline_left: float | None) -> None:
        """Sync twin of `discard` (`drain_sync`)."""
        drain_sync(result, delay, deadline_left)

    def follow_body(self, result: object, ending: BodyEnding) -> bool:
        """Whether ``result``, the response the call will return, has a body still to be read;
        if so, ``ending`` is told how it was read (`returned` puts it in its `WatchedBody`)."""
        if not body_open(result, self.flavour.module):
            return False
        self._ending = ending
        return True

    def returned(self, result: Any, deadline_left: float | None) -> Any:
        """The response the call returns, its body bounded by the deadline and the transport's
        limits, and watched to its end if the engine follows it (`watch_body`)."""
        ending, self._ending = self._ending, None
        # An LLM API's stream must end with its terminal event, for an SDK or a fallback.
        checked = self._profile.name == "sdk" or self.failover is not None
        return watch_body(
            result,
            deadline_left=deadline_left,
            limits=self.limits,
            flavour=self.flavour.module,
            request=self.request,
            ending=ending,
            terminal=terminal_for(self.request, result) if checked else None,
        )

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

    def raise_translated(self, error: Exception) -> None:
        """Raise the httpx twin of an engine give-up ``error`` (see `translate`).

        Returns for any other error, which the caller re-raises as it is with a bare ``raise``
        (so that its traceback does not grow).
        """
        translated = translate(error, self.request, self.policy, self.flavour)
        if translated is not None:
            raise translated from translated.__cause__


async def drive_async(call: HttpCall, send: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``call`` with ``send`` (one attempt) through the engine; return its response.

    A call that ends in an error closes the latest response (say, the one a raising
    ``retry_on`` predicate was judging), so that it never keeps its connection from the pool.
    """
    try:
        result = await call.retrier.run_async(call.sender(send), (), {}, call.description())
    except Exception as error:
        await call.abandon()
        call.raise_translated(error)
        raise
    except BaseException:
        await call.abandon()
        raise
    return call.checked(result)


def drive_sync(call: HttpCall, send: Callable[[Any], Any]) -> Any:
    """Sync twin of `drive_async`; each attempt's httpx timeouts are capped to its time limit
    (`cap_phase_timeouts`)."""
    request = call.request
    extensions = request.extensions
    attempt = cap_phase_timeouts(call.sender(send), request)
    try:
        result = call.retrier.run_sync(attempt, (), {}, call.description())
    except Exception as error:
        call.abandon_sync()
        call.raise_translated(error)
        raise
    except BaseException:
        call.abandon_sync()
        raise
    finally:
        request.extensions = extensions  # cap_phase_timeouts sets each attempt's timeouts there
    return call.checked(result)

"""The engine's side of one httpx exchange, as the transports and the client helpers share it.

`build_exchange` builds the `HttpExchange` adapter handed to the `Retrier`; `translate` turns the
engine's give-up errors into httpx errors (the three classes here, re-exported and presented
by `retrymw.httpx`); `checked` makes sure a policy fallback returned a response. They live
apart from `retrymw.httpx` so that `_httpx_client` can use them without importing the
transports' module, which re-exports the helpers.
"""

from __future__ import annotations

from typing import Final

import httpx

from ._clock import Clock
from ._errors import CircuitOpenError, RetryBudgetExhausted, add_note
from ._http import HttpExchange
from ._policy import RetryPolicy

__all__ = [
    "ATTEMPTS_EXTENSION",
    "AttemptTimeoutError",
    "TransportCircuitOpenError",
    "TransportRetryBudgetExhausted",
    "checked",
    "build_exchange",
    "translate",
]

#: ``response.extensions`` key holding the number of attempts that produced the response.
ATTEMPTS_EXTENSION: Final = "retrymw.attempts"
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


def translate(error: Exception, request: httpx.Request, policy: RetryPolicy) -> Exception | None:
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


def checked(response: object, policy: RetryPolicy) -> httpx.Response:
    """Return the engine's result, raising `TypeError` if a fallback returned no response."""
    if not isinstance(response, httpx.Response):  # only a policy fallback can return this
        raise TypeError(
            f"policy {policy.name!r}: on_failure='fallback' must return an httpx.Response, "
            f"got {type(response).__qualname__}"
        )
    return response


def build_exchange(clock: Clock, request: httpx.Request, replayable: bool) -> HttpExchange:
    """Return the engine's adapter for ``request``: its idempotency, replay and hint rules."""
    return HttpExchange(
        clock,
        request,
        replayable=replayable,
        never_sent=_NEVER_SENT,
        attempts_key=ATTEMPTS_EXTENSION,
    )

"""How a call that gave up ends: the outcome of each give-up reason and the note it carries.

`CallRun` reports a reason; these tables say what the caller sees (the ``CallFinished``
outcome, the note on the raised exception) so the wording lives in one place.
"""

from __future__ import annotations

from .._core.errors import (
    CircuitOpenError,
    LoadShedError,
    PacedError,
    RetryBudgetExhausted,
    add_note,
)
from .._core.events import CallOutcome, Outcome, RetryReason
from .._core.policy import CallState, RetryPolicy
from .._core.redact import safe_repr
from .layers import current, mark

__all__ = ["OUTCOME_OF_REASON", "OUTCOME_OF_REFUSAL", "ending_error", "error_type", "mark_final"]

#: The outcome of a call that made attempts and gave up for a reason. A retry the
#: breaker or the throttle refused ends the call with what its attempts got, a ``failure``: the
#: reason (``retrymw_retries_denied_total``) tells why no retry followed. Only a call refused
#: before any attempt is ``circuit_open`` or ``shed`` (`OUTCOME_OF_REFUSAL`), so that the
#: dashboards' admitted calls are the calls that reached the dependency.
OUTCOME_OF_REASON: dict[RetryReason, CallOutcome] = {
    "max_attempts": "exhausted",
    "budget_exhausted": "budget_exhausted",
    "throttled": "throttled",
    "deadline_exceeded": "deadline_exceeded",
    "circuit_open": "failure",
    "shed": "failure",
    "not_idempotent": "failure",
    "body_not_replayable": "failure",
    "retry_after_exceeds_limit": "failure",
    "server_said_no": "failure",
    "retried_below": "failure",
    "paced": "failure",
}

#: The outcome of a call refused before any attempt (in this process) by the breaker, the
#: throttle or the pacer: nothing reached the dependency.
OUTCOME_OF_REFUSAL: dict[RetryReason, CallOutcome] = {
    "circuit_open": "circuit_open",
    "shed": "shed",
    "paced": "paced",
}

_NOTE_PREFIX = "retrymw: gave up after attempt "

_WHY: dict[RetryReason, str] = {
    "max_attempts": "no attempts left",
    "budget_exhausted": "the call's retry_budget would be exceeded",
    "throttled": "the cross-call retry budget denied the retry",
    "deadline_exceeded": "the next retry would start past the deadline",
    "circuit_open": "the circuit breaker is open",
    "shed": "the adaptive throttle shed the retry",
    "not_idempotent": "the request is not idempotent",
    "body_not_replayable": "the request body cannot be replayed",
    "retry_after_exceeds_limit": "the server's Retry-After exceeds the policy's limits",
    "server_said_no": "the server said not to retry (x-should-retry: false)",
    "retried_below": "a retrymw call below already retried it and gave up",
    "paced": "the pacer has no slot for the retry within the deadline",
}


def error_type(outcome: Outcome) -> str:
    if outcome.exception is not None:
        return type(outcome.exception).__qualname__
    if outcome.status is not None:
        return str(outcome.status)
    return "result"


def _budget_exhausted(policy: RetryPolicy, state: CallState, error: Exception) -> Exception:
    """The `RetryBudgetExhausted` raised for ``error`` when the call's retry_budget ran out."""
    exhausted = RetryBudgetExhausted(
        f"Retry budget exhausted: {policy.retry_budget:g}s of backoff allowed, "
        f"{state.delay_so_far:g}s used after {state.attempt} attempt(s); "
        f"last error: {safe_repr(error)}",
        attempts=state.attempt,
        delay_so_far=state.delay_so_far,
    )
    exhausted.__cause__ = error
    return exhausted


def _note_gave_up(error: Exception, attempt: int, policy: RetryPolicy, reason: RetryReason) -> None:
    """Add the note saying why retrying stopped, replacing an earlier retrymw note."""
    # An exception object raised again and again (a module-level instance) keeps one
    # retrymw note, the latest, instead of one per call.
    notes = getattr(error, "__notes__", None)
    if isinstance(notes, list):
        notes[:] = [
            note for note in notes if not (isinstance(note, str) and note.startswith(_NOTE_PREFIX))
        ]
    add_note(
        error,
        f"{_NOTE_PREFIX}{attempt} of {policy.attempts} "
        f"(policy {policy.name!r}): {_WHY[reason]} [{reason}]",
    )


def ending_error(
    policy: RetryPolicy, state: CallState, reason: RetryReason, error: Exception
) -> Exception:
    """What a call that gave up for ``reason`` raises: ``error`` with its note, or a new error.

    A breaker's or throttle's own refusal is raised as it is; an exhausted retry_budget
    raises `RetryBudgetExhausted` caused by ``error``.
    """
    if reason == "budget_exhausted":
        return _budget_exhausted(policy, state, error)
    if not isinstance(error, (CircuitOpenError, LoadShedError, PacedError)):
        _note_gave_up(error, state.attempt, policy, reason)
    return error


def mark_final(value: object) -> None:
    """The call gave up for good: mark what it hands over, and tell the request served.

    An enclosing retrymw call does not retry a marked error or response (reason
    ``retried_below``); `retrymw.server` answers a failed request with ``x-should-retry:
    false``. A call that gave up before its first attempt ran (breaker, throttle) marks
    nothing: it never sent anything to retry.
    """
    mark(value)
    inbound = current()
    if inbound is not None:
        inbound.final = True

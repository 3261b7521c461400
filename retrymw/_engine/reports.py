"""What a call tells the instruments: each event built from its `CallRun`'s state.

Called by `run` only when an instrument listens for that event (the hook table is not empty),
so a call nobody observes builds none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .._core.events import (
    AttemptFinished,
    AttemptOutcome,
    AttemptStarted,
    BodyRead,
    CallFinished,
    CallOutcome,
    CallStarted,
    Outcome,
    RetryDenied,
    RetryReason,
    RetryScheduled,
)
from .._core.instruments import Dispatch, Hook, Scopes
from .._core.policy import RetryPolicy
from .endings import error_type
from .runtime import Runtime

if TYPE_CHECKING:
    from .._protect.budget import RetryBudget

__all__ = [
    "ReportedCall",
    "attempt_finished",
    "attempt_started",
    "call_finished",
    "call_started",
    "hedge_finished",
    "retry_denied",
    "retry_scheduled",
]


class ReportedCall(Protocol):
    """What the reports read of a call: a `run.CallRun`."""

    policy: RetryPolicy
    target: str
    operation: str
    request: object
    attempt: int
    started_at: float
    attempt_started_at: float
    result: object
    outcome: CallOutcome
    status: int | None
    runtime: Runtime
    budget: RetryBudget | None
    body: BodyRead | None
    paced_for: float | None


def call_started(run: ReportedCall, hooks: tuple[Hook, ...]) -> Scopes:
    """Announce the call; the scopes the instruments return wrap the whole call."""
    policy = run.policy
    return Dispatch.enter(
        hooks,
        CallStarted(
            policy=policy.name,
            target=run.target,
            operation=run.operation,
            max_attempts=policy.attempts,
            request=run.request,
        ),
    )


def attempt_started(run: ReportedCall, hooks: tuple[Hook, ...], *, hedge: bool = False) -> Scopes:
    """Announce the attempt ``run.attempt`` (or a ``hedge`` of it); its scopes wrap it."""
    policy = run.policy
    return Dispatch.enter(
        hooks,
        AttemptStarted(
            policy=policy.name,
            target=run.target,
            operation=run.operation,
            attempt=run.attempt,
            max_attempts=policy.attempts,
            request=run.request,
            hedge=hedge,
        ),
    )


def hedge_finished(
    run: ReportedCall,
    hooks: tuple[Hook, ...],
    duration: float,
    won: bool,
    failure: str | None,
    error: Exception | None,
) -> None:
    """Report an extra copy of attempt ``run.attempt`` (`hedging`): it won, or it failed
    with ``failure`` (an error type, ``"cancelled"`` for a copy another one beat)."""
    Dispatch.emit(
        hooks,
        AttemptFinished(
            policy=run.policy.name,
            target=run.target,
            operation=run.operation,
            attempt=run.attempt,
            attempt_outcome="hedge",
            duration=duration,
            error_type=None if won else failure,
            exception=error,
            hedge=True,
        ),
    )


def attempt_finished(
    run: ReportedCall,
    hooks: tuple[Hook, ...],
    outcome: Outcome,
    now: float,
    matched: bool,
    retry: bool,
) -> None:
    """Report the attempt that produced ``outcome``: a success, retried, or failed for good."""
    error = outcome.exception
    attempt_outcome: AttemptOutcome = (
        "success" if not matched and error is None else "retried" if retry else "failed"
    )
    Dispatch.emit(
        hooks,
        AttemptFinished(
            policy=run.policy.name,
            target=run.target,
            operation=run.operation,
            attempt=run.attempt,
            attempt_outcome=attempt_outcome,
            duration=now - run.attempt_started_at,
            error_type=None if attempt_outcome == "success" else error_type(outcome),
            status=outcome.status,
            exception=error,
            result=run.result,
            body=run.body,
            paced_for=run.paced_for,
        ),
    )


def retry_scheduled(
    run: ReportedCall, hooks: tuple[Hook, ...], outcome: Outcome, delay: float
) -> Scopes:
    """Announce the wait of ``delay`` seconds before the next attempt; its scopes wrap it."""
    policy = run.policy
    return Dispatch.enter(
        hooks,
        RetryScheduled(
            policy=policy.name,
            target=run.target,
            operation=run.operation,
            attempt=run.attempt,
            max_attempts=policy.attempts,
            delay=delay,
            error_type=error_type(outcome),
            retry_after=outcome.retry_after,
            exception=outcome.exception,
            budget_available=_budget_available(run),
            retry_after_header=outcome.retry_after_header,
        ),
    )


def retry_denied(
    run: ReportedCall, hooks: tuple[Hook, ...], reason: RetryReason, outcome: Outcome
) -> None:
    """Report that ``outcome`` gets no retry, for ``reason``."""
    policy = run.policy
    Dispatch.emit(
        hooks,
        RetryDenied(
            policy=policy.name,
            target=run.target,
            operation=run.operation,
            attempt=run.attempt,
            max_attempts=policy.attempts,
            reason=reason,
            error_type=error_type(outcome),
            budget_available=_budget_available(run),
        ),
    )


def call_finished(run: ReportedCall, hooks: tuple[Hook, ...], error: BaseException | None) -> None:
    """Report the call's end: its outcome, attempts, duration and the budget's tokens."""
    if run.outcome == "success":
        failure = None
    elif error is not None:
        failure = type(error).__qualname__
    else:
        failure = None if run.status is None else str(run.status)
    runtime = run.runtime
    now = runtime.clock.now()
    budget_available = None
    # Reading the budget costs a lock: worth it on every call that retried, at most once a
    # second on the success path (`Runtime.budget_gauge_due`).
    if run.budget is not None and (run.attempt > 1 or runtime.budget_gauge_due(now)):
        budget_available = run.budget.available()
    Dispatch.emit(
        hooks,
        CallFinished(
            policy=run.policy.name,
            target=run.target,
            operation=run.operation,
            outcome=run.outcome,
            attempts=run.attempt,
            duration=now - run.started_at,
            error_type=failure,
            status=run.status,
            exception=error,
            budget_available=budget_available,
        ),
    )


def _budget_available(run: ReportedCall) -> float | None:
    budget = run.budget
    return None if budget is None else budget.available()

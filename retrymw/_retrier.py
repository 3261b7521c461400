"""`Retrier`: the runtime object. One per-call `_Run` holds the logic; the drivers only execute.

The async and sync drivers are deliberately thin loops around the same `_Run` methods: run the
attempt, ask the run (which asks the pure `RetryPolicy.decide`) what follows, sleep, repeat.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from random import Random
from typing import Any, ParamSpec, Protocol, TypeVar, overload

import anyio

from ._breaker import CircuitBreaker, CircuitBreakerRegistry
from ._budget import RetryBudget
from ._clock import SYSTEM_CLOCK, Clock, waits_disabled
from ._errors import CircuitOpenError, ConfigError, RetryBudgetExhausted, add_note
from ._events import (
    AttemptFinished,
    AttemptOutcome,
    AttemptStarted,
    CallFinished,
    CallOutcome,
    CallStarted,
    Outcome,
    RetryDenied,
    RetryReason,
    RetryScheduled,
)
from ._matchers import status_of
from ._policy import Accept, CallState, GiveUp, Retry, RetryPolicy
from .instrumentation._base import NO_SCOPES, Dispatch, Instrument

__all__ = ["Retrier", "retry"]

P = ParamSpec("P")
T = TypeVar("T")

_DEFAULT: Any = object()
_NOT_GIVEN: Any = object()

_OUTCOME_OF_REASON: dict[RetryReason, CallOutcome] = {
    "max_attempts": "exhausted",
    "budget_exhausted": "budget_exhausted",
    "throttled": "throttled",
    "deadline_exceeded": "deadline_exceeded",
    "circuit_open": "circuit_open",
    "not_idempotent": "failure",
    "body_not_replayable": "failure",
    "retry_after_exceeds_limit": "failure",
}

_NOTE_PREFIX = "retrymw: gave up after attempt "

_WHY: dict[RetryReason, str] = {
    "max_attempts": "no attempts left",
    "budget_exhausted": "the call's retry_budget would be exceeded",
    "throttled": "the cross-call retry budget denied the retry",
    "deadline_exceeded": "the next retry would start past the deadline",
    "circuit_open": "the circuit breaker is open",
    "not_idempotent": "the request is not idempotent",
    "body_not_replayable": "the request body cannot be replayed",
    "retry_after_exceeds_limit": "the server's Retry-After exceeds the policy's limits",
}


class AttemptAdapter(Protocol):
    """How a front door (the httpx transport) refines outcomes and disposes of results."""

    def outcome(
        self, attempt: int, elapsed: float, result: object, error: Exception | None
    ) -> Outcome:
        """Build the `Outcome` of one attempt (status, Retry-After hint, veto)."""
        ...

    async def discard(self, result: object) -> None:
        """Dispose of a superseded result before the backoff sleep (async driver)."""
        ...

    def discard_sync(self, result: object) -> None:
        """Dispose of a superseded result before the backoff sleep (sync driver)."""
        ...


def _operation_name(fn: object) -> str:
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    # "<locals>" qualnames are per-definition-site noise; keep the readable tail for labels.
    return str(name).rsplit("<locals>.", 1)[-1]


def _error_type(outcome: Outcome) -> str:
    if outcome.exception is not None:
        return type(outcome.exception).__qualname__
    if outcome.status is not None:
        return str(outcome.status)
    return "result"


class Retrier:
    """Runs functions and coroutines under a `RetryPolicy`, with breaker, budget and telemetry.

    Args:
        policy: the policy; the default `RetryPolicy()` when omitted.
        breaker: a `CircuitBreaker` used as a template, keyed per operation (per host for the
            httpx transport); ``None`` for no breaker.
        budget: the cross-call `RetryBudget`; a fresh one by default, ``None`` turns it off.
        instruments: instruments receiving events; ``None`` for the process defaults (see
            `retrymw.set_default_instruments`), ``()`` for none.
        clock: where time is read and slept; the system clock by default.
        rng: the random source for jitter.

    Use ``await retrier.call(fn, *args, **kwargs)``, ``retrier.call_sync(fn, ...)``, or the
    instance as a decorator on async and sync functions.

    .. versionadded:: 0.1
    """

    __slots__ = (
        "_breakers",
        "_budget",
        "_budget_reported_at",
        "_clock",
        "_dispatch",
        "_plain",
        "_quiet",
        "_rng",
        "policy",
    )

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        breaker: CircuitBreaker | None = None,
        budget: RetryBudget | None = _DEFAULT,
        instruments: Any = None,
        clock: Clock | None = None,
        rng: Random | None = None,
    ) -> None:
        _check_arguments(policy, breaker, budget, instruments, clock, rng)
        self.policy = policy if policy is not None else RetryPolicy()
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._budget = RetryBudget(clock=self._clock) if budget is _DEFAULT else budget
        if instruments is None:
            from .instrumentation import default_instruments

            instruments = default_instruments()
        self._dispatch = Dispatch(instruments)
        self._breakers: CircuitBreakerRegistry | None = None
        if breaker is not None:
            self._breakers = CircuitBreakerRegistry(
                breaker, listeners=(self._dispatch.breaker_listener,)
            )
        self._rng = rng if rng is not None else Random()
        self._budget_reported_at = -math.inf
        self._plain = self._is_plain(self.policy, self._dispatch)
        # Instruments that can be idle (OpenTelemetry without an SDK) are asked once per call;
        # while none listens, calls use this dispatch without them, and its plain path.
        quiet = self._dispatch.quiet()
        self._quiet = None if quiet is None else (quiet, self._is_plain(self.policy, quiet))

    def _current(self) -> tuple[Dispatch, bool]:
        """The dispatch for a call starting now, and whether its policy may take the plain path."""
        if self._quiet is None or self._dispatch.listening():
            return self._dispatch, self._plain
        return self._quiet

    def plain_first_attempt(self, policy: RetryPolicy) -> bool:
        """Whether a call under ``policy`` starting now may run its first attempt bare.

        True when no instrument observes calls or attempts, no breaker admits them, and the
        policy bounds no attempt in time. A front door that checks results itself (the httpx
        transport) then runs the first attempt directly and hands it to `execute_async` /
        `execute_sync` through ``first_result`` / ``first_error`` only when it needs a retry.
        """
        return self._is_plain(policy, self._current()[0], results_checked=True)

    @property
    def clock(self) -> Clock:
        """The clock this retrier reads and sleeps on."""
        return self._clock

    def _is_plain(
        self, policy: RetryPolicy, dispatch: Dispatch, *, results_checked: bool = False
    ) -> bool:
        # The plain path runs the first attempt with no bookkeeping at all; anything that must
        # observe or bound that first attempt sends calls down the full path instead.
        return not (
            dispatch.call_started
            or dispatch.attempt_started
            or dispatch.attempt_finished
            or dispatch.call_finished
            or self._breakers is not None
            or policy.timeout is not None
            or policy.deadline is not None
            or (
                not results_checked and policy.retry_on is not None and policy.retry_on.uses_results
            )
        )

    @property
    def budget(self) -> RetryBudget | None:
        """The cross-call retry budget, or ``None``."""
        return self._budget

    @property
    def breakers(self) -> CircuitBreakerRegistry | None:
        """The keyed circuit breakers, or ``None`` when no breaker was given."""
        return self._breakers

    def __repr__(self) -> str:
        return f"<Retrier policy={self.policy.name!r} attempts={self.policy.attempts}>"

    # -- front doors ---------------------------------------------------------------------------

    async def call(self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Await ``fn(*args, **kwargs)`` with retries and return its result.

        Raises:
            Exception: the last exception, with a note saying why retrying stopped.
            RetryBudgetExhausted: the policy's ``retry_budget`` ran out.
            CircuitOpenError: the breaker rejected the call before its first attempt.
        """
        return await self._call_async(fn, args, kwargs, None)

    def call_sync(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Call ``fn(*args, **kwargs)`` with retries, sleeping in the current thread.

        Raises:
            ConfigError: the policy has a per-attempt ``timeout``, which cannot interrupt a
                synchronous function.
        """
        return self._call_sync(fn, args, kwargs, None)

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, T]], /
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    @overload
    def __call__(self, fn: Callable[P, T], /) -> Callable[P, T]: ...

    def __call__(self, fn: Callable[P, Any], /) -> Callable[P, Any]:
        """Decorate ``fn``; a coroutine function stays a coroutine function."""
        operation = _operation_name(fn)
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                return await self._call_async(fn, args, kwargs, operation)

            return run_async

        if self.policy.timeout is not None:
            raise _sync_timeout_error(self.policy.timeout)

        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> Any:
            return self._call_sync(fn, args, kwargs, operation)

        return run

    async def _call_async(
        self, fn: Callable[..., Awaitable[T]], args: Any, kwargs: Any, operation: str | None
    ) -> T:
        quiet = self._quiet
        plain = self._plain if quiet is None or self._dispatch.listening() else quiet[1]
        if plain:
            try:
                result = await fn(*args, **kwargs)
            except Exception as error:
                return await self.execute_async(
                    functools.partial(fn, *args, **kwargs),
                    operation=operation or _operation_name(fn),
                    first_error=error,
                )
            if self._budget is not None:
                self._budget.record_success()
            return result
        return await self.execute_async(
            functools.partial(fn, *args, **kwargs), operation=operation or _operation_name(fn)
        )

    def _call_sync(self, fn: Callable[..., T], args: Any, kwargs: Any, operation: str | None) -> T:
        if self.policy.timeout is not None:
            raise _sync_timeout_error(self.policy.timeout)
        quiet = self._quiet
        plain = self._plain if quiet is None or self._dispatch.listening() else quiet[1]
        if plain:
            try:
                result = fn(*args, **kwargs)
            except Exception as error:
                return self.execute_sync(
                    functools.partial(fn, *args, **kwargs),
                    operation=operation or _operation_name(fn),
                    first_error=error,
                )
            if self._budget is not None:
                self._budget.record_success()
            return result
        return self.execute_sync(
            functools.partial(fn, *args, **kwargs), operation=operation or _operation_name(fn)
        )

    # -- drivers -------------------------------------------------------------------------------

    async def execute_async(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        operation: str,
        target: str | None = None,
        policy: RetryPolicy | None = None,
        adapter: AttemptAdapter | None = None,
        request: object = None,
        first_error: Exception | None = None,
        first_result: object = _NOT_GIVEN,
    ) -> T:
        """Run ``attempt`` until the policy accepts an outcome or gives up (async driver).

        Front doors use this directly: ``target`` labels telemetry and keys the breaker
        (default: ``operation``), ``policy`` overrides the retrier's policy for one call,
        ``adapter`` refines outcomes, and ``first_error`` or ``first_result`` resumes a call
        whose first attempt already ran on the plain path (see `plain_first_attempt`).
        """
        resumed = first_error is not None or first_result is not _NOT_GIVEN
        dispatch = self._quiet[0] if resumed and self._quiet is not None else self._current()[0]
        run = _Run(self, policy or self.policy, operation, target, adapter, request, dispatch)
        sleep = self._clock.sleep
        try:
            delay = run.open(resumed, first_result, first_error)
            while delay is not None:
                if delay > 0.0 or run.state.attempt:
                    if adapter is not None and run.result is not None:
                        await adapter.discard(run.result)
                    scopes = run.sleep_scopes
                    if not waits_disabled():
                        await sleep(delay)
                    scopes.exit()
                if not run.start_attempt():
                    break
                limit = run.attempt_limit()
                try:
                    if limit is None:
                        result = await attempt()
                    else:
                        with anyio.fail_after(limit):
                            result = await attempt()
                except Exception as error:
                    delay = run.finish_attempt(None, error)
                else:
                    delay = run.finish_attempt(result, None)
        except BaseException as error:
            run.abort(error)
            raise
        return run.conclude()  # type: ignore[no-any-return]

    def execute_sync(
        self,
        attempt: Callable[[], T],
        *,
        operation: str,
        target: str | None = None,
        policy: RetryPolicy | None = None,
        adapter: AttemptAdapter | None = None,
        request: object = None,
        first_error: Exception | None = None,
        first_result: object = _NOT_GIVEN,
    ) -> T:
        """Sync twin of `execute_async`: same `_Run`, blocking sleeps, no attempt timeout."""
        resumed = first_error is not None or first_result is not _NOT_GIVEN
        dispatch = self._quiet[0] if resumed and self._quiet is not None else self._current()[0]
        run = _Run(self, policy or self.policy, operation, target, adapter, request, dispatch)
        sleep = self._clock.sleep_sync
        try:
            delay = run.open(resumed, first_result, first_error)
            while delay is not None:
                if delay > 0.0 or run.state.attempt:
                    if adapter is not None and run.result is not None:
                        adapter.discard_sync(run.result)
                    scopes = run.sleep_scopes
                    if not waits_disabled():
                        sleep(delay)
                    scopes.exit()
                if not run.start_attempt():
                    break
                try:
                    result = attempt()
                except Exception as error:
                    delay = run.finish_attempt(None, error)
                else:
                    delay = run.finish_attempt(result, None)
        except BaseException as error:
            run.abort(error)
            raise
        return run.conclude()  # type: ignore[no-any-return]


class _Run:
    """One call's state and bookkeeping; every decision is delegated to `RetryPolicy.decide`."""

    __slots__ = (
        "adapter",
        "admitted",
        "attempt_scopes",
        "attempt_started_at",
        "breaker",
        "call_scopes",
        "dispatch",
        "error",
        "operation",
        "outcome",
        "policy",
        "reason",
        "request",
        "result",
        "retrier",
        "sleep_scopes",
        "state",
        "status",
        "target",
    )

    def __init__(
        self,
        retrier: Retrier,
        policy: RetryPolicy,
        operation: str,
        target: str | None,
        adapter: AttemptAdapter | None,
        request: object,
        dispatch: Dispatch,
    ) -> None:
        self.retrier = retrier
        self.policy = policy
        self.operation = operation
        self.target = target if target is not None else operation
        self.adapter = adapter
        self.request = request
        self.dispatch = dispatch
        self.state = CallState(retrier._clock.now())
        self.breaker = None if retrier._breakers is None else retrier._breakers.get(self.target)
        self.admitted = False
        self.call_scopes = NO_SCOPES
        self.attempt_scopes = NO_SCOPES
        self.sleep_scopes = NO_SCOPES
        self.attempt_started_at = self.state.started_at
        self.result: object = None
        self.error: Exception | None = None
        self.status: int | None = None
        self.outcome: CallOutcome = "success"
        self.reason: RetryReason | None = None

    # -- steps, in the order the drivers call them ---------------------------------------------

    def begin(self) -> None:
        """Announce the call and enter the instruments' call scopes."""
        hooks = self.dispatch.call_started
        if hooks:
            self.call_scopes = Dispatch.enter(
                hooks,
                CallStarted(
                    self.policy.name,
                    self.target,
                    self.operation,
                    self.policy.attempts,
                    self.request,
                ),
            )

    def open(self, resumed: bool, result: object, error: Exception | None) -> float | None:
        """Start the call; return the delay before the next attempt, or None if it is over.

        A call ``resumed`` from the plain path already ran its first attempt, with no hooks:
        it goes on from that attempt's ``result`` or ``error`` and keeps to the dispatch it
        was given (the one without idle instruments), rather than reporting half a call.
        """
        if not resumed:
            self.begin()
            return 0.0
        self.state.attempt = 1
        return self.finish_attempt(None if error is not None else result, error)

    def start_attempt(self) -> bool:
        """Ask the breaker for admission and open the attempt; False ends the call."""
        breaker = self.breaker
        if breaker is not None:
            if not breaker.allow_request():
                if self.state.attempt:
                    self._deny("circuit_open", self._last_outcome())
                if self.state.attempt == 0 or (
                    self.adapter is not None and self.result is not None
                ):
                    # Before any attempt, or after the last result was already disposed of
                    # (a closed response must not be returned): the call fails fast.
                    self.result = None
                    self.outcome = "circuit_open"
                    self.error = CircuitOpenError(breaker.name, retry_in=breaker.retry_in())
                    self.reason = "circuit_open"
                return False
            self.admitted = True
        state = self.state
        state.attempt += 1
        hooks = self.dispatch.attempt_started
        if hooks:
            self.attempt_started_at = self.retrier._clock.now()
            self.attempt_scopes = Dispatch.enter(
                hooks,
                AttemptStarted(
                    self.policy.name,
                    self.target,
                    self.operation,
                    state.attempt,
                    self.policy.attempts,
                    self.request,
                ),
            )
        elif self.dispatch.attempt_finished:
            self.attempt_started_at = self.retrier._clock.now()
        return True

    def attempt_limit(self) -> float | None:
        """The time this attempt may take: the per-attempt timeout, cut by the deadline."""
        policy = self.policy
        if policy.deadline is None:
            return policy.timeout
        return policy.attempt_limit(self.retrier._clock.now() - self.state.started_at)

    def finish_attempt(self, result: object, error: Exception | None) -> float | None:
        """Record the attempt's outcome; return the delay before the next one, or None."""
        retrier = self.retrier
        policy = self.policy
        state = self.state
        now = retrier._clock.now()
        outcome = self._outcome(state.attempt, now - state.started_at, result, error)
        self.result, self.error, self.status = result, error, outcome.status
        decision = policy.decide(state, outcome, now=now, rng=retrier._rng)
        matched = not isinstance(decision, Accept)
        if self.breaker is not None and self.admitted:
            self.admitted = False
            if matched:
                self.breaker.record_failure()
            else:
                self.breaker.record_success()
        if isinstance(decision, Retry):
            if self.breaker is not None and self.breaker.state == "open":
                decision = GiveUp("circuit_open")
            elif retrier._budget is not None and not retrier._budget.try_acquire():
                decision = GiveUp("throttled")
        hooks = self.dispatch.attempt_finished
        if hooks:
            attempt_outcome: AttemptOutcome = (
                "success"
                if not matched and error is None
                else "retried"
                if isinstance(decision, Retry)
                else "failed"
            )
            Dispatch.emit(
                hooks,
                AttemptFinished(
                    policy.name,
                    self.target,
                    self.operation,
                    state.attempt,
                    attempt_outcome,
                    now - self.attempt_started_at,
                    None if attempt_outcome == "success" else _error_type(outcome),
                    outcome.status,
                    error,
                ),
            )
        self.attempt_scopes.exit()
        self.attempt_scopes = NO_SCOPES
        if isinstance(decision, Retry):
            delay = decision.delay
            state.delay_so_far += delay
            state.last_delay = delay
            hooks = self.dispatch.retry_scheduled
            if hooks:
                self.sleep_scopes = Dispatch.enter(
                    hooks,
                    RetryScheduled(
                        policy.name,
                        self.target,
                        self.operation,
                        state.attempt,
                        policy.attempts,
                        delay,
                        _error_type(outcome),
                        outcome.retry_after,
                        error,
                        self._budget_available(),
                    ),
                )
            else:
                self.sleep_scopes = NO_SCOPES
            return delay
        if isinstance(decision, GiveUp):
            self._deny(decision.reason, outcome)
        else:
            self.outcome = "success" if error is None else "failure"
        return None

    def conclude(self) -> Any:
        """Finish the call: emit its end, then return the value or raise, per the policy."""
        error = self.error
        if error is None and self.outcome == "success" and self.retrier._budget is not None:
            self.retrier._budget.record_success()
        self._emit_finished(error)
        self.call_scopes.exit()
        if error is None:
            return self.result
        if self.reason is None:
            raise error
        policy = self.policy
        last = error  # what a fallback receives, whatever is raised
        if self.reason == "budget_exhausted":
            exhausted = RetryBudgetExhausted(
                f"Retry budget exhausted: {policy.retry_budget:g}s of backoff allowed, "
                f"{self.state.delay_so_far:g}s used after {self.state.attempt} attempt(s); "
                f"last error: {error!r}",
                attempts=self.state.attempt,
                delay_so_far=self.state.delay_so_far,
            )
            exhausted.__cause__ = error
            error = exhausted
        elif not isinstance(error, CircuitOpenError):
            # An exception object raised again and again (a module-level instance) keeps one
            # retrymw note, the latest, instead of one per call.
            notes = getattr(error, "__notes__", None)
            if isinstance(notes, list):
                notes[:] = [note for note in notes if not str(note).startswith(_NOTE_PREFIX)]
            add_note(
                error,
                f"{_NOTE_PREFIX}{self.state.attempt} of {policy.attempts} "
                f"(policy {policy.name!r}): {_WHY[self.reason]} [{self.reason}]",
            )
        if policy.on_failure == "continue":
            return None
        if policy.on_failure == "fallback" and policy.fallback is not None:
            return policy.fallback(last)
        raise error

    def abort(self, error: BaseException) -> None:
        """The call ends by an error outside the attempts: close everything; the caller re-raises.

        Cancellation, ``KeyboardInterrupt`` and ``SystemExit`` are ``cancelled``; anything else
        (a ``retry_on`` predicate or a fallback that raised) is a ``failure``.
        """
        if self.breaker is not None and self.admitted:
            self.admitted = False
            self.breaker.release()
        self.attempt_scopes.exit(error)
        self.sleep_scopes.exit(error)
        self.outcome = "failure" if isinstance(error, Exception) else "cancelled"
        self._emit_finished(error)
        self.call_scopes.exit(error)

    # -- helpers -------------------------------------------------------------------------------

    def _outcome(
        self, attempt: int, elapsed: float, result: object, error: Exception | None
    ) -> Outcome:
        if self.adapter is not None:
            return self.adapter.outcome(attempt, elapsed, result, error)
        if error is not None:
            return Outcome(attempt, elapsed, error, None, status_of(error))
        matcher = self.policy.retry_on
        status = status_of(result) if matcher is not None and matcher.uses_results else None
        return Outcome(attempt, elapsed, None, result, status)

    def _last_outcome(self) -> Outcome:
        return Outcome(self.state.attempt, 0.0, self.error, self.result, self.status)

    def _deny(self, reason: RetryReason, outcome: Outcome) -> None:
        self.reason = reason
        self.outcome = _OUTCOME_OF_REASON[reason]
        hooks = self.dispatch.retry_denied
        if hooks:
            Dispatch.emit(
                hooks,
                RetryDenied(
                    self.policy.name,
                    self.target,
                    self.operation,
                    self.state.attempt,
                    self.policy.attempts,
                    reason,
                    _error_type(outcome),
                    self._budget_available(),
                ),
            )

    def _emit_finished(self, error: BaseException | None) -> None:
        hooks = self.dispatch.call_finished
        if not hooks:
            return
        if self.outcome == "success":
            error_type = None
        elif error is not None:
            error_type = type(error).__qualname__
        else:
            error_type = None if self.status is None else str(self.status)
        retrier = self.retrier
        now = retrier._clock.now()
        budget_available = None
        # Reading the budget folds its lock-free success count under a lock: worth it on every
        # call that retried, and at most once a second on the success path so the gauge still
        # shows the bucket refilling.
        if retrier._budget is not None and (
            self.state.attempt > 1 or now - retrier._budget_reported_at >= 1.0
        ):
            retrier._budget_reported_at = now
            budget_available = retrier._budget.available()
        Dispatch.emit(
            hooks,
            CallFinished(
                self.policy.name,
                self.target,
                self.operation,
                self.outcome,
                self.state.attempt,
                now - self.state.started_at,
                error_type,
                self.status,
                error,
                budget_available,
            ),
        )

    def _budget_available(self) -> float | None:
        budget = self.retrier._budget
        return None if budget is None else budget.available()


def _sync_timeout_error(timeout: float) -> ConfigError:
    return ConfigError(
        "timeout",
        timeout,
        "cannot interrupt a synchronous function; set the timeout inside it "
        "(socket or client timeout) or make it async",
        "timeout=None",
    )


def _check_arguments(
    policy: object, breaker: object, budget: object, instruments: object, clock: object, rng: object
) -> None:
    """Refuse wrong argument types at construction, naming the argument (not mid-call)."""
    checks = (
        ("policy", policy, RetryPolicy, "RetryPolicy(attempts=3)"),
        ("breaker", breaker, CircuitBreaker, 'CircuitBreaker(name="db")'),
        ("budget", None if budget is _DEFAULT else budget, RetryBudget, "RetryBudget()"),
        ("clock", clock, Clock, "retrymw.testing.FakeClock()"),
        ("rng", rng, Random, "random.Random(42)"),
    )
    for name, value, kind, example in checks:
        if value is not None and not isinstance(value, kind):
            raise ConfigError(name, value, f"must be a {kind.__name__} or None", example)
    if instruments is not None and (
        isinstance(instruments, (str, bytes, Instrument)) or not isinstance(instruments, Iterable)
    ):
        raise ConfigError(
            "instruments",
            instruments,
            "must be an iterable of instruments",
            "(LoggingInstrument(),)",
        )


def retry(
    *,
    breaker: CircuitBreaker | None = None,
    budget: RetryBudget | None = _DEFAULT,
    instruments: Any = None,
    clock: Clock | None = None,
    **policy_fields: Any,
) -> Retrier:
    """Shorthand decorator: ``@retry(attempts=5, retry_on=["timeout"])``.

    Policy fields go to `RetryPolicy`; ``breaker``, ``budget``, ``instruments`` and ``clock`` go
    to `Retrier`.

    .. versionadded:: 0.1
    """
    return Retrier(
        RetryPolicy(**policy_fields),
        breaker=breaker,
        budget=budget,
        instruments=instruments,
        clock=clock,
    )

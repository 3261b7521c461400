"""`Retrier`: the runtime object. One per-call `CallRun` holds the logic; the drivers only execute.

The async and sync drivers are deliberately thin loops around the same `CallRun` methods: run the
attempt, ask the run (which asks the pure `RetryPolicy.decide`) what follows, sleep, repeat.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from random import Random
from types import CoroutineType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

import anyio

from .._protect.breaker import CircuitBreaker
from .._protect.budget import RetryBudget
from .._protect.targets import PerTarget
from .._protect.throttle import AdaptiveThrottle
from .callables import (
    SUSPECT_RESULTS,
    Refused,
    async_attempt,
    async_result_error,
    check_callable,
    check_decorated,
    is_async,
    operation_name,
    sync_attempt,
    sync_result_error,
)
from .clock import SYSTEM_CLOCK, Clock, waits_disabled
from .errors import ConfigError
from .events import BreakerStateChanged
from .instruments import Dispatch, Instrument
from .layers import next_serial
from .policy import RetryPolicy
from .redact import safe_repr
from .run import AttemptAdapter, CallRun, for_target

if TYPE_CHECKING:
    from ..stores import Store

__all__ = ["BreakerArg", "BudgetArg", "Retrier", "ThrottleArg", "retry"]

P = ParamSpec("P")
T = TypeVar("T")

#: What ``breaker=``, ``budget=`` and ``throttle=`` accept: one instance, used as it is for
#: every call, or a `PerTarget` of one (an instance per HTTP host or operation), or ``None``.
BreakerArg = CircuitBreaker | PerTarget[CircuitBreaker] | None
BudgetArg = RetryBudget | PerTarget[RetryBudget] | None
ThrottleArg = AdaptiveThrottle | PerTarget[AdaptiveThrottle] | None

_DEFAULT: Any = object()
_NOT_GIVEN: Any = object()


class Retrier:
    """Runs functions and coroutines under a `RetryPolicy`, with breaker, budget and telemetry.

    The breaker, budget and throttle given are used as they are, for every call: what their
    ``statistics()`` say is the truth, and listeners added later fire. A `PerTarget` of one
    gives each target (the operation name; the host for the httpx transports) its own.

    Args:
        policy: the policy; the default `RetryPolicy()` when omitted.
        breaker: a `CircuitBreaker` (one circuit for every call), a ``PerTarget`` of one, or
            ``None`` for no breaker.
        budget: the cross-call `RetryBudget` (or a ``PerTarget`` of one); a fresh one by
            default, ``None`` turns it off.
        throttle: an `AdaptiveThrottle` (or a ``PerTarget`` of one) shedding attempts with
            `LoadShedError` (outcome ``shed``, never retried); ``None`` (the default) for none.
        instruments: instruments receiving events; ``None`` for the process defaults (see
            `retrymw.set_default_instruments`), ``()`` for none.
        clock: where time is read and slept; the system clock by default.
        rng: the random source for jitter.
        store: a durable `retrymw.stores.Store` (``SQLiteStore``, ``RedisStore``): a call with a
            resume key (``with retrymw.resume(key):``) keeps its attempts and retry-budget
            expiry there and a later process goes on from them (docs/resume.md).
        fleet: a `retrymw.fleet.RedisFleet`: the breaker, budget and throttle become fleet-wide,
            per target (docs/fleet.md).

    Use ``await retrier.call(fn, *args, **kwargs)``, ``retrier.call_sync(fn, ...)``, or the
    instance as a decorator on async and sync functions.

    .. versionadded:: 0.1
    """

    __slots__ = (
        "_breaker",
        "_budget",
        "_budget_reported_at",
        "_clock",
        "_dispatch",
        "_fund",
        "_plain",
        "_quiet",
        "_rng",
        "_store",
        "_throttle",
        "policy",
    )

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        breaker: BreakerArg = None,
        budget: BudgetArg = _DEFAULT,
        throttle: ThrottleArg = None,
        instruments: Any = None,
        clock: Clock | None = None,
        rng: Random | None = None,
        store: Store | None = None,
        fleet: Any = None,
    ) -> None:
        _check_arguments(policy, breaker, budget, throttle, instruments, clock, rng)
        if store is not None:
            _check_store(store)
        self._store = store
        self.policy = policy if policy is not None else RetryPolicy()
        self._clock: Clock = clock if clock is not None else SYSTEM_CLOCK
        self._budget: BudgetArg = RetryBudget(clock=self._clock) if budget is _DEFAULT else budget
        # The plain success path funds one budget without a lookup (a PerTarget needs the target).
        self._fund: Callable[[], None] | None = (
            self._budget.record_success if isinstance(self._budget, RetryBudget) else None
        )
        self._throttle: ThrottleArg = throttle
        if instruments is None:
            from ..instrumentation import default_instruments

            instruments = default_instruments()
        self._dispatch = Dispatch(instruments)
        self._breaker: BreakerArg = breaker
        if breaker is not None and self._dispatch.breaker_state_changed:
            # The user's own breaker reports to this retrier's instruments; the same instruments
            # listen once however many retriers and transports share the breaker.
            breaker.add_listener(_BreakerEvents(self._dispatch))
        self._rng = rng if rng is not None else Random()
        self._budget_reported_at = -math.inf
        if fleet is not None:
            for protection in (self._breaker, self._budget, self._throttle):
                if protection is not None:
                    fleet.attach(protection)
        self._announce()
        self._plain = self._is_plain(self.policy, self._dispatch)
        # Instruments that can be idle (OpenTelemetry without an SDK) are asked once per call;
        # while none listens, calls use this dispatch without them, and its plain path.
        quiet = self._dispatch.quiet()
        self._quiet = None if quiet is None else (quiet, self._is_plain(self.policy, quiet))

    def _announce(self) -> None:
        """Announce the policy and protection to the instruments before any call (`Attached`).

        A shared instance is announced now (target ""); a `PerTarget`'s instances now for the
        targets it already has, and from then on as it creates them, so every series a
        dashboard needs exists before the first trip.
        """
        dispatch, name = self._dispatch, self.policy.name
        if not dispatch.attached:  # nobody listens: no listener left on a shared PerTarget
            return
        dispatch.attach(name, "", self.policy)
        for protection in (self._breaker, self._budget, self._throttle):
            if isinstance(protection, PerTarget):
                # The listener first: a target created meanwhile is announced twice, never
                # missed (instruments tolerate a repeat).
                protection.add_creation_listener(_Announcer(dispatch, name))
                for target in protection:
                    instance = protection.get(target)
                    if instance is not None:  # pragma: no branch - evicted meanwhile
                        dispatch.attach(name, target, instance)
            elif protection is not None:
                dispatch.attach(name, "", protection)

    def _current(self) -> tuple[Dispatch, bool]:
        """The dispatch for a call starting now, and whether its policy may take the plain path."""
        if self._quiet is None or self._dispatch.listening():
            return self._dispatch, self._plain
        return self._quiet

    def plain_first_attempt(self, policy: RetryPolicy) -> bool:
        """Whether a call under ``policy`` starting now may run its first attempt bare.

        True when no instrument observes calls or attempts, no breaker or throttle admits
        them, and the policy bounds no attempt in time. A front door that checks results
        itself (the httpx transport) then runs the first attempt directly and hands it to
        `execute_async` / `execute_sync` through ``first_result`` / ``first_error`` only when
        it needs a retry.
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
            or self._breaker is not None
            or self._throttle is not None
            or self._store is not None
            or policy.timeout is not None
            or policy.deadline is not None
            or (
                not results_checked and policy.retry_on is not None and policy.retry_on.uses_results
            )
        )

    @property
    def budget(self) -> BudgetArg:
        """The cross-call retry budget (or `PerTarget` of them) in use, or ``None``."""
        return self._budget

    @property
    def breaker(self) -> BreakerArg:
        """The circuit breaker (or `PerTarget` of them) given, itself, or ``None``."""
        return self._breaker

    @property
    def throttle(self) -> ThrottleArg:
        """The adaptive throttle (or `PerTarget` of them) given, itself, or ``None``."""
        return self._throttle

    def budget_for(self, target: str) -> RetryBudget | None:
        """The budget a call to ``target`` spends and funds (created for a new target)."""
        return for_target(self._budget, target)

    def __repr__(self) -> str:
        return f"<Retrier policy={self.policy.name!r} attempts={self.policy.attempts}>"

    # -- front doors ---------------------------------------------------------------------------

    async def call(self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Await ``fn(*args, **kwargs)`` with retries and return its result.

        ``fn`` returns an awaitable: a coroutine function, or any callable returning one (a
        lambda, a partial). Misuse is refused with a `TypeError` that names the right call, and
        never retried: what is not callable, such as a coroutine object (``call(fetch())``),
        before anything runs; a generator function when it returns its generator, before its
        body runs; a synchronous function (use `call_sync`) at its first return.

        Raises:
            Exception: the last exception, with a note saying why retrying stopped.
            RetryBudgetExhausted: the policy's ``retry_budget`` ran out.
            CircuitOpenError: the breaker rejected the call before its first attempt.
            LoadShedError: the throttle shed an attempt (see `LoadShedError`).
            TypeError: ``fn`` cannot be retried by ``call`` (see above).
        """
        if not callable(fn):
            check_callable(fn, "retrier.call()")
        return await self._call_async(fn, args, kwargs, None)

    def call_sync(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Call ``fn(*args, **kwargs)`` with retries, sleeping in the current thread.

        Raises:
            ConfigError: the policy has a per-attempt ``timeout``, which cannot interrupt a
                synchronous function.
            TypeError: ``fn`` is async or a generator function (refused when it returns its
                coroutine or generator, before the body runs, and never retried), or is not
                callable; the message names the right call.
        """
        if not callable(fn):
            check_callable(fn, "retrier.call_sync()")
        return self._call_sync(fn, args, kwargs, None)

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, T]], /
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    @overload
    def __call__(self, fn: Callable[P, T], /) -> Callable[P, T]: ...

    def __call__(self, fn: Callable[P, Any], /) -> Callable[P, Any]:
        """Decorate ``fn``; a coroutine function stays a coroutine function.

        Raises:
            TypeError: ``fn`` is a generator or async generator function (its body runs while
                the caller iterates, out of the retrier's reach), or is not callable.
        """
        check_decorated(fn)
        operation = operation_name(fn)
        if is_async(fn):

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
            since = next_serial()  # what is marked after this was marked inside this call
            try:
                awaitable = fn(*args, **kwargs)
                if type(awaitable) is CoroutineType or inspect.isawaitable(awaitable):
                    result = await awaitable
                    fund = self._fund
                    if fund is not None:
                        fund()
                    elif self._budget is not None:
                        self._record_success(operation, fn)
                    return result
            except Exception as error:
                first = error
            else:
                raise sync_result_error(fn, awaitable)  # never retried
            # Outside the except block: the retries' exceptions must not carry the first one
            # as their __context__ ("During handling of the above exception...").
            return await self.execute_async(
                async_attempt(fn, args, kwargs),
                operation=operation or operation_name(fn),
                first_error=first,
                since=since,
            )
        return await self.execute_async(
            async_attempt(fn, args, kwargs), operation=operation or operation_name(fn)
        )

    def _call_sync(self, fn: Callable[..., T], args: Any, kwargs: Any, operation: str | None) -> T:
        if self.policy.timeout is not None:
            raise _sync_timeout_error(self.policy.timeout)
        quiet = self._quiet
        plain = self._plain if quiet is None or self._dispatch.listening() else quiet[1]
        if plain:
            since = next_serial()  # what is marked after this was marked inside this call
            first: Exception | None = None
            try:
                result = fn(*args, **kwargs)
            except Exception as error:
                first = error
            if first is not None:
                # Outside the except block, as in `_call_async`: no accidental chaining.
                return self.execute_sync(
                    sync_attempt(fn, args, kwargs),
                    operation=operation or operation_name(fn),
                    first_error=first,
                    since=since,
                )
            if type(result) in SUSPECT_RESULTS:
                refusal = async_result_error(fn, result)
                if refusal is not None:
                    raise refusal  # never retried
            fund = self._fund
            if fund is not None:
                fund()
            elif self._budget is not None:
                self._record_success(operation, fn)
            return result
        return self.execute_sync(
            sync_attempt(fn, args, kwargs), operation=operation or operation_name(fn)
        )

    def _record_success(self, operation: str | None, fn: Callable[..., Any]) -> None:
        """Fund the budget for a call that succeeded on the plain path."""
        budget = self._budget
        if isinstance(budget, PerTarget):
            budget = budget.for_target(operation or operation_name(fn))
        if budget is not None:
            budget.record_success()

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
        since: int | None = None,
    ) -> T:
        """Run ``attempt`` until the policy accepts an outcome or gives up (async driver).

        Front doors use this directly: ``target`` labels telemetry and keys the breaker
        (default: ``operation``), ``policy`` overrides the retrier's policy for one call,
        ``adapter`` refines outcomes, and ``first_error`` or ``first_result`` resumes a call
        whose first attempt already ran on the plain path (see `plain_first_attempt`), with
        ``since``, the `next_serial` taken before that attempt (retry at one layer).
        """
        resumed = first_error is not None or first_result is not _NOT_GIVEN
        dispatch = self._quiet[0] if resumed and self._quiet is not None else self._current()[0]
        run = CallRun(
            self, policy or self.policy, operation, target, adapter, request, dispatch, since
        )
        sleep = self._clock.sleep
        try:
            delay = run.open(resumed, first_result, first_error)
            while delay is not None:
                if delay > 0.0 or run.state.attempt:
                    if adapter is not None and run.result is not None:
                        # Disposing of the superseded result is part of the wait: the adapter
                        # bounds it by the delay, and the sleep is what is left of it.
                        disposed_from = self._clock.now()
                        await adapter.discard(run.result, delay)
                        delay -= self._clock.now() - disposed_from
                    scopes = run.sleep_scopes
                    if not waits_disabled():
                        await sleep(max(delay, 0.0))
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
        except Refused as refused:
            run.abort(refused.error)
            raise refused.error from None
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
        since: int | None = None,
    ) -> T:
        """Sync twin of `execute_async`: same `CallRun`, blocking sleeps, no attempt timeout."""
        resumed = first_error is not None or first_result is not _NOT_GIVEN
        dispatch = self._quiet[0] if resumed and self._quiet is not None else self._current()[0]
        run = CallRun(
            self, policy or self.policy, operation, target, adapter, request, dispatch, since
        )
        sleep = self._clock.sleep_sync
        try:
            delay = run.open(resumed, first_result, first_error)
            while delay is not None:
                if delay > 0.0 or run.state.attempt:
                    if adapter is not None and run.result is not None:
                        disposed_from = self._clock.now()
                        adapter.discard_sync(run.result, delay)
                        delay -= self._clock.now() - disposed_from
                    scopes = run.sleep_scopes
                    if not waits_disabled():
                        sleep(max(delay, 0.0))
                    scopes.exit()
                if not run.start_attempt():
                    break
                try:
                    result = attempt()
                except Exception as error:
                    delay = run.finish_attempt(None, error)
                else:
                    delay = run.finish_attempt(result, None)
        except Refused as refused:
            run.abort(refused.error)
            raise refused.error from None
        except BaseException as error:
            run.abort(error)
            raise
        return run.conclude()  # type: ignore[no-any-return]


def _sync_timeout_error(timeout: float) -> ConfigError:
    return ConfigError(
        "timeout",
        timeout,
        "cannot interrupt a synchronous function; set the timeout inside it "
        "(socket or client timeout) or make it async",
        "timeout=None",
    )


class _Announcer:
    """A `PerTarget` creation listener announcing each new instance (`Dispatch.attach`).

    Equal for the same instruments and policy name, so a `PerTarget` shared by many retriers
    built alike (``config.retrier(name)`` called per request) keeps one, not one per retrier.
    """

    __slots__ = ("_dispatch", "_key", "_policy")

    def __init__(self, dispatch: Dispatch, policy: str) -> None:
        self._dispatch = dispatch
        self._policy = policy
        self._key = (policy, *(id(instrument) for instrument in dispatch.instruments))

    def __call__(self, target: str, instance: object) -> None:
        self._dispatch.attach(self._policy, target, instance)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Announcer) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)


class _BreakerEvents:
    """A breaker listener forwarding transitions to a dispatch's instruments.

    Two of them are equal when they feed the same instruments, so a breaker shared by several
    retriers (a config's retrier and transport) reports each transition to them once.
    """

    __slots__ = ("_dispatch", "_key")

    def __init__(self, dispatch: Dispatch) -> None:
        self._dispatch = dispatch
        self._key = tuple(id(instrument) for instrument in dispatch.instruments)

    def __call__(self, event: BreakerStateChanged) -> None:
        self._dispatch.breaker_listener(event)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BreakerEvents) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)


def _check_store(store: object) -> None:
    """Refuse a ``store=`` that is not a `retrymw.stores.Store` (imported only when given)."""
    from ..stores import Store

    if not isinstance(store, Store):
        raise ConfigError(
            "store", store, "must be a retrymw store or None", 'SQLiteStore("retries.db")'
        )


def _check_protection(name: str, value: object, kind: type, example: str) -> None:
    """Refuse a breaker, budget or throttle that is neither ``kind`` nor a PerTarget of one."""
    if value is None or isinstance(value, kind):
        return
    if isinstance(value, PerTarget) and isinstance(value.template, kind):
        return
    raise ConfigError(
        name, value, f"must be a {kind.__name__}, a PerTarget of one, or None", example
    )


def _check_arguments(
    policy: object,
    breaker: object,
    budget: object,
    throttle: object,
    instruments: object,
    clock: object,
    rng: object,
) -> None:
    """Refuse wrong argument types at construction, naming the argument (not mid-call)."""
    _check_protection("breaker", breaker, CircuitBreaker, 'CircuitBreaker(name="db")')
    _check_protection(
        "budget", None if budget is _DEFAULT else budget, RetryBudget, "RetryBudget()"
    )
    _check_protection("throttle", throttle, AdaptiveThrottle, "AdaptiveThrottle()")
    checks = (
        ("policy", policy, RetryPolicy, "RetryPolicy(attempts=3)"),
        ("clock", clock, Clock, "retrymw.testing.FakeClock()"),
        ("rng", rng, Random, "random.Random(42)"),
    )
    if callable(policy) and not isinstance(policy, RetryPolicy):
        # ``@Retrier`` without parentheses hands the decorated function over as the policy.
        raise ConfigError(
            "policy",
            policy,
            "must be a RetryPolicy or None; to decorate a function use @Retrier() or @retry",
            "RetryPolicy(attempts=3)",
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


@overload
def retry(fn: Callable[P, T], /) -> Callable[P, T]: ...


@overload
def retry(
    *,
    breaker: BreakerArg = None,
    budget: BudgetArg = _DEFAULT,
    throttle: ThrottleArg = None,
    instruments: Any = None,
    clock: Clock | None = None,
    **policy_fields: Any,
) -> Retrier: ...


def retry(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    breaker: BreakerArg = None,
    budget: BudgetArg = _DEFAULT,
    throttle: ThrottleArg = None,
    instruments: Any = None,
    clock: Clock | None = None,
    **policy_fields: Any,
) -> Any:
    """Shorthand decorator: ``@retry(attempts=5, retry_on=["timeout"])``, or bare ``@retry``.

    Policy fields go to `RetryPolicy`; ``breaker``, ``budget``, ``throttle``, ``instruments``
    and ``clock`` go to `Retrier`. Bare ``@retry`` is ``@retry()``: the default policy.

    Raises:
        TypeError: the positional argument is not a function (policy fields are keywords, and
            a `RetryPolicy` goes to `Retrier`), or cannot be retried (see `Retrier.__call__`).

    .. versionadded:: 0.1
    """
    if fn is not None and not callable(fn):
        hint = (
            "for a RetryPolicy use Retrier(policy)"
            if isinstance(fn, RetryPolicy)
            else "policy fields are keywords, as in @retry(attempts=5)"
        )
        raise TypeError(f"retry() decorates a function, got {safe_repr(fn, 80)}; {hint}")
    retrier = Retrier(
        RetryPolicy(**policy_fields),
        breaker=breaker,
        budget=budget,
        throttle=throttle,
        instruments=instruments,
        clock=clock,
    )
    return retrier if fn is None else retrier(fn)

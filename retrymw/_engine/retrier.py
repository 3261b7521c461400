"""`Retrier`: construction and the front doors (`call`, `call_sync`, the decorator, `retry`).

Each front door hands its call to the engine's door of its colour (`Engine.run_async`,
`Engine.run_sync`, in `drivers`); the argument checks and protection listeners are in
`retrier_args`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from random import Random
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from .._core.clock import SYSTEM_CLOCK, Clock
from .._core.instruments import Dispatch
from .._core.policy import RetryPolicy
from .._core.redact import safe_repr
from .._protect.budget import RetryBudget
from .._protect.targets import PerTarget
from .callables import (
    check_callable,
    check_decorated,
    is_async,
)
from .drivers import Engine
from .retrier_args import (
    DEFAULT,
    Announcer,
    BreakerArg,
    BreakerEvents,
    BudgetArg,
    ThrottleArg,
    check_arguments,
    check_store,
    default_budget,
    sync_timeout_error,
)
from .run import for_target
from .runtime import Runtime

if TYPE_CHECKING:
    from ..stores import Store

__all__ = ["BreakerArg", "BudgetArg", "Retrier", "ThrottleArg", "retry"]

P = ParamSpec("P")
T = TypeVar("T")


class Retrier(Engine):
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
            per target, the budget's state named by the policy's name (docs/fleet.md); the
            default budget is then one per operation.

    Use ``await retrier.call(fn, *args, **kwargs)``, ``retrier.call_sync(fn, ...)``, or the
    instance as a decorator on async and sync functions.

    .. versionadded:: 0.1
    """

    __slots__ = ()

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        breaker: BreakerArg = None,
        budget: BudgetArg = DEFAULT,
        throttle: ThrottleArg = None,
        instruments: Any = None,
        clock: Clock | None = None,
        rng: Random | None = None,
        store: Store | None = None,
        fleet: Any = None,
    ) -> None:
        check_arguments(policy, breaker, budget, throttle, instruments, clock, rng)
        if store is not None:
            check_store(store)
        self.policy = policy if policy is not None else RetryPolicy()
        clock = clock if clock is not None else SYSTEM_CLOCK
        if budget is DEFAULT:
            # A fleet shares the default budget per operation: one target's retries are paid by
            # that target, never by another retrier's successes under the same policy name.
            budget = (
                default_budget(clock) if fleet is None else default_budget(clock, per_target=True)
            )
        self._runtime = Runtime(
            clock=clock,
            rng=rng if rng is not None else Random(),
            breaker=breaker,
            budget=budget,
            throttle=throttle,
            store=store,
        )
        # The plain success path funds one budget without a lookup (a PerTarget needs the target).
        self._funded: RetryBudget | None = budget if isinstance(budget, RetryBudget) else None
        if instruments is None:
            from ..instrumentation import default_instruments

            instruments = default_instruments()
        self._dispatch = Dispatch(instruments)
        self._bare = self._bare_policy(self.policy, judged=False)
        if breaker is not None and self._dispatch.breaker_state_changed:
            # The user's own breaker reports to this retrier's instruments; the same instruments
            # listen once however many retriers and transports share the breaker.
            breaker.add_listener(BreakerEvents(self._dispatch))
        if fleet is not None:
            for protection in (breaker, budget, throttle):
                if protection is not None:  # a budget's fleet key names its policy
                    fleet.attach(protection, owner=self.policy.name)
        self._announce()
        # Instruments that can be idle (OpenTelemetry without an SDK) are asked once per call;
        # while none listens, calls use this dispatch without them.
        self._quiet = self._dispatch.quiet()

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
        for protection in (self._runtime.breaker, self._runtime.budget, self._runtime.throttle):
            if isinstance(protection, PerTarget):
                # The listener first: a target created meanwhile is announced twice, never
                # missed (instruments tolerate a repeat).
                protection.add_creation_listener(Announcer(dispatch, name))
                for target in protection:
                    instance = protection.get(target)
                    if instance is not None:  # pragma: no branch - evicted meanwhile
                        dispatch.attach(name, target, instance)
            elif protection is not None:
                dispatch.attach(name, "", protection)

    @property
    def clock(self) -> Clock:
        """The clock this retrier reads and sleeps on."""
        return self._runtime.clock

    @property
    def budget(self) -> BudgetArg:
        """The cross-call retry budget (or `PerTarget` of them) in use, or ``None``."""
        return self._runtime.budget

    @property
    def breaker(self) -> BreakerArg:
        """The circuit breaker (or `PerTarget` of them) given, itself, or ``None``."""
        return self._runtime.breaker

    @property
    def throttle(self) -> ThrottleArg:
        """The adaptive throttle (or `PerTarget` of them) given, itself, or ``None``."""
        return self._runtime.throttle

    @property
    def store(self) -> Store | None:
        """The store that resumes keyed calls across restarts, or ``None``."""
        return self._runtime.store

    def budget_for(self, target: str) -> RetryBudget | None:
        """The budget a call to ``target`` spends and funds (created for a new target)."""
        return for_target(self._runtime.budget, target)

    def __repr__(self) -> str:
        return f"<Retrier policy={self.policy.name!r} attempts={self.policy.attempts}>"

    # -- front doors ---------------------------------------------------------------------------

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
        if self.policy.timeout is not None:
            raise sync_timeout_error(self.policy.timeout)
        return self.run_sync(fn, args, kwargs)

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
        run_async, run_sync = self.run_async, self.run_sync
        if is_async(fn):

            @functools.wraps(fn)
            async def retried_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                return await run_async(fn, args, kwargs)

            return retried_async

        if self.policy.timeout is not None:
            raise sync_timeout_error(self.policy.timeout)

        @functools.wraps(fn)
        def retried(*args: P.args, **kwargs: P.kwargs) -> Any:
            return run_sync(fn, args, kwargs)

        return retried

    def call(
        self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs
    ) -> Coroutine[Any, Any, T]:
        """Await ``fn(*args, **kwargs)`` with retries and return its result: ``await
        retrier.call(fn, ...)``.

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
        # The engine's coroutine is the call itself: no frame in front of it.
        return self.run_async(fn, args, kwargs)


@overload
def retry(fn: Callable[P, T], /) -> Callable[P, T]: ...


@overload
def retry(
    *,
    breaker: BreakerArg = None,
    budget: BudgetArg = DEFAULT,
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
    budget: BudgetArg = DEFAULT,
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

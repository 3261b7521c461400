"""What `Retrier` accepts: the argument types, their checks, the protection made when an
argument is not given, and the listeners it registers.

Kept apart from `retrier` so that the constructor's refusals (each naming the argument, its
value and an accepted example) and the protection listeners read as one concept.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from random import Random
from typing import Any, Literal, overload

from .._core.clock import Clock
from .._core.errors import ConfigError
from .._core.events import BreakerStateChanged
from .._core.instruments import Dispatch, Instrument
from .._core.policy import RetryPolicy
from .._protect.breaker import CircuitBreaker
from .._protect.budget import RetryBudget
from .._protect.pacer import Pacer
from .._protect.targets import PerTarget
from .._protect.throttle import AdaptiveThrottle

__all__ = [
    "DEFAULT",
    "NOT_GIVEN",
    "PacerArg",
    "Announcer",
    "BreakerArg",
    "BreakerEvents",
    "BudgetArg",
    "ThrottleArg",
    "check_arguments",
    "check_store",
    "default_budget",
    "reset_default_protection",
    "sync_timeout_error",
]

#: What ``breaker=``, ``budget=`` and ``throttle=`` accept: one instance, used as it is for
#: every call, or a `PerTarget` of one (an instance per HTTP host or operation), or ``None``.
BreakerArg = CircuitBreaker | PerTarget[CircuitBreaker] | None
BudgetArg = RetryBudget | PerTarget[RetryBudget] | None
ThrottleArg = AdaptiveThrottle | PerTarget[AdaptiveThrottle] | None
PacerArg = Pacer | PerTarget[Pacer] | None

#: The default of ``budget=``: the default budget, made per retrier (``None`` is no budget).
DEFAULT: Any = object()
#: An argument, or a first attempt's result, that was not given (``None`` is a value).
NOT_GIVEN: Any = object()

# -- protection made by default ------------------------------------------------------------------

#: Every budget made because ``budget=`` was not given, held weakly: `reset_default_protection`
#: makes them fresh (a decorator's budget lives as long as its module, and so spans tests).
_MADE_BY_DEFAULT: weakref.WeakSet[RetryBudget | PerTarget[RetryBudget]] = weakref.WeakSet()


@overload
def default_budget(clock: Clock, *, per_target: Literal[False] = False) -> RetryBudget: ...


@overload
def default_budget(clock: Clock, *, per_target: Literal[True]) -> PerTarget[RetryBudget]: ...


def default_budget(
    clock: Clock, *, per_target: bool = False
) -> RetryBudget | PerTarget[RetryBudget]:
    """The budget of a `Retrier` (one) or transport (``per_target``: one per host) given no
    ``budget=``, remembered so that `reset_default_protection` reaches it."""
    budget = RetryBudget(clock=clock)
    made: RetryBudget | PerTarget[RetryBudget] = PerTarget(budget) if per_target else budget
    _MADE_BY_DEFAULT.add(made)
    return made


def reset_default_protection() -> None:
    """Make every protection retrymw made by default as if new, in place.

    The budgets of retriers and transports built without ``budget=`` (a `PerTarget`'s live
    instances each; its template is only ever cloned). What the user gave is never touched.
    For tests (the pytest plugin's ``retrymw_fresh_protection``): no test inherits the
    tokens another spent.
    """
    for protection in list(_MADE_BY_DEFAULT):
        if isinstance(protection, PerTarget):
            for target in list(protection):
                instance = protection.get(target)
                if instance is not None:  # evicted meanwhile
                    instance.reset()
        else:
            protection.reset()


def sync_timeout_error(timeout: float) -> ConfigError:
    return ConfigError(
        "timeout",
        timeout,
        "cannot interrupt a synchronous function; set the timeout inside it "
        "(socket or client timeout) or make it async",
        "timeout=None",
    )


class Announcer:
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
        return isinstance(other, Announcer) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)


class BreakerEvents:
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
        return isinstance(other, BreakerEvents) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)


def check_store(store: object) -> None:
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


def check_arguments(
    policy: object,
    breaker: object,
    budget: object,
    throttle: object,
    instruments: object,
    clock: object,
    rng: object,
    pacer: object = None,
) -> None:
    """Refuse wrong argument types at construction, naming the argument (not mid-call)."""
    _check_protection("breaker", breaker, CircuitBreaker, 'CircuitBreaker(name="db")')
    _check_protection("budget", None if budget is DEFAULT else budget, RetryBudget, "RetryBudget()")
    _check_protection("throttle", throttle, AdaptiveThrottle, "AdaptiveThrottle()")
    _check_protection("pacer", pacer, Pacer, 'Pacer(rate="50/s")')
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

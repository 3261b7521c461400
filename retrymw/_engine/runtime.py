"""What a `CallRun` is given: its retrier's effects and protection (`Runtime`), a front door's
`AttemptAdapter`, and `for_target`, which picks the protection instance governing a target.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar, final

from .._protect.breaker import CircuitBreaker
from .._protect.budget import RetryBudget
from .._protect.pacer import Pacer
from .._protect.targets import PerTarget
from .._protect.throttle import AdaptiveThrottle

if TYPE_CHECKING:
    from random import Random

    from .._core.clock import Clock
    from .._core.events import BodyRead, Outcome
    from .._protect.hedge import Hedge
    from ..stores import Store

__all__ = [
    "AttemptAdapter",
    "BodyEnding",
    "BodyFollower",
    "HandsOn",
    "PacerTeacher",
    "Runtime",
    "for_target",
]

#: Told once how the body of the returned result was read, and the exception that cut or
#: stalled it, if any (`BodyFollower.follow_body`).
BodyEnding = Callable[["BodyRead", "Exception | None"], None]


K = TypeVar("K", CircuitBreaker, RetryBudget, AdaptiveThrottle, Pacer)


def for_target(protection: K | PerTarget[K] | None, target: str) -> K | None:
    """The instance that governs ``target``: the one given, or its `PerTarget`'s for it."""
    if isinstance(protection, PerTarget):
        return protection.for_target(target)
    return protection


@final
class Runtime:
    """What every call of one `Retrier` reads: its effects (the clock, the random source), the
    protection that governs it (the user's own objects, or their `PerTarget`) and the store that
    resumes it. Built once by the retrier and handed to each `CallRun`.

    Attributes:
        admits_attempts: a breaker or throttle admits each attempt.
        gates_retries: a breaker, budget or throttle may withhold a retry the policy grants.
        guards_calls: something decides about each attempt before it runs (a breaker or
            throttle admitting it, a store claiming it, a hedge timing it). A pacer is asked
            per call: one that paces nothing lets the first attempt go bare
            (`Pacer.send_at_once`).
        hedge: the `Hedge` that races copies of slow attempts (async calls only), or ``None``.
    """

    __slots__ = (
        "_budget_read_at",
        "admits_attempts",
        "breaker",
        "budget",
        "clock",
        "gates_retries",
        "guards_calls",
        "hedge",
        "pacer",
        "rng",
        "store",
        "throttle",
    )

    def __init__(
        self,
        *,
        clock: Clock,
        rng: Random,
        breaker: CircuitBreaker | PerTarget[CircuitBreaker] | None,
        budget: RetryBudget | PerTarget[RetryBudget] | None,
        throttle: AdaptiveThrottle | PerTarget[AdaptiveThrottle] | None,
        store: Store | None,
        hedge: Hedge | None = None,
        pacer: Pacer | PerTarget[Pacer] | None = None,
    ) -> None:
        self.clock = clock
        self.rng = rng
        self.breaker = breaker
        self.budget = budget
        self.throttle = throttle
        self.store = store
        self.hedge = hedge
        self.pacer = pacer
        self.admits_attempts = breaker is not None or throttle is not None
        self.guards_calls = self.admits_attempts or store is not None or hedge is not None
        self.gates_retries = breaker is not None or throttle is not None or budget is not None
        self._budget_read_at = -math.inf

    def budget_gauge_due(self, now: float) -> bool:
        """Whether a call that succeeded at ``now`` reads the budget for its gauge.

        Reading folds the budget's lock-free success count under a lock: at most once a second
        on the success path, so that the gauge still shows the bucket refilling.
        """
        if now - self._budget_read_at < 1.0:
            return False
        self._budget_read_at = now
        return True


class AttemptAdapter(Protocol):
    """How a front door (the httpx transport) refines outcomes and disposes of results."""

    def settles(self, result: object) -> bool:
        """Whether ``result``, what a bare first attempt returned, is final: the call succeeded
        (an HTTP response the policy would not retry)."""
        ...

    def before_attempt(self, attempt: int) -> None:
        """Attempt number ``attempt`` starts now (a resumed call counts other processes' too)."""
        ...

    def outcome(
        self, attempt: int, elapsed: float, result: object, error: Exception | None
    ) -> Outcome:
        """Build the `Outcome` of one attempt (status, Retry-After hint, veto)."""
        ...

    async def discard(self, result: object, delay: float, deadline_left: float | None) -> None:
        """Dispose of a superseded result during the backoff wait (async driver).

        ``delay`` is the backoff delay: the time the disposal should take, so that the next
        attempt starts when the policy decided; the driver sleeps what is left of it.
        ``deadline_left`` is the time the call's deadline leaves (``None``: no deadline).
        """
        ...

    def discard_sync(self, result: object, delay: float, deadline_left: float | None) -> None:
        """Dispose of a superseded result during the backoff wait (sync driver)."""
        ...

    def returned(self, result: object, deadline_left: float | None) -> object:
        """What the call returns for ``result``, the outcome it ends with: the result itself,
        or one whose remaining work (a response's body) ends by the deadline."""
        ...


class BodyFollower(Protocol):
    """An `AttemptAdapter` whose results have bodies read after the call returns.

    Optional: the engine looks for ``follow_body`` on the adapter (the HTTP transports have
    it), and reports the last attempt and the call when the returned result's body ends.
    """

    def follow_body(self, result: object, ending: BodyEnding) -> bool:
        """Whether ``result``, which the call will return, has a body still to be read; if so,
        ``ending`` is called once when it has been read or closed (`returned` arranges it)."""
        ...


class HandsOn(Protocol):
    """An `AttemptAdapter` that may send a request on elsewhere when its call gives up.

    Optional: the engine looks for ``hands_on`` on the adapter (the HTTP transports have it
    when they fail over to other origins), and a call that is handed on ends with outcome
    ``failover`` instead of the failure it would report.
    """

    def hands_on(self, result: object, error: Exception | None) -> bool:
        """Whether the call's last ``result`` or ``error`` sends the request to another origin."""
        ...


class PacerTeacher(Protocol):
    """An `AttemptAdapter` that tells a pacer what each answer says about the server's limit.

    Optional: the engine looks for ``teach`` on the adapter (the HTTP transports have it: the
    response's status and rate-limit headers); without it the pacer learns the status alone.
    """

    def teach(self, pacer: Pacer, result: object, now: float) -> None:
        """Tell ``pacer`` (`Pacer.learn`) what an attempt's ``result`` (never an error) says,
        at ``now``."""
        ...

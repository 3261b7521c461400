"""What a `CallRun` is given: the `Retrier` it reads (`Runtime`), a front door's
`AttemptAdapter`, and `for_target`, which picks the protection instance governing a target.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from .._protect.breaker import CircuitBreaker
from .._protect.budget import RetryBudget
from .._protect.targets import PerTarget
from .._protect.throttle import AdaptiveThrottle

if TYPE_CHECKING:
    from random import Random

    from .._core.clock import Clock
    from .._core.events import BodyRead, Outcome
    from ..stores import Store

__all__ = ["AttemptAdapter", "BodyEnding", "BodyFollower", "Runtime", "for_target"]

#: Told once how the body of the returned result was read, and the exception that cut or
#: stalled it, if any (`BodyFollower.follow_body`).
BodyEnding = Callable[["BodyRead", "Exception | None"], None]


K = TypeVar("K", CircuitBreaker, RetryBudget, AdaptiveThrottle)


def for_target(protection: K | PerTarget[K] | None, target: str) -> K | None:
    """The instance that governs ``target``: the one given, or its `PerTarget`'s for it."""
    if isinstance(protection, PerTarget):
        return protection.for_target(target)
    return protection


class Runtime(Protocol):
    """What a call reads from the `Retrier` that runs it: its effects and its protection."""

    _clock: Clock
    _rng: Random
    _admits_attempts: bool
    _gates_retries: bool
    _budget: RetryBudget | PerTarget[RetryBudget] | None
    _budget_reported_at: float
    _store: Store | None
    _breaker: CircuitBreaker | PerTarget[CircuitBreaker] | None
    _throttle: AdaptiveThrottle | PerTarget[AdaptiveThrottle] | None


class AttemptAdapter(Protocol):
    """How a front door (the httpx transport) refines outcomes and disposes of results."""

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

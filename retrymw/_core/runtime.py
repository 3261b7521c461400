"""What a `CallRun` is given: the `Retrier` it reads (`Runtime`), a front door's
`AttemptAdapter`, and `for_target`, which picks the protection instance governing a target.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

from .._protect.breaker import CircuitBreaker
from .._protect.budget import RetryBudget
from .._protect.targets import PerTarget
from .._protect.throttle import AdaptiveThrottle

if TYPE_CHECKING:
    from random import Random

    from ..stores import Store
    from .clock import Clock
    from .events import Outcome

__all__ = ["AttemptAdapter", "Runtime", "for_target"]


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
